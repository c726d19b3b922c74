//! The Observe shape (docs/http-api.md#rpcs, conformance T) and the Prometheus text
//! built from it.

use serde_json::Value;

use super::prometheus::render;
use super::*;

const SEND: &str = "/mqlite.v1.QueueService/Send";
const LIST: &str = "/mqlite.v1.AdminService/ListQueues";

fn registry() -> Registry {
    Registry::new(&[SEND, LIST], 1_000)
}

fn gauge(queue: &str, kind: &str, active: i64) -> QueueGauge {
    QueueGauge {
        queue: queue.to_string(),
        kind: kind.to_string(),
        active,
        locked: 2,
        deferred: 3,
        scheduled: 4,
        dead_lettered: 5,
        unexpected: 6,
        oldest_message_age_ms: 2_500,
    }
}

fn collected(queues: Vec<QueueGauge>) -> Collection {
    Collection {
        result: Ok(queues),
        duration_seconds: 0.004,
        schema_version: "5".to_string(),
        ping_seconds: Some(0.002),
        databases: Vec::new(),
    }
}

fn failed(code: &str) -> Collection {
    Collection {
        result: Err(code.to_string()),
        duration_seconds: 0.5,
        schema_version: "5".to_string(),
        ping_seconds: None,
        databases: Vec::new(),
    }
}

fn json(registry: &Registry, collection: &Collection, now_ms: i64) -> Value {
    serde_json::to_value(registry.observe("manage", collection, now_ms)).unwrap_or(Value::Null)
}

#[test]
fn registry_is_shareable_from_a_static() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Registry>();
    static REGISTRY: std::sync::OnceLock<Registry> = std::sync::OnceLock::new();
    let r = REGISTRY.get_or_init(registry);
    r.record_auth(AuthOutcome::Success);
}

#[test]
fn c240_every_member_present_and_totals_add_up() {
    let r = registry();
    let v = json(
        &r,
        &collected(vec![gauge("q", "queue", 1), gauge("s", "subscription", 0)]),
        9_000,
    );
    for member in [
        "sampled_at_ms",
        "started_at_ms",
        "backend",
        "runtime",
        "collection",
        "queue_count",
        "subscription_count",
        "queues",
        "messages",
        "storage",
        "maintenance",
        "filters",
        "version",
        "access",
        "http",
    ] {
        assert!(v.get(member).is_some(), "missing {member}");
    }
    assert_eq!(v["access"], "manage");
    assert_eq!(v["backend"], "remote");
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["started_at_ms"], 1_000);
    assert_eq!(v["sampled_at_ms"], 9_000);
    assert_eq!(v["collection"]["state"], "available");
    assert_eq!(v["collection"]["error_code"], "");
    assert_eq!(v["collection"]["last_success_at_ms"], 9_000);
    assert_eq!(v["queue_count"], 1);
    assert_eq!(v["subscription_count"], 1);
    assert_eq!(v["queues"][0]["queue"], "q");
    assert_eq!(v["queues"][0]["total"], 1 + 2 + 3 + 4 + 5 + 6);
    assert_eq!(v["queues"][0]["unexpected"], 6);
    assert_eq!(v["runtime"]["read_available"], true);
    assert_eq!(v["runtime"]["schema_version"], "5");
    assert_eq!(v["runtime"]["db_size_available"], false);
    assert_eq!(v["http"]["state"], "available");
    assert_eq!(v["storage"]["pool"]["max_open"], 6);
}

#[test]
fn c241_all_twenty_events_per_queue_sorted_even_when_zero() {
    let r = registry();
    r.record_event("b", Event::Completed, 2);
    let v = json(&r, &collected(vec![gauge("a", "queue", 0)]), 5);
    let messages = v["messages"].as_array().cloned().unwrap_or_default();
    assert_eq!(messages.len(), 40);
    let pairs: Vec<(String, String)> = messages
        .iter()
        .map(|m| (m["queue"].to_string(), m["event"].to_string()))
        .collect();
    let mut sorted = pairs.clone();
    sorted.sort();
    assert_eq!(pairs, sorted, "sorted by queue, then event name");
    let a_events: Vec<&str> = messages
        .iter()
        .filter(|m| m["queue"] == "a")
        .filter_map(|m| m["event"].as_str())
        .collect();
    for event in Event::ALL {
        assert!(a_events.contains(&event.as_str()), "{event:?}");
    }
    assert!(messages
        .iter()
        .filter(|m| m["queue"] == "a")
        .all(|m| m["count"] == 0));
    let completed = messages
        .iter()
        .find(|m| m["queue"] == "b" && m["event"] == "completed");
    assert_eq!(completed.map(|m| m["count"].clone()), Some(2.into()));
}

