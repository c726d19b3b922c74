//! Lazy housekeeping (docs/semantics.md#maintenance, docs/engine.md): one
//! statement applies every due transition of a queue (T14 both branches,
//! T3, T16, T17, the TTL discard), and the request that observes them counts
//! each exactly (docs/semantics.md#observability) and reports a wake hint
//! when a lease was reaped with deliveries left or a row became claimable.
//! Each case is one row in a fresh queue that someone waits on, observed by
//! one Peek; the whole table is also applied at once, in one queue.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use mqlite_edge::engine::{Effect, Effects, Engine, PeekRequest, QueueConfigInput};
use mqlite_edge::store::{Program, Statement};
use support::*;

/// Runs `sql` in a write transaction (test set-up only).
async fn exec(engine: &Engine<InProcess>, sql: &str) {
    // Test set-up only: leaking gives the ad-hoc text the 'static lifetime
    // the engine's constant statements have.
    let statement: &'static Statement = Box::leak(Box::new(Statement {
        sql: Box::leak(sql.to_owned().into_boxed_str()),
        clock_param: 0,
    }));
    let mut program = Program::write();
    program.step(statement, vec![]);
    engine
        .store()
        .run(&program)
        .await
        .expect("set-up statement");
}

/// One due row: its state, lease deadline, delivery count and TTL relative
/// to now (`None`: none), whether its queue discards expired messages, and
/// what the housekeeping must count and whether it must wake waiters.
struct Case {
    name: &'static str,
    state: &'static str,
    lease_ms: i64,
    deliveries: i64,
    schedule_ms: i64,
    ttl_ms: Option<i64>,
    discard: bool,
    counts: &'static [(&'static str, u64)],
    wakes: bool,
    left: Option<&'static str>,
}

const CASES: &[Case] = &[
    Case {
        name: "T14 expired lease with deliveries left: reaped",
        state: "locked",
        lease_ms: -1,
        deliveries: 1,
        schedule_ms: 0,
        ttl_ms: None,
        discard: false,
        counts: &[("lock_expired", 1)],
        wakes: true,
        left: Some("active"),
    },
    Case {
        name: "T14 expired lease, deliveries used up: dead letter",
        state: "locked",
        lease_ms: 0,
        deliveries: 2,
        schedule_ms: 0,
        ttl_ms: None,
        discard: false,
        counts: &[("lock_expired", 1), ("dead_lettered", 1)],
        wakes: false,
        left: Some("dead_lettered"),
    },
    Case {
        name: "expired lease with deliveries left whose TTL ran out: reaped, then TTLExpired",
        state: "locked",
        lease_ms: -1,
        deliveries: 1,
        schedule_ms: 0,
        ttl_ms: Some(-1),
        discard: false,
        counts: &[("lock_expired", 1), ("dead_lettered", 1)],
        wakes: true,
        left: Some("dead_lettered"),
    },
    Case {
        name: "the same in a discarding queue: reaped, then discarded",
        state: "locked",
        lease_ms: -1,
        deliveries: 1,
        schedule_ms: 0,
        ttl_ms: Some(0),
        discard: true,
        counts: &[("lock_expired", 1), ("ttl_discarded", 1)],
        wakes: true,
        left: None,
    },
    Case {
        name: "expired lease, deliveries used up, TTL ran out: MaxDeliveryCountExceeded",
        state: "locked",
        lease_ms: -1,
        deliveries: 2,
        schedule_ms: 0,
        ttl_ms: Some(-1),
        discard: true,
        counts: &[("lock_expired", 1), ("dead_lettered", 1)],
        wakes: false,
        left: Some("dead_lettered"),
    },
    Case {
        name: "T17 live lease whose TTL ran out: dead letter",
        state: "locked",
        lease_ms: 5_000,
        deliveries: 1,
        schedule_ms: 0,
        ttl_ms: Some(-1),
        discard: false,
        counts: &[("dead_lettered", 1)],
        wakes: false,
        left: Some("dead_lettered"),
    },
    Case {
        name: "T3 due schedule: activated",
        state: "scheduled",
        lease_ms: 0,
        deliveries: 1,
        schedule_ms: 0,
        ttl_ms: None,
        discard: false,
        counts: &[("activated", 1)],
        wakes: true,
        left: Some("active"),
    },
    Case {
        name: "T16 due schedule whose TTL ran out: discarded, not activated",
        state: "scheduled",
        lease_ms: 0,
        deliveries: 0,
        schedule_ms: -1,
        ttl_ms: Some(-1),
        discard: true,
        counts: &[("ttl_discarded", 1)],
        wakes: false,
        left: None,
    },
    Case {
        name: "T16 active row whose TTL ran out: dead letter",
        state: "active",
        lease_ms: 0,
        deliveries: 0,
        schedule_ms: 0,
        ttl_ms: Some(0),
        discard: false,
        counts: &[("dead_lettered", 1)],
        wakes: false,
        left: Some("dead_lettered"),
    },
    Case {
        name: "deferred row whose TTL ran out: discarded",
        state: "deferred",
        lease_ms: 0,
        deliveries: 1,
        schedule_ms: 0,
        ttl_ms: Some(-1),
        discard: true,
        counts: &[("ttl_discarded", 1)],
        wakes: false,
        left: None,
    },
];

