//! Conformance S (DeleteQueue, cases 232–239) and P (Status, case 212; unknown-queue Stats, case 210).

mod support;

use serde_json::json;
use support::{b64, Api};

async fn generation(api: &Api, name: &str) -> String {
    let list = api.ok("AdminService/ListQueues", json!({})).await;
    list["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| q["name"] == name)
        .and_then(|q| q["generation"].as_str())
        .expect("listed with a generation")
        .to_owned()
}

async fn delete(api: &Api, name: &str, generation: &str) -> (u16, serde_json::Value) {
    api.rpc(
        "AdminService/DeleteQueue",
        json!({"name": name, "generation": generation}),
    )
    .await
}

#[tokio::test]
async fn c232_delete() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let g = generation(&api, "q").await;
    assert_eq!(delete(&api, "q", &g).await, (200, json!({"deleted":true})));
    let list = api.ok("AdminService/ListQueues", json!({})).await;
    assert_eq!(list, json!({"queues":[]}));
    api.fails(
        "QueueService/Send",
        json!({"queue":"q","messages":[{"body":b64("x")}]}),
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn c233_c234_missing_generation_and_unknown_queue() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.fails(
        "AdminService/DeleteQueue",
        json!({"name":"q"}),
        400,
        "invalid_argument",
    )
    .await;
    api.fails(
        "AdminService/DeleteQueue",
        json!({"name":"","generation":"g"}),
        400,
        "invalid_argument",
    )
    .await;
    api.fails(
        "AdminService/DeleteQueue",
        json!({"name":"nope","generation":"g"}),
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn c235_backing_queue_is_refused() {
    let api = Api::new(&[]);
    api.subscribe("t", "s", None).await;
    let g = generation(&api, "s").await;
    let (status, body) = delete(&api, "s", &g).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_argument"))
    );
    let seq = api
        .ok(
            "QueueService/Send",
            json!({"queue":"t","messages":[{"body":b64("x")}]}),
        )
        .await;
    assert!(seq["seq_numbers"][0].as_i64().expect("seq") > 0);
}

#[tokio::test]
async fn c236_c238_generation_fences_and_survives_reconfiguration() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let g1 = generation(&api, "q").await;
    api.create_queue("q", json!({"lock_duration_ms":60000}))
        .await;
    assert_eq!(generation(&api, "q").await, g1, "c238");
    assert_eq!(delete(&api, "q", &g1).await.0, 200);
    api.create_queue("q", json!({})).await;
    let g2 = generation(&api, "q").await;
    assert_ne!(g1, g2);
    let (status, body) = delete(&api, "q", &g1).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("queue_changed"))
    );
    assert_eq!(generation(&api, "q").await, g2);
}

#[tokio::test]
async fn c237_not_empty_in_every_state() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"max_delivery_count":1})).await;
    let g = generation(&api, "q").await;
    // active
    let seq = api.send_text("q", "a").await;
    not_empty(&api, &g).await;
    // locked
    let received = api.ok("QueueService/Receive", json!({"queue":"q"})).await;
    let token = received["messages"][0]["lock_token"].clone();
    not_empty(&api, &g).await;
    // deferred
    api.ok(
        "QueueService/Defer",
        json!({"queue":"q","seq_number":seq,"lock_token":token}),
    )
    .await;
    not_empty(&api, &g).await;
    let got = api
        .ok(
            "QueueService/ReceiveDeferred",
            json!({"queue":"q","seq_numbers":[seq]}),
        )
        .await;
    let token = got["messages"][0]["lock_token"].clone();
    // dead_lettered
    api.ok(
        "QueueService/Reject",
        json!({"queue":"q","seq_number":seq,"lock_token":token}),
    )
    .await;
    not_empty(&api, &g).await;
    api.ok("AdminService/Purge", json!({"queue":"q"})).await;
    // scheduled
    let at = api.now() + 60_000;
    let scheduled = api
        .ok(
            "QueueService/Schedule",
            json!({"queue":"q","messages":[{"body":b64("s")}],"scheduled_enqueue_time_ms":at}),
        )
        .await;
    not_empty(&api, &g).await;
    api.ok(
        "QueueService/Cancel",
        json!({"queue":"q","seq_number":scheduled["seq_numbers"][0]}),
    )
    .await;
    assert_eq!(delete(&api, "q", &g).await.0, 200);
}

