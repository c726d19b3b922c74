//! Query plans are behaviour: a claim or probe that scans is an O(n²)
//! drain. These tests pin, with `EXPLAIN QUERY PLAN` on the real SQLite
//! engine, that every hot statement seeks an index and never scans
//! `messages`.

use std::sync::Arc;

use mqlite_libsql::Database;

use super::{
    admin, deferred, dlq, dlq_across, keys, maintenance, peek, pgmq, placement, receive,
    receive_fold, send, send_fold, settle, settle_fold, stats,
};
use crate::store::hrana::Value;
use crate::store::{HttpReply, Program, Statement, Store, Transport, TransportError};

/// The local libSQL database as a transport (also the containment tests').
pub(super) struct Local(pub(super) Arc<Database>);

impl Transport for Local {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        let reply = self.0.pipeline(None, body.as_bytes());
        Ok(HttpReply {
            status: reply.status,
            body: reply.body.into_bytes(),
        })
    }

    async fn pause(&self, _millis: u32) {}
}

/// The plan's detail lines for exactly the text production sends, with
/// `args`, on a migrated database.
fn plan(statement: &Statement, args: Vec<Value>) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!(
        "mqlite-plans-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let db = Arc::new(Database::open(dir.join("plans.db"), None).expect("database"));
    let store = Store::new(Local(db));
    // A test-only statement; leaking it gives it the 'static lifetime
    // every program step has.
    let explain: &'static Statement = Box::leak(Box::new(Statement {
        sql: Box::leak(format!("EXPLAIN QUERY PLAN {}", statement.sql).into_boxed_str()),
        clock_param: statement.clock_param,
    }));
    let mut program = Program::read();
    program.set_now(Some(0));
    let step = program.step(explain, args);
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
        let scanned = d
            .strip_prefix("SCAN ")
            .and_then(|r| r.split_whitespace().next());
        // A scan of a subquery's materialised rows is not a scan of the table.
        let coroutine = |t: &str| details.iter().any(|l| *l == format!("CO-ROUTINE {t}"));
        let scans_messages = scanned
            .is_some_and(|t| ["messages", "m", "b", "c"].contains(&t) && !coroutine(t))
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
    let args = vec![
        text("q"),
        int(10),
        int(0),
        int(1 << 20),
        text(""),
        text("[]"),
    ];
    let d = plan(&receive::CLAIM, args);
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
fn single_claim_seeks_the_same_indexes() {
    let d = plan(&receive::TAKE_ONE, vec![text("q"), text("")]);
    assert_no_message_scan("take one", &d);
    assert_uses("take one", &d, "group_heads_by_head (queue=?)");
    let d = plan(&receive::CLAIM_ONE, vec![text("q"), text(""), text("[]")]);
    assert_no_message_scan("claim one", &d);
    assert_uses("claim one", &d, "messages_ungrouped_active (queue=?)");
    assert_uses("claim one", &d, "group_heads_by_head (queue=?)");
    assert_uses(
        "claim one",
        &d,
        "messages_by_state (queue=? AND state=? AND id<?)",
    );
    assert!(
        !d.iter().any(|l| l.starts_with("SCAN h")),
        "claim one scans group_heads:\n{d:#?}"
    );
}

/// One statement for all of a queue's housekeeping: each side of its union
/// (the expired leases, materialised once for `RETURNING`, the due
/// schedules, the TTLs) seeks its own queue-leading partial index, and the
/// changed rows are found by primary key. The sweep's statement for every
/// queue seeks the same indexes, once per queue.
#[test]
fn housekeeping_uses_queue_leading_partial_indexes() {
    let indexes = [
        "messages_lease_expiry (queue=? AND locked_until<?)",
        "messages_schedule_due (queue=? AND visible_at<?)",
        "messages_ttl_due (queue=? AND expires_at>? AND expires_at<?)",
        "SEARCH messages USING INTEGER PRIMARY KEY (rowid=?)",
    ];
    for (statement, args) in [
        (&maintenance::ONE_QUEUE, vec![text("q")]),
        (&maintenance::EVERY_QUEUE, vec![]),
    ] {
        let d = plan(statement, args);
        assert_no_message_scan(statement.sql, &d);
        for index in indexes {
            assert_uses(statement.sql, &d, index);
        }
    }
    // `RETURNING` tells reaped leases from activations by the same
    // materialisation the update's own `WHERE` used, taken before any row
    // changed: it is built once.
    let d = plan(&maintenance::ONE_QUEUE, vec![text("q")]);
    let built = d.iter().filter(|l| *l == "MATERIALIZE expired").count();
    assert_eq!(built, 1, "{d:#?}");
}

