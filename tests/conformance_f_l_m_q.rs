//! Conformance sections F (dedup), L (TTL), M (dead letters: max deliveries
//! and retention; Redrive and Purge arrive with the AdminService), Q
//! (idempotent receive), and the maintenance sweep.

mod support;

use mqlite_edge::engine::Retention;
use serde_json::{json, Value};
use support::*;

fn seqs(v: &Value) -> Vec<i64> {
    v["seq_numbers"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default()
}

async fn send_id(
    api: &Api,
    queue: &str,
    id: Option<&str>,
    body: &str,
    extra: Value,
) -> (u16, Value) {
    let mut m = json!({"body": b64(body)});
    if let Some(id) = id {
        m["message_id"] = id.into();
    }
    let m = with(m, extra);
    api.rpc("QueueService/Send", json!({"queue":queue,"messages":[m]}))
        .await
}

async fn peek(api: &Api, queue: &str) -> Vec<Value> {
    messages(
        &api.ok("QueueService/Peek", json!({"queue":queue,"max":1000}))
            .await,
    )
}

#[tokio::test]
async fn c085_c086_duplicate_collapses_and_conflict_is_409() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"dedup_window_ms":600000}))
        .await;
    let (_, a) = send_id(&api, "q", Some("dup-1"), "payload", json!({})).await;
    let (_, b) = send_id(&api, "q", Some("dup-1"), "payload", json!({})).await;
    assert_eq!(seqs(&a), seqs(&b));
    assert_eq!(api.stats("q").await["active"], 1);
    let (status, body) = send_id(&api, "q", Some("dup-1"), "DIFFERENT", json!({})).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("already_exists"))
    );
}

#[tokio::test]
async fn c087_conflict_in_a_batch_is_slot_zero() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"dedup_window_ms":600000}))
        .await;
    let r = api
        .ok("QueueService/Send", json!({"queue":"q","messages":[
            {"message_id":"A","body":b64("one")},{"message_id":"A","body":b64("TWO-different-body")},
            {"message_id":"B","body":b64("three")}]}))
        .await;
    let s = seqs(&r);
    assert!(s[0] > 0 && s[1] == 0 && s[2] > 0, "{s:?}");
    assert_eq!(api.stats("q").await["active"], 2);
    assert_eq!(
        send_id(&api, "q", Some("A"), "yet-another", json!({}))
            .await
            .0,
        409
    );
}

#[tokio::test]
async fn c088_c089_c090_c091_keys_identity_and_scope() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"dedup_window_ms":600000}))
        .await;
    api.create_queue("q2", json!({"dedup_window_ms":600000}))
        .await;
    api.create_queue("off", json!({})).await;
    let (_, a) = send_id(&api, "q", None, "same body", json!({})).await;
    let (_, b) = send_id(&api, "q", None, "same body", json!({})).await;
    assert_eq!(seqs(&a), seqs(&b), "c088 content-addressed");
    let (_, c) = send_id(&api, "off", Some("k"), "x", json!({})).await;
    let (_, d) = send_id(&api, "off", Some("k"), "x", json!({})).await;
    assert_ne!(seqs(&c), seqs(&d), "c089 dedup off");
    let (_, e) = send_id(&api, "q2", None, "same body", json!({})).await;
    assert_ne!(seqs(&a), seqs(&e), "c090 per queue");
    let (_, f) = send_id(
        &api,
        "q",
        Some("p"),
        "body",
        json!({"properties":{"a":"1"}}),
    )
    .await;
    let (_, g) = send_id(
        &api,
        "q",
        Some("p"),
        "body",
        json!({"properties":{"a":"2"},"subject":"s"}),
    )
    .await;
    assert_eq!(seqs(&f), seqs(&g), "c091 only the body takes part");
}

#[tokio::test]
async fn c092_duplicate_of_a_consumed_message_reports_the_original_seq() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"dedup_window_ms":600000}))
        .await;
    let (_, a) = send_id(&api, "q", Some("k"), "x", json!({})).await;
    let got = api.ok("QueueService/Receive", json!({"queue":"q"})).await;
    let m = &got["messages"][0];
    api.ok(
        "QueueService/Complete",
        json!({"queue":"q","seq_number":m["seq_number"],"lock_token":m["lock_token"]}),
    )
    .await;
    let (_, b) = send_id(&api, "q", Some("k"), "x", json!({})).await;
    assert_eq!(seqs(&a), seqs(&b));
    assert_eq!(api.stats("q").await["total"], 0);
}

