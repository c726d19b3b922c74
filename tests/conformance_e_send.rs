//! Conformance section E: Send and Schedule. Stored times are inspected
//! directly where the contract reads them through Peek (not yet served).

mod support;

use serde_json::json;
use support::*;

async fn row(api: &Api, seq: i64) -> Vec<serde_json::Value> {
    query(
        api.engine(),
        &format!(
            "SELECT state, visible_at, enqueued_at, expires_at FROM messages WHERE id = {seq}"
        ),
    )
    .await
    .into_iter()
    .next()
    .unwrap_or_default()
}

#[tokio::test]
async fn c065_single_send() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let seq = api.send_text("q", "one").await;
    assert!(seq >= 1);
    let stats = api.stats("q").await;
    assert_eq!(
        (stats["active"].as_i64(), stats["total"].as_i64()),
        (Some(1), Some(1))
    );
}

#[tokio::test]
async fn c066_batch_seqs_strictly_increase() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let r = api
        .ok(
            "QueueService/Send",
            json!({"queue":"q","messages":[{"body":b64("a")},{"body":b64("b")},{"body":b64("c")}]}),
        )
        .await;
    let seqs: Vec<i64> = r["seq_numbers"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_i64()).collect())
        .unwrap_or_default();
    assert_eq!(seqs.len(), 3);
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
}

#[tokio::test]
async fn c067_missing_queue_is_404() {
    let api = Api::new(&[]);
    let (status, body) = api
        .rpc(
            "QueueService/Send",
            json!({"queue":"nope","messages":[{"body":b64("x")}]}),
        )
        .await;
    assert_eq!(status, 404);
    assert_eq!(
        body,
        json!({"code":"not_found","message":"mqlite: queue not found"})
    );
}

#[tokio::test]
async fn c068_empty_list_is_200_empty_without_existence_check() {
    let api = Api::new(&[]);
    let before = api.round_trips();
    assert_eq!(
        api.ok("QueueService/Send", json!({"queue":"nope","messages":[]}))
            .await,
        json!({"seq_numbers":[]})
    );
    assert_eq!(api.round_trips(), before, "no work, no database request");
}

#[tokio::test]
async fn c069_c070_body_cap_boundary_checked_before_existence() {
    let api = Api::new(&[("MQLITE_MAX_MESSAGE_BYTES", "100")]);
    api.create_queue("q", json!({})).await;
    let exact = b64(&"x".repeat(100));
    let over = b64(&"x".repeat(101));
    api.ok(
        "QueueService/Send",
        json!({"queue":"q","messages":[{"body":exact}]}),
    )
    .await;
    api.fails(
        "QueueService/Send",
        json!({"queue":"q","messages":[{"body":over}]}),
        413,
        "message_too_large",
    )
    .await;
    api.fails(
        "QueueService/Send",
        json!({"queue":"nope","messages":[{"body":over}]}),
        413,
        "message_too_large",
    )
    .await;
    assert_eq!(api.stats("q").await["total"], 1);
}

/// docs/http-api.md#rpcs check order: a scheduled request is time-checked before
/// anything else, so a past time wins over an oversized body; with a
/// future time the body cap answers.
#[tokio::test]
async fn c069_c076_past_schedule_time_is_checked_before_the_body_cap() {
    let api = Api::new(&[("MQLITE_MAX_MESSAGE_BYTES", "100")]);
    api.create_queue("q", json!({})).await;
    let now = api.clock.manual_now().unwrap_or(0);
    let over = b64(&"x".repeat(101));
    for rpc in ["QueueService/Send", "QueueService/Schedule"] {
        api.fails(
            rpc,
            json!({"queue":"q","scheduled_enqueue_time_ms":now - 1,"messages":[{"body":over}]}),
            400,
            "invalid_argument",
        )
        .await;
        api.fails(
            rpc,
            json!({"queue":"q","scheduled_enqueue_time_ms":now + 60_000,"messages":[{"body":over}]}),
            413,
            "message_too_large",
        )
        .await;
    }
    assert_eq!(api.stats("q").await["total"], 0);
}