#[test]
fn counting_sent_messages_reads_only_the_inserts_rowid_range() {
    let d = plan(&send::COUNT_SENT, vec![]);
    assert_no_message_scan("count sent", &d);
    // Both the queue list and each queue's count read the range only:
    // never the queue's index, which holds its whole backlog.
    let searches: Vec<_> = d.iter().filter(|l| l.contains("SEARCH m ")).collect();
    assert_eq!(searches.len(), 2, "count sent:\n{d:#?}");
    for line in searches {
        assert!(
            line.contains("USING INTEGER PRIMARY KEY (rowid>?)"),
            "count sent reads messages by another path: {line}\n{d:#?}"
        );
    }
}

#[test]
fn the_housekeeping_gate_reads_three_index_heads() {
    let d = plan(&maintenance::ONE_QUEUE_DUE, vec![text("q")]);
    assert_no_message_scan("housekeeping gate", &d);
    for index in [
        "COVERING INDEX messages_lease_expiry (queue=?)",
        "COVERING INDEX messages_schedule_due (queue=?)",
        "INDEX messages_ttl_due (queue=? AND expires_at>?)",
    ] {
        assert_uses("housekeeping gate", &d, index);
    }
    assert!(
        !d.iter().any(|l| l.contains("TEMP B-TREE")),
        "housekeeping gate sorts:\n{d:#?}"
    );
}

#[test]
fn settlement_finds_rows_by_primary_key() {
    let pairs = text("[[1,\"t\"]]");
    let key = vec![text("q"), pairs.clone(), text("completed"), text("")];
    let d = plan(&settle::RECORD_RECEIPTS, key.clone());
    assert_no_message_scan("record receipts", &d);
    assert_uses("record receipts", &d, "USING INTEGER PRIMARY KEY");
    let d = plan(&settle::COMPLETE, key.clone());
    assert_no_message_scan("complete", &d);
    assert_uses("complete", &d, "USING INTEGER PRIMARY KEY");
    let d = plan(&settle::LIVE_RECEIPTS, key);
    assert_no_scan_of("live receipts", &d, "settlement_receipts");
    let d = plan(&settle::RENEW, vec![text("q"), pairs]);
    assert_no_message_scan("renew", &d);
    assert_uses("renew", &d, "USING INTEGER PRIMARY KEY");
}

