//! Outcome classification under transport faults: retry only what provably
//! did not run; a write whose answer was lost is `outcome_unknown`, never
//! retried; a dead or garbled database is a clear 5xx, never a panic.

mod support;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use mqlite_edge::engine::pgmq::PgmqRead;
use mqlite_edge::engine::{
    Clock, Effect, Effects, Engine, EngineError, Limits, OutgoingMessage, QueueConfigInput,
    ReceiveRequest, SendRequest, StorageCall, StorageOp, StorageOutcome, Waiter,
};
use mqlite_edge::store::{
    HttpReply, Program, RunError, RunStats, Statement, StoreError, Transport, TransportError,
};
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
    /// No fault: the request goes through (to script faults after it).
    Pass,
    /// The server ran the request, then a proxy answered this status.
    RanThenStatus(u16),
    /// The server ran the request and answered a pipeline without a batch.
    RanThenNoBatch,
    /// The server ran the request, but every guard's own error came back
    /// as a disk I/O error (a transient fault where a guard sits).
    GuardStepFails,
    /// The server refused the batch request itself with a stream error
    /// (nothing ran).
    StreamError,
    /// Statement `index` of the batch failed with a disk I/O error and the
    /// transaction rolled back (nothing ran).
    StepFails(usize),
}

/// The in-process database behind a scripted sequence of faults.
struct Faulty {
    inner: InProcess,
    faults: Mutex<VecDeque<Fault>>,
    calls: AtomicU32,
    /// Every back-off the store asked for, in milliseconds.
    pauses: Mutex<Vec<u32>>,
}

