//! Query plans are behaviour: a claim or probe that scans is an O(n²)
//! drain. These tests pin, with `EXPLAIN QUERY PLAN` on the real SQLite
//! engine, that every hot statement seeks an index and never scans
//! `messages`.

use std::sync::Arc;

use mqlite_libsql::Database;

use super::{deferred, keys, maintenance, peek, receive, send, settle, stats, topics, Clock};
use crate::store::hrana::Value;
use crate::store::{HttpReply, Program, Store, Transport, TransportError};

struct Local(Arc<Database>);

impl Transport for Local {
    async fn send_pipeline(&self, body: String) -> Result<HttpReply, TransportError> {
        let reply = self.0.pipeline(None, body.as_bytes());
        Ok(HttpReply {
            status: reply.status,
            body: reply.body.into_bytes(),
        })
    }

    async fn pause(&self, _millis: u32) {}
}

/// The plan's detail lines for `sql` with `args`, on a migrated database.
fn plan(sql: &str, args: Vec<Value>) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!(
        "mqlite-plans-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let db = Arc::new(Database::open(dir.join("plans.db"), None).expect("database"));
    let store = Store::new(Local(db));
    let mut program = Program::read();
    let step = program.step(
        format!("EXPLAIN QUERY PLAN {}", Clock::manual(0).sql(sql)),
        args,
    );
    let committed = pollster::block_on(store.run(&program)).expect("explain");
    let details = committed
        .rows(step)
        .filter_map(|row| row.text(3).ok().map(str::to_owned))
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    details
}

fn rand_suffix() -> String {
    super::random_hex(8).unwrap_or_default()
}

fn text(s: &str) -> Value {
    s.into()
}

fn int(n: i64) -> Value {
    n.into()
}

/// Every access to `messages` is an index or primary-key search.
fn assert_no_message_scan(name: &str, details: &[String]) {
    for d in details {
        let scans_messages = d.starts_with("SCAN ")
            && ["messages", " m", " b", " c"].iter().any(|t| d.contains(t))
            && !d.contains("VIRTUAL TABLE")
            && !d.contains("CONSTANT ROW");
        assert!(!scans_messages, "{name} scans: {d}\n{details:#?}");
    }
}

fn assert_uses(name: &str, details: &[String], expected: &str) {
    assert!(
        details.iter().any(|d| d.contains(expected)),
        "{name}: no `{expected}` in\n{details:#?}"
    );
}

#[test]
fn claim_seeks_the_state_index_and_probes_by_index() {
    let sql = receive::claim_sql();
    let args = vec![
        text("q"),
        int(10),
        int(0),
        int(1 << 20),
        text(""),
        text("[]"),
    ];
    let d = plan(&sql, args);
    assert_no_message_scan("claim", &d);
    assert_uses(
        "claim",
        &d,
        "messages_by_state (queue=? AND state=? AND id>?)",
    );
    assert_uses(
        "claim",
        &d,
        "messages_by_state (queue=? AND state=? AND id<?)",
    );
    assert_uses(
        "claim",
        &d,
        "messages_by_group (queue=? AND group_id=? AND state=? AND id<?)",
    );
    assert_uses("claim", &d, "messages_ungrouped_active (queue=? AND id>?)");
    assert_uses("claim", &d, "group_heads_by_head (queue=? AND head_id>?)");
    assert!(
        !d.iter().any(|l| l.starts_with("SCAN h")),
        "claim scans group_heads:\n{d:#?}"
    );
}

#[test]
fn housekeeping_uses_queue_leading_partial_indexes() {
    let cases = [
        (
            maintenance::for_one_queue(maintenance::REAP_EXPIRED_LEASES),
            "messages_lease_expiry (queue=? AND locked_until<?)",
        ),
        (
            maintenance::for_one_queue(maintenance::ACTIVATE_DUE_SCHEDULED),
            "messages_schedule_due (queue=? AND visible_at<?)",
        ),
        (
            maintenance::for_one_queue(maintenance::DEAD_LETTER_EXPIRED),
            "messages_ttl_due (queue=? AND expires_at>? AND expires_at<?)",
        ),
        (
            maintenance::for_one_queue(maintenance::DISCARD_EXPIRED),
            "messages_ttl_due (queue=? AND expires_at>? AND expires_at<?)",
        ),
    ];
    for (sql, index) in cases {
        let d = plan(&sql, vec![text("q")]);
        assert_no_message_scan(&sql, &d);
        assert_uses(&sql, &d, index);
    }
}