#[tokio::test]
async fn c071_empty_body_is_omitted_on_output() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.ok(
        "QueueService/Send",
        json!({"queue":"q","messages":[{"body":""},{}]}),
    )
    .await;
    let got = api
        .ok(
            "QueueService/Receive",
            json!({"queue":"q","max_messages":2}),
        )
        .await;
    let messages = got["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(messages.len(), 2);
    for m in messages {
        assert!(m.get("body").is_none(), "{m}");
    }
}

#[tokio::test]
async fn c072_round_trip_of_bytes_and_metadata() {
    use base64::Engine as _;
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let body = base64::engine::general_purpose::STANDARD.encode(b"payload \x00\xff");
    let props = json!({"tenant":"acme","k":"中文🚀","x":""});
    api.ok(
        "QueueService/Send",
        json!({"queue":"q","messages":[{"body":body,"message_id":"M1","group_id":"S1","correlation_id":"C1",
               "reply_to":"R1","subject":"sub.x","content_type":"application/json","properties":props}]}),
    )
    .await;
    let got = api.ok("QueueService/Receive", json!({"queue":"q"})).await;
    let m = &got["messages"][0];
    assert_eq!(m["body"], body);
    for (field, value) in [
        ("message_id", "M1"),
        ("group_id", "S1"),
        ("correlation_id", "C1"),
        ("reply_to", "R1"),
        ("subject", "sub.x"),
        ("content_type", "application/json"),
    ] {
        assert_eq!(m[field], value, "{field}");
    }
    assert_eq!(m["properties"], props);
}

#[tokio::test]
async fn c073_group_fifo_requires_group_and_fails_the_whole_request() {
    let api = Api::new(&[]);
    api.create_queue("g", json!({"ordering_mode":"group_fifo"}))
        .await;
    api.fails(
        "QueueService/Send",
        json!({"queue":"g","messages":[{"body":b64("x")}]}),
        400,
        "group_required",
    )
    .await;
    api.fails(
        "QueueService/Send",
        json!({"queue":"g","messages":[{"body":b64("a"),"group_id":"g1"},{"body":b64("b")}]}),
        400,
        "group_required",
    )
    .await;
    assert_eq!(api.stats("g").await["total"], 0);
}

#[tokio::test]
async fn c074_strict_fifo_needs_no_group() {
    let api = Api::new(&[]);
    api.create_queue("s", json!({"ordering_mode":"strict_fifo"}))
        .await;
    api.send_text("s", "x").await;
}

#[tokio::test]
async fn c075_c076_schedule_time_must_be_a_future_instant() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let now = api.clock.manual_now().unwrap_or(0);
    for rpc in ["QueueService/Send", "QueueService/Schedule"] {
        for t in [-1, now - 1000, now] {
            api.fails(
                rpc,
                json!({"queue":"q","scheduled_enqueue_time_ms":t,"messages":[{"body":b64("x")}]}),
                400,
                "invalid_argument",
            )
            .await;
        }
        // Validation before work (docs/deviations.md D5): also with no messages.
        api.fails(
            rpc,
            json!({"queue":"q","scheduled_enqueue_time_ms":now - 1,"messages":[]}),
            400,
            "invalid_argument",
        )
        .await;
    }
    assert_eq!(api.stats("q").await["total"], 0);
}

#[tokio::test]
async fn c077_schedule_parks_the_message_until_its_time() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let t = api.clock.manual_now().unwrap_or(0) + 60_000;
    let r = api
        .ok(
            "QueueService/Schedule",
            json!({"queue":"q","scheduled_enqueue_time_ms":t,"messages":[{"body":b64("x")}]}),
        )
        .await;
    let seq = r["seq_numbers"][0].as_i64().unwrap_or(0);
    let stored = row(&api, seq).await;
    assert_eq!(
        (stored[0].clone(), stored[1].as_i64()),
        (json!("scheduled"), Some(t))
    );
    assert_eq!(
        api.ok(
            "QueueService/Receive",
            json!({"queue":"q","wait_time_ms":0})
        )
        .await,
        json!({"messages":[]})
    );
    assert_eq!(api.stats("q").await["scheduled"], 1);
    // Still parked a millisecond before its time, due exactly at it.
    api.advance(59_999);
    assert_eq!(api.stats("q").await["scheduled"], 1);
    api.advance(1);
    let due = api
        .ok(
            "QueueService/Receive",
            json!({"queue":"q","wait_time_ms":0}),
        )
        .await;
    assert_eq!(due["messages"][0]["seq_number"], seq);
}

