//! `/metrics` text checked by Prometheus' own parser and linter
//! (`promtool check metrics`, from Debian's `prometheus` package), for a
//! successful and a failed collection.
//!
//! Two findings cannot be fixed without breaking the contract: docs/http-api.md#metrics
//! requires the deprecated legacy aliases `mqlite_queue_total` (a gauge named
//! `_total`) and `mqlite_queue_oldest_message_age_ms` (an abbreviated unit).
//! The test pins them: the full text must produce exactly those findings and
//! nothing else, and the text without those two families must pass outright.
//!
//! Without `promtool` on PATH the test fails when `MQLITE_REQUIRE_PROMTOOL=1`
//! (as `scripts/test.sh` sets) and otherwise says so loudly and skips.

use std::io::Write as _;
use std::process::{Command, Stdio};

use mqlite_edge::observe::prometheus::render;
use mqlite_edge::observe::{
    AuthOutcome, Collection, Event, FilterStage, MaintenanceOutcome, QueueGauge, Registry,
    StorageOp, StorageOutcome, Task,
};

const LIST_QUEUES: &str = "/mqlite.v1.AdminService/ListQueues";
const ROUTES: [&str; 3] = [
    "/mqlite.v1.QueueService/Send",
    "/mqlite.v1.QueueService/Receive",
    LIST_QUEUES,
];

/// The contract-mandated legacy names promtool objects to, as it reports them.
const LEGACY_ALIAS_FINDINGS: [&str; 2] = [
    "mqlite_queue_oldest_message_age_ms metric names should not contain abbreviated units",
    "mqlite_queue_total non-counter metrics should not have \"_total\" suffix",
];
const LEGACY_ALIASES: [&str; 2] = ["mqlite_queue_oldest_message_age_ms", "mqlite_queue_total"];

/// A registry with some traffic, as a Worker isolate would have it.
fn busy_registry() -> Registry {
    let registry = Registry::new(&ROUTES, 1_700_000_000_000);
    for _ in 0..5 {
        registry.record_auth(AuthOutcome::Success);
        registry.record_request(LIST_QUEUES, "ok", 0.004);
    }
    registry.record_auth(AuthOutcome::Missing);
    registry.record_request("/mqlite.v1.QueueService/Send", "unauthenticated", 0.0002);
    registry.record_request("/mqlite.v1.QueueService/Send", "ok", 0.012);
    registry.record_request("/mqlite.v1.NoSuch/Route", "ok", 0.1);
    registry.record_event("q1", Event::Enqueued, 2);
    registry.record_event("q1", Event::Delivered, 1);
    registry.record_event("q2", Event::Completed, 1);
    registry.record_storage(StorageOp::Write, StorageOutcome::Ok, "", 0.03, 0);
    registry.record_storage(StorageOp::Read, StorageOutcome::Error, "connection", 1.2, 1);
    registry.record_filter_failure(FilterStage::Evaluate);
    registry.record_maintenance(
        Task::Locks,
        MaintenanceOutcome::Success,
        0.05,
        1_700_000_060_000,
    );
    registry
}

fn queue(name: &str, active: i64) -> QueueGauge {
    QueueGauge {
        queue: name.to_string(),
        kind: "queue".to_string(),
        active,
        locked: 0,
        deferred: 0,
        scheduled: 0,
        dead_lettered: 0,
        unexpected: 0,
        oldest_message_age_ms: 1_250,
    }
}

fn successful() -> Collection {
    Collection {
        result: Ok(vec![queue("q1", 1), queue("q2", 0)]),
        duration_seconds: 0.006,
        schema_version: "5".to_string(),
        ping_seconds: Some(0.003),
        databases: vec![("main".into(), None), ("db2".into(), None)],
    }
}

fn failed() -> Collection {
    Collection {
        result: Err("connection".to_string()),
        duration_seconds: 2.0,
        schema_version: "5".to_string(),
        ping_seconds: None,
        databases: vec![
            ("main".into(), None),
            ("db2".into(), Some("connection".into())),
        ],
    }
}

/// What `promtool check metrics` said about `text`: exit code and the
/// findings it printed. `None` when promtool is not installed and not
/// required.
fn promtool(text: &str) -> Option<(i32, Vec<String>)> {
    let spawned = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            let required = std::env::var("MQLITE_REQUIRE_PROMTOOL").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "promtool is required (MQLITE_REQUIRE_PROMTOOL=1) but cannot run: {e}; \
                 run scripts/setup.sh"
            );
            // Straight to stderr: libtest captures `eprintln!` of passing tests.
            let _ = std::io::stderr().write_all(
                format!(
                    "\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\
                     !! promtool not found ({e}): /metrics text NOT linted.\n\
                     !! Install it with scripts/setup.sh (Debian package `prometheus`).\n\
                     !!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n"
                )
                .as_bytes(),
            );
            return None;
        }
    };
    child
        .stdin
        .take()
        .expect("promtool stdin")
        .write_all(text.as_bytes())
        .expect("write to promtool");
    let output = child.wait_with_output().expect("promtool finishes");
    let findings = String::from_utf8_lossy(&output.stderr)
        .lines()
        .chain(String::from_utf8_lossy(&output.stdout).lines())
        .map(str::to_string)
        .filter(|line| !line.trim().is_empty())
        .collect();
    Some((output.status.code().unwrap_or(-1), findings))
}