#[tokio::test]
async fn c093_c094_window_expiry_and_repeats_within_a_request() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"dedup_window_ms":600000}))
        .await;
    let r = api.ok("QueueService/Send", json!({"queue":"q","messages":[{"message_id":"k","body":b64("x")},{"message_id":"k","body":b64("x")}]})).await;
    let s = seqs(&r);
    assert_eq!(s[0], s[1], "c094");
    api.advance(300_000);
    assert_eq!(
        seqs(&send_id(&api, "q", Some("k"), "x", json!({})).await.1),
        vec![s[0]]
    );
    // A millisecond before the window closes: still the original.
    api.advance(299_999);
    assert_eq!(
        seqs(&send_id(&api, "q", Some("k"), "x", json!({})).await.1),
        vec![s[0]]
    );
    api.advance(1);
    let fresh = seqs(&send_id(&api, "q", Some("k"), "x", json!({})).await.1);
    assert!(
        fresh[0] > s[0],
        "the window is fixed from the first send, not refreshed"
    );
    assert_eq!(api.stats("q").await["active"], 2);
}

#[tokio::test]
async fn c165_c166_ttl_dead_letters_or_discards() {
    let api = Api::new(&[]);
    api.create_queue("dl", json!({"default_ttl_ms":1000})).await;
    api.create_queue(
        "drop",
        json!({"default_ttl_ms":1000,"dead_letter_on_expire":false}),
    )
    .await;
    api.send_text("dl", "x").await;
    api.send_text("drop", "x").await;
    // A millisecond before the TTL both are still there.
    api.advance(999);
    assert_eq!(api.stats("dl").await["active"], 1);
    assert_eq!(api.stats("drop").await["active"], 1);
    api.advance(1001);
    assert_eq!(
        api.ok("QueueService/Receive", json!({"queue":"dl"})).await,
        json!({"messages":[]})
    );
    let p = peek(&api, "dl").await;
    assert_eq!(
        (p[0]["state"].as_str(), p[0]["dead_letter_reason"].as_str()),
        (Some("dead_lettered"), Some("TTLExpired"))
    );
    assert_eq!(api.stats("drop").await["total"], 0);
}

#[tokio::test]
async fn c167_scheduled_expiry_is_never_delivered() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"default_ttl_ms":1000})).await;
    let t = api.clock.manual_now().unwrap_or(0) + 1000;
    api.ok(
        "QueueService/Schedule",
        json!({"queue":"q","scheduled_enqueue_time_ms":t,"messages":[{"body":b64("x")}]}),
    )
    .await;
    // Due at +1000, alive until +2000 (the TTL runs from visibility).
    api.advance(1999);
    assert_eq!(api.stats("q").await["active"], 1);
    api.advance(1001);
    assert_eq!(
        api.ok("QueueService/Receive", json!({"queue":"q"})).await,
        json!({"messages":[]})
    );
    let p = peek(&api, "q").await;
    assert_eq!(
        (
            p[0]["state"].as_str(),
            p[0]["dead_letter_reason"].as_str(),
            p[0]["delivery_count"].as_i64()
        ),
        (Some("dead_lettered"), Some("TTLExpired"), None)
    );
}

#[tokio::test]
async fn c168_c169_locked_and_deferred_expiry() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"default_ttl_ms":2000,"lock_duration_ms":60000}))
        .await;
    api.send_text("q", "locked").await;
    api.send_text("q", "deferred").await;
    let got = messages(
        &api.ok(
            "QueueService/Receive",
            json!({"queue":"q","max_messages":2}),
        )
        .await,
    );
    let settle =
        |m: &Value| json!({"queue":"q","seq_number":m["seq_number"],"lock_token":m["lock_token"]});
    api.ok("QueueService/Defer", settle(&got[1])).await;
    // A millisecond before the TTL neither has expired.
    api.advance(1999);
    let p = peek(&api, "q").await;
    assert!(p.iter().all(|m| m["state"] != "dead_lettered"), "{p:?}");
    api.advance(501);
    let p = peek(&api, "q").await;
    assert!(
        p.iter()
            .all(|m| m["state"] == "dead_lettered" && m["dead_letter_reason"] == "TTLExpired"),
        "{p:?}"
    );
    assert_eq!(
        api.rpc("QueueService/Complete", settle(&got[0])).await.0,
        409
    );
}