#[test]
fn c246_unavailable_collection_reports_null_queues_not_zeros() {
    let r = registry();
    r.observe("manage", &collected(vec![gauge("q", "queue", 1)]), 7_000);
    r.record_event("other", Event::Enqueued, 1);
    let v = json(&r, &failed("connection"), 8_000);
    assert!(v["queues"].is_null());
    assert_eq!(v["collection"]["state"], "unavailable");
    assert_eq!(v["collection"]["error_code"], "connection");
    assert_eq!(v["collection"]["last_success_at_ms"], 7_000);
    assert_eq!(v["queue_count"], 0);
    assert_eq!(v["runtime"]["read_available"], false);
    // Queues known from the earlier collection keep their event series.
    let queues: Vec<&str> = v["messages"]
        .as_array()
        .map(|ms| ms.iter().filter_map(|m| m["queue"].as_str()).collect())
        .unwrap_or_default();
    assert!(queues.contains(&"q") && queues.contains(&"other"));
}

#[test]
fn a_failed_collection_always_says_why_in_bounded_words() {
    let r = registry();
    let v = json(&r, &failed(""), 1);
    assert_eq!(v["collection"]["error_code"], "other");
    let v = json(
        &r,
        &failed("SQLITE_IOERR: disk I/O error at /secret/path"),
        1,
    );
    assert_eq!(v["collection"]["error_code"], "other");
    assert_eq!(v["collection"]["last_success_at_ms"], 0);
}

#[test]
fn c245_unknown_routes_and_codes_create_no_series() {
    let r = registry();
    for _ in 0..5 {
        r.record_request(LIST, "ok", 0.003);
    }
    r.record_request("/mqlite.v1.X/Y", "ok", 0.1);
    r.record_request(SEND, "teapot", 0.1);
    let o = r.observe("manage", &collected(vec![]), 1);
    assert_eq!(o.http.requests.len(), 2 * REQUEST_CODES.len());
    assert!(o
        .http
        .requests
        .iter()
        .all(|q| q.rpc == SEND || q.rpc == LIST));
    assert_eq!(o.http.requests.iter().map(|q| q.count).sum::<u64>(), 5);
    let list = o.http.handler_latency.iter().find(|l| l.rpc == LIST);
    assert_eq!(list.map(|l| l.count), Some(5));
    let text = render(&o);
    assert!(text.contains("mqlite_rpc_duration_seconds_count{rpc=\"AdminService/ListQueues\"} 5\n"));
    assert!(
        text.contains("mqlite_rpc_requests_total{rpc=\"AdminService/ListQueues\",code=\"ok\"} 5\n")
    );
    assert!(!text.contains("X/Y"));
    assert!(!text.contains("teapot"));
}

#[test]
fn requests_are_zero_initialised_and_sorted_by_route_then_code() {
    let r = registry();
    let o = r.observe("monitor", &collected(vec![]), 1);
    assert_eq!(o.access, "monitor");
    let keys: Vec<(&str, &str)> = o
        .http
        .requests
        .iter()
        .map(|q| (q.rpc.as_str(), q.code.as_str()))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(keys, sorted);
    assert!(keys.contains(&(SEND, "queue_not_empty")));
    assert!(o.http.requests.iter().all(|q| q.count == 0));
    let outcomes: Vec<&str> = o
        .http
        .authentication
        .iter()
        .map(|a| a.outcome.as_str())
        .collect();
    assert_eq!(
        outcomes,
        [
            "success",
            "missing",
            "invalid",
            "expired",
            "revoked",
            "permission_denied",
            "backend_error"
        ]
    );
}

#[test]
fn handler_latency_buckets_are_cumulative() {
    let r = registry();
    for s in [0.0005, 0.02, 0.02, 3.0, 60.0] {
        r.record_request(SEND, "ok", s);
    }
    let o = r.observe("manage", &collected(vec![]), 1);
    let send = o.http.handler_latency.iter().find(|l| l.rpc == SEND);
    let counts: Vec<u64> = send
        .map(|l| l.buckets.iter().map(|b| b.count).collect())
        .unwrap_or_default();
    assert_eq!(counts, [1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4]);
    assert_eq!(send.map(|l| l.count), Some(5));
    let bounds: Vec<f64> = send
        .map(|l| l.buckets.iter().map(|b| b.upper_bound_seconds).collect())
        .unwrap_or_default();
    assert_eq!(bounds, BOUNDS_SECONDS);
}

#[test]
fn storage_lists_every_fixed_combination() {
    let r = registry();
    r.record_storage(StorageOp::Write, StorageOutcome::Error, "busy", 0.01, 2);
    r.record_storage(StorageOp::Write, StorageOutcome::Error, "weird", 0.01, 0);
    r.record_storage(StorageOp::Read, StorageOutcome::Ok, "ignored", 0.01, 0);
    let o = r.observe("manage", &collected(vec![]), 1);
    let ops = &o.storage.operations;
    assert_eq!(ops.len(), 33);
    let find = |op: &str, outcome: &str, code: &str| {
        ops.iter()
            .find(|o| o.operation == op && o.outcome == outcome && o.error_code == code)
            .map(|o| (o.duration.count, o.retries))
    };
    assert_eq!(find("write", "error", "busy"), Some((1, 2)));
    assert_eq!(find("write", "error", "other"), Some((1, 0)));
    assert_eq!(find("read", "ok", ""), Some((1, 0)));
    assert_eq!(find("transaction", "rejected", "application"), Some((0, 0)));
    assert_eq!(
        find("transaction", "outcome_unknown", "outcome_unknown"),
        Some((0, 0))
    );
}

