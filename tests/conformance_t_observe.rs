//! Conformance T: Observe and /metrics (cases 240–246), plus the isolate's
//! event accounting and case 3/15 of the discovery card.

mod support;

use serde_json::json;
use support::{b64, json_body, Api, ADMIN, ADMIN_AUTH, MONITOR};

const METRICS_ON: (&str, &str) = ("MQLITE_METRICS", "on");

async fn metrics(api: &Api, token: Option<&str>) -> mqlite_edge::http::Response {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth
        .as_deref()
        .map(|a| vec![("Authorization", a)])
        .unwrap_or_default();
    api.request("GET", "/metrics", &headers, b"").await
}

fn text(response: &mqlite_edge::http::Response) -> String {
    String::from_utf8_lossy(&response.body).into_owned()
}

fn event(observation: &serde_json::Value, queue: &str, name: &str) -> i64 {
    observation["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["queue"] == queue && m["event"] == name)
        .and_then(|m| m["count"].as_i64())
        .unwrap_or(-1)
}

#[tokio::test]
async fn c240_observe_as_admin() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.subscribe("t", "s", None).await;
    api.send_text("q", "a").await;
    api.send_text("q", "b").await;
    api.ok("QueueService/Receive", json!({"queue":"q"})).await;
    let r = api
        .request(
            "POST",
            "/mqlite.v1.AdminService/Observe",
            &[("Authorization", ADMIN_AUTH)],
            b"{}",
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Cache-Control"), Some("no-store"));
    let o = json_body(&r);
    assert_eq!(o["access"], "manage");
    assert_eq!(o["collection"]["state"], "available");
    assert_eq!(o["queue_count"], 1);
    assert_eq!(o["subscription_count"], 1);
    let stats = api.stats("q").await;
    let q = o["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| q["queue"] == "q")
        .cloned()
        .expect("q observed");
    for state in ["active", "locked", "deferred", "scheduled", "dead_lettered"] {
        assert_eq!(q[state], stats[state], "{state}");
    }
    assert_eq!(q["total"], 2);
    assert_eq!(q["unexpected"], 0);
}

#[tokio::test]
async fn c241_twenty_events_per_queue_and_effects_counted() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"lock_duration_ms":1000,"max_delivery_count":1}))
        .await;
    api.send_text("q", "a").await;
    let seq = api.send_text("q", "b").await;
    let got = api
        .ok(
            "QueueService/Receive",
            json!({"queue":"q","max_messages":2}),
        )
        .await;
    let token = got["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["seq_number"] == seq)
        .map(|m| m["lock_token"].clone())
        .expect("claimed");
    api.ok(
        "QueueService/Complete",
        json!({"queue":"q","seq_number":seq,"lock_token":token}),
    )
    .await;
    // The other lease runs out and, with one delivery allowed, dead-letters
    // at the next request that runs the queue's housekeeping (Stats only
    // reads: it reports the transition without applying it).
    api.advance(1000);
    assert_eq!(api.stats("q").await["dead_lettered"], 1);
    api.ok("QueueService/Peek", json!({"queue":"q"})).await;
    let o = api.ok("AdminService/Observe", json!({})).await;
    let events: Vec<&str> = o["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["queue"] == "q")
        .map(|m| m["event"].as_str().expect("event"))
        .collect();
    assert_eq!(events.len(), 20);
    let mut sorted = events.clone();
    sorted.sort_unstable();
    assert_eq!(events, sorted);
    assert_eq!(event(&o, "q", "enqueued"), 2);
    assert_eq!(event(&o, "q", "delivered"), 2);
    assert_eq!(event(&o, "q", "completed"), 1);
    assert_eq!(event(&o, "q", "lock_expired"), 1);
    assert_eq!(event(&o, "q", "dead_lettered"), 1);
    assert_eq!(event(&o, "q", "purged"), 0);
}

#[tokio::test]
async fn c242_permissions() {
    let api = Api::new(&[]);
    let listen = api.mint_key(&["listen"]).await;
    assert_eq!(
        api.rpc_as(&listen, "AdminService/Observe", json!({}))
            .await
            .0,
        403
    );
    let manage = api.mint_key(&["manage"]).await;
    let (status, o) = api.rpc_as(&manage, "AdminService/Observe", json!({})).await;
    assert_eq!((status, o["access"].as_str()), (200, Some("manage")));
    let off = Api::new(&[("MQLITE_TOKENS", "off")]);
    let r = off
        .request("POST", "/mqlite.v1.AdminService/Observe", &[], b"{}")
        .await;
    assert_eq!(
        (r.status, json_body(&r)["access"].clone()),
        (200, json!("anonymous"))
    );
}

#[tokio::test]
async fn c035_monitor_observes() {
    let api = Api::new(&[("MQLITE_MONITOR_TOKENS", MONITOR)]);
    let (status, o) = api.rpc_as(MONITOR, "AdminService/Observe", json!({})).await;
    assert_eq!((status, o["access"].as_str()), (200, Some("monitor")));
}

#[tokio::test]
async fn c047_observe_needs_exactly_an_empty_object() {
    let api = Api::new(&[]);
    for body in [&b""[..], b"{\"x\":1}", b"[]"] {
        let r = api
            .request(
                "POST",
                "/mqlite.v1.AdminService/Observe",
                &[("Authorization", ADMIN_AUTH)],
                body,
            )
            .await;
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(body));
    }
}

