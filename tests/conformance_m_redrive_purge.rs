//! Conformance section M: Redrive (in place, cross-queue, paced, filtered)
//! and Purge.

mod support;

use serde_json::{json, Value};
use support::*;

/// `n` dead letters in `queue` (Reject); returns their seqs.
async fn dead_letters(api: &Api, queue: &str, n: usize) -> Vec<i64> {
    let batch: Vec<Value> = (0..n)
        .map(|i| json!({"body": b64(&i.to_string())}))
        .collect();
    api.ok("QueueService/Send", json!({"queue":queue,"messages":batch}))
        .await;
    let got = api
        .ok(
            "QueueService/Receive",
            json!({"queue":queue,"max_messages":n}),
        )
        .await;
    let ms = got["messages"].as_array().cloned().unwrap_or_default();
    for m in &ms {
        api.ok("QueueService/Reject", json!({"queue":queue,"seq_number":m["seq_number"],"lock_token":m["lock_token"],"dead_letter_reason":"r"})).await;
    }
    ms.iter().filter_map(|m| m["seq_number"].as_i64()).collect()
}

#[tokio::test]
async fn c171_in_place_redrive() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let seqs = dead_letters(&api, "q", 1).await;
    assert_eq!(
        api.ok("AdminService/Redrive", json!({"queue":"q"})).await,
        json!({"moved":1})
    );
    let peek = api.ok("QueueService/Peek", json!({"queue":"q"})).await;
    let m = &peek["messages"][0];
    assert_eq!(m["state"], "active");
    for cleared in ["dead_letter_reason", "visible_at_ms", "delivery_count"] {
        assert!(m.get(cleared).is_none(), "{cleared}: {m}");
    }
    let got = api.ok("QueueService/Receive", json!({"queue":"q"})).await;
    assert_eq!(
        (
            got["messages"][0]["seq_number"].as_i64(),
            got["messages"][0]["delivery_count"].as_i64()
        ),
        (Some(seqs[0]), Some(1))
    );
}

#[tokio::test]
async fn c172_cross_queue_redrive() {
    let api = Api::new(&[]);
    api.create_queue("src", json!({})).await;
    api.create_queue("dst", json!({"default_ttl_ms":60000}))
        .await;
    let seqs = dead_letters(&api, "src", 5).await;
    assert_eq!(
        api.ok(
            "AdminService/Redrive",
            json!({"queue":"src","target":"dst"})
        )
        .await,
        json!({"moved":5})
    );
    assert_eq!(api.stats("src").await["dead_lettered"], 0);
    assert_eq!(api.stats("dst").await["active"], 5);
    let peek = api.ok("QueueService/Peek", json!({"queue":"dst"})).await;
    let copies = peek["messages"].as_array().cloned().unwrap_or_default();
    let max_old = seqs.iter().max().copied().unwrap_or(0);
    for (i, m) in copies.iter().enumerate() {
        assert!(m["seq_number"].as_i64() > Some(max_old), "fresh seqs: {m}");
        assert_eq!(m["body"], b64(&i.to_string()), "bodies copied in order");
        for absent in [
            "visible_at_ms",
            "expires_at_ms",
            "delivery_count",
            "dead_letter_reason",
        ] {
            assert!(m.get(absent).is_none(), "decision 6: {absent} in {m}");
        }
    }
}

#[tokio::test]
async fn c173_rate_limited_redrive_moves_everything_in_paced_chunks() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    dead_letters(&api, "q", 3).await;
    let before = api.round_trips();
    let started = std::time::Instant::now();
    assert_eq!(
        api.ok(
            "AdminService/Redrive",
            json!({"queue":"q","rate_per_sec":2})
        )
        .await,
        json!({"moved":3})
    );
    assert!(
        started.elapsed().as_millis() >= 1000,
        "paced: {:?}",
        started.elapsed()
    );
    assert_eq!(api.round_trips() - before, 2, "one transaction per chunk");
}

/// Paced chunks stop at `max`: the last chunk is what `max` leaves, and
/// no chunk follows it.
#[tokio::test]
async fn c174_paced_redrive_stops_at_max_in_as_many_chunks() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    dead_letters(&api, "q", 5).await;
    let before = api.round_trips();
    assert_eq!(
        api.ok(
            "AdminService/Redrive",
            json!({"queue":"q","rate_per_sec":2,"max":3})
        )
        .await,
        json!({"moved":3})
    );
    assert_eq!(api.round_trips() - before, 2, "a chunk of 2, then of 1");
    assert_eq!(api.stats("q").await["dead_lettered"], 2);
}

