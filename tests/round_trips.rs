//! One round trip per RPC: every call is exactly one pipeline request to
//! the database, counted by the local server, batch calls included.

mod support;

use serde_json::{json, Value};
use support::*;

async fn trips(api: &Api, rpc: &str, body: Value) -> u64 {
    let before = api.round_trips();
    api.ok(rpc, body).await;
    api.round_trips() - before
}

#[tokio::test]
async fn every_rpc_of_the_slice_is_one_database_request() {
    let api = Api::new(&[]);
    // The very first request also migrates the fresh database.
    api.create_queue("warm-up", json!({})).await;

    assert_eq!(
        trips(
            &api,
            "AdminService/CreateQueue",
            json!({"name":"q","config":{}})
        )
        .await,
        1
    );
    assert_eq!(
        trips(
            &api,
            "AdminService/CreateQueue",
            json!({"name":"d","config":{"dedup_window_ms":60000}})
        )
        .await,
        1
    );
    assert_eq!(trips(&api, "AdminService/ListQueues", json!({})).await, 1);
    assert_eq!(
        trips(
            &api,
            "QueueService/Send",
            json!({"queue":"q","messages":[{"body":b64("x")}]})
        )
        .await,
        1
    );
    let batch: Vec<Value> = (0..100)
        .map(|i| json!({"body": b64(&i.to_string()), "message_id": i.to_string()}))
        .collect();
    assert_eq!(
        trips(
            &api,
            "QueueService/Send",
            json!({"queue":"q","messages":batch.clone()})
        )
        .await,
        1
    );
    assert_eq!(
        trips(
            &api,
            "QueueService/Send",
            json!({"queue":"d","messages":batch})
        )
        .await,
        1
    );
    let later = api.clock.manual_now().unwrap_or(0) + 60_000;
    assert_eq!(
        trips(
            &api,
            "QueueService/Schedule",
            json!({"queue":"q","scheduled_enqueue_time_ms":later,"messages":[{"body":b64("x")}]})
        )
        .await,
        1
    );
    assert_eq!(
        trips(
            &api,
            "QueueService/Receive",
            json!({"queue":"q","max_messages":256,"receive_attempt_id":"a"})
        )
        .await,
        1
    );
    assert_eq!(
        trips(
            &api,
            "QueueService/Receive",
            json!({"queue":"d","max_messages":50,"receive_mode":1})
        )
        .await,
        1
    );
    assert_eq!(
        trips(
            &api,
            "QueueService/Receive",
            json!({"queue":"d","max_messages":5,"receive_mode":1,"receive_attempt_id":"b"})
        )
        .await,
        1
    );

    api.send_text("q", "to-complete").await;
    let got = api.ok("QueueService/Receive", json!({"queue":"q"})).await;
    let m = &got["messages"][0];
    let complete = json!({"queue":"q","seq_number":m["seq_number"],"lock_token":m["lock_token"]});
    assert_eq!(
        trips(&api, "QueueService/Complete", complete.clone()).await,
        1
    );
    assert_eq!(
        trips(&api, "QueueService/Complete", complete).await,
        1,
        "replay too"
    );
    assert_eq!(
        trips(&api, "QueueService/Stats", json!({"queue":"q"})).await,
        1
    );
}

#[tokio::test]
async fn every_settle_batch_and_inspection_rpc_is_one_database_request() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let batch: Vec<Value> = (0..20)
        .map(|i| json!({"body": b64(&i.to_string())}))
        .collect();
    api.ok("QueueService/Send", json!({"queue":"q","messages":batch}))
        .await;
    let got = api
        .ok(
            "QueueService/Receive",
            json!({"queue":"q","max_messages":20}),
        )
        .await;
    let ms = messages(&got);
    let settle = |m: &Value, extra: Value| {
        with(
            json!({"queue":"q","seq_number":m["seq_number"],"lock_token":m["lock_token"]}),
            extra,
        )
    };
    let pairs = |range: std::ops::Range<usize>| -> Vec<Value> {
        ms[range]
            .iter()
            .map(|m| json!({"seq_number":m["seq_number"],"lock_token":m["lock_token"]}))
            .collect()
    };
    assert_eq!(
        trips(&api, "QueueService/Renew", settle(&ms[0], json!({}))).await,
        1
    );
    assert_eq!(
        trips(
            &api,
            "QueueService/RenewBatch",
            json!({"queue":"q","messages":pairs(0..10)})
        )
        .await,
        1
    );
    assert_eq!(
        trips(
            &api,
            "QueueService/Abandon",
            settle(&ms[0], json!({"delay_ms":1000}))
        )
        .await,
        1
    );
    assert_eq!(
        trips(
            &api,
            "QueueService/Reject",
            settle(&ms[1], json!({"dead_letter_reason":"r"}))
        )
        .await,
        1
    );
    assert_eq!(
        trips(&api, "QueueService/Defer", settle(&ms[2], json!({}))).await,
        1
    );
    assert_eq!(
        trips(
            &api,
            "QueueService/CompleteBatch",
            json!({"queue":"q","messages":pairs(3..20)})
        )
        .await,
        1
    );
    assert_eq!(
        trips(
            &api,
            "QueueService/ReceiveDeferred",
            json!({"queue":"q","seq_numbers":[ms[2]["seq_number"]]})
        )
        .await,
        1
    );
    assert_eq!(
        trips(&api, "QueueService/Peek", json!({"queue":"q","max":1000})).await,
        1
    );
    assert_eq!(
        trips(
            &api,
            "QueueService/Peek",
            json!({"queue":"q","state":"dead_lettered"})
        )
        .await,
        1
    );
    let t = api.clock.manual_now().unwrap_or(0) + 60_000;
    let s = api
        .ok(
            "QueueService/Schedule",
            json!({"queue":"q","scheduled_enqueue_time_ms":t,"messages":[{"body":b64("s")}]}),
        )
        .await;
    assert_eq!(
        trips(
            &api,
            "QueueService/Cancel",
            json!({"queue":"q","seq_number":s["seq_numbers"][0]})
        )
        .await,
        1
    );
    assert_eq!(
        trips(&api, "AdminService/Redrive", json!({"queue":"q"})).await,
        1
    );
    assert_eq!(
        trips(&api, "AdminService/Purge", json!({"queue":"q"})).await,
        1
    );
    let before = api.round_trips();
    api.engine()
        .sweep(&mqlite_edge::engine::Retention::default())
        .await
        .expect("sweep");
    assert_eq!(api.round_trips() - before, 1, "the cron sweep too");
}
