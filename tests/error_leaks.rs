//! Nothing raw leaks (docs/http-api.md, "Errors"): a 500 answers `internal error (id …)`
//! and a lost outcome a fixed sentence with an id, never database or fetch
//! error text; the id is in the log line beside the real text. A broken
//! configuration is not described to whoever asks.

mod support;

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use mqlite_edge::engine::Clock;
use mqlite_edge::http::{Config, Isolate, Request, Response, Service};
use mqlite_edge::store::{HttpReply, Transport, TransportError};
use serde_json::json;
use support::{b64, json_body, Api, InProcess, NoWait, TempDb, ADMIN, T0};

/// Text that must never reach a caller.
const SECRET: &str = "peer 10.9.8.7 reset: SQLITE_IOERR in table access_keys";

/// How the database answers: as itself, then (once set) with one fault.
const HEALTHY: u8 = 0;
/// Every answer lost.
const LOST: u8 = 1;
/// The database ran the request and reported an error, with its own text.
const FAILS: u8 = 2;
/// Never reached (a refused connection).
const DOWN: u8 = 3;

/// The in-process database until `fault` is set, then that fault.
#[derive(Clone)]
struct Lossy {
    inner: InProcess,
    fault: Arc<AtomicU8>,
}

impl Transport for Lossy {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        match self.fault.load(Ordering::SeqCst) {
            HEALTHY => self.inner.send_pipeline(body).await,
            FAILS => {
                let answer = json!({"baton":null,"base_url":null,"results":[
                    {"type":"error","error":{"message":SECRET}}]});
                Ok(HttpReply {
                    status: 200,
                    body: answer.to_string().into_bytes(),
                })
            }
            DOWN => Err(TransportError::NotSent(SECRET.into())),
            _ => Err(TransportError::AnswerLost(SECRET.into())),
        }
    }

    async fn pause(&self, _millis: u32) {}
}

/// A broker over a database that answers with `fault` once it is set.
fn lossy_service() -> (Arc<TempDb>, Arc<AtomicU8>, Service<Lossy>) {
    let temp = Arc::new(TempDb::new());
    let fault = Arc::new(AtomicU8::new(HEALTHY));
    let transport = Lossy {
        inner: InProcess {
            db: temp.db.clone(),
        },
        fault: fault.clone(),
    };
    let config = Config::from_vars(|name| (name == "MQLITE_TOKENS").then(|| ADMIN.to_owned()));
    let service = Service::new(
        config.map(|c| (c, transport)),
        Clock::manual(T0),
        Arc::new(Isolate::new(T0)),
    );
    (temp, fault, service)
}

fn admin_request(path: &str) -> Request {
    Request {
        method: "POST".into(),
        path: path.into(),
        headers: vec![("Authorization".into(), format!("Bearer {ADMIN}"))],
    }
}

/// The message must be exactly `prefix` + `(id <hex>)`, and the log line
/// must name the same id beside `detail`.
fn assert_hidden(r: &Response, status: u16, code: &str, prefix: &str, detail: &str) {
    let body = json_body(r);
    assert_eq!(
        (r.status, body["code"].as_str()),
        (status, Some(code)),
        "{body}"
    );
    let message = body["message"].as_str().unwrap_or_default();
    let id = message
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix("(id "))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not the generic message: {message:?}"));
    assert!(
        id.len() >= 8 && id.bytes().all(|b| b.is_ascii_alphanumeric()),
        "{id:?}"
    );
    let line = r
        .log_line()
        .unwrap_or_else(|| panic!("no log line for {message:?}"));
    assert!(line.contains(&format!("(id {id})")), "{line}");
    assert!(line.contains(detail), "{line} lacks {detail}");
    assert!(!message.contains(detail));
}

#[tokio::test]
async fn a_database_error_is_a_generic_500_with_an_id_in_the_log() {
    // This database refuses our credentials, with its own text.
    let api = Api::unreachable(&[]);
    let auth = format!("Bearer {ADMIN}");
    let r = api
        .request(
            "POST",
            "/mqlite.v1.AdminService/ListQueues",
            &[("Authorization", &auth)],
            b"",
        )
        .await;
    assert_hidden(&r, 500, "internal", "internal error ", "database");
}

#[tokio::test]
async fn two_internal_errors_have_different_ids() {
    let api = Api::unreachable(&[]);
    let auth = format!("Bearer {ADMIN}");
    let mut ids = Vec::new();
    for _ in 0..2 {
        let r = api
            .request(
                "POST",
                "/mqlite.v1.AdminService/ListQueues",
                &[("Authorization", &auth)],
                b"",
            )
            .await;
        ids.push(json_body(&r)["message"].as_str().map(str::to_owned));
    }
    assert_ne!(ids[0], ids[1]);
}