impl Faulty {
    fn new(temp: &TempDb, faults: &[Fault]) -> Self {
        Faulty {
            inner: InProcess {
                db: temp.db.clone(),
            },
            faults: Mutex::new(faults.iter().cloned().collect()),
            calls: AtomicU32::new(0),
            pauses: Mutex::new(Vec::new()),
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
            Some(Fault::Pass) => self.inner.send_pipeline(body).await,
            Some(Fault::RanThenStatus(status)) => {
                let _ = self.inner.send_pipeline(body).await;
                Ok(HttpReply {
                    status,
                    body: b"<html>origin error</html>".to_vec(),
                })
            }
            Some(Fault::RanThenNoBatch) => {
                let _ = self.inner.send_pipeline(body).await;
                let answer = json!({"baton":null,"base_url":null,"results":[
                    {"type":"ok","response":{"type":"close"}}]});
                Ok(HttpReply {
                    status: 200,
                    body: answer.to_string().into_bytes(),
                })
            }
            Some(Fault::StreamError) => {
                let answer = json!({"baton":null,"base_url":null,"results":[
                    {"type":"error","error":{"message":"SQL string too long","code":"SQL_TOO_LONG"}},
                    {"type":"ok","response":{"type":"close"}}]});
                Ok(HttpReply {
                    status: 200,
                    body: answer.to_string().into_bytes(),
                })
            }
            Some(Fault::GuardStepFails) => {
                let reply = self.inner.send_pipeline(body).await?;
                let text = String::from_utf8_lossy(&reply.body)
                    .replace("malformed JSON", "disk I/O error");
                Ok(HttpReply {
                    status: reply.status,
                    body: text.into_bytes(),
                })
            }
            Some(Fault::StepFails(index)) => {
                let request: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
                let steps = request["requests"][0]["batch"]["steps"]
                    .as_array()
                    .map_or(0, Vec::len);
                let results: Vec<_> = (0..steps)
                    .map(|i| {
                        if i < index || i + 1 == steps {
                            json!({"cols":[],"rows":[]})
                        } else {
                            serde_json::Value::Null
                        }
                    })
                    .collect();
                let errors: Vec<_> = (0..steps)
                    .map(|i| {
                        if i == index {
                            json!({"message":"disk I/O error","code":"SQLITE_IOERR"})
                        } else {
                            serde_json::Value::Null
                        }
                    })
                    .collect();
                let answer = json!({"baton":null,"base_url":null,"results":[
                    {"type":"ok","response":{"type":"batch","result":{
                        "step_results":results,"step_errors":errors}}},
                    {"type":"ok","response":{"type":"close"}}]});
                Ok(HttpReply {
                    status: 200,
                    body: answer.to_string().into_bytes(),
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

    async fn pause(&self, millis: u32) {
        if let Ok(mut pauses) = self.pauses.lock() {
            pauses.push(millis);
        }
    }
}

/// A migrated database with queue `q`, and an engine over `faults`.
async fn setup(faults: &[Fault]) -> (TempDb, Engine<Faulty>) {
    setup_with(faults, Limits::default()).await
}

/// [`setup`] with `limits`.
async fn setup_with(faults: &[Fault], limits: Limits) -> (TempDb, Engine<Faulty>) {
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
    let engine = Engine::new(Faulty::new(&temp, faults), Clock::manual(T0), limits);
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

fn pauses(engine: &Engine<Faulty>) -> Vec<u32> {
    engine
        .store()
        .transport()
        .pauses
        .lock()
        .map(|p| p.clone())
        .unwrap_or_default()
}

/// Retries back off linearly: 40 ms before the second attempt, 80 before
/// the third.
#[tokio::test]
async fn retries_back_off_40_ms_more_each_attempt() {
    let (_temp, engine) = setup(&[Fault::NotSent, Fault::NotSent]).await;
    engine
        .send(&one_message())
        .await
        .expect("send after retries");
    assert_eq!(pauses(&engine), vec![40, 80]);
}

/// A batch request the server refused as a whole never ran: a definite
/// failure for a write (not `outcome_unknown`), and not tried again.
#[tokio::test]
async fn a_refused_batch_request_is_a_definite_failure() {
    let (_temp, engine) = setup(&[Fault::StreamError]).await;
    let err = engine.send(&one_message()).await.expect_err("refused");
    assert_eq!(
        err,
        EngineError::Store(StoreError::Failed("SQL string too long".into()))
    );
    assert_eq!(calls(&engine), 1);
    assert_eq!(engine.stats("q").await.expect("stats").active, 0);
}

/// An engine over `faults` on a database that was never migrated.
fn unmigrated(faults: &[Fault]) -> (TempDb, Engine<Faulty>) {
    let temp = TempDb::new();
    let engine = Engine::new(
        Faulty::new(&temp, faults),
        Clock::manual(T0),
        Limits::default(),
    );
    (temp, engine)
}

/// The migration's own requests are retried like any other when the
/// database refuses the connection (the first request found the schema
/// behind; the next ones are the migration's).
#[tokio::test]
async fn refused_migration_requests_are_retried_with_the_same_back_off() {
    let (_temp, engine) = unmigrated(&[Fault::Pass, Fault::NotSent, Fault::NotSent]);
    engine
        .create_queue("q", &QueueConfigInput::default())
        .await
        .expect("created once the migration got through");
    assert_eq!(pauses(&engine), vec![40, 80]);
    assert_eq!(engine.list_queues().await.expect("list").len(), 1);
}

/// A migration refused on every attempt gives up after five, with no pause
/// after the last.
#[tokio::test]
async fn a_migration_refused_five_times_is_unavailable() {
    let faults = [Fault::Pass].into_iter().chain([Fault::NotSent; 5]);
    let (_temp, engine) = unmigrated(&faults.collect::<Vec<_>>());
    let err = engine
        .create_queue("q", &QueueConfigInput::default())
        .await
        .expect_err("refused");
    assert!(
        matches!(err, EngineError::Store(StoreError::Unavailable(_))),
        "{err:?}"
    );
    assert_eq!(pauses(&engine), vec![40, 80, 120, 160]);
}

/// A migration whose statement fails is reported as that migration's
/// failure (the database was not migrated), not taken for another isolate's
/// progress; a busy one is: this request gives up, the next one migrates.
#[tokio::test]
async fn a_failed_migration_step_is_reported_and_a_busy_one_is_left_to_others() {
    // The program, the version read, then the first migration's batch.
    let (_temp, engine) = unmigrated(&[Fault::Pass, Fault::Pass, Fault::StepFails(5)]);
    let err = engine.list_queues().await.expect_err("not migrated");
    let EngineError::Store(StoreError::Failed(message)) = &err else {
        panic!("{err:?}");
    };
    assert!(
        message.starts_with("migration ") && message.ends_with(" failed: disk I/O error"),
        "{message}"
    );

    let (_temp, engine) = unmigrated(&[Fault::Pass, Fault::Pass, Fault::Busy]);
    let err = engine.list_queues().await.expect_err("not migrated yet");
    assert_eq!(
        err,
        EngineError::Store(StoreError::Failed(
            "schema check still failing after migration".into()
        ))
    );
    assert!(engine.list_queues().await.expect("migrated").is_empty());
}

/// A migration's retries count among the run's, and a budget the migration
/// spent stops it without a pause or a retry it cannot make.
#[tokio::test]
async fn a_migration_counts_its_retries_and_stops_at_the_budget() {
    let program = select_one();
    let (_temp, engine) = unmigrated(&[Fault::Pass, Fault::NotSent, Fault::NotSent]);
    let mut stats = RunStats::default();
    let outcome = engine.store().run_keeping(&program, &mut stats).await;
    assert!(outcome.is_ok(), "{outcome:?}");
    assert_eq!(stats.retries, 2, "{stats:?}");

    let (_temp, engine) = unmigrated(&[Fault::Pass, Fault::NotSent]);
    assert_budget_spent_quietly(&engine, &program, RunStats::limited_to(2)).await;
}

/// A run whose request budget is spent by its first attempt neither waits
/// nor counts a retry it cannot make.
#[tokio::test]
async fn a_spent_budget_makes_no_retry_and_no_pause() {
    let (_temp, engine) = setup(&[Fault::NotSent]).await;
    assert_budget_spent_quietly(&engine, &select_one(), RunStats::limited_to(1)).await;
}

/// A read program of one statement.
fn select_one() -> Program<'static> {
    const SELECT_ONE: Statement = mqlite_edge::statement!("SELECT 1");
    let mut program = Program::read();
    program.step(&SELECT_ONE, vec![]);
    program
}

/// Runs `program` under `stats`' budget, which the transport's refusals
/// spend: `Unavailable` once every request allowed was sent, with neither a
/// retry counted nor a pause made past the budget.
async fn assert_budget_spent_quietly(
    engine: &Engine<Faulty>,
    program: &Program<'_>,
    mut stats: RunStats,
) {
    let outcome = engine.store().run_keeping(program, &mut stats).await;
    assert!(
        matches!(
            outcome,
            Err((RunError::Store(StoreError::Unavailable(_)), None))
        ),
        "{outcome:?}"
    );
    assert_eq!(stats.fetches, stats.fetch_limit, "{stats:?}");
    assert_eq!(stats.retries, 0, "{stats:?}");
    assert_eq!(pauses(engine), Vec::<u32>::new());
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
        matches!(err, EngineError::Store(StoreError::Refused(_))),
        "{err:?}"
    );
    assert_eq!(calls(&engine), 1);
}

/// Issue 9 item 3: a write answered by a 500, a gateway's 502–504 or a
/// proxy's 520–524 may have committed (here it did): `outcome_unknown`,
/// never retried. Reads meeting the same answers are retried.
#[tokio::test]
async fn server_and_proxy_errors_after_a_write_are_outcome_unknown() {
    for status in [500, 502, 503, 504, 520, 521, 522, 523, 524] {
        let (_temp, engine) = setup(&[Fault::RanThenStatus(status)]).await;
        let err = engine
            .send(&one_message())
            .await
            .expect_err("unknown outcome");
        assert!(
            matches!(err, EngineError::Store(StoreError::OutcomeUnknown(_))),
            "HTTP {status}: {err:?}"
        );
        assert_eq!(calls(&engine), 1, "HTTP {status}: never blindly retried");
        assert_eq!(
            engine.stats("q").await.expect("stats").active,
            1,
            "HTTP {status}: it did commit, hence 'unknown'"
        );

        let (_temp, engine) = setup(&[Fault::Status(status), Fault::Status(status)]).await;
        let queues = engine.list_queues().await.expect("read retried");
        assert_eq!(queues.len(), 1);
        assert_eq!(calls(&engine), 3, "HTTP {status}");
    }
}

/// Issue 9 item 3: a parsed answer that holds no batch result proves
/// nothing about the commit.
#[tokio::test]
async fn a_write_answer_without_a_batch_result_is_outcome_unknown() {
    let (_temp, engine) = setup(&[Fault::RanThenNoBatch]).await;
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

/// A Service over `transport` with a long admin token and metrics off.
fn service_over(transport: Faulty) -> mqlite_edge::http::Service<Faulty> {
    let config =
        mqlite_edge::http::Config::from_vars(|n| (n == "MQLITE_TOKENS").then(|| LONG_ADMIN.into()));
    mqlite_edge::http::Service::new(
        config.map(|c| (c, transport)),
        Clock::manual(T0),
        Arc::new(mqlite_edge::http::Isolate::new(T0)),
    )
}

/// An administrator token of the length the configuration requires.
const LONG_ADMIN: &str = "store-outcomes-admin-token-0123456789abcdef";

fn post(rpc: &str, token: &str) -> mqlite_edge::http::Request {
    mqlite_edge::http::Request {
        method: "POST".into(),
        path: format!("/mqlite.v1.{rpc}"),
        headers: vec![("Authorization".into(), format!("Bearer {token}"))],
    }
}

fn push_faults(service: &mqlite_edge::http::Service<Faulty>, faults: &[Fault]) {
    service
        .engine()
        .expect("valid configuration")
        .store()
        .transport()
        .faults
        .lock()
        .expect("faults")
        .extend(faults.iter().copied());
}

/// Issue 9 item 3: a transient database error where a guard sits is a
/// 5xx, never the guard's domain answer (404 for an unknown queue).
#[tokio::test]
async fn a_transient_error_in_a_guard_is_500_never_404() {
    let temp = TempDb::new();
    let service = service_over(Faulty::new(&temp, &[]));
    let body = r#"{"queue":"missing"}"#.to_owned();
    let send = post("AdminService/Purge", LONG_ADMIN);
    // Positive control: the guard itself answers 404.
    let r = service
        .handle(&send, body.clone().into_bytes(), &NoWait)
        .await;
    assert_eq!(r.status, 404, "{}", String::from_utf8_lossy(&r.body));
    push_faults(&service, &[Fault::GuardStepFails]);
    let r = service.handle(&send, body.into_bytes(), &NoWait).await;
    assert_eq!(r.status, 500, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(json_body(&r)["code"], "internal");
}

/// Issue 9 item 3: a transient database error in the credential check of a
/// valid managed key is a 5xx, never a 401.
#[tokio::test]
async fn a_transient_error_in_the_key_check_is_500_never_401() {
    let temp = TempDb::new();
    let service = service_over(Faulty::new(&temp, &[]));
    let created = service
        .handle(
            &post("AuthService/CreateKey", LONG_ADMIN),
            br#"{"id":"0123456789abcdef0123456789abcdef","name":"k1","permissions":["manage"]}"#
                .to_vec(),
            &NoWait,
        )
        .await;
    assert_eq!(
        created.status,
        200,
        "{}",
        String::from_utf8_lossy(&created.body)
    );
    let token = json_body(&created)["token"]
        .as_str()
        .expect("token")
        .to_owned();
    let list = post("AdminService/ListQueues", &token);
    // Positive control: the key works.
    let r = service.handle(&list, b"{}".to_vec(), &NoWait).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    // The key check is the statement right after BEGIN and the schema check.
    push_faults(&service, &[Fault::StepFails(2)]);
    let r = service.handle(&list, b"{}".to_vec(), &NoWait).await;
    assert!(
        r.status >= 500,
        "{} {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    // And the key is still good afterwards.
    let r = service.handle(&list, b"{}".to_vec(), &NoWait).await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

/// A waiter whose deadline never comes: a long poll runs until its
/// request budget is spent.
struct Endless;

impl Waiter for Endless {
    fn elapsed_ms(&self) -> u64 {
        0
    }

    async fn sleep(&self, _millis: u64) {}
}

fn empty_poll() -> ReceiveRequest {
    ReceiveRequest {
        queue: "q".into(),
        max_messages: 1,
        wait_time_ms: 20_000,
        ..Default::default()
    }
}

/// Issue 9 item 3: `MQLITE_POLL_MAX_REQUESTS` is clamped: a long poll
/// configured for 1,000 requests still makes fewer than 50.
#[tokio::test]
async fn the_long_poll_budget_is_clamped_under_50_requests() {
    let limits = Limits {
        poll_max_requests: 1_000,
        ..Limits::default()
    };
    let (_temp, engine) = setup_with(&[], limits).await;
    let (claimed, poll) = engine
        .receive(&empty_poll(), &Endless)
        .await
        .expect("empty poll");
    assert!(claimed.is_empty());
    assert_eq!(calls(&engine), 45, "{poll:?}");
    assert_eq!(poll.fetches, 45);
}

/// Issue 9 item 3: the long-poll budget counts every fetch: retries of
/// busy attempts use it up too.
#[tokio::test]
async fn the_long_poll_budget_counts_retries() {
    let faults: Vec<Fault> = (0..200).flat_map(|_| [Fault::Busy, Fault::Pass]).collect();
    let (_temp, engine) = setup_with(&faults, Limits::default()).await;
    let (claimed, poll) = engine
        .receive(&empty_poll(), &Endless)
        .await
        .expect("empty poll");
    assert!(claimed.is_empty());
    assert_eq!(calls(&engine), 40, "{poll:?}");
    assert_eq!(poll.attempts, 20, "each attempt took a retry");
}

/// Issue 9 item 3: pgmq's read-poll spends the same clamped budget, every
/// fetch counted.
#[tokio::test]
async fn the_pgmq_read_poll_budget_is_clamped_and_counts_retries() {
    let faults: Vec<Fault> = (0..200).flat_map(|_| [Fault::Busy, Fault::Pass]).collect();
    let limits = Limits {
        poll_max_requests: 1_000,
        ..Limits::default()
    };
    let (_temp, engine) = setup_with(&faults, limits).await;
    let read = PgmqRead {
        queue: "q".into(),
        qty: 1,
        vt_seconds: 30,
        pop: false,
        conditional: None,
        max_poll_ms: 20_000,
        poll_interval_ms: 100,
    };
    // 22 polls of two fetches each, then a busy one the budget cannot
    // retry: still an empty answer, never an error.
    let claimed = engine.pgmq_read(&read, &Endless).await.expect("empty poll");
    assert!(claimed.is_empty());
    assert_eq!(calls(&engine), 45);
}

/// Issue 9 item 3: a database that refuses every connection is retried a
/// bounded number of times and answered `503 unavailable` (nothing applied),
/// never `outcome_unknown` and never a 500.
#[tokio::test]
async fn a_dead_database_is_503_unavailable_and_a_lost_write_is_outcome_unknown() {
    let temp = TempDb::new();
    let config = mqlite_edge::http::Config::from_vars(|n| {
        (n == "MQLITE_TOKENS").then(|| LONG_ADMIN.to_owned())
    });
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
        headers: vec![("Authorization".into(), format!("Bearer {LONG_ADMIN}"))],
    };
    let r = service
        .handle(&request, br#"{"name":"q"}"#.to_vec(), &NoWait)
        .await;
    assert_eq!(r.status, 503);
    assert_eq!(json_body(&r)["code"], "unavailable");
    assert_eq!(
        service
            .engine()
            .expect("config")
            .store()
            .transport()
            .calls
            .load(Ordering::SeqCst),
        5,
        "bounded retries"
    );

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
        "MQLITE_TOKENS" => Some(LONG_ADMIN.to_owned()),
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
        headers: vec![("Authorization".into(), format!("Bearer {LONG_ADMIN}"))],
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
        headers: vec![("Authorization".into(), format!("Bearer {LONG_ADMIN}"))],
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
