//! Conformance section A: discovery, health, routing, CORS (natively, through
//! the full HTTP pipeline).

mod support;

use serde_json::json;
use support::*;

const AUTH: (&str, &str) = ("Authorization", ADMIN_AUTH);

/// Wire §4's registration order, written from the spec.
const CATALOGUE: [&str; 27] = [
    "/mqlite.v1.QueueService/Send",
    "/mqlite.v1.QueueService/Receive",
    "/mqlite.v1.QueueService/Complete",
    "/mqlite.v1.QueueService/CompleteBatch",
    "/mqlite.v1.QueueService/RenewBatch",
    "/mqlite.v1.QueueService/Abandon",
    "/mqlite.v1.QueueService/Reject",
    "/mqlite.v1.QueueService/Defer",
    "/mqlite.v1.QueueService/ReceiveDeferred",
    "/mqlite.v1.QueueService/Renew",
    "/mqlite.v1.QueueService/Schedule",
    "/mqlite.v1.QueueService/Cancel",
    "/mqlite.v1.QueueService/Peek",
    "/mqlite.v1.QueueService/Stats",
    "/mqlite.v1.AdminService/CreateQueue",
    "/mqlite.v1.AdminService/Subscribe",
    "/mqlite.v1.AdminService/ListQueues",
    "/mqlite.v1.AdminService/ListSubscriptions",
    "/mqlite.v1.AdminService/TestFilter",
    "/mqlite.v1.AdminService/Redrive",
    "/mqlite.v1.AdminService/Purge",
    "/mqlite.v1.AdminService/Status",
    "/mqlite.v1.AdminService/DeleteQueue",
    "/mqlite.v1.AdminService/Observe",
    "/mqlite.v1.AuthService/CreateKey",
    "/mqlite.v1.AuthService/ListKeys",
    "/mqlite.v1.AuthService/RevokeKey",
];

/// The discovery card as docs/http-api.md, "Open routes" spells it, members in contract order.
fn expected_card(auth: &str, metrics: bool) -> String {
    let endpoints: Vec<String> = CATALOGUE.iter().map(|p| format!("\"{p}\"")).collect();
    let metrics = if metrics {
        r#","metrics":"/metrics""#
    } else {
        ""
    };
    format!(
        concat!(
            r#"{{"name":"mqlite","#,
            r#""description":"Lightweight SQLite-backed message queue with Azure Service Bus-style semantics.","#,
            r#""version":"{version}","status":"ok","auth":"{auth}","#,
            r#""docs":"https://github.com/mqlitehq/mqlite","#,
            r#""endpoints":[{endpoints}],"health":"/healthz"{metrics}}}"#
        ),
        version = env!("CARGO_PKG_VERSION"),
        auth = auth,
        endpoints = endpoints.join(","),
        metrics = metrics,
    )
}

#[tokio::test]
async fn c001_card_is_open_and_lists_exactly_the_served_routes() {
    // The case's broker runs with the console off (tests/console.rs: on).
    for (vars, auth, metrics) in [
        (vec![("MQLITE_UI", "off")], "bearer", false),
        (
            vec![("MQLITE_UI", "off"), ("MQLITE_METRICS", "on")],
            "bearer",
            true,
        ),
        (
            vec![("MQLITE_UI", "off"), ("MQLITE_TOKENS", "off")],
            "none",
            false,
        ),
    ] {
        let api = Api::new(&vars);
        let r = api.request("GET", "/", &[], b"").await;
        assert_eq!(r.status, 200);
        assert_eq!(r.header("Content-Type"), Some("application/json"));
        assert_eq!(
            String::from_utf8_lossy(&r.body),
            expected_card(auth, metrics),
            "{vars:?}"
        );
    }
    // Every listed route really is served: none answers "no such path".
    let api = Api::new(&[]);
    for path in CATALOGUE {
        let r = api.request("POST", path, &[AUTH], b"{}").await;
        assert_ne!(
            json_body(&r)["message"],
            format!("no such path: {path}"),
            "{path}"
        );
    }
}

#[tokio::test]
async fn c002_card_with_auth_off_says_none() {
    let api = Api::new(&[("MQLITE_TOKENS", "off")]);
    let card = json_body(&api.request("GET", "/", &[], b"").await);
    assert_eq!(card["auth"], "none");
}

#[tokio::test]
async fn c004_healthz_is_open_plain_ok_and_storage_free() {
    let api = Api::new(&[]);
    let before = api.round_trips();
    let r = api.request("GET", "/healthz", &[], b"").await;
    assert_eq!((r.status, r.body.as_slice()), (200, b"ok".as_slice()));
    assert_eq!(r.header("Content-Type"), Some("text/plain; charset=utf-8"));
    assert_eq!(api.round_trips(), before, "healthz never touches storage");
}