#[tokio::test]
async fn c170_max_deliveries_via_lease_expiry() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"max_delivery_count":1,"lock_duration_ms":1000}))
        .await;
    api.send_text("q", "x").await;
    api.ok("QueueService/Receive", json!({"queue":"q"})).await;
    api.advance(1000);
    assert_eq!(
        api.ok("QueueService/Receive", json!({"queue":"q"})).await,
        json!({"messages":[]})
    );
    let p = peek(&api, "q").await;
    assert_eq!(
        (p[0]["state"].as_str(), p[0]["dead_letter_reason"].as_str()),
        (Some("dead_lettered"), Some("MaxDeliveryCountExceeded"))
    );
}

/// `n` dead letters in `queue` (Reject), with 100-byte bodies.
async fn dead_letters(api: &Api, queue: &str, n: usize) -> Vec<i64> {
    let batch: Vec<Value> = (0..n)
        .map(|i| json!({"body": b64(&format!("{i:0>100}"))}))
        .collect();
    api.ok("QueueService/Send", json!({"queue":queue,"messages":batch}))
        .await;
    let got = messages(
        &api.ok(
            "QueueService/Receive",
            json!({"queue":queue,"max_messages":n}),
        )
        .await,
    );
    for m in &got {
        api.ok(
            "QueueService/Reject",
            json!({"queue":queue,"seq_number":m["seq_number"],"lock_token":m["lock_token"]}),
        )
        .await;
    }
    got.iter()
        .filter_map(|m| m["seq_number"].as_i64())
        .collect()
}

fn retention(count: i64, bytes: i64, age: i64) -> Retention {
    Retention {
        max_age_ms: age,
        max_count: count,
        max_bytes: bytes,
    }
}

#[tokio::test]
async fn c178_c179_retention_by_count_keeps_the_newest() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"dlq_max_count":2})).await;
    api.create_queue("inherit", json!({})).await;
    api.create_queue("untouched", json!({})).await;
    // docs/deviations.md D4 (corrected): a negative bound is the queue's opt-out.
    api.create_queue(
        "opted-out",
        json!({"dlq_max_count":-1,"dlq_max_age_ms":-1,"dlq_max_bytes":-1}),
    )
    .await;
    let dlq = dead_letters(&api, "q", 5).await;
    dead_letters(&api, "inherit", 5).await;
    dead_letters(&api, "opted-out", 5).await;
    for i in 0..3 {
        api.send_text("untouched", &i.to_string()).await;
    }
    api.engine()
        .sweep(&retention(3, 0, 0))
        .await
        .expect("sweep");
    let kept: Vec<i64> = peek(&api, "q")
        .await
        .iter()
        .filter_map(|m| m["seq_number"].as_i64())
        .collect();
    assert_eq!(kept, dlq[3..], "the queue's own bound: the 2 newest");
    assert_eq!(
        api.stats("inherit").await["dead_lettered"],
        3,
        "0 inherits the broker default"
    );
    assert_eq!(
        api.stats("opted-out").await["dead_lettered"],
        5,
        "-1 keeps every dead letter"
    );
    // The opt-out holds for every dimension of the broker's bound.
    api.advance(10_000);
    api.engine()
        .sweep(&retention(1, 100, 1))
        .await
        .expect("sweep");
    assert_eq!(api.stats("opted-out").await["dead_lettered"], 5);
    assert_eq!(api.stats("inherit").await["dead_lettered"], 0);
    assert_eq!(api.stats("untouched").await["active"], 3);
}

#[tokio::test]
async fn c180_retention_by_bytes() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"dlq_max_bytes":250})).await;
    let dlq = dead_letters(&api, "q", 5).await;
    api.engine().sweep(&Retention::off()).await.expect("sweep");
    let kept: Vec<i64> = peek(&api, "q")
        .await
        .iter()
        .filter_map(|m| m["seq_number"].as_i64())
        .collect();
    assert_eq!(kept, dlq[3..]);
}