/// The text without the two legacy alias families (HELP, TYPE and samples).
fn without_legacy_aliases(text: &str) -> String {
    text.lines()
        .filter(|line| {
            let name = line
                .strip_prefix("# HELP ")
                .or_else(|| line.strip_prefix("# TYPE "))
                .unwrap_or(line);
            let name = name.split(['{', ' ']).next().unwrap_or_default();
            !LEGACY_ALIASES.contains(&name)
        })
        .map(|line| format!("{line}\n"))
        .collect()
}

/// Lints `text`: only the legacy alias findings are allowed in the full
/// text, and the rest must pass with exit status 0.
fn assert_lints_clean(text: &str, expected_alias_findings: &[&str]) {
    let Some((code, findings)) = promtool(text) else {
        return;
    };
    assert_eq!(
        findings, expected_alias_findings,
        "promtool findings on the full text:\n{text}"
    );
    let expected_code = if expected_alias_findings.is_empty() {
        0
    } else {
        3
    };
    assert_eq!(code, expected_code, "promtool exit status; text:\n{text}");

    let rest = without_legacy_aliases(text);
    let Some((code, findings)) = promtool(&rest) else {
        return;
    };
    assert!(
        findings.is_empty(),
        "promtool findings: {findings:?}\n{rest}"
    );
    assert_eq!(code, 0, "promtool check metrics failed on:\n{rest}");
}

#[test]
fn metrics_after_a_successful_collection_pass_promtool() {
    let registry = busy_registry();
    let text = render(&registry.observe("monitor", &successful(), 1_700_000_100_000));

    for line in [
        "# TYPE mqlite_queue_messages gauge",
        "mqlite_queue_messages{queue=\"q1\",state=\"active\"} 1",
        "mqlite_queue_messages{queue=\"q2\",state=\"active\"} 0",
        "mqlite_queue_total{queue=\"q1\"} 1",
        "mqlite_collection_success 1",
        "mqlite_entities{kind=\"queue\"} 2",
        "mqlite_rpc_duration_seconds_count{rpc=\"AdminService/ListQueues\"} 5",
        "mqlite_rpc_duration_seconds_bucket{rpc=\"AdminService/ListQueues\",le=\"0.005\"} 5",
        "mqlite_rpc_duration_seconds_bucket{rpc=\"AdminService/ListQueues\",le=\"+Inf\"} 5",
        "mqlite_rpc_requests_total{rpc=\"AdminService/ListQueues\",code=\"ok\"} 5",
        "mqlite_rpc_requests_total{rpc=\"QueueService/Send\",code=\"unauthenticated\"} 1",
        "mqlite_authentication_total{outcome=\"success\"} 5",
        "mqlite_authentication_total{outcome=\"missing\"} 1",
        "mqlite_message_events_total{queue=\"q1\",event=\"enqueued\"} 2",
        "mqlite_messages_completed_total{queue=\"q2\"} 1",
        "mqlite_storage_operations_total{operation=\"read\",outcome=\"error\",error_code=\"connection\"} 1",
        "mqlite_storage_retries_total{operation=\"read\",outcome=\"error\",error_code=\"connection\"} 1",
        "mqlite_storage_pool_connections{state=\"max_open\"} 6",
        "mqlite_maintenance_runs_total{task=\"locks\",outcome=\"success\"} 1",
        "mqlite_maintenance_enabled{task=\"reclaim\"} 0",
        "mqlite_filter_failures_total{stage=\"evaluate\"} 1",
        "mqlite_storage_size_available 0",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing line {line:?} in:\n{text}"
        );
    }
    assert!(
        !text.contains("NoSuch"),
        "an unregistered route got a series"
    );
    assert!(!text.contains("mqlite_storage_size_bytes"));

    assert_lints_clean(&text, &LEGACY_ALIAS_FINDINGS);
}

#[test]
fn metrics_after_a_failed_collection_pass_promtool() {
    let registry = busy_registry();
    registry.observe("manage", &successful(), 1_700_000_100_000);
    let text = render(&registry.observe("manage", &failed(), 1_700_000_200_000));

    for line in [
        "mqlite_collection_success 0",
        "mqlite_collection_status{state=\"unavailable\",error_code=\"connection\"} 1",
        "mqlite_collection_last_success_timestamp_seconds 1700000100",
        "mqlite_storage_read_available 0",
        "mqlite_rpc_duration_seconds_count{rpc=\"AdminService/ListQueues\"} 5",
        // Event series of queues known from the earlier collection remain.
        "mqlite_message_events_total{queue=\"q1\",event=\"delivered\"} 1",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing line {line:?} in:\n{text}"
        );
    }
    for absent in [
        "mqlite_queue_messages",
        "mqlite_queue_total",
        "mqlite_queue_retained_messages",
        "mqlite_entities",
        "mqlite_storage_ping_seconds",
    ] {
        assert!(!text.contains(absent), "{absent} present in:\n{text}");
    }

    assert_lints_clean(&text, &[]);
}
