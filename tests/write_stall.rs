//! Graceful degradation when the database stops committing (issue 14): a
//! fake database that answers reads but lets writes hang until the request
//! times out, behind the whole HTTP pipeline. After a few lost write answers
//! the isolate stops sending writes, answers `503 unavailable` at once,
//! probes with exactly one write per back-off, keeps serving reads, reports
//! `writes: paused` in Status, and resumes when the database heals.

mod support;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mqlite_edge::engine::Clock;
use mqlite_edge::http::{Config, Isolate, Service};
use mqlite_edge::store::{HttpReply, Policy, Transport, TransportError, WriteHealth};
use serde_json::{json, Value};
use support::*;

/// How long a hanging write waits before its "timeout" (the real default
/// is 10 s; the test only needs it to be clearly longer than a refusal).
const HANG_MS: u64 = 200;

/// What the fake database saw and how it behaves.
#[derive(Default)]
struct Wire {
    hang_writes: AtomicBool,
    /// Answer writes as sqld does when all its capped connections are stuck.
    refuse_writes: AtomicBool,
    writes: AtomicU64,
    reads: AtomicU64,
}

/// Reads (`BEGIN`) go to the in-process server; writes (`BEGIN IMMEDIATE`)
/// do too while healthy, and hang then lose their answer while stalled.
#[derive(Clone)]
struct StallingDb {
    inner: InProcess,
    wire: Arc<Wire>,
}

impl Transport for StallingDb {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        if !body.contains("BEGIN IMMEDIATE") {
            self.wire.reads.fetch_add(1, Ordering::SeqCst);
            return self.inner.send_pipeline(body).await;
        }
        self.wire.writes.fetch_add(1, Ordering::SeqCst);
        if self.wire.refuse_writes.load(Ordering::SeqCst) {
            return Ok(HttpReply {
                status: 429,
                body: br#"{"error":"Timed out while opening database connection"}"#.to_vec(),
            });
        }
        if self.wire.hang_writes.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(HANG_MS)).await;
            return Err(TransportError::AnswerLost(format!(
                "no answer within {HANG_MS} ms"
            )));
        }
        self.inner.send_pipeline(body).await
    }

    async fn pause(&self, millis: u32) {
        self.inner.pause(millis).await;
    }
}

struct Broker {
    service: Service<StallingDb>,
    wire: Arc<Wire>,
    /// The breaker's clock (the engine's is separate and never moves).
    breaker_now: Arc<AtomicI64>,
    _temp: TempDb,
}

impl Broker {
    fn new() -> Self {
        let temp = TempDb::new();
        let wire = Arc::new(Wire::default());
        let transport = StallingDb {
            inner: InProcess {
                db: temp.db.clone(),
            },
            wire: wire.clone(),
        };
        let breaker_now = Arc::new(AtomicI64::new(0));
        let read = breaker_now.clone();
        let health = WriteHealth::new(
            Policy::default(),
            Arc::new(move || read.load(Ordering::SeqCst)),
        );
        let isolate = Arc::new(Isolate::new(T0).with_write_health(health));
        let config = Config::from_vars(|name| (name == "MQLITE_TOKENS").then(|| ADMIN.into()));
        let service = Service::new(config.map(|c| (c, transport)), Clock::manual(T0), isolate);
        Broker {
            service,
            wire,
            breaker_now,
            _temp: temp,
        }
    }

    /// A broker whose database holds queue `q`.
    async fn with_queue() -> Self {
        let broker = Broker::new();
        let (status, _, json, _) = broker
            .call(
                "AdminService/CreateQueue",
                json!({"name": "q", "config": {}}),
            )
            .await;
        assert_eq!(status, 200, "{json}");
        broker
    }

    /// One RPC: status, `Retry-After`, JSON body, and how long it took.
    async fn call(&self, rpc: &str, body: Value) -> (u16, Option<String>, Value, Duration) {
        self.call_as(ADMIN, rpc, body).await
    }

