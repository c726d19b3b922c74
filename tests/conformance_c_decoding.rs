//! Conformance section C: strict request decoding, plus the slice's other
//! bad-input answers (empty names, caps).

mod support;

use serde_json::json;
use support::*;

const SEND: &str = "/mqlite.v1.QueueService/Send";
const AUTH: (&str, &str) = ("Authorization", ADMIN_AUTH);

async fn status_and_code(api: &Api, path: &str, body: &[u8]) -> (u16, String) {
    let r = api.request("POST", path, &[AUTH], body).await;
    (
        r.status,
        json_body(&r)["code"].as_str().unwrap_or("").to_owned(),
    )
}

#[tokio::test]
async fn c038_to_c044_malformed_requests_are_400_invalid_argument() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let bad: &[(&str, &[u8])] = &[
        (SEND, b"{not json"),
        (SEND, br#"{"queue":"q","messsages":[]}"#),
        (SEND, br#"{"queue":"q","messages":[]}{"queue":"q"}"#),
        (SEND, b""),
        (SEND, br#"{"queue":"q","messages":[{"body":"a"}]}"#),
        (SEND, br#"{"queue":"q","messages":[{"body":"aGk"}]}"#),
        (SEND, br#"{"queue":"q","messages":[{"body":"_-8="}]}"#),
        (
            SEND,
            br#"{"queue":"q","messages":[{"properties":{"k":1}}]}"#,
        ),
        (SEND, br#"{"queue":"q","messages":[{"unknown":1}]}"#),
        (SEND, br#"[1,2]"#),
        (
            "/mqlite.v1.QueueService/Receive",
            br#"{"queue":"q","max_messages":"5"}"#,
        ),
        (
            "/mqlite.v1.QueueService/Receive",
            br#"{"queue":"q","max_messages":1.5}"#,
        ),
        (
            "/mqlite.v1.QueueService/Receive",
            br#"{"queue":"q","max_messages":9223372036854775808}"#,
        ),
        (
            "/mqlite.v1.AdminService/CreateQueue",
            br#"{"name":"q","config":{"lock_duration_ms":"1"}}"#,
        ),
    ];
    for (path, body) in bad {
        assert_eq!(
            status_and_code(&api, path, body).await,
            (400, "invalid_argument".to_owned()),
            "{path} {}",
            String::from_utf8_lossy(body)
        );
    }
    assert_eq!(
        api.stats("q").await["total"],
        0,
        "nothing enqueued by a bad request"
    );
}

#[tokio::test]
async fn nulls_mean_zero_values_and_base64_line_breaks_are_tolerated() {
    let api = Api::new(&[]);
    api.create_queue("q", json!(null)).await;
    let seqs = api
        .ok(
            "QueueService/Send",
            json!({"queue":"q","ttl_ms":null,"messages":[{"body":"aGVs\r\nbG8=","subject":null,"properties":null}]}),
        )
        .await;
    assert!(seqs["seq_numbers"][0].as_i64().unwrap_or(0) > 0);
    let got = api
        .ok(
            "QueueService/Receive",
            json!({"queue":"q","max_messages":null}),
        )
        .await;
    assert_eq!(got["messages"][0]["body"], b64("hello"));
}

#[tokio::test]
async fn c045_request_cap_is_413() {
    let api = Api::new(&[("MQLITE_MAX_REQUEST_BYTES", "1000")]);
    let body = format!(
        r#"{{"queue":"q","messages":[{{"body":"{}"}}]}}"#,
        b64(&"x".repeat(1000))
    );
    let r = api.request("POST", SEND, &[AUTH], body.as_bytes()).await;
    assert_eq!(r.status, 413);
    assert_eq!(
        json_body(&r),
        json!({"code":"message_too_large","message":"request body over 1000 bytes"})
    );
}

#[tokio::test]
async fn c046_body_less_admin_reads_ignore_the_body() {
    let api = Api::new(&[]);
    for body in [&b""[..], b"{}", b"not json at all"] {
        let r = api
            .request("POST", "/mqlite.v1.AdminService/ListQueues", &[AUTH], body)
            .await;
        assert_eq!(r.status, 200);
        assert_eq!(json_body(&r), json!({"queues": []}));
    }
    // Never read, so not even the request cap applies to it.
    let capped = Api::new(&[("MQLITE_MAX_REQUEST_BYTES", "1000")]);
    let oversized = vec![b'x'; 2000];
    for rpc in [
        "AdminService/ListQueues",
        "AdminService/ListSubscriptions",
        "AdminService/Status",
    ] {
        let path = format!("/mqlite.v1.{rpc}");
        let r = capped.request("POST", &path, &[AUTH], &oversized).await;
        assert_eq!(r.status, 200, "{rpc}");
    }
    // Observe decodes its body: the cap holds there.
    let r = capped
        .request(
            "POST",
            "/mqlite.v1.AdminService/Observe",
            &[AUTH],
            &oversized,
        )
        .await;
    assert_eq!(r.status, 413);
}

#[tokio::test]
async fn c048_output_fields_are_tolerated_on_input_and_ignored() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let seqs = api
        .ok(
            "QueueService/Send",
            json!({"queue":"q","messages":[{"body":b64("x"),"seq_number":999,"state":"locked","lock_token":"x",
                   "delivery_count":7,"locked_until_ms":5,"dead_letter_reason":"r"}]}),
        )
        .await;
    assert_ne!(seqs["seq_numbers"][0], 999);
    let stats = api.stats("q").await;
    assert_eq!(
        (stats["active"].as_i64(), stats["locked"].as_i64()),
        (Some(1), Some(0))
    );
    let got = api.ok("QueueService/Receive", json!({"queue":"q"})).await;
    assert_eq!(got["messages"][0]["delivery_count"], 1);
}

#[tokio::test]
async fn decision01_empty_names_are_400_before_any_lookup() {
    let api = Api::new(&[]);
    let before = api.round_trips();
    for (rpc, body) in [
        ("QueueService/Send", json!({"queue":"","messages":[]})),
        ("QueueService/Receive", json!({"queue":""})),
        ("QueueService/Stats", json!({})),
        ("AdminService/CreateQueue", json!({"name":""})),
    ] {
        api.fails(rpc, body, 400, "invalid_argument").await;
    }
    assert_eq!(
        api.round_trips(),
        before,
        "rejected without touching the database"
    );
}

#[tokio::test]
async fn decision04_queue_config_validation() {
    let api = Api::new(&[]);
    for config in [
        json!({"kind":"bogus"}),
        json!({"ordering_mode":"fifo"}),
        json!({"lock_duration_ms":-1}),
        json!({"max_delivery_count":-1}),
        json!({"default_ttl_ms":-1}),
        json!({"dedup_window_ms":-5}),
    ] {
        api.fails(
            "AdminService/CreateQueue",
            json!({"name":"q","config":config}),
            400,
            "invalid_argument",
        )
        .await;
    }
    for mode in ["standard", "group_fifo", "strict_fifo", ""] {
        api.create_queue(
            &format!("q-{mode}"),
            json!({"ordering_mode": mode, "kind": ""}),
        )
        .await;
    }
}