#[test]
fn maintenance_and_filters_cover_their_vocabularies() {
    let r = registry();
    r.record_maintenance(Task::Ttl, MaintenanceOutcome::Success, 0.2, 4_000);
    r.record_maintenance(Task::Ttl, MaintenanceOutcome::Error, 0.2, 5_000);
    r.record_maintenance(Task::Ttl, MaintenanceOutcome::Interrupted, 0.2, 6_000);
    r.record_filter_failure(FilterStage::Evaluate);
    let o = r.observe("manage", &collected(vec![]), 1);
    let tasks: Vec<&str> = o.maintenance.iter().map(|m| m.task.as_str()).collect();
    assert_eq!(
        tasks,
        [
            "locks",
            "scheduled",
            "ttl",
            "dedup",
            "receipts",
            "retention",
            "reclaim"
        ]
    );
    let ttl = &o.maintenance[2];
    assert_eq!((ttl.runs, ttl.failures, ttl.interrupted), (3, 1, 1));
    assert_eq!(ttl.last_success_at_ms, 4_000);
    assert_eq!(ttl.duration.count, ttl.runs);
    assert!(ttl.enabled);
    assert!(
        !o.maintenance[6].enabled,
        "nothing to reclaim on remote libSQL"
    );
    let filters: Vec<(&str, u64)> = o
        .filters
        .iter()
        .map(|f| (f.stage.as_str(), f.count))
        .collect();
    assert_eq!(filters, [("compile", 0), ("evaluate", 1)]);
}

#[test]
fn a_poisoned_lock_is_recovered() {
    let r = std::sync::Arc::new(registry());
    let clone = r.clone();
    let _ = std::thread::spawn(move || {
        let _guard = clone.lock();
        panic!("poison the lock");
    })
    .join();
    r.record_auth(AuthOutcome::Missing);
    let o = r.observe("manage", &collected(vec![]), 1);
    assert_eq!(o.http.authentication[1].count, 1);
}

#[test]
fn c243_metrics_text_for_one_queue() {
    let r = registry();
    let mut q = gauge("Q", "queue", 1);
    (
        q.locked,
        q.deferred,
        q.scheduled,
        q.dead_lettered,
        q.unexpected,
    ) = (0, 0, 0, 0, 0);
    let text = render(&r.observe("manage", &collected(vec![q]), 1));
    assert!(text.contains("# TYPE mqlite_queue_messages gauge\n"));
    assert!(text.contains("mqlite_queue_messages{queue=\"Q\",state=\"active\"} 1\n"));
    assert!(text.contains("mqlite_queue_total{queue=\"Q\"} 1\n"));
    assert!(text.contains("mqlite_queue_oldest_message_age_seconds{queue=\"Q\"} 2.5\n"));
    assert!(text.contains("mqlite_queue_oldest_message_age_ms{queue=\"Q\"} 2500\n"));
    assert!(text.contains("mqlite_collection_success 1\n"));
    assert!(text.contains("mqlite_entities{kind=\"queue\"} 1\n"));
    assert!(text.contains("mqlite_storage_ping_seconds 0.002\n"));
    assert!(!text.contains("mqlite_storage_size_bytes"));
}

#[test]
fn c246_metrics_text_without_queue_gauges() {
    let r = registry();
    r.record_event("q", Event::Completed, 3);
    let text = render(&r.observe("monitor", &failed("busy"), 1));
    assert!(text.contains("mqlite_collection_success 0\n"));
    assert!(
        text.contains("mqlite_collection_status{state=\"unavailable\",error_code=\"busy\"} 1\n")
    );
    for absent in [
        "mqlite_queue_",
        "mqlite_entities",
        "mqlite_storage_ping_seconds",
    ] {
        assert!(!text.contains(absent), "{absent}");
    }
    assert!(text.contains("mqlite_messages_completed_total{queue=\"q\"} 3\n"));
}

#[test]
fn each_family_is_one_block_with_help_and_type() {
    let r = registry();
    r.record_request(SEND, "ok", 0.01);
    let text = render(&r.observe(
        "manage",
        &collected(vec![gauge("a\"b\\c\nd", "queue", 1)]),
        1,
    ));
    assert!(text.contains("queue=\"a\\\"b\\\\c\\nd\""));
    let mut seen: Vec<String> = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().unwrap_or_default().to_string();
            assert!(!seen.contains(&name), "{name} appears twice");
            seen.push(name.clone());
            current = name;
        } else if !line.starts_with('#') {
            assert!(line.starts_with(&current), "{line} outside {current}");
        }
    }
    assert_eq!(
        text.matches("# HELP ").count(),
        seen.len(),
        "one HELP per family"
    );
}