#[tokio::test]
async fn c003_c015_card_and_path_follow_the_metrics_switch() {
    let off = Api::new(&[]);
    let card = json_body(&off.request("GET", "/", &[], b"").await);
    assert!(card.get("metrics").is_none());
    assert_eq!(metrics(&off, Some(ADMIN)).await.status, 404);
    let on = Api::new(&[METRICS_ON]);
    let card = json_body(&on.request("GET", "/", &[], b"").await);
    assert_eq!(card["metrics"], "/metrics");
    let endpoints = card["endpoints"].as_array().expect("endpoints");
    assert!(!endpoints.iter().any(|e| e == "/metrics"));
}

#[tokio::test]
async fn c243_metrics_text() {
    let api = Api::new(&[METRICS_ON]);
    api.create_queue("Q", json!({})).await;
    api.send_text("Q", "x").await;
    let r = metrics(&api, Some(ADMIN)).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("Content-Type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let body = text(&r);
    assert!(
        body.contains("# TYPE mqlite_queue_messages gauge"),
        "{body}"
    );
    assert!(body.contains("mqlite_queue_messages{queue=\"Q\",state=\"active\"} 1"));
    assert!(body.contains("mqlite_queue_total{queue=\"Q\"} 1"));
    assert!(body.contains("mqlite_collection_success 1"));
}

#[tokio::test]
async fn c244_metrics_auth() {
    let api = Api::new(&[METRICS_ON, ("MQLITE_MONITOR_TOKENS", MONITOR)]);
    assert_eq!(metrics(&api, None).await.status, 401);
    let listen = api.mint_key(&["listen"]).await;
    assert_eq!(metrics(&api, Some(&listen)).await.status, 403);
    assert_eq!(metrics(&api, Some(MONITOR)).await.status, 200);
    let manage = api.mint_key(&["manage"]).await;
    assert_eq!(metrics(&api, Some(&manage)).await.status, 200);
}

#[tokio::test]
async fn metrics_cannot_be_enabled_with_auth_off() {
    let api = Api::new(&[METRICS_ON, ("MQLITE_TOKENS", "off")]);
    assert_eq!(metrics(&api, None).await.status, 500);
}

#[tokio::test]
async fn c245_rpc_histogram_labels() {
    let api = Api::new(&[METRICS_ON]);
    for _ in 0..5 {
        api.ok("AdminService/ListQueues", json!({})).await;
    }
    let r = api
        .request(
            "POST",
            "/mqlite.v1.X/Y",
            &[("Authorization", ADMIN_AUTH)],
            b"{}",
        )
        .await;
    assert_eq!(r.status, 404);
    let body = text(&metrics(&api, Some(ADMIN)).await);
    let count = body
        .lines()
        .find(|l| {
            l.starts_with("mqlite_rpc_duration_seconds_count{rpc=\"AdminService/ListQueues\"}")
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .expect("count series");
    assert!(count >= 5.0, "{count}");
    assert!(!body.contains("X/Y"));
}

#[tokio::test]
async fn c246_collection_failure() {
    let api = Api::unreachable(&[METRICS_ON, ("MQLITE_MONITOR_TOKENS", MONITOR)]);
    for token in [ADMIN, MONITOR] {
        let (status, o) = api.rpc_as(token, "AdminService/Observe", json!({})).await;
        assert_eq!(status, 200);
        assert_eq!(o["collection"]["state"], "unavailable");
        assert!(o["queues"].is_null());
        assert!(!o["collection"]["error_code"]
            .as_str()
            .expect("code")
            .is_empty());
    }
    let body = text(&metrics(&api, Some(ADMIN)).await);
    assert!(body.contains("mqlite_collection_success 0"), "{body}");
    assert!(!body.contains("mqlite_queue_messages{"));
}

#[tokio::test]
async fn topic_fan_out_counts_each_copy() {
    let api = Api::new(&[]);
    api.subscribe("t", "a", None).await;
    api.subscribe("t", "b", Some("subject == \"x\"")).await;
    api.ok(
        "QueueService/Send",
        json!({"queue":"t","messages":[{"body":b64("1"),"subject":"x"},{"body":b64("2")}]}),
    )
    .await;
    let o = api.ok("AdminService/Observe", json!({})).await;
    assert_eq!(event(&o, "a", "enqueued"), 2);
    assert_eq!(event(&o, "b", "enqueued"), 1);
}

/// Finished calls of the Observe storage series `operation`/`outcome`.
fn storage_calls(observation: &serde_json::Value, operation: &str, outcome: &str) -> u64 {
    observation["storage"]["operations"]
        .as_array()
        .expect("operations")
        .iter()
        .filter(|o| o["operation"] == operation && o["outcome"] == outcome)
        .map(|o| o["duration"]["count"].as_u64().expect("count"))
        .sum()
}

#[tokio::test]
async fn a_key_lookup_is_a_counted_storage_call() {
    // Minted by another isolate, so this one has not seen it valid.
    let minting = Api::new(&[]);
    let key = minting.mint_key(&["send"]).await;
    let api = Api::over(&minting, &[]);
    let before = storage_calls(
        &api.ok("AdminService/Observe", json!({})).await,
        "read",
        "ok",
    );
    // No program runs for an unknown path: only the key lookup asks the
    // database whether the managed key may see the 404.
    let auth = format!("Bearer {key}");
    let r = api
        .request(
            "POST",
            "/mqlite.v1.QueueService/Nothing",
            &[("Authorization", &auth)],
            b"{}",
        )
        .await;
    assert_eq!(r.status, 404);
    let after = storage_calls(
        &api.ok("AdminService/Observe", json!({})).await,
        "read",
        "ok",
    );
    // The lookup, then the second Observe's own collection.
    assert_eq!(after - before, 2);
}

#[tokio::test]
async fn a_sweep_reports_one_run_per_enabled_task() {
    let api = Api::new(&[]);
    api.engine()
        .sweep(&mqlite_edge::engine::Retention::default())
        .await
        .expect("sweep");
    let o = api.ok("AdminService/Observe", json!({})).await;
    let tasks = o["maintenance"].as_array().expect("maintenance");
    assert_eq!(tasks.len(), 7);
    for task in tasks {
        let (runs, last) = if task["enabled"] == true {
            (1, api.now())
        } else {
            (0, 0)
        };
        assert_eq!(task["runs"], runs, "{task}");
        assert_eq!(task["failures"], 0, "{task}");
        assert_eq!(task["last_success_at_ms"], last, "{task}");
    }
}
