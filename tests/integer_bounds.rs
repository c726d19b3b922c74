//! Durations and instants have sane maxima: an out-of-range value is a 400,
//! never a 500 or a queue that can no longer be received from. Durations
//! (lock, TTL, dedup window, DLQ age, Abandon backoff, Redrive/Purge age)
//! are at most 10 years; instants (schedule time, key expiry) at most the
//! end of year 9999. Each case has a positive control at the bound.

mod support;

use serde_json::json;
use support::*;

const TEN_YEARS_MS: i64 = 10 * 366 * 24 * 3_600_000;

#[tokio::test]
async fn huge_durations_and_instants_are_invalid_arguments() {
    let api = Api::new(&[]);
    for field in [
        "lock_duration_ms",
        "default_ttl_ms",
        "dedup_window_ms",
        "dlq_max_age_ms",
    ] {
        api.fails(
            "AdminService/CreateQueue",
            json!({"name":"q","config":{field: i64::MAX}}),
            400,
            "invalid_argument",
        )
        .await;
        api.create_queue(&format!("ok-{field}"), json!({field: TEN_YEARS_MS}))
            .await;
    }
    api.create_queue("q", json!({})).await;
    let body = b64("x");
    api.fails(
        "QueueService/Send",
        json!({"queue":"q","ttl_ms": i64::MAX,"messages":[{"body":body}]}),
        400,
        "invalid_argument",
    )
    .await;
    api.fails(
        "QueueService/Schedule",
        json!({"queue":"q","scheduled_enqueue_time_ms": i64::MAX,"messages":[{"body":body}]}),
        400,
        "invalid_argument",
    )
    .await;
    api.ok(
        "QueueService/Send",
        json!({"queue":"q","ttl_ms": TEN_YEARS_MS,"messages":[{"body":body}]}),
    )
    .await;
    // The queue still serves: the message sent at the bound is received and
    // settled, and a huge backoff is refused without touching the lease.
    let got = api
        .ok(
            "QueueService/Receive",
            json!({"queue":"q","max_messages":1}),
        )
        .await;
    let m = &got["messages"][0];
    let (seq, token) = (m["seq_number"].clone(), m["lock_token"].clone());
    api.fails(
        "QueueService/Abandon",
        json!({"queue":"q","seq_number":seq,"lock_token":token,"delay_ms": i64::MAX}),
        400,
        "invalid_argument",
    )
    .await;
    api.ok(
        "QueueService/Abandon",
        json!({"queue":"q","seq_number":seq,"lock_token":token,"delay_ms": TEN_YEARS_MS}),
    )
    .await;
    for rpc in ["AdminService/Redrive", "AdminService/Purge"] {
        api.fails(
            rpc,
            json!({"queue":"q","older_than_ms": i64::MAX}),
            400,
            "invalid_argument",
        )
        .await;
    }
    api.fails(
        "AuthService/CreateKey",
        json!({"id":"0123456789abcdef0123456789abcdef","name":"k","permissions":["send"],"expires_at_ms": i64::MAX}),
        400,
        "invalid_argument",
    )
    .await;
}