#[tokio::test]
async fn c181_retention_by_age_counts_from_the_original_enqueue() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"dlq_max_age_ms":60000})).await;
    dead_letters(&api, "q", 2).await;
    api.advance(120_000);
    let fresh = dead_letters(&api, "q", 1).await;
    api.engine().sweep(&Retention::off()).await.expect("sweep");
    let kept: Vec<i64> = peek(&api, "q")
        .await
        .iter()
        .filter_map(|m| m["seq_number"].as_i64())
        .collect();
    assert_eq!(kept, fresh);
}

#[tokio::test]
async fn sweep_converges_idle_queues_and_clears_expired_records() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"lock_duration_ms":1000,"dedup_window_ms":1000}))
        .await;
    api.send_text("q", "x").await;
    let got = api
        .ok(
            "QueueService/Receive",
            json!({"queue":"q","receive_attempt_id":"a"}),
        )
        .await;
    let m = &got["messages"][0];
    api.ok(
        "QueueService/Complete",
        json!({"queue":"q","seq_number":m["seq_number"],"lock_token":m["lock_token"]}),
    )
    .await;
    api.send_text("q", "y").await;
    api.ok("QueueService/Receive", json!({"queue":"q"})).await;
    let count = |table: &'static str| {
        let api = &api;
        async move { query(api.engine(), &format!("SELECT count(*) FROM {table}")).await[0][0].as_i64() }
    };
    assert_eq!(
        (
            count("dedup").await,
            count("settlement_receipts").await,
            count("receive_attempts").await
        ),
        (Some(2), Some(1), Some(1))
    );
    api.advance(31 * 60 * 1000);
    api.engine()
        .sweep(&Retention::default())
        .await
        .expect("sweep");
    assert_eq!(
        (
            count("dedup").await,
            count("settlement_receipts").await,
            count("receive_attempts").await
        ),
        (Some(0), Some(0), Some(0))
    );
    let state = query(api.engine(), "SELECT state FROM messages").await;
    assert_eq!(
        state,
        vec![vec![json!("active")]],
        "the expired lease was reaped by the sweep alone"
    );
}

#[tokio::test]
async fn c214_empty_receives_are_not_recorded() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    assert_eq!(
        api.ok(
            "QueueService/Receive",
            json!({"queue":"q","receive_attempt_id":"E"})
        )
        .await,
        json!({"messages":[]})
    );
    api.send_text("q", "x").await;
    assert_eq!(
        messages(
            &api.ok(
                "QueueService/Receive",
                json!({"queue":"q","receive_attempt_id":"E"})
            )
            .await
        )
        .len(),
        1
    );
}

#[tokio::test]
async fn c217_attempts_are_scoped_per_queue() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.create_queue("q2", json!({})).await;
    api.send_text("q", "a").await;
    api.send_text("q2", "b").await;
    let a = api
        .ok(
            "QueueService/Receive",
            json!({"queue":"q","receive_attempt_id":"X"}),
        )
        .await;
    let b = api
        .ok(
            "QueueService/Receive",
            json!({"queue":"q2","receive_attempt_id":"X"}),
        )
        .await;
    assert_eq!(
        (
            a["messages"][0]["body"].as_str(),
            b["messages"][0]["body"].as_str()
        ),
        (Some(b64("a").as_str()), Some(b64("b").as_str()))
    );
}

#[tokio::test]
async fn c218_attempt_records_expire() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"lock_duration_ms":1000}))
        .await;
    api.send_text("q", "a").await;
    let first = api
        .ok(
            "QueueService/Receive",
            json!({"queue":"q","receive_attempt_id":"A"}),
        )
        .await;
    api.advance(5 * 60 * 1000 - 1);
    assert_eq!(
        api.ok(
            "QueueService/Receive",
            json!({"queue":"q","receive_attempt_id":"A"})
        )
        .await,
        first,
        "still replayed"
    );
    api.advance(1001);
    let fresh = api
        .ok(
            "QueueService/Receive",
            json!({"queue":"q","receive_attempt_id":"A"}),
        )
        .await;
    assert_eq!(
        fresh["messages"][0]["delivery_count"], 2,
        "claims afresh (the lease had expired)"
    );
}