#[test]
fn settlement_finds_rows_by_primary_key() {
    let pairs = text("[[1,\"t\"]]");
    let record = settle::RECORD_RECEIPTS.replace("RECEIPT_LIFETIME", "1");
    let d = plan(
        &record,
        vec![text("q"), pairs.clone(), text("completed"), text("")],
    );
    assert_no_message_scan("record receipts", &d);
    assert_uses("record receipts", &d, "USING INTEGER PRIMARY KEY");
    let complete = settle::COMPLETE.replace("RECEIPTED", settle::RECEIPTED);
    let d = plan(
        &complete,
        vec![text("q"), pairs.clone(), text("completed"), text("")],
    );
    assert_no_message_scan("complete", &d);
    assert_uses("complete", &d, "USING INTEGER PRIMARY KEY");
    let d = plan(settle::RENEW, vec![text("q"), pairs]);
    assert_no_message_scan("renew", &d);
    assert_uses("renew", &d, "USING INTEGER PRIMARY KEY");
}

#[test]
fn reads_and_sends_seek() {
    let d = plan(&stats::stats_sql(), vec![text("q")]);
    assert_no_message_scan("stats", &d);
    assert_uses(
        "stats",
        &d,
        "COVERING INDEX messages_by_state (queue=? AND state=?)",
    );
    let peek_state = peek::PEEK.replace("STATE_FILTER", "AND state = ?5");
    let d = plan(
        &peek_state,
        vec![text("q"), int(0), int(32), int(1), text("active")],
    );
    assert_no_message_scan("peek by state", &d);
    let peek_all = peek::PEEK.replace("STATE_FILTER", "");
    let d = plan(&peek_all, vec![text("q"), int(0), int(32), int(1)]);
    assert_no_message_scan("peek", &d);
    assert_uses("peek", &d, "messages_by_queue (queue=? AND rowid>?)");
    let d = plan(
        &deferred::claim_deferred_sql(),
        vec![text("q"), text("[1]"), text("[\"t\"]")],
    );
    assert_no_message_scan("receive deferred", &d);
    assert_uses("receive deferred", &d, "USING INTEGER PRIMARY KEY");
    let insert = send::INSERT_MESSAGE.replace("NEXT_SEQ", send::NEXT_SEQ);
    let args = (0..12).map(|_| Value::Null).collect::<Vec<_>>();
    let d = plan(&insert, args);
    assert_uses(
        "send",
        &d,
        "SEARCH d USING PRIMARY KEY (queue=? AND dedup_key=?)",
    );
    let record = receive::RECORD_ATTEMPT;
    let d = plan(record, vec![text("q"), text("a"), text("[\"t\"]"), int(0)]);
    assert_no_message_scan("record attempt", &d);
    assert_uses("record attempt", &d, "messages_lock_token (lock_token=?)");
    let d = plan(receive::DELETE_CLAIMED, vec![text("[\"t\"]")]);
    assert_uses(
        "receive-and-delete",
        &d,
        "messages_lock_token (lock_token=?)",
    );
}

/// Every access to `table` is an index or primary-key search.
fn assert_no_scan_of(name: &str, details: &[String], table: &str) {
    for d in details {
        assert!(
            !(d.starts_with("SCAN ") && d.contains(table)),
            "{name} scans {table}: {d}\n{details:#?}"
        );
    }
}

#[test]
fn publish_fingerprint_and_subscriptions_are_index_seeks() {
    for (name, sql, args) in [
        (
            "topic subscriptions",
            topics::TOPIC_SUBSCRIPTIONS.to_owned(),
            vec![text("t")],
        ),
        (
            "topic changed",
            crate::store::guard_sql(topics::TOPIC_CHANGED),
            vec![text("t"), text("0:0")],
        ),
    ] {
        assert_no_scan_of(name, &plan(&sql, args), "subscriptions");
    }
}

#[test]
fn managed_key_check_is_one_unique_index_seek() {
    let sql = crate::store::guard_sql(keys::KEY_REFUSED);
    let details = plan(
        &sql,
        vec![
            Value::Blob {
                base64: "AA==".into(),
            },
            int(1),
        ],
    );
    assert_no_scan_of("key check", &details, "access_keys");
    assert_uses("key check", &details, "INDEX");
}