/// A folded run of Receives (docs/engine.md#folding): the seeks of one
/// claim's walk, whatever the number of members.
#[test]
fn folded_claim_seeks_the_same_indexes() {
    let args = vec![
        text("q"),
        text("[[1,9223372036854775807],[3,8388608]]"),
        text(r#"[["a"],["b","c","d"]]"#),
        int(2),
    ];
    let d = plan(&receive_fold::CLAIM_FOLDED, args);
    assert_no_message_scan("folded claim", &d);
    assert_uses(
        "folded claim",
        &d,
        "messages_ungrouped_active (queue=? AND id>?)",
    );
    assert_uses(
        "folded claim",
        &d,
        "group_heads_by_head (queue=? AND head_id>?)",
    );
    assert_uses(
        "folded claim",
        &d,
        "messages_by_state (queue=? AND state=? AND id>?)",
    );
    assert_uses(
        "folded claim",
        &d,
        "messages_by_state (queue=? AND state=? AND id<?)",
    );
    assert!(
        !d.iter().any(|l| l.starts_with("SCAN h")),
        "folded claim scans group_heads:\n{d:#?}"
    );
}

/// A folded run of Completes (docs/engine.md#folding), two members: the
/// same primary-key seeks as one Complete's.
#[test]
fn folded_settlement_finds_rows_by_primary_key() {
    let members = vec![text(r#"[["q",[[1,"t"],[2,"u"]]],["r",[[3,"v"]]]]"#)];
    let d = plan(&settle_fold::RECORD_RECEIPTS_FOLDED, members.clone());
    assert_no_message_scan("folded record receipts", &d);
    assert_uses("folded record receipts", &d, "USING INTEGER PRIMARY KEY");
    let d = plan(&settle_fold::COMPLETE_FOLDED, members.clone());
    assert_no_message_scan("folded complete", &d);
    assert_uses("folded complete", &d, "USING INTEGER PRIMARY KEY");
    let d = plan(&settle_fold::LIVE_RECEIPTS_FOLDED, members);
    assert_no_scan_of("folded live receipts", &d, "settlement_receipts");
}

#[test]
fn reads_seek() {
    let d = plan(&stats::STATS, vec![text("q")]);
    assert_no_message_scan("stats", &d);
    // Every count is index-only (migration 0008 keeps `group_id` in both
    // keys for this): one count per index arm, none reading a table row.
    for index in [
        "COVERING INDEX messages_ungrouped_active (queue=?)",
        "COVERING INDEX messages_lease_expiry (queue=?)",
        "COVERING INDEX messages_by_state (queue=? AND state=?)",
    ] {
        assert_uses("stats", &d, index);
    }
    assert!(
        !d.iter().any(|l| l.contains("messages_by_group")),
        "stats counts grouped rows of every state:\n{d:#?}"
    );
    for state in ["", "active", "locked", "dead_lettered"] {
        let d = plan(
            &peek::PEEK,
            vec![text("q"), int(0), int(32), int(1), text(state)],
        );
        let name = format!("peek {state:?}");
        assert_no_message_scan(&name, &d);
        assert_uses(
            &name,
            &d,
            "INDEX messages_ungrouped_active (queue=? AND id>?)",
        );
        assert_uses(
            &name,
            &d,
            "INDEX messages_by_state (queue=? AND state=? AND id>?)",
        );
        assert_uses(&name, &d, "INDEX messages_lease_expiry (queue=?)");
    }
    let d = plan(
        &deferred::CLAIM_DEFERRED,
        vec![text("q"), text("[1]"), text("[\"t\"]")],
    );
    assert_no_message_scan("receive deferred", &d);
    assert_uses("receive deferred", &d, "USING INTEGER PRIMARY KEY");
}

/// Receive's attempt record finds the claim's rows among the queue's leases
/// due within its window (`messages_lease_expiry`, a range on both sides),
/// never by walking the queue's in-flight set; receive-and-delete with an
/// attempt records its picks from the claim walk, or for one message from
/// the single pick (by primary key), then deletes them by primary key from
/// the record.
#[test]
fn the_attempt_record_reads_only_the_leases_in_its_window() {
    let d = plan(
        &receive::RECORD_ATTEMPT,
        vec![text("q"), text("a"), text("[\"t\"]")],
    );
    assert_no_message_scan("record attempt", &d);
    assert_uses(
        "record attempt",
        &d,
        "SEARCH m USING INDEX messages_lease_expiry (queue=? AND locked_until>? AND locked_until<?)",
    );
    let walk = vec![text("q"), int(10), int(1), int(1 << 20), text("a")];
    let picks = [
        (
            "record the picks",
            &receive::RECORD_TAKE,
            walk,
            [
                "messages_ungrouped_active (queue=? AND id>?)",
                "group_heads_by_head (queue=? AND head_id>?)",
            ],
        ),
        (
            "record the pick of one",
            &receive::RECORD_TAKE_ONE,
            vec![text("q"), text("a")],
            [
                "SEARCH messages USING INDEX messages_ungrouped_active (queue=?)",
                "SEARCH h USING COVERING INDEX group_heads_by_head (queue=?)",
            ],
        ),
    ];
    for (name, statement, args, indexes) in picks {
        let d = plan(statement, args);
        assert_no_message_scan(name, &d);
        for index in indexes {
            assert_uses(name, &d, index);
        }
        assert_uses(name, &d, "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)");
    }
    let d = plan(&receive::DELETE_RECORDED, vec![text("q"), text("a")]);
    assert_no_message_scan("receive-and-delete after the record", &d);
    assert_uses(
        "receive-and-delete after the record",
        &d,
        "SEARCH messages USING INTEGER PRIMARY KEY (rowid=?)",
    );
    assert_no_scan_of(
        "receive-and-delete after the record",
        &d,
        "receive_attempts",
    );
}

/// Receive-and-delete and pgmq's pop delete the claim's picks by primary
/// key, after the same walk as the claim.
#[test]
fn taking_deletes_the_picks_by_primary_key() {
    let args = vec![text("q"), int(10), int(1), int(1 << 20), text("")];
    for (name, statement) in [("take", &receive::TAKE), ("pgmq pop", &pgmq::read::TAKE)] {
        let d = plan(statement, args.clone());
        assert_no_message_scan(name, &d);
        assert_uses(name, &d, "messages_ungrouped_active (queue=? AND id>?)");
        assert_uses(name, &d, "group_heads_by_head (queue=? AND head_id>?)");
        assert_uses(
            name,
            &d,
            "SEARCH messages USING INTEGER PRIMARY KEY (rowid=?)",
        );
    }
}

/// Redrive into another queue: the chunk is picked from the dead letters
/// by state and seq, then found again by its marks alone (a range on
/// `messages_redrive_marks`), never by walking the queue's dead letters.
#[test]
fn redrive_finds_its_marked_chunk_by_the_marks_index() {
    let marked = vec![text("q"), int(0), int(10), text("redrive:00")];
    let d = plan(&dlq::MARK_CHUNK, marked.clone());
    assert_no_message_scan("mark chunk", &d);
    assert_uses("mark chunk", &d, "messages_by_state (queue=? AND state=?)");
    let mut copy = marked.clone();
    copy.push(text("dst"));
    for (name, d) in [
        ("copy chunk", plan(&dlq::COPY_CHUNK, copy)),
        ("delete chunk", plan(&dlq::DELETE_CHUNK, marked)),
    ] {
        assert_no_message_scan(name, &d);
        assert_uses(
            name,
            &d,
            "INDEX messages_redrive_marks (lock_token>? AND lock_token<?)",
        );
        assert!(
            !d.iter().any(|l| l.contains("messages_by_state")),
            "{name} walks the queue's dead letters:\n{d:#?}"
        );
    }
}

/// The statements of every Send, with a two-copy request.
#[test]
fn send_statements_seek_dedup_queues_and_subscriptions() {
    let copies = text(r#"[["h1",0,1,1,0],["h2",1,1,1,0,"r","k2",null,null,"g"]]"#);
    let key = vec![
        text("q"),
        text("0:0"),
        text(r#"[["h1"],["k2","r"]]"#),
        text(r#"["q"]"#),
    ];
    let insert = vec![
        text("q"),
        text("0:0"),
        copies,
        text(r#"["q"]"#),
        int(0),
        int(0),
        Value::Blob {
            base64: "AAE=".into(),
        },
    ];
    let d = plan(&send::INSERT_MESSAGES, insert);
    assert_uses(
        "insert messages",
        &d,
        "SEARCH d USING PRIMARY KEY (queue=? AND dedup_key=?)",
    );
    for (name, d) in [
        ("insert messages", d),
        ("read outcome", plan(&send::READ_OUTCOME, key)),
    ] {
        assert_no_message_scan(name, &d);
        assert_no_scan_of(name, &d, "subscriptions");
        assert_no_scan_of(name, &d, "SCAN q ");
        assert_no_scan_of(name, &d, "SCAN gq");
        assert_no_scan_of(name, &d, "dedup");
    }
}

/// The statements of a folded run of Sends (docs/engine.md#folding), two
/// members of two copies each: the same seeks as one Send's.
#[test]
fn folded_send_statements_seek_dedup_queues_and_subscriptions() {
    let members = text(
        r#"[["q","0:0",["q"],0,[["h1",0,1,1,0],["h2",1,1,1,0,null,"k2",null,null,"g"]]],
            ["t","2:5",[],0,[["h1",0,1,1,0,"q",null,null,null,"g"]]]]"#,
    );
    let body = Value::Blob {
        base64: "AAE=".into(),
    };
    let insert = vec![members.clone(), body.clone(), body];
    let d = plan(&send_fold::INSERT_FOLDED, insert);
    assert_uses(
        "folded insert",
        &d,
        "SEARCH d USING PRIMARY KEY (queue=? AND dedup_key=?)",
    );
    let outcomes = plan(&send_fold::READ_OUTCOMES, vec![members]);
    assert_uses(
        "read outcomes and counts",
        &outcomes,
        "SEARCH d USING PRIMARY KEY (queue=? AND dedup_key=?)",
    );
    for (name, d) in [("folded insert", d), ("read outcomes and counts", outcomes)] {
        assert_no_message_scan(name, &d);
        assert_no_scan_of(name, &d, "subscriptions");
        assert_no_scan_of(name, &d, "SCAN q ");
        assert_no_scan_of(name, &d, "SCAN gq");
        assert_no_scan_of(name, &d, "dedup");
    }
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
fn managed_key_check_is_one_unique_index_seek() {
    let details = plan(
        &keys::KEY_REFUSED,
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

/// The pgmq dialect's statements (docs/pgmq.md): its claim walks the same
/// indexes as Receive's; by-id statements seek the primary key; metrics
/// count per state from the state index.
#[test]
fn pgmq_statements_seek_indexes() {
    let claim_args = vec![
        text("q"),
        int(10),
        int(0),
        int(1 << 20),
        text(""),
        text("[]"),
        int(30_000),
    ];
    let d = plan(&pgmq::read::CLAIM, claim_args.clone());
    assert_no_message_scan("pgmq claim", &d);
    assert_uses(
        "pgmq claim",
        &d,
        "messages_ungrouped_active (queue=? AND id>?)",
    );
    // A conditional read walks the same indexes; containment is decided on
    // each candidate row it reaches, never by scanning for matches.
    let mut conditional_args = claim_args;
    conditional_args.push(text(r#"{"k":"a"}"#));
    let d = plan(&pgmq::read::CLAIM_CONTAINING, conditional_args);
    assert_no_message_scan("pgmq conditional claim", &d);
    assert_uses(
        "pgmq conditional claim",
        &d,
        "messages_ungrouped_active (queue=? AND id>?)",
    );
    assert_uses("pgmq conditional claim", &d, "SCAN todo");
    let d = plan(
        &pgmq::send::INSERT,
        vec![text("q"), text("[]"), int(0), Value::Null],
    );
    assert_no_scan_of("pgmq insert", &d, "SCAN q ");
    let ids = vec![text("q"), text("[1,2]")];
    for (name, statement) in [
        ("pgmq delete", &pgmq::by_id::DELETE),
        ("pgmq archive", &pgmq::by_id::ARCHIVE_COPY),
    ] {
        let d = plan(statement, ids.clone());
        assert_no_message_scan(name, &d);
        assert_uses(name, &d, "INTEGER PRIMARY KEY (rowid=?)");
    }
    let d = plan(
        &pgmq::by_id::SET_VT,
        vec![text("q"), int(1), int(0), Value::Null],
    );
    assert_no_message_scan("pgmq set_vt", &d);
    assert_uses("pgmq set_vt", &d, "INTEGER PRIMARY KEY (rowid=?)");
    for (name, statement) in [
        ("pgmq metrics", &pgmq::queues::METRICS_ONE),
        ("pgmq purge", &pgmq::queues::PURGE),
    ] {
        let d = plan(statement, vec![text("q")]);
        assert_no_message_scan(name, &d);
    }
    let d = plan(&pgmq::queues::METRICS_ALL, vec![]);
    assert_no_message_scan("pgmq metrics (all)", &d);
    for (i, statement) in pgmq::queues::DROP.iter().enumerate() {
        let d = plan(statement, vec![text("q")]);
        assert_no_message_scan(&format!("pgmq drop #{i}"), &d);
    }
}

/// No index holds every row of a queue (migration 0008): a statement over
/// all of them seeks each index arm (docs/engine.md, "Where a queue's rows
/// are found") and never scans the table.
#[test]
fn whole_queue_statements_seek_every_index_arm() {
    for (name, statement, args) in [
        ("holds messages", &admin::HOLDS_MESSAGES, vec![text("q")]),
        ("gauges", &admin::GAUGES, vec![]),
        ("pgmq purge", &pgmq::queues::PURGE, vec![text("q")]),
        ("pgmq drop", &pgmq::queues::DROP[0], vec![text("q")]),
        ("pgmq metrics", &pgmq::queues::METRICS_ONE, vec![text("q")]),
    ] {
        let d = plan(statement, args);
        assert_no_message_scan(name, &d);
        for index in [
            "COVERING INDEX messages_ungrouped_active (queue=?)",
            "COVERING INDEX messages_lease_expiry (queue=?)",
            "COVERING INDEX messages_by_state (queue=? AND state=?)",
        ] {
            assert_uses(name, &d, index);
        }
    }
}

/// A placement (docs/databases.md) is read and written by its name, the
/// primary key of a table without rowids.
#[test]
fn placements_are_found_by_name() {
    for (name, d) in [
        (
            "placement of",
            plan(&placement::PLACEMENT_OF, vec![text("q")]),
        ),
        (
            "place beside",
            plan(&placement::PLACE_BESIDE, vec![text("s"), text("t")]),
        ),
    ] {
        assert_uses(name, &d, "placements USING PRIMARY KEY (name=?)");
        assert_no_scan_of(name, &d, "placements");
    }
}

/// The wake-hint statements (docs/semantics.md#long-polling) touch one
/// queue row, found by its name.
#[test]
fn wake_hint_statements_seek_the_queue_by_name() {
    for (name, d) in [
        (
            "mark waiting",
            plan(
                &receive::MARK_WAITING,
                vec![text("q"), int(30_000), int(5_000)],
            ),
        ),
        ("waiters of", plan(&dlq::WAITERS_OF, vec![text("q")])),
    ] {
        assert_uses(
            name,
            &d,
            "queues USING INDEX sqlite_autoindex_queues_1 (name=?)",
        );
        assert_no_scan_of(name, &d, "queues");
    }
}

/// A claim's head reads the queue's next schedule and lease deadline from
/// the heads of their partial indexes (docs/semantics.md#long-polling).
#[test]
fn the_claim_head_reads_the_next_due_times_from_index_heads() {
    let plain = plan(&receive::CLAIM_HEAD, vec![text("q"), text("")]);
    assert_no_message_scan("claim head", &plain);
    assert!(
        !plain.iter().any(|l| l.contains("messages")),
        "a claim that will not park reads no message index:\n{plain:#?}"
    );
    let d = plan(&receive::WAITING_CLAIM_HEAD, vec![text("q"), text("")]);
    assert_no_message_scan("claim head", &d);
    for index in [
        "messages_schedule_due (queue=? AND visible_at>?)",
        "messages_lease_expiry (queue=? AND locked_until>?)",
    ] {
        assert_uses("claim head", &d, index);
    }
    assert!(
        !d.iter().any(|l| l.contains("TEMP B-TREE")),
        "claim head sorts:\n{d:#?}"
    );
}

/// A Redrive across databases: its chunk is cut from the dead letters by
/// state and seq, and the outbox and the arrivals are reached by key, never
/// walked (docs/databases.md). A copy is a plain insert, with no plan.
#[test]
fn redrive_across_databases_seeks_its_chunk_the_outbox_and_the_arrivals() {
    let trip = || vec![text("db0"), int(7)];
    for (name, statement, args, seeks) in [
        (
            "into outbox",
            &dlq_across::INTO_OUTBOX,
            vec![
                text("q"),
                int(0),
                int(10),
                int(1 << 20),
                text("db1"),
                text("dst"),
                int(7),
            ],
            "messages_by_state (queue=? AND state=?)",
        ),
        (
            "out of queue",
            &dlq_across::OUT_OF_QUEUE,
            vec![text("q")],
            "redrive_outbox_by_source (source=?)",
        ),
        (
            "more",
            &dlq_across::MORE_DEAD_LETTERS,
            vec![text("q"), int(0)],
            "messages_by_state (queue=? AND state=?)",
        ),
        (
            "in transit",
            &dlq_across::IN_TRANSIT,
            vec![text("q")],
            "redrive_outbox_by_source (source=?)",
        ),
        (
            "arrive",
            &dlq_across::ARRIVE,
            vec![text("db0"), int(7), text("q"), int(0)],
            "queues USING",
        ),
        (
            "new delivery",
            &dlq_across::NEW_DELIVERY,
            vec![text("q")],
            "queues USING",
        ),
        (
            "count delivered",
            &dlq_across::COUNT_DELIVERED,
            vec![text("q"), int(2)],
            "queues USING",
        ),
        (
            "arrival",
            &dlq_across::ARRIVAL,
            trip(),
            "redrive_arrivals USING PRIMARY KEY (source_database=? AND trip=?)",
        ),
        (
            "trip cleared",
            &dlq_across::TRIP_CLEARED,
            vec![text("q"), int(7)],
            "redrive_outbox_by_source (source=?)",
        ),
        (
            "arrival done",
            &dlq_across::ARRIVAL_DONE,
            trip(),
            "redrive_arrivals USING PRIMARY KEY (source_database=? AND trip=?)",
        ),
        (
            "arrivals expired",
            &dlq_across::ARRIVALS_EXPIRED,
            vec![int(1000)],
            "redrive_arrivals USING INDEX redrive_arrivals_done (done_at>? AND done_at<?)",
        ),
        (
            "put back",
            &dlq_across::PUT_BACK,
            vec![text("q"), int(7)],
            "redrive_outbox_by_source (source=?)",
        ),
    ] {
        let d = plan(statement, args);
        assert_no_message_scan(name, &d);
        assert_uses(name, &d, seeks);
        assert!(
            !d.iter().any(|l| l.starts_with("SCAN redrive_")),
            "{name} walks the outbox or the arrivals:\n{d:#?}"
        );
    }
}