    /// [`Broker::call`] with another credential.
    async fn call_as(
        &self,
        token: &str,
        rpc: &str,
        body: Value,
    ) -> (u16, Option<String>, Value, Duration) {
        let request = mqlite_edge::http::Request {
            method: "POST".into(),
            path: format!("/mqlite.v1.{rpc}"),
            headers: vec![("Authorization".into(), format!("Bearer {token}"))],
        };
        let started = Instant::now();
        let response = self
            .service
            .handle(&request, body.to_string().into_bytes(), &NoWait)
            .await;
        let took = started.elapsed();
        let retry_after = response.header("Retry-After").map(str::to_owned);
        (response.status, retry_after, json_body(&response), took)
    }

    async fn send(&self, text: &str) -> (u16, Option<String>, Value, Duration) {
        self.call(
            "QueueService/Send",
            json!({"queue": "q", "messages": [{"body": b64(text)}]}),
        )
        .await
    }

    fn writes(&self) -> u64 {
        self.wire.writes.load(Ordering::SeqCst)
    }

    fn advance_breaker(&self, ms: i64) {
        self.breaker_now.fetch_add(ms, Ordering::SeqCst);
    }

    async fn status(&self) -> Value {
        let (status, _, json, _) = self.call("AdminService/Status", json!({})).await;
        assert_eq!(status, 200, "{json}");
        json
    }

    /// A read that must keep working whatever the write path does.
    async fn list_queues_works(&self) {
        let (status, _, json, _) = self.call("AdminService/ListQueues", json!({})).await;
        assert_eq!(status, 200, "{json}");
        assert_eq!(json["queues"][0]["name"], "q", "{json}");
    }
}

fn code(json: &Value) -> &str {
    json["code"].as_str().unwrap_or("")
}

#[tokio::test]
async fn a_stalled_database_trips_the_breaker_and_recovers() {
    let broker = Broker::with_queue().await;
    assert_eq!(broker.send("before").await.0, 200);
    assert_eq!(broker.status().await["writes"], "accepting");

    // The database stops committing: the first three writes each wait out
    // the timeout and may have applied.
    broker.wire.hang_writes.store(true, Ordering::SeqCst);
    let before = broker.writes();
    for _ in 0..3 {
        let (status, _, json, took) = broker.send("lost").await;
        assert_eq!((status, code(&json)), (503, "outcome_unknown"), "{json}");
        assert!(took >= Duration::from_millis(HANG_MS), "{took:?}");
    }
    assert_eq!(broker.writes() - before, 3, "each lost write was sent once");

    // Open: writes are refused at once and never reach the database.
    let refused_from = broker.writes();
    let mut refused = 0;
    for _ in 0..50 {
        let (status, retry_after, json, took) = broker.send("refused").await;
        assert_eq!((status, code(&json)), (503, "unavailable"), "{json}");
        assert_eq!(retry_after.as_deref(), Some("1"));
        assert!(took < Duration::from_millis(HANG_MS / 2), "{took:?}");
        refused += 1;
    }
    assert_eq!(broker.writes(), refused_from, "no write sent while open");
    broker.list_queues_works().await;
    let status = broker.status().await;
    assert_eq!(status["writes"], "paused", "{status}");
    assert!(status["ping_ms"].as_i64().unwrap_or(-1) >= 0, "{status}");
    assert_eq!(status["queues"], 1, "{status}");

    // The back-off expires: of many concurrent writes exactly one probes.
    broker.advance_breaker(999);
    assert_eq!(code(&broker.send("early").await.2), "unavailable");
    broker.advance_breaker(1);
    let b = &broker;
    let (a0, a1, a2, a3, a4, a5, a6, a7) = tokio::join!(
        b.send("burst"),
        b.send("burst"),
        b.send("burst"),
        b.send("burst"),
        b.send("burst"),
        b.send("burst"),
        b.send("burst"),
        b.send("burst")
    );
    let answers = [a0, a1, a2, a3, a4, a5, a6, a7];
    let probes = answers
        .iter()
        .filter(|(_, _, json, _)| code(json) == "outcome_unknown")
        .count();
    let quick = answers
        .iter()
        .filter(|(_, _, json, _)| code(json) == "unavailable")
        .count();
    assert_eq!((probes, quick), (1, 7), "{answers:?}");
    assert_eq!(broker.writes(), refused_from + 1, "one probe reached it");

    // The failed probe doubled the back-off to 2 s.
    broker.advance_breaker(1_999);
    let (_, retry_after, json, _) = broker.send("still open").await;
    assert_eq!(code(&json), "unavailable");
    assert_eq!(retry_after.as_deref(), Some("1"));
    assert_eq!(broker.writes(), refused_from + 1);
    broker.list_queues_works().await;

    // The database heals; the next probe succeeds and closes the breaker.
    broker.wire.hang_writes.store(false, Ordering::SeqCst);
    broker.advance_breaker(1);
    let (status, _, json, _) = broker.send("probe ok").await;
    assert_eq!(status, 200, "{json}");
    assert_eq!(broker.status().await["writes"], "accepting");
    for i in 0..5 {
        assert_eq!(broker.send(&format!("after {i}")).await.0, 200);
    }
    let (status, _, stats, _) = broker
        .call("QueueService/Stats", json!({"queue": "q"}))
        .await;
    assert_eq!(status, 200, "{stats}");
    // "before", the probe and five more: nothing refused ever applied.
    assert_eq!(stats["active"], 7, "{stats}");
    let reached = broker.writes();
    println!(
        "write stall: {before} writes before the stall; while stalled {} writes reached the \
         fake database (3 lost + 2 probes) and {} were answered 503 unavailable at once \
         ({refused} sequential, 7 of a concurrent burst of 8, 2 more); after healing {} writes; \
         {} reads served throughout",
        refused_from + 1 - before + 1,
        refused + 7 + 2,
        reached - (refused_from + 2),
        broker.wire.reads.load(Ordering::SeqCst)
    );
}

