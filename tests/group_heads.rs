//! The group-head ledger (migration 0002) must always equal its definition:
//! per group, the lowest seq among active, locked, deferred and scheduled
//! rows. Checked after every step of a workload touching every transition.

mod support;

use serde_json::{json, Value};
use support::*;

const LEDGER: &str = "SELECT queue, group_id, head_id FROM group_heads ORDER BY queue, group_id";
const DEFINITION: &str = "\
SELECT queue, group_id, min(id) FROM messages
WHERE group_id IS NOT NULL AND state <> 'dead_lettered'
GROUP BY queue, group_id ORDER BY queue, group_id";

async fn assert_exact(api: &Api, step: &str) {
    let engine = api.engine();
    assert_eq!(
        query(engine, LEDGER).await,
        query(engine, DEFINITION).await,
        "after {step}"
    );
}

fn settle(m: &Value, extra: Value) -> Value {
    with(
        json!({"queue":"q","seq_number":m["seq_number"],"lock_token":m["lock_token"]}),
        extra,
    )
}

#[tokio::test]
async fn the_ledger_tracks_every_transition() {
    let api = Api::new(&[]);
    api.create_queue(
        "q",
        json!({"lock_duration_ms":1000,"max_delivery_count":3,"default_ttl_ms":600000}),
    )
    .await;
    let mut batch = vec![];
    for g in ["A", "B", "C", "D"] {
        for i in 0..4 {
            batch.push(json!({"body": b64(&format!("{g}{i}")), "group_id": g}));
        }
    }
    batch.push(json!({"body": b64("loose")}));
    api.ok("QueueService/Send", json!({"queue":"q","messages":batch}))
        .await;
    assert_exact(&api, "send").await;
    let t = api.clock.manual_now().unwrap_or(0) + 5000;
    api.ok("QueueService/Schedule", json!({"queue":"q","scheduled_enqueue_time_ms":t,"messages":[{"body":b64("E0"),"group_id":"E"}]})).await;
    assert_exact(&api, "schedule").await;

    let got = api
        .ok(
            "QueueService/Receive",
            json!({"queue":"q","max_messages":10}),
        )
        .await;
    let ms = got["messages"].as_array().cloned().unwrap_or_default();
    assert_exact(&api, "claim").await;
    let by_group = |g: &str| {
        ms.iter()
            .find(|m| m["group_id"] == g)
            .cloned()
            .unwrap_or_default()
    };
    api.ok("QueueService/Complete", settle(&by_group("A"), json!({})))
        .await;
    assert_exact(&api, "complete").await;
    api.ok("QueueService/Reject", settle(&by_group("B"), json!({})))
        .await;
    assert_exact(&api, "reject").await;
    api.ok("QueueService/Defer", settle(&by_group("C"), json!({})))
        .await;
    assert_exact(&api, "defer").await;
    api.ok(
        "QueueService/Abandon",
        settle(&by_group("D"), json!({"delay_ms":2000})),
    )
    .await;
    assert_exact(&api, "abandon with delay").await;
    api.ok("AdminService/Redrive", json!({"queue":"q"})).await;
    assert_exact(&api, "redrive").await;
    api.advance(6000);
    api.ok(
        "QueueService/Receive",
        json!({"queue":"q","max_messages":10,"receive_mode":1}),
    )
    .await;
    assert_exact(&api, "activation and receive-and-delete").await;
    api.ok(
        "QueueService/Receive",
        json!({"queue":"q","max_messages":10}),
    )
    .await;
    api.advance(1000);
    api.ok("QueueService/Stats", json!({"queue":"q"})).await;
    assert_exact(&api, "lease expiry").await;
    api.advance(600_000);
    api.ok("QueueService/Stats", json!({"queue":"q"})).await;
    assert_exact(&api, "ttl").await;
    api.ok("AdminService/Purge", json!({"queue":"q"})).await;
    assert_exact(&api, "purge").await;
    assert!(
        query(api.engine(), LEDGER).await.is_empty(),
        "everything finished"
    );
}