/// A fresh engine with a journal; queues `keep` (dead-letters on expiry)
/// and `drop` (discards), both allowing two deliveries and both waited on.
async fn journaled() -> (Harness, Engine<InProcess>, Arc<Effects>) {
    let h = Harness::new();
    let (engine, effects) = h.journaled_engine();
    for (name, dead_letter_on_expire) in [("keep", true), ("drop", false)] {
        let config = QueueConfigInput {
            max_delivery_count: 2,
            dead_letter_on_expire: Some(dead_letter_on_expire),
            ..Default::default()
        };
        engine.create_queue(name, &config).await.expect("create");
    }
    exec(
        &engine,
        &format!("UPDATE queues SET waiters_until = {}", h.now() + 60_000),
    )
    .await;
    (h, engine, effects)
}

async fn insert(h: &Harness, engine: &Engine<InProcess>, case: &Case) -> i64 {
    let now = h.now();
    let queue = if case.discard { "drop" } else { "keep" };
    let lease = if case.state == "locked" {
        now + case.lease_ms
    } else {
        0
    };
    let token = if case.state == "locked" {
        "'t'"
    } else {
        "NULL"
    };
    let expires = case.ttl_ms.map_or(0, |t| now + t);
    exec(
        engine,
        &format!(
            "INSERT INTO messages (queue, state, visible_at, locked_until, lock_token, \
             delivery_count, enqueued_at, expires_at, body) \
             VALUES ('{queue}', '{}', {}, {lease}, {token}, {}, {}, {expires}, x'00')",
            case.state,
            now + case.schedule_ms,
            case.deliveries,
            now - 10_000,
        ),
    )
    .await;
    query(engine, "SELECT max(id) FROM messages").await[0][0]
        .as_i64()
        .expect("seq")
}

/// Every case's row, in table order, all in the two queues at once.
async fn insert_all(h: &Harness, engine: &Engine<InProcess>) -> Vec<i64> {
    let mut seqs = Vec::new();
    for case in CASES {
        seqs.push(insert(h, engine, case).await);
    }
    seqs
}

/// Each case's row (`seqs`, in table order) is left as the case says.
async fn assert_all_left(engine: &Engine<InProcess>, seqs: &[i64]) {
    for (case, seq) in CASES.iter().zip(seqs) {
        assert_eq!(
            state_of(engine, *seq).await.as_deref(),
            case.left,
            "{}",
            case.name
        );
    }
}

/// Events counted and wake hints reported, drained from the journal.
fn observed(effects: &Effects) -> (BTreeMap<&'static str, u64>, bool) {
    let mut counts = BTreeMap::new();
    let mut woke = false;
    for effect in effects.take() {
        match effect {
            Effect::Message { event, count, .. } => {
                *counts.entry(event.as_str()).or_default() += count;
            }
            Effect::Claimable { .. } => woke = true,
            _ => {}
        }
    }
    (counts, woke)
}

async fn peek_both(engine: &Engine<InProcess>) {
    for queue in ["keep", "drop"] {
        engine
            .peek(&PeekRequest {
                queue: queue.into(),
                ..Default::default()
            })
            .await
            .expect("peek");
    }
}

async fn state_of(engine: &Engine<InProcess>, seq: i64) -> Option<String> {
    query(
        engine,
        &format!("SELECT state, lock_token, locked_until FROM messages WHERE id = {seq}"),
    )
    .await
    .first()
    .map(|row| {
        assert_eq!(row[1], serde_json::Value::Null, "token cleared");
        assert_eq!(row[2], 0, "lease cleared");
        row[0].as_str().unwrap_or_default().to_owned()
    })
}

#[tokio::test]
async fn each_due_transition_is_applied_and_counted_exactly() {
    for case in CASES {
        let (h, engine, effects) = journaled().await;
        let seq = insert(&h, &engine, case).await;
        effects.take();
        peek_both(&engine).await;
        let (counts, woke) = observed(&effects);
        let want: BTreeMap<&str, u64> = case.counts.iter().copied().collect();
        assert_eq!(counts, want, "{}", case.name);
        assert_eq!(woke, case.wakes, "{}: wake hint", case.name);
        assert_eq!(
            state_of(&engine, seq).await.as_deref(),
            case.left,
            "{}",
            case.name
        );
        // Applied once: the next request finds nothing due.
        peek_both(&engine).await;
        assert_eq!(
            observed(&effects),
            (BTreeMap::new(), false),
            "{}",
            case.name
        );
    }
}

#[tokio::test]
async fn all_due_transitions_at_once_are_the_sum_of_each() {
    let (h, engine, effects) = journaled().await;
    let seqs = insert_all(&h, &engine).await;
    effects.take();
    peek_both(&engine).await;
    let (counts, woke) = observed(&effects);
    let mut want: BTreeMap<&str, u64> = BTreeMap::new();
    for case in CASES {
        for (event, n) in case.counts {
            *want.entry(*event).or_default() += n;
        }
    }
    assert_eq!(counts, want);
    assert!(woke);
    assert_all_left(&engine, &seqs).await;
}

/// The cron sweep applies the same transitions for every queue.
#[tokio::test]
async fn the_sweep_applies_the_same_transitions() {
    let (h, engine, _effects) = journaled().await;
    let seqs = insert_all(&h, &engine).await;
    engine
        .sweep(&mqlite_edge::engine::Retention::off())
        .await
        .expect("sweep");
    assert_all_left(&engine, &seqs).await;
}
