//! Outcome classification under transport faults: retry only what provably
//! did not run; a write whose answer was lost is `outcome_unknown`, never
//! retried; a dead or garbled database is a clear 5xx, never a panic.

mod support;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use mqlite_edge::engine::{
    Clock, Engine, EngineError, Limits, OutgoingMessage, QueueConfigInput, SendRequest,
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
        mqlite_edge::http::Config::from_vars(|n| (n == "MQLITE_TOKENS").then(|| "T".to_owned()));
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
        headers: vec![("Authorization".into(), "Bearer T".into())],
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
