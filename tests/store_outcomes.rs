//! Outcome classification under transport faults: retry only what provably
//! did not run; a write whose answer was lost is `outcome_unknown`, never
//! retried; a dead or garbled database is a clear 5xx, never a panic.

mod support;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use mqlite_edge::engine::{
    Clock, Effect, Effects, Engine, EngineError, Limits, OutgoingMessage, QueueConfigInput,
    SendRequest, StorageCall, StorageOp, StorageOutcome,
};
use mqlite_edge::store::{HttpReply, StoreError, Transport, TransportError};
use serde_json::json;
use support::*;

#[derive(Debug, Clone, Copy)]
enum Fault {
    /// Connection refused: nothing reached the server.
    NotSent,
    /// The server ran the request, then the answer was lost.
    LoseAnswer,
    /// The server answered this status without running anything.
    Status(u16),
    /// The server ran the request and answered garbage.
    Garbage,
    /// The server answered that the transaction hit SQLITE_BUSY.
    Busy,
}

/// The in-process database behind a scripted sequence of faults.
struct Faulty {
    inner: InProcess,
    faults: Mutex<VecDeque<Fault>>,
    calls: AtomicU32,
}

impl Faulty {
    fn new(temp: &TempDb, faults: &[Fault]) -> Self {
        Faulty {
            inner: InProcess {
                db: temp.db.clone(),
            },
            faults: Mutex::new(faults.iter().cloned().collect()),
            calls: AtomicU32::new(0),
        }
    }
}

impl Transport for Faulty {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let fault = self
            .faults
            .lock()
            .map(|mut f| f.pop_front())
            .unwrap_or(None);
        match fault {
            None => self.inner.send_pipeline(body).await,
            Some(Fault::NotSent) => Err(TransportError::NotSent("connection refused".into())),
            Some(Fault::Status(status)) => Ok(HttpReply {
                status,
                body: b"{\"error\":\"no\"}".to_vec(),
            }),
            Some(Fault::LoseAnswer) => {
                let _ = self.inner.send_pipeline(body).await;
                Err(TransportError::AnswerLost("connection reset".into()))
            }
            Some(Fault::Garbage) => {
                let _ = self.inner.send_pipeline(body).await;
                Ok(HttpReply {
                    status: 200,
                    body: b"<html>oops".to_vec(),
                })
            }
            Some(Fault::Busy) => {
                let busy = json!({"baton":null,"base_url":null,"results":[
                    {"type":"ok","response":{"type":"batch","result":{
                        "step_results":[null],
                        "step_errors":[{"message":"database is locked","code":"SQLITE_BUSY"}]}}},
                    {"type":"ok","response":{"type":"close"}}]});
                Ok(HttpReply {
                    status: 200,
                    body: busy.to_string().into_bytes(),
                })
            }
        }
    }

    async fn pause(&self, _millis: u32) {}
}

/// A migrated database with queue `q`, and an engine over `faults`.
async fn setup(faults: &[Fault]) -> (TempDb, Engine<Faulty>) {
    let temp = TempDb::new();
    let clean = Engine::new(
        InProcess {
            db: temp.db.clone(),
        },
        Clock::manual(T0),
        Limits::default(),
    );
    clean
        .create_queue("q", &QueueConfigInput::default())
        .await
        .expect("create");
    let engine = Engine::new(
        Faulty::new(&temp, faults),
        Clock::manual(T0),
        Limits::default(),
    );
    (temp, engine)
}