#[tokio::test]
async fn c078_schedule_route_without_time_is_an_immediate_send() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.ok(
        "QueueService/Schedule",
        json!({"queue":"q","messages":[{"body":b64("x")}]}),
    )
    .await;
    let got = api.ok("QueueService/Receive", json!({"queue":"q"})).await;
    assert_eq!(got["messages"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn c079_scheduled_batch_is_atomic() {
    let api = Api::new(&[]);
    api.create_queue("g", json!({"ordering_mode":"group_fifo"}))
        .await;
    let t = api.clock.manual_now().unwrap_or(0) + 60_000;
    api.fails(
        "QueueService/Schedule",
        json!({"queue":"g","scheduled_enqueue_time_ms":t,"messages":[{"body":b64("a"),"group_id":"g1"},{"body":b64("b")}]}),
        400,
        "group_required",
    )
    .await;
    assert_eq!(api.stats("g").await["scheduled"], 0);
}

#[tokio::test]
async fn c080_c081_ttl_is_anchored_at_visibility_and_capped_by_the_queue_default() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.create_queue("capped", json!({"default_ttl_ms":3_600_000}))
        .await;
    let send = |queue: &'static str, ttl: Option<i64>| {
        let api = &api;
        async move {
            let mut req = json!({"queue":queue,"messages":[{"body":b64("x")}]});
            if let Some(ttl) = ttl {
                req["ttl_ms"] = ttl.into();
            }
            let seq = api.ok("QueueService/Send", req).await["seq_numbers"][0]
                .as_i64()
                .unwrap_or(0);
            let stored = row(api, seq).await;
            stored[3].as_i64().unwrap_or(-1) - stored[2].as_i64().unwrap_or(0)
        }
    };
    assert_eq!(send("q", Some(300_000)).await, 300_000);
    let no_ttl = api.send_text("q", "none").await;
    assert_eq!(row(&api, no_ttl).await[3], 0);
    assert_eq!(send("capped", Some(7_200_000)).await, 3_600_000);
    assert_eq!(send("capped", Some(600_000)).await, 600_000);
    assert_eq!(send("capped", None).await, 3_600_000);
    // Scheduled: TTL counts from the scheduled time.
    let t = api.clock.manual_now().unwrap_or(0) + 10_000;
    let r = api.ok("QueueService/Send", json!({"queue":"q","ttl_ms":5000,"scheduled_enqueue_time_ms":t,"messages":[{"body":b64("x")}]})).await;
    let stored = row(&api, r["seq_numbers"][0].as_i64().unwrap_or(0)).await;
    assert_eq!(stored[3].as_i64(), Some(t + 5000));
}

#[tokio::test]
async fn c082_c083_seqs_are_global_and_never_reused() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.create_queue("q2", json!({})).await;
    let a = api.send_text("q", "a").await;
    let got = api.ok("QueueService/Receive", json!({"queue":"q"})).await;
    let token = got["messages"][0]["lock_token"].clone();
    api.ok(
        "QueueService/Complete",
        json!({"queue":"q","seq_number":a,"lock_token":token}),
    )
    .await;
    let b = api.send_text("q", "b").await;
    assert!(b > a, "{b} > {a} although {a} was deleted");
    let c = api.send_text("q2", "c").await;
    let d = api.send_text("q", "d").await;
    assert!(b < c && c < d);
}

#[tokio::test]
async fn c084_schedule_activation_clock() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let t = api.clock.manual_now().unwrap_or(0) + 2000;
    api.ok(
        "QueueService/Schedule",
        json!({"queue":"q","scheduled_enqueue_time_ms":t,"messages":[{"body":b64("x")}]}),
    )
    .await;
    assert_eq!(
        api.ok("QueueService/Receive", json!({"queue":"q"})).await,
        json!({"messages":[]})
    );
    api.advance(1999);
    assert_eq!(
        api.ok("QueueService/Receive", json!({"queue":"q"})).await,
        json!({"messages":[]})
    );
    api.advance(1);
    let got = api.ok("QueueService/Receive", json!({"queue":"q"})).await;
    assert_eq!(
        got["messages"][0]["delivery_count"], 1,
        "due at exactly its time"
    );
}

