//! Stats and the Observe gauges are read transactions (issue: monitoring
//! never takes the write lock): they report what the queue's housekeeping
//! would leave, without applying it. Pinned against the housekeeping itself:
//! for every kind of pending transition, Stats before the housekeeping runs
//! equals Stats after a request that runs it, and Stats changes nothing.

mod support;

use serde_json::{json, Value};
use support::*;

/// The five counts and the total of a Stats answer.
fn counts(stats: &Value) -> Vec<i64> {
    [
        "active",
        "locked",
        "deferred",
        "scheduled",
        "dead_lettered",
        "total",
    ]
    .iter()
    .map(|k| stats[k].as_i64().unwrap_or(0))
    .collect()
}

async fn receive(api: &Api, queue: &str) -> Value {
    api.ok(
        "QueueService/Receive",
        json!({"queue": queue, "max_messages": 1}),
    )
    .await["messages"][0]
        .clone()
}

/// Rows straight from the database: (seq, state) of queue `q`.
async fn rows(api: &Api, queue: &str) -> Vec<Vec<Value>> {
    query(
        api.engine(),
        &format!(
            "SELECT id, state, locked_until FROM messages WHERE queue = '{queue}' ORDER BY id"
        ),
    )
    .await
}

#[tokio::test]
async fn stats_projects_every_pending_transition_without_writing() {
    let api = Api::new(&[]);
    for (name, config) in [
        (
            "dlq",
            json!({"max_delivery_count": 1, "lock_duration_ms": 1000}),
        ),
        (
            "retry",
            json!({"max_delivery_count": 5, "lock_duration_ms": 1000}),
        ),
        ("ttl-dl", json!({"default_ttl_ms": 2000})),
        (
            "ttl-drop",
            json!({"default_ttl_ms": 2000, "dead_letter_on_expire": false}),
        ),
        ("sched", json!({})),
    ] {
        api.create_queue(name, config).await;
    }
    // An expired lease that used up its deliveries, one with deliveries left.
    api.send_text("dlq", "a").await;
    api.send_text("dlq", "b").await;
    receive(&api, "dlq").await;
    api.send_text("retry", "c").await;
    receive(&api, "retry").await;
    // TTL running out on a dead-lettering and on a discarding queue, one of
    // them while locked.
    api.send_text("ttl-dl", "d").await;
    api.send_text("ttl-dl", "e").await;
    receive(&api, "ttl-dl").await;
    api.send_text("ttl-drop", "f").await;
    api.send_text("ttl-drop", "g").await;
    // A schedule coming due, and one that stays in the future.
    let soon = api.now() + 500;
    let later = api.now() + 60_000;
    for at in [soon, later] {
        api.ok(
            "QueueService/Schedule",
            json!({"queue":"sched","messages":[{"body": b64("s")}],"scheduled_enqueue_time_ms": at}),
        )
        .await;
    }
    api.advance(2_500);

    for queue in ["dlq", "retry", "ttl-dl", "ttl-drop", "sched"] {
        let stored = rows(&api, queue).await;
        let projected = api.stats(queue).await;
        assert_eq!(rows(&api, queue).await, stored, "{queue}: Stats wrote");
        // Peek runs the queue's housekeeping, then Stats reads settled rows.
        api.ok("QueueService/Peek", json!({"queue": queue})).await;
        assert_ne!(
            rows(&api, queue).await,
            stored,
            "{queue}: the scenario left nothing pending"
        );
        let settled = api.stats(queue).await;
        assert_eq!(counts(&projected), counts(&settled), "{queue}");
        assert_eq!(
            projected["oldest_message_age_ms"], settled["oldest_message_age_ms"],
            "{queue}"
        );
    }
    assert_eq!(counts(&api.stats("dlq").await), vec![1, 0, 0, 0, 1, 2]);
    assert_eq!(counts(&api.stats("retry").await), vec![1, 0, 0, 0, 0, 1]);
    assert_eq!(counts(&api.stats("ttl-dl").await), vec![0, 0, 0, 0, 2, 2]);
    assert_eq!(counts(&api.stats("ttl-drop").await), vec![0, 0, 0, 0, 0, 0]);
    assert_eq!(counts(&api.stats("sched").await), vec![1, 0, 0, 1, 0, 2]);
}

#[tokio::test]
async fn observe_gauges_agree_with_stats_before_housekeeping() {
    let api = Api::new(&[]);
    api.create_queue(
        "q",
        json!({"max_delivery_count": 1, "lock_duration_ms": 1000}),
    )
    .await;
    api.send_text("q", "a").await;
    api.send_text("q", "b").await;
    receive(&api, "q").await;
    api.advance(1_500);
    let stats = api.stats("q").await;
    let observed = api.ok("AdminService/Observe", json!({})).await;
    let gauge = observed["queues"]
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["queue"] == "q"))
        .cloned()
        .unwrap_or(Value::Null);
    for key in ["active", "locked", "deferred", "scheduled", "dead_lettered"] {
        assert_eq!(gauge[key], stats[key], "{key}: {gauge}");
    }
    assert_eq!(stats["dead_lettered"], 1);
    assert_eq!(gauge["unexpected"], 0);
}