fn one_message() -> SendRequest {
    SendRequest {
        queue: "q".into(),
        messages: vec![OutgoingMessage {
            body: b"x".to_vec(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn calls(engine: &Engine<Faulty>) -> u32 {
    // The transport sits inside the store; count through a second handle.
    engine.store().transport().calls.load(Ordering::SeqCst)
}

#[tokio::test]
async fn refused_connections_are_retried_and_the_write_applies_once() {
    let (_temp, engine) = setup(&[Fault::NotSent, Fault::NotSent]).await;
    let seqs = engine
        .send(&one_message())
        .await
        .expect("send after retries");
    assert_eq!(seqs.len(), 1);
    assert_eq!(calls(&engine), 3);
    assert_eq!(engine.stats("q").await.expect("stats").active, 1);
}

#[tokio::test]
async fn a_lost_answer_to_a_write_is_outcome_unknown_and_not_retried() {
    let (_temp, engine) = setup(&[Fault::LoseAnswer]).await;
    let err = engine
        .send(&one_message())
        .await
        .expect_err("unknown outcome");
    assert!(
        matches!(err, EngineError::Store(StoreError::OutcomeUnknown(_))),
        "{err:?}"
    );
    assert_eq!(calls(&engine), 1, "never blindly retried");
    assert_eq!(
        engine.stats("q").await.expect("stats").active,
        1,
        "it did commit: hence 'unknown'"
    );
}

#[tokio::test]
async fn garbage_after_a_write_is_outcome_unknown() {
    let (_temp, engine) = setup(&[Fault::Garbage]).await;
    let err = engine
        .send(&one_message())
        .await
        .expect_err("unknown outcome");
    assert!(
        matches!(err, EngineError::Store(StoreError::OutcomeUnknown(_))),
        "{err:?}"
    );
    assert_eq!(calls(&engine), 1);
}

#[tokio::test]
async fn gateway_errors_leave_writes_unknown_but_reads_retry() {
    let (_temp, engine) = setup(&[Fault::Status(502)]).await;
    let err = engine
        .send(&one_message())
        .await
        .expect_err("unknown outcome");
    assert!(
        matches!(err, EngineError::Store(StoreError::OutcomeUnknown(_))),
        "{err:?}"
    );

    let (_temp, engine) = setup(&[Fault::Status(502), Fault::LoseAnswer, Fault::Garbage]).await;
    let queues = engine.list_queues().await.expect("read retried");
    assert_eq!(queues.len(), 1);
    assert_eq!(calls(&engine), 4);
}

#[tokio::test]
async fn busy_transactions_rolled_back_and_retried() {
    let (_temp, engine) = setup(&[Fault::Busy, Fault::Busy]).await;
    engine.send(&one_message()).await.expect("send after busy");
    assert_eq!(calls(&engine), 3);
    assert_eq!(engine.stats("q").await.expect("stats").active, 1);
}

#[tokio::test]
async fn a_refusing_database_is_a_definite_failure() {
    let (_temp, engine) = setup(&[Fault::Status(401)]).await;
    let err = engine.send(&one_message()).await.expect_err("refused");
    assert!(
        matches!(err, EngineError::Store(StoreError::Unavailable(_))),
        "{err:?}"
    );
    assert_eq!(calls(&engine), 1);
}

#[tokio::test]
async fn a_dead_database_is_500_internal_and_a_lost_write_is_503() {
    let temp = TempDb::new();
    let config =
        mqlite_edge::http::Config::from_vars(|n| (n == "MQLITE_TOKENS").then(|| ADMIN.to_owned()));
    let dead = Faulty::new(&temp, &[Fault::NotSent; 5]);
    let setup = config.clone().map(|c| (c, dead));
    let service = mqlite_edge::http::Service::new(
        setup,
        Clock::manual(T0),
        std::sync::Arc::new(mqlite_edge::http::Isolate::new(T0)),
    );
    let request = mqlite_edge::http::Request {
        method: "POST".into(),
        path: "/mqlite.v1.AdminService/CreateQueue".into(),
        headers: vec![("Authorization".into(), ADMIN_AUTH.into())],
    };
    let r = service
        .handle(&request, br#"{"name":"q"}"#.to_vec(), &NoWait)
        .await;
    assert_eq!(r.status, 500);
    assert_eq!(json_body(&r)["code"], "internal");

    let lossy = Faulty::new(&temp, &[]);
    let service = mqlite_edge::http::Service::new(
        config.map(|c| (c, lossy)),
        Clock::manual(T0),
        std::sync::Arc::new(mqlite_edge::http::Isolate::new(T0)),
    );
    service
        .handle(&request, br#"{"name":"q"}"#.to_vec(), &NoWait)
        .await;
    service
        .engine()
        .expect("valid configuration")
        .store()
        .transport()
        .faults
        .lock()
        .expect("faults")
        .push_back(Fault::LoseAnswer);
    let send = mqlite_edge::http::Request {
        path: "/mqlite.v1.QueueService/Send".into(),
        ..request
    };
    let body = format!(r#"{{"queue":"q","messages":[{{"body":"{}"}}]}}"#, b64("x"));
    let r = service.handle(&send, body.into_bytes(), &NoWait).await;
    assert_eq!(r.status, 503);
    assert_eq!(json_body(&r)["code"], "outcome_unknown");
}

/// The storage calls an engine reported, in order.
fn storage_calls(effects: &Effects) -> Vec<StorageCall> {
    effects
        .take()
        .into_iter()
        .filter_map(|effect| match effect {
            Effect::Storage(call) => Some(call),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn every_storage_call_reports_the_retries_made_inside_it() {
    let (_temp, engine) = setup(&[Fault::NotSent, Fault::Busy, Fault::NotSent]).await;
    let effects = Arc::new(Effects::default());
    let engine = engine.with_effects(effects.clone());
    engine
        .send(&one_message())
        .await
        .expect("send after retries");
    let calls = storage_calls(&effects);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(
        (calls[0].operation, calls[0].outcome, calls[0].retries),
        (StorageOp::Write, StorageOutcome::Ok, 3)
    );
    assert_eq!(calls[0].error, None);

    // A read that never gets through: four retries, then the failure.
    engine
        .store()
        .transport()
        .faults
        .lock()
        .expect("faults")
        .extend([Fault::NotSent; 5]);
    engine.list_queues().await.expect_err("never reached");
    let calls = storage_calls(&effects);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(
        (calls[0].operation, calls[0].outcome, calls[0].retries),
        (StorageOp::Read, StorageOutcome::Error, 4)
    );
    assert!(
        matches!(calls[0].error, Some(StoreError::Unavailable(_))),
        "{:?}",
        calls[0].error
    );

    // A first attempt that decides the outcome retried nothing.
    engine.send(&one_message()).await.expect("send");
    let calls = storage_calls(&effects);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].retries, 0);
}

/// `retries` of the Observe storage series `operation`/`outcome`.
fn observed_retries(observation: &serde_json::Value, operation: &str, outcome: &str) -> u64 {
    observation["storage"]["operations"]
        .as_array()
        .expect("operations")
        .iter()
        .filter(|o| o["operation"] == operation && o["outcome"] == outcome)
        .map(|o| o["retries"].as_u64().expect("retries"))
        .sum()
}

#[tokio::test]
async fn observe_and_metrics_count_the_retries_of_refused_connections() {
    let temp = TempDb::new();
    let config = mqlite_edge::http::Config::from_vars(|n| match n {
        "MQLITE_TOKENS" => Some(ADMIN.to_owned()),
        "MQLITE_METRICS" => Some("on".to_owned()),
        _ => None,
    });
    let service = mqlite_edge::http::Service::new(
        config.map(|c| (c, Faulty::new(&temp, &[]))),
        Clock::manual(T0),
        Arc::new(mqlite_edge::http::Isolate::new(T0)),
    );
    let post = |rpc: &str| mqlite_edge::http::Request {
        method: "POST".into(),
        path: format!("/mqlite.v1.{rpc}"),
        headers: vec![("Authorization".into(), ADMIN_AUTH.into())],
    };
    let observe = || async {
        json_body(
            &service
                .handle(&post("AdminService/Observe"), b"{}".to_vec(), &NoWait)
                .await,
        )
    };
    let r = service
        .handle(
            &post("AdminService/CreateQueue"),
            br#"{"name":"q"}"#.to_vec(),
            &NoWait,
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(observed_retries(&observe().await, "write", "ok"), 0);

    service
        .engine()
        .expect("valid configuration")
        .store()
        .transport()
        .faults
        .lock()
        .expect("faults")
        .extend([Fault::NotSent; 3]);
    let body = format!(r#"{{"queue":"q","messages":[{{"body":"{}"}}]}}"#, b64("x"));
    let r = service
        .handle(&post("QueueService/Send"), body.into_bytes(), &NoWait)
        .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(observed_retries(&observe().await, "write", "ok"), 3);

    let metrics = mqlite_edge::http::Request {
        method: "GET".into(),
        path: "/metrics".into(),
        headers: vec![("Authorization".into(), ADMIN_AUTH.into())],
    };
    let text = String::from_utf8_lossy(&service.handle(&metrics, Vec::new(), &NoWait).await.body)
        .into_owned();
    let line = text
        .lines()
        .find(|l| {
            l.starts_with("mqlite_storage_retries_total{")
                && l.contains("operation=\"write\"")
                && l.contains("outcome=\"ok\"")
        })
        .unwrap_or_else(|| panic!("no write/ok retries series in\n{text}"));
    assert!(line.ends_with(" 3"), "{line}");
}