#[tokio::test]
async fn ttl_expired_rows_do_not_keep_a_queue_non_empty() {
    let api = Api::new(&[]);
    api.create_queue(
        "q",
        json!({"default_ttl_ms":1000,"dead_letter_on_expire":false}),
    )
    .await;
    api.send_text("q", "x").await;
    let g = generation(&api, "q").await;
    assert_eq!(delete(&api, "q", &g).await.0, 409);
    api.advance(1000);
    assert_eq!(delete(&api, "q", &g).await.0, 200);
}

#[tokio::test]
async fn c239_fresh_auxiliary_state_and_increasing_seqs() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"dedup_window_ms":600000}))
        .await;
    let send = json!({"queue":"q","messages":[{"body":b64("same"),"message_id":"k"}]});
    let first = api.ok("QueueService/Send", send.clone()).await["seq_numbers"][0]
        .as_i64()
        .expect("seq");
    api.ok(
        "QueueService/Receive",
        json!({"queue":"q","receive_mode":1}),
    )
    .await;
    let g = generation(&api, "q").await;
    assert_eq!(delete(&api, "q", &g).await.0, 200);
    api.create_queue("q", json!({"dedup_window_ms":600000}))
        .await;
    let second = api.ok("QueueService/Send", send).await["seq_numbers"][0]
        .as_i64()
        .expect("seq");
    assert!(second > first, "{second} > {first}");
    let aux = support::query(api.engine(), "SELECT count(*) FROM dedup WHERE queue = 'q'").await;
    assert_eq!(aux, vec![vec![json!(1)]]);
}

#[tokio::test]
async fn c212_status() {
    let api = Api::new(&[("MQLITE_DB", "libsql://db-org.turso.io?authToken=secret")]);
    api.create_queue("q1", json!({})).await;
    api.create_queue("q2", json!({})).await;
    api.subscribe("t", "s", None).await;
    // The isolate started at T0; uptime is measured from there.
    api.advance(1234);
    let status = api.ok("AdminService/Status", json!({})).await;
    assert_eq!(status["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(status["backend"], "remote libSQL/Turso");
    assert_eq!(status["remote"], true);
    assert_eq!(status["location"], "libsql://***.turso.io");
    assert_eq!(
        status["schema_version"],
        mqlite_edge::store::migrate::SCHEMA_VERSION.to_string()
    );
    // -1 would mean the probe failed.
    assert!(status["ping_ms"].as_i64().expect("ping") >= 0);
    assert_eq!(status["db_size_bytes"], 0);
    assert_eq!(status["queues"], 2);
    assert_eq!(status["subscriptions"], 1);
    assert_eq!(status["uptime_ms"], 1234);
    assert_eq!(status["auth"], true);
    // The contract's eleven members plus the Worker's `writes` (write breaker).
    assert_eq!(status["writes"], "accepting");
    assert_eq!(status.as_object().expect("object").len(), 12);
    assert!(!status.to_string().contains("secret"));
}

#[tokio::test]
async fn status_reports_a_failed_probe_without_failing() {
    let api = Api::unreachable(&[]);
    let status = api.ok("AdminService/Status", json!({})).await;
    assert_eq!(status["ping_ms"], -1);
    assert_eq!(status["queues"], 0);
}

async fn not_empty(api: &Api, generation: &str) {
    let (status, body) = delete(api, "q", generation).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("queue_not_empty"))
    );
}

#[tokio::test]
async fn c210_stats_of_an_unknown_queue_is_404() {
    let api = Api::new(&[]);
    api.fails(
        "QueueService/Stats",
        json!({"queue":"nope"}),
        404,
        "not_found",
    )
    .await;
    api.subscribe("t", "s", None).await;
    // A topic is not a queue.
    api.fails("QueueService/Stats", json!({"queue":"t"}), 404, "not_found")
        .await;
}
