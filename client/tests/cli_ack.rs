//! `mqlite-edge receive` against a scripted fake broker: a received batch is completed
//! with one CompleteBatch only after stdout took it, and never when stdout failed or is
//! the null device. The full command set runs against the Worker in e2e/tests/clients.rs.

mod fake;

use std::process::{Command, Stdio};

use fake::{fake_broker, routes, Seen};
use serde_json::{json, Value};

fn broker() -> (String, Seen) {
    fake_broker(|route, _, _| match route.rsplit('/').next() {
        Some("Receive") => Some((
            200,
            json!({"messages": [{"seq_number": 4, "lock_token": "t4", "delivery_count": 1,
                                 "body": "aGk=", "locked_until_ms": 4_000_000_000_000_i64}]}),
        )),
        Some("CompleteBatch") => Some((200, json!({"results": [{"seq_number": 4, "ok": true}]}))),
        _ => Some((
            404,
            json!({"code": "not_found", "message": "no such path: x"}),
        )),
    })
}

fn receive(url: &str, args: &[&str], stdout: Stdio) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mqlite-edge"))
        .arg("receive")
        .args(args)
        .env("MQLITE_ENDPOINT", url)
        .env_remove("MQLITE_TOKEN")
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mqlite-edge");
    // A piped stdout nobody reads: closed before the command writes.
    drop(child.stdout.take());
    child.wait_with_output().expect("wait")
}

#[test]
fn a_printed_batch_is_completed_once_with_one_complete_batch() {
    let (url, seen) = broker();
    let out = Command::new(env!("CARGO_BIN_EXE_mqlite-edge"))
        .args(["receive", "q", "--output", "json"])
        .env("MQLITE_ENDPOINT", &url)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let printed: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(printed[0]["seq_number"], 4);
    assert!(
        printed[0].get("lock_token").is_none(),
        "auto-ack hides the token"
    );
    assert_eq!(printed[0]["locked_until_ms"], 4_000_000_000_000_i64);
    assert_eq!(
        routes(&seen, "/CompleteBatch"),
        vec![json!({"queue": "q", "messages": [{"seq_number": 4, "lock_token": "t4"}]})]
    );
    assert!(routes(&seen, "/Complete").is_empty());
}

#[test]
fn output_that_fails_leaves_the_batch_locked() {
    let (url, seen) = broker();
    let out = receive(&url, &["q"], Stdio::piped());
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("left locked for redelivery"));
    assert_eq!(routes(&seen, "/Receive").len(), 1);
    assert!(routes(&seen, "/CompleteBatch").is_empty());
}

#[test]
fn the_null_device_is_refused_before_anything_is_claimed() {
    let (url, seen) = broker();
    let null = std::fs::File::create("/dev/null").expect("/dev/null");
    let out = receive(&url, &["q"], Stdio::from(null));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(routes(&seen, "/Receive").is_empty());
    // --no-ack settles nothing and may print anywhere.
    let null = std::fs::File::create("/dev/null").expect("/dev/null");
    let out = receive(&url, &["q", "--no-ack"], Stdio::from(null));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(routes(&seen, "/CompleteBatch").is_empty());
}