/// sqld with capped connections shows its deadlock as 429 on every request:
/// the store's own retries of one write count, so a single request trips
/// the breaker instead of each request spending five attempts.
#[tokio::test]
async fn connection_refusals_trip_the_breaker_too() {
    let broker = Broker::with_queue().await;
    broker.wire.refuse_writes.store(true, Ordering::SeqCst);
    let before = broker.writes();
    let (status, retry_after, json, _) = broker.send("refused").await;
    assert_eq!((status, code(&json)), (503, "unavailable"), "{json}");
    assert_eq!(retry_after.as_deref(), Some("1"));
    assert_eq!(
        broker.writes() - before,
        3,
        "three attempts, then the breaker"
    );
    let (status, _, json, _) = broker.send("again").await;
    assert_eq!((status, code(&json)), (503, "unavailable"), "{json}");
    assert_eq!(broker.writes() - before, 3, "nothing more sent");
    broker.list_queues_works().await;
}

/// The breaker is the isolate's, not the admin token's: once it is open, a
/// write made with a managed key is refused at once too, and never sent.
#[tokio::test]
async fn an_open_breaker_holds_the_writes_of_managed_keys_too() {
    let broker = Broker::with_queue().await;
    let (status, _, key, _) = broker
        .call(
            "AuthService/CreateKey",
            json!({"id": "0123456789abcdef0123456789abcdef", "name": "sender",
                   "permissions": ["send"]}),
        )
        .await;
    assert_eq!(status, 200, "{key}");
    let token = key["token"].as_str().unwrap_or_default().to_owned();
    let send_as_key = || {
        broker.call_as(
            &token,
            "QueueService/Send",
            json!({"queue": "q", "messages": [{"body": b64("keyed")}]}),
        )
    };
    assert_eq!(send_as_key().await.0, 200, "the key writes while healthy");

    broker.wire.hang_writes.store(true, Ordering::SeqCst);
    for _ in 0..3 {
        assert_eq!(code(&broker.send("lost").await.2), "outcome_unknown");
    }
    let before = broker.writes();
    let (status, retry_after, json, took) = send_as_key().await;
    assert_eq!((status, code(&json)), (503, "unavailable"), "{json}");
    assert_eq!(retry_after.as_deref(), Some("1"));
    assert!(took < Duration::from_millis(HANG_MS / 2), "{took:?}");
    assert_eq!(broker.writes(), before, "the key's write was not sent");
}
