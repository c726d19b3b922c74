//! Conformance section D, the CreateQueue/ListQueues part (topics and
//! subscriptions arrive with Subscribe).

mod support;

use serde_json::json;
use support::*;

async fn listed(api: &Api, name: &str) -> serde_json::Value {
    let list = api.ok("AdminService/ListQueues", json!({})).await;
    list["queues"]
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["name"] == name).cloned())
        .unwrap_or(serde_json::Value::Null)
}

#[tokio::test]
async fn c049_defaults() {
    let api = Api::new(&[]);
    assert_eq!(
        api.ok("AdminService/CreateQueue", json!({"name":"q","config":{}}))
            .await,
        json!({})
    );
    let q = listed(&api, "q").await;
    assert_eq!(q["kind"], "queue");
    assert_eq!(q["lock_duration_ms"], 30000);
    assert_eq!(q["max_delivery_count"], 10);
    assert_eq!(q["default_ttl_ms"], 0);
    assert_eq!(q["dedup_window_ms"], 0);
    assert_eq!(q["generation"].as_str().map(str::len), Some(32));
    for hidden in [
        "ordering_mode",
        "dead_letter_on_expire",
        "dlq_max_age_ms",
        "dlq_max_count",
        "dlq_max_bytes",
    ] {
        assert!(q.get(hidden).is_none(), "{hidden} is not exposed");
    }
}

#[tokio::test]
async fn c050_zero_means_default() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"lock_duration_ms":0,"max_delivery_count":0}))
        .await;
    let q = listed(&api, "q").await;
    assert_eq!(
        (
            q["lock_duration_ms"].as_i64(),
            q["max_delivery_count"].as_i64()
        ),
        (Some(30000), Some(10))
    );
}

#[tokio::test]
async fn c051_validation() {
    let api = Api::new(&[]);
    api.fails(
        "AdminService/CreateQueue",
        json!({"name":"","config":{}}),
        400,
        "invalid_argument",
    )
    .await;
    api.fails(
        "AdminService/CreateQueue",
        json!({"name":"q","config":{"ordering_mode":"fifo"}}),
        400,
        "invalid_argument",
    )
    .await;
    api.fails(
        "AdminService/CreateQueue",
        json!({"name":"q","config":{"kind":"bogus"}}),
        400,
        "invalid_argument",
    )
    .await;
    for mode in ["standard", "group_fifo", "strict_fifo"] {
        api.create_queue(mode, json!({"ordering_mode": mode})).await;
    }
}

#[tokio::test]
async fn c052_upsert_overwrites_all_config_and_keeps_messages_and_generation() {
    let api = Api::new(&[]);
    api.create_queue(
        "q",
        json!({"lock_duration_ms":60000,"dedup_window_ms":5000,"default_ttl_ms":9000}),
    )
    .await;
    let generation = listed(&api, "q").await["generation"].clone();
    api.send_text("q", "kept").await;
    api.create_queue("q", json!({})).await;
    let q = listed(&api, "q").await;
    assert_eq!(q["lock_duration_ms"], 30000);
    assert_eq!(q["dedup_window_ms"], 0);
    assert_eq!(q["default_ttl_ms"], 0);
    assert_eq!(
        q["generation"], generation,
        "reconfiguration keeps the generation (c238)"
    );
    assert_eq!(api.stats("q").await["active"], 1);
}

#[tokio::test]
async fn c054_kind_never_changes_through_create_queue() {
    let api = Api::new(&[]);
    api.create_queue("plain", json!({})).await;
    api.fails(
        "AdminService/CreateQueue",
        json!({"name":"plain","config":{"kind":"subscription"}}),
        409,
        "name_conflict",
    )
    .await;
    api.create_queue("backing", json!({"kind":"subscription"}))
        .await;
    api.fails(
        "AdminService/CreateQueue",
        json!({"name":"backing","config":{}}),
        409,
        "name_conflict",
    )
    .await;
    api.create_queue(
        "backing",
        json!({"kind":"subscription","lock_duration_ms":60000}),
    )
    .await;
    assert_eq!(listed(&api, "backing").await["lock_duration_ms"], 60000);
}

#[tokio::test]
async fn c211_list_queues_sorted_by_name_in_byte_order() {
    let api = Api::new(&[]);
    for name in ["b", "B", "a", "sub"] {
        let kind = if name == "sub" {
            "subscription"
        } else {
            "queue"
        };
        api.create_queue(name, json!({"kind": kind})).await;
    }
    let list = api.ok("AdminService/ListQueues", json!({})).await;
    let names: Vec<&str> = list["queues"]
        .as_array()
        .map(|qs| qs.iter().filter_map(|q| q["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["B", "a", "b", "sub"]);
    assert_eq!(listed(&api, "sub").await["kind"], "subscription");
}