#[tokio::test]
async fn a_lost_answer_is_outcome_unknown_without_the_fetch_text() {
    let (_temp, fault, service) = lossy_service();
    let create = admin_request("/mqlite.v1.AdminService/CreateQueue");
    let r = service
        .handle(&create, br#"{"name":"q"}"#.to_vec(), &NoWait)
        .await;
    assert_eq!(r.status, 200);
    fault.store(LOST, Ordering::SeqCst);
    let send = admin_request("/mqlite.v1.QueueService/Send");
    let body = json!({"queue":"q","messages":[{"body":b64("x")}]}).to_string();
    let r = service.handle(&send, body.into_bytes(), &NoWait).await;
    assert_hidden(
        &r,
        503,
        "outcome_unknown",
        "mqlite: commit outcome unknown: the write may or may not have applied ",
        SECRET,
    );
}

#[tokio::test]
async fn a_configuration_error_is_not_described_to_the_caller() {
    // A monitor token equal to the administrator's is refused (docs/http-api.md, "Credentials").
    let api = Api::new(&[("MQLITE_MONITOR_TOKENS", ADMIN)]);
    for headers in [vec![], vec![("Authorization", "Bearer nope")]] {
        let r = api
            .request("POST", "/mqlite.v1.AdminService/Status", &headers, b"")
            .await;
        assert_hidden(&r, 500, "internal", "internal error ", "monitoring");
    }
    // Liveness stays open and storage-free.
    assert_eq!(api.request("GET", "/healthz", &[], b"").await.status, 200);
}

/// The pgmq dialect's answer: `detail` must be exactly `prefix` +
/// `(id <hex>)` and the log line must name the same id beside `secret`.
fn assert_pgmq_hidden(r: &Response, status: u16, error: &str, prefix: &str, secret: &str) {
    let body = json_body(r);
    assert_eq!(
        (r.status, body["error"].as_str()),
        (status, Some(error)),
        "{body}"
    );
    let detail = body["detail"].as_str().unwrap_or_default();
    let id = detail
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix("(id "))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("not the generic detail: {detail:?}"));
    let line = r
        .log_line()
        .unwrap_or_else(|| panic!("no log line for {detail:?}"));
    assert!(line.contains(&format!("(id {id})")), "{line}");
    assert!(line.contains(secret), "{line} lacks {secret}");
    assert!(!detail.contains(secret));
}

#[tokio::test]
async fn pgmq_errors_hide_fetch_database_and_configuration_text() {
    let (_temp, fault, service) = lossy_service();
    let request = |method: &str, path: &str| Request {
        method: method.into(),
        path: path.into(),
        headers: vec![("Authorization".into(), format!("Bearer {ADMIN}"))],
    };
    let r = service
        .handle(&request("PUT", "/v1/queues/q"), Vec::new(), &NoWait)
        .await;
    assert_eq!(r.status, 201);
    fault.store(LOST, Ordering::SeqCst);
    let body = json!({"message": {"n": 1}}).to_string().into_bytes();
    let r = service
        .handle(&request("POST", "/v1/queues/q/messages"), body, &NoWait)
        .await;
    assert_pgmq_hidden(
        &r,
        503,
        "outcome_unknown",
        "the database's answer was lost: the write may or may not have applied ",
        SECRET,
    );
    // A send the database ran and failed is the reference's send_failed.
    fault.store(FAILS, Ordering::SeqCst);
    let body = json!({"message": {"n": 2}}).to_string().into_bytes();
    let r = service
        .handle(&request("POST", "/v1/queues/q/messages"), body, &NoWait)
        .await;
    assert_pgmq_hidden(
        &r,
        500,
        "send_failed",
        "the message could not be sent ",
        SECRET,
    );
    // A database never reached.
    fault.store(DOWN, Ordering::SeqCst);
    let r = service
        .handle(&request("GET", "/v1/queues/q/metrics"), Vec::new(), &NoWait)
        .await;
    assert_pgmq_hidden(
        &r,
        503,
        "dependency_unavailable",
        "the database is unavailable ",
        SECRET,
    );

    // A broken configuration, asked by anyone.
    let api = Api::new(&[("MQLITE_MONITOR_TOKENS", ADMIN)]);
    let r = api.request("GET", "/v1/queues", &[], b"").await;
    assert_pgmq_hidden(&r, 500, "internal_error", "internal error ", "monitoring");
}