#[tokio::test]
async fn c005_c006_unknown_paths_authenticated_are_404_with_exact_message() {
    let api = Api::new(&[]);
    for path in ["/nope", "/mqlite.v1.QueueService/Nope", "/metrics"] {
        let r = api.request("POST", path, &[AUTH], b"{}").await;
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(
            json_body(&r),
            json!({"code":"not_found","message": format!("no such path: {path}")})
        );
    }
}

#[tokio::test]
async fn c007_unknown_path_unauthenticated_is_401() {
    let api = Api::new(&[]);
    assert_eq!(api.request("POST", "/nope", &[], b"").await.status, 401);
}

#[tokio::test]
async fn c008_c009_method_check_comes_after_auth() {
    let api = Api::new(&[]);
    let r = api
        .request("GET", "/mqlite.v1.QueueService/Send", &[AUTH], b"")
        .await;
    assert_eq!(r.status, 405);
    assert_eq!(
        json_body(&r),
        json!({"code":"unimplemented","message":"POST required"})
    );
    assert_eq!(
        api.request("GET", "/mqlite.v1.QueueService/Send", &[], b"")
            .await
            .status,
        401
    );
}

#[tokio::test]
async fn c010_console_prefix_is_exact() {
    let api = Api::new(&[("MQLITE_UI", "off")]);
    assert_eq!(api.request("POST", "/uixyz", &[], b"").await.status, 401);
    for path in ["/ui", "/ui/index.html"] {
        let r = api.request("GET", path, &[], b"").await;
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(json_body(&r)["code"], "not_found");
    }
}

#[tokio::test]
async fn c011_cors_preflight_bypasses_auth() {
    let api = Api::new(&[]);
    let r = api
        .request(
            "OPTIONS",
            "/mqlite.v1.QueueService/Send",
            &[("Origin", "https://x.example")],
            b"",
        )
        .await;
    assert_eq!(r.status, 204);
    assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"));
    assert_eq!(
        r.header("Access-Control-Allow-Methods"),
        Some("GET, POST, OPTIONS")
    );
    assert_eq!(
        r.header("Access-Control-Allow-Headers"),
        Some("Authorization, Content-Type")
    );
    assert_eq!(r.header("Access-Control-Max-Age"), Some("86400"));
}

#[tokio::test]
async fn c012_cors_header_on_errors() {
    let api = Api::new(&[]);
    let r = api
        .request("POST", "/mqlite.v1.AdminService/ListQueues", &[], b"")
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("Access-Control-Allow-Origin"), Some("*"));
    assert_eq!(r.header("Content-Type"), Some("application/json"));
}

#[tokio::test]
async fn c013_cors_single_origin_adds_vary() {
    let api = Api::new(&[("MQLITE_CORS", "https://app.example")]);
    for r in [
        api.request("GET", "/", &[], b"").await,
        api.request("POST", "/nope", &[], b"").await,
    ] {
        assert_eq!(
            r.header("Access-Control-Allow-Origin"),
            Some("https://app.example")
        );
        assert_eq!(r.header("Vary"), Some("Origin"));
    }
}

#[tokio::test]
async fn c014_cors_off_sends_no_header_and_options_goes_through_auth() {
    let api = Api::new(&[("MQLITE_CORS", "off")]);
    for r in [
        api.request("GET", "/", &[], b"").await,
        api.request("POST", "/nope", &[], b"").await,
    ] {
        assert_eq!(r.header("Access-Control-Allow-Origin"), None);
    }
    let r = api
        .request("OPTIONS", "/mqlite.v1.QueueService/Send", &[], b"")
        .await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn cors_defaults_off_when_auth_is_off() {
    let api = Api::new(&[("MQLITE_TOKENS", "off")]);
    let r = api.request("GET", "/", &[], b"").await;
    assert_eq!(r.header("Access-Control-Allow-Origin"), None);
    let r = api
        .request("OPTIONS", "/mqlite.v1.QueueService/Send", &[], b"")
        .await;
    assert_eq!(
        r.status, 405,
        "no preflight: OPTIONS on an RPC route is a wrong method"
    );
}

#[tokio::test]
async fn c015_metrics_disabled_is_404_after_auth() {
    let api = Api::new(&[]);
    assert_eq!(
        api.request("GET", "/metrics", &[AUTH], b"").await.status,
        404
    );
    assert_eq!(api.request("GET", "/metrics", &[], b"").await.status, 401);
}