#[tokio::test]
async fn dedup_duplicate_and_conflict_in_one_request() {
    // Section F lands with the next slice; the slice's Send already honours
    // a queue's window, so pin the core rule here.
    let api = Api::new(&[]);
    api.create_queue("d", json!({"dedup_window_ms":600000}))
        .await;
    let r = api
        .ok(
            "QueueService/Send",
            json!({"queue":"d","messages":[
            {"message_id":"A","body":b64("one")},{"message_id":"A","body":b64("two")},
            {"message_id":"B","body":b64("three")},{"message_id":"A","body":b64("one")}]}),
        )
        .await;
    let seqs: Vec<i64> = r["seq_numbers"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_i64()).collect())
        .unwrap_or_default();
    assert!(seqs[0] > 0 && seqs[2] > 0, "{seqs:?}");
    assert_eq!((seqs[1], seqs[3]), (0, seqs[0]), "{seqs:?}");
    api.fails(
        "QueueService/Send",
        json!({"queue":"d","messages":[{"message_id":"A","body":b64("other")}]}),
        409,
        "already_exists",
    )
    .await;
    let again = api
        .ok(
            "QueueService/Send",
            json!({"queue":"d","messages":[{"message_id":"A","body":b64("one")}]}),
        )
        .await;
    assert_eq!(again["seq_numbers"][0], seqs[0]);
    assert_eq!(api.stats("d").await["active"], 2);
    api.advance(600_001);
    let fresh = api
        .ok(
            "QueueService/Send",
            json!({"queue":"d","messages":[{"message_id":"A","body":b64("other")}]}),
        )
        .await;
    assert!(
        fresh["seq_numbers"][0].as_i64() > Some(seqs[2]),
        "out of window: a new message"
    );
}

/// A Send near the request cap travels in several body blobs (libSQL
/// refuses one value over a few MiB): every body comes back intact, in
/// order, whatever blob it rode in.
#[tokio::test]
async fn bodies_of_a_large_send_travel_in_several_blobs_intact() {
    use mqlite_edge::engine::{OutgoingMessage, QueueConfigInput, ReceiveRequest, SendRequest};
    let h = Harness::new();
    h.engine
        .create_queue("big", &QueueConfigInput::default())
        .await
        .expect("create");
    // 23 bodies of 1 MiB less a little, each a different byte pattern.
    let bodies: Vec<Vec<u8>> = (0..23u8)
        .map(|i| (0..1_048_000u32).map(|j| (j as u8) ^ i).collect())
        .collect();
    let request = SendRequest {
        queue: "big".into(),
        messages: bodies
            .iter()
            .map(|b| OutgoingMessage {
                body: b.clone(),
                ..OutgoingMessage::default()
            })
            .collect(),
        ..SendRequest::default()
    };
    let seqs = h.engine.send(&request).await.expect("send");
    assert_eq!(seqs.len(), 23);
    let (got, _) = h
        .engine
        .receive(
            &ReceiveRequest {
                queue: "big".into(),
                max_messages: 256,
                ..ReceiveRequest::default()
            },
            &RealWaiter::start(),
        )
        .await
        .expect("receive");
    assert_eq!(
        got.len(),
        9,
        "the 8 MiB response budget stops after the crossing body"
    );
    use base64::Engine as _;
    for (m, body) in got.iter().zip(&bodies) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(&m.body_base64)
            .expect("base64");
        assert!(decoded == *body, "seq {} differs", m.seq_number);
    }
    let rows = query(
        &h.engine,
        "SELECT length(body), hex(substr(body, 1, 4)) FROM messages ORDER BY id",
    )
    .await;
    assert_eq!(rows.len(), 23);
    for (row, body) in rows.iter().zip(&bodies) {
        assert_eq!(row[0], serde_json::json!(body.len()));
        let head: String = body[..4].iter().map(|b| format!("{b:02X}")).collect();
        assert_eq!(row[1], serde_json::json!(head));
    }
}
