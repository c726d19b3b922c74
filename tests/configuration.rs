//! Configuration footguns are errors, answered 500 on every RPC (never
//! served with a weaker configuration), and the configuration is read once
//! per isolate.

mod support;

use std::cell::Cell;

use mqlite_edge::http::Isolate;
use support::{json_body, Api, ADMIN, ADMIN_AUTH, MONITOR, T0};

const LIST: &str = "/mqlite.v1.AdminService/ListQueues";

#[tokio::test]
async fn token_footguns_refuse_every_rpc() {
    let short = "short-admin-token";
    let off_and_token = format!("off,{ADMIN}");
    let twice = format!("{ADMIN},{ADMIN}");
    let monitor_twice = format!("{MONITOR},{MONITOR}");
    for vars in [
        vec![("MQLITE_TOKENS", short)],
        vec![("MQLITE_TOKENS", off_and_token.as_str())],
        vec![("MQLITE_TOKENS", twice.as_str())],
        vec![("MQLITE_MONITOR_TOKENS", "short-monitor")],
        vec![("MQLITE_MONITOR_TOKENS", monitor_twice.as_str())],
        vec![("MQLITE_MONITOR_TOKENS", ADMIN)],
    ] {
        let api = Api::new(&vars);
        for auth in [ADMIN_AUTH, "Bearer short-admin-token", "Bearer off"] {
            let r = api
                .request("POST", LIST, &[("Authorization", auth)], b"")
                .await;
            assert_eq!(
                (r.status, json_body(&r)["code"].as_str()),
                (500, Some("internal")),
                "{vars:?} {auth}"
            );
        }
        // Liveness still answers: the process is up, only its configuration is wrong.
        let r = api.request("GET", "/health", &[], b"").await;
        assert_eq!(
            (r.status, json_body(&r)["status"].as_str()),
            (200, Some("ok")),
            "{vars:?}"
        );
    }
    // The positive control: the same broker with valid tokens serves.
    let api = Api::new(&[("MQLITE_MONITOR_TOKENS", MONITOR)]);
    let r = api
        .request("POST", LIST, &[("Authorization", ADMIN_AUTH)], b"")
        .await;
    assert_eq!(r.status, 200);
}

#[test]
fn configuration_is_read_once_per_isolate() {
    let isolate = Isolate::new(T0);
    let reads = Cell::new(0);
    let first = isolate.config(|name| {
        reads.set(reads.get() + 1);
        (name == "MQLITE_TOKENS").then(|| ADMIN.to_owned())
    });
    assert!(first.is_ok());
    let after_first = reads.get();
    assert!(after_first > 0);
    let second = isolate.config(|name| {
        reads.set(reads.get() + 1);
        (name == "MQLITE_TOKENS").then(|| "off".to_owned())
    });
    assert_eq!(reads.get(), after_first, "not read again");
    assert_eq!(
        second.map(|c| c.auth_enabled()),
        Ok(true),
        "the first reading stands"
    );
}