#[tokio::test]
async fn c174_redrive_max_and_older_than() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let seqs = dead_letters(&api, "q", 3).await;
    assert_eq!(
        api.ok("AdminService/Redrive", json!({"queue":"q","max":1}))
            .await,
        json!({"moved":1})
    );
    let active = api
        .ok("QueueService/Peek", json!({"queue":"q","state":"active"}))
        .await;
    assert_eq!(
        active["messages"][0]["seq_number"], seqs[0],
        "the lowest seq"
    );
    assert_eq!(
        api.ok(
            "AdminService/Redrive",
            json!({"queue":"q","older_than_ms":3600000})
        )
        .await,
        json!({"moved":0})
    );
    api.advance(3_600_001);
    assert_eq!(
        api.ok(
            "AdminService/Redrive",
            json!({"queue":"q","older_than_ms":3600000})
        )
        .await,
        json!({"moved":2})
    );
}

#[tokio::test]
async fn c175_redrive_validation() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.ok(
        "AdminService/CreateQueue",
        json!({"name":"tp-sub","config":{"kind":"subscription"}}),
    )
    .await;
    for bad in [
        json!({"queue":"q","max":-1}),
        json!({"queue":"q","older_than_ms":-1}),
        json!({"queue":"q","rate_per_sec":-1}),
    ] {
        api.fails("AdminService/Redrive", bad, 400, "invalid_argument")
            .await;
    }
    api.fails(
        "AdminService/Redrive",
        json!({"queue":"nope"}),
        404,
        "not_found",
    )
    .await;
    api.fails(
        "AdminService/Redrive",
        json!({"queue":"q","target":"nope"}),
        404,
        "not_found",
    )
    .await;
    // A backing queue is a queue of any kind: a valid target.
    api.ok(
        "AdminService/Redrive",
        json!({"queue":"q","target":"tp-sub"}),
    )
    .await;
}

#[tokio::test]
async fn c176_c177_purge() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    dead_letters(&api, "q", 4).await;
    api.send_text("q", "active").await;
    let t = api.clock.manual_now().unwrap_or(0) + 60_000;
    api.ok(
        "QueueService/Schedule",
        json!({"queue":"q","scheduled_enqueue_time_ms":t,"messages":[{"body":b64("s")}]}),
    )
    .await;
    assert_eq!(
        api.ok("AdminService/Purge", json!({"queue":"q","max":3}))
            .await,
        json!({"purged":3})
    );
    assert_eq!(
        api.ok("AdminService/Purge", json!({"queue":"q"})).await,
        json!({"purged":1})
    );
    let stats = api.stats("q").await;
    assert_eq!(
        (
            stats["dead_lettered"].as_i64(),
            stats["active"].as_i64(),
            stats["scheduled"].as_i64()
        ),
        (Some(0), Some(1), Some(1))
    );
    api.fails(
        "AdminService/Purge",
        json!({"queue":"q","max":-1}),
        400,
        "invalid_argument",
    )
    .await;
    api.fails(
        "AdminService/Purge",
        json!({"queue":"q","older_than_ms":-1}),
        400,
        "invalid_argument",
    )
    .await;
    api.fails(
        "AdminService/Purge",
        json!({"queue":"nope"}),
        404,
        "not_found",
    )
    .await;
}

/// Redrive into another queue in several paced chunks: every dead letter
/// arrives exactly once (bodies in seq order, none lost or duplicated) and
/// none is left behind.
#[tokio::test]
async fn c172_c173_cross_queue_redrive_in_chunks_loses_and_duplicates_nothing() {
    let api = Api::new(&[]);
    api.create_queue("src", json!({})).await;
    api.create_queue("dst", json!({})).await;
    dead_letters(&api, "src", 5).await;
    let before = api.round_trips();
    assert_eq!(
        api.ok(
            "AdminService/Redrive",
            json!({"queue":"src","target":"dst","rate_per_sec":2})
        )
        .await,
        json!({"moved":5})
    );
    assert_eq!(api.round_trips() - before, 3, "chunks of 2, 2 and 1");
    assert_eq!(api.stats("src").await["total"], 0);
    assert_eq!(api.stats("dst").await["active"], 5);
    let peek = api
        .ok("QueueService/Peek", json!({"queue":"dst","max":10}))
        .await;
    let bodies: Vec<Value> = messages(&peek).iter().map(|m| m["body"].clone()).collect();
    let want: Vec<Value> = (0..5).map(|i| json!(b64(&i.to_string()))).collect();
    assert_eq!(bodies, want);
}
