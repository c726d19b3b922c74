//! Statements per RPC (docs/engine.md, "Statements per RPC"): counted from
//! the database's own answer, as the steps that ran (succeeded or failed),
//! BEGIN and COMMIT included. Lazy housekeeping sits behind a gate, so a
//! Receive on a queue with nothing due skips it on the server, and runs it
//! the moment something is due.

mod support;

use std::sync::Mutex;

use mqlite_edge::engine::{
    Clock, Engine, Limits, OutgoingMessage, QueueConfigInput, ReceiveMode, ReceiveRequest,
    SendRequest, SettleRequest,
};
use mqlite_edge::store::{HttpReply, Transport, TransportError};
use serde_json::Value;
use support::*;

/// The in-process database, recording the SQL of every step that ran and
/// the size of every request and of every answer.
struct Recording {
    inner: InProcess,
    ran: Mutex<Vec<Vec<String>>>,
    request_bytes: Mutex<Vec<usize>>,
    answer_bytes: Mutex<Vec<usize>>,
}

impl Transport for Recording {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        if let Ok(mut sizes) = self.request_bytes.lock() {
            sizes.push(body.len());
        }
        let reply = self.inner.send_pipeline(body).await?;
        if let Ok(mut sizes) = self.answer_bytes.lock() {
            sizes.push(reply.body.len());
        }
        let request: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let answer: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
        let steps = request["requests"][0]["batch"]["steps"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let result = &answer["results"][0]["response"]["result"];
        let ran = steps
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                !result["step_results"][*i].is_null() || !result["step_errors"][*i].is_null()
            })
            .map(|(_, step)| step["stmt"]["sql"].as_str().unwrap_or("").to_owned())
            .collect();
        if let Ok(mut log) = self.ran.lock() {
            log.push(ran);
        }
        Ok(reply)
    }

    async fn pause(&self, _millis: u32) {}
}

const LOCK_MS: i64 = 30_000;

async fn setup() -> (TempDb, Engine<Recording>) {
    let temp = TempDb::new();
    let transport = Recording {
        inner: InProcess {
            db: temp.db.clone(),
        },
        ran: Mutex::new(Vec::new()),
        request_bytes: Mutex::new(Vec::new()),
        answer_bytes: Mutex::new(Vec::new()),
    };
    let engine = Engine::new(transport, Clock::manual(T0), Limits::default());
    let config = QueueConfigInput {
        lock_duration_ms: LOCK_MS,
        ..Default::default()
    };
    engine.create_queue("q", &config).await.expect("create");
    (temp, engine)
}

/// The statements the last RPC ran.
fn last_run(engine: &Engine<Recording>) -> Vec<String> {
    engine
        .store()
        .transport()
        .ran
        .lock()
        .ok()
        .and_then(|log| log.last().cloned())
        .unwrap_or_default()
}

/// What each statement that ran is, in order (see `Path::expected`).
fn labels(statements: &[String]) -> Vec<&'static str> {
    statements
        .iter()
        .enumerate()
        .map(|(i, sql)| match sql.as_str() {
            _ if sql.starts_with("BEGIN") => "BEGIN",
            _ if sql.starts_with("COMMIT") => "COMMIT",
            _ if i == 1 => "head",
            _ if sql.contains("'nothing due'") => "gate",
            _ if sql.starts_with("WITH expired(id) AS MATERIALIZED") => "housekeeping",
            _ if sql.contains("INSERT OR REPLACE INTO receive_attempts") => "record",
            _ if sql.starts_with("DELETE FROM messages WHERE changes() = 1") => "delete recorded",
            _ if sql.starts_with("UPDATE queues SET waiters_until") => "mark",
            _ => "claim",
        })
        .collect()
}

fn ran_housekeeping(statements: &[String]) -> bool {
    statements
        .iter()
        .any(|sql| sql.starts_with("WITH expired(id) AS MATERIALIZED"))
}

fn send(n: usize) -> SendRequest {
    SendRequest {
        queue: "q".into(),
        messages: (0..n)
            .map(|i| OutgoingMessage {
                body: format!("m{i}").into_bytes(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

fn receive_one() -> ReceiveRequest {
    ReceiveRequest {
        queue: "q".into(),
        max_messages: 1,
        wait_time_ms: 0,
        mode: ReceiveMode::PeekLock,
        attempt_id: String::new(),
    }
}

/// The last size recorded in `sizes` (0 when none is).
fn last_size(sizes: &Mutex<Vec<usize>>) -> usize {
    sizes
        .lock()
        .ok()
        .and_then(|s| s.last().copied())
        .unwrap_or(0)
}

/// A Send's request is mostly its copies, and a copy of a message without
/// metadata is its hash and four numbers (docs/engine.md, "What a Send
/// carries"): 64 small messages, 15.1 KB (22.5 KB with every field of every
/// copy written and each key beside its hash).
#[tokio::test]
async fn a_send_of_64_small_messages_is_a_request_of_under_16_kb() {
    let (_temp, engine) = setup().await;
    engine.send(&send(64)).await.expect("send");
    let last = last_size(&engine.store().transport().request_bytes);
    assert!((1..16_000).contains(&last), "Send of 64: {last} bytes");
}

/// A claimed row comes back as its body, one cell packing its seq number,
/// counts, times and metadata, and its lock token (docs/engine.md, "What a
/// Receive answers"): the Receive of the same 64 small messages answers
/// 13,737 bytes, where a cell for each field answered 24,480.
#[tokio::test]
async fn a_receive_of_64_small_messages_answers_under_16_kb() {
    let (_temp, engine) = setup().await;
    engine.send(&send(64)).await.expect("send");
    let request = ReceiveRequest {
        max_messages: 64,
        ..receive_one()
    };
    let (got, _) = engine.receive(&request, &NoWait).await.expect("receive");
    assert_eq!(got.len(), 64);
    let last = last_size(&engine.store().transport().answer_bytes);
    assert!((1..16_000).contains(&last), "Receive of 64: {last} bytes");
}

#[tokio::test]
async fn a_send_of_any_size_runs_at_most_six_statements() {
    let (_temp, engine) = setup().await;
    for n in [1, 64, 500] {
        engine.send(&send(n)).await.expect("send");
        let ran = last_run(&engine);
        assert!(ran.len() <= 6, "Send of {n} ran {}: {ran:#?}", ran.len());
    }
}

#[tokio::test]
async fn a_receive_with_nothing_due_skips_housekeeping() {
    let (_temp, engine) = setup().await;
    // Empty queue.
    let (got, _) = engine.receive(&receive_one(), &NoWait).await.expect("poll");
    assert!(got.is_empty());
    let ran = last_run(&engine);
    assert!(!ran_housekeeping(&ran), "{ran:#?}");
    assert_eq!(ran.len(), 5, "BEGIN, head, gate, claim, COMMIT: {ran:#?}");
    // A backlog with a live lease: still nothing due.
    engine.send(&send(2)).await.expect("send");
    let (got, _) = engine
        .receive(&receive_one(), &NoWait)
        .await
        .expect("claim");
    assert_eq!(got.len(), 1);
    let ran = last_run(&engine);
    assert!(!ran_housekeeping(&ran), "{ran:#?}");
    assert_eq!(ran.len(), 5, "{ran:#?}");
}

#[tokio::test]
async fn an_expired_lease_opens_the_gate_and_is_redelivered() {
    let (_temp, engine) = setup().await;
    engine.send(&send(1)).await.expect("send");
    let (first, _) = engine
        .receive(&receive_one(), &NoWait)
        .await
        .expect("claim");
    assert_eq!(first.len(), 1);
    // Positive control: one millisecond before the deadline nothing is due.
    let clock = engine.clock();
    clock.advance(LOCK_MS - 1);
    let (none, _) = engine.receive(&receive_one(), &NoWait).await.expect("poll");
    assert!(none.is_empty());
    assert!(!ran_housekeeping(&last_run(&engine)));
    clock.advance(1);
    let (again, _) = engine
        .receive(&receive_one(), &NoWait)
        .await
        .expect("reclaim");
    assert_eq!(again.len(), 1, "the expired lease is claimable at once");
    assert_eq!(again[0].seq_number, first[0].seq_number);
    assert_eq!(again[0].delivery_count, 2);
    let ran = last_run(&engine);
    assert!(ran_housekeeping(&ran), "{ran:#?}");
    assert_eq!(
        ran.len(),
        6,
        "BEGIN, head, gate, housekeeping, claim, COMMIT: {ran:#?}"
    );
}

#[tokio::test]
async fn complete_runs_at_most_five_statements() {
    let (_temp, engine) = setup().await;
    engine.send(&send(1)).await.expect("send");
    let (got, _) = engine
        .receive(&receive_one(), &NoWait)
        .await
        .expect("claim");
    let message = got.first().expect("one message");
    engine
        .complete(&SettleRequest {
            queue: "q".into(),
            seq_number: message.seq_number,
            lock_token: message.lock_token.clone().unwrap_or_default(),
        })
        .await
        .expect("complete");
    let ran = last_run(&engine);
    assert!(ran.len() <= 5, "{ran:#?}");
}

/// A waiter on wake hints whose park times out at once.
struct Parking;

impl mqlite_edge::engine::Waiter for Parking {
    fn elapsed_ms(&self) -> u64 {
        0
    }
    async fn sleep(&self, _millis: u64) {}
    fn hints(&self) -> bool {
        true
    }
    async fn park(&self, _q: &str, _since: i64, _ms: u64) -> mqlite_edge::engine::Parked {
        mqlite_edge::engine::Parked::TimedOut
    }
}

/// One way through Receive (docs/engine.md, "What each hot RPC runs").
#[derive(Debug, Clone, Copy)]
struct Path {
    mode: ReceiveMode,
    max: i64,
    /// `None`: no attempt id; `Some(false)`: a fresh one; `Some(true)`: a
    /// replay of a live one.
    attempt: Option<bool>,
    /// A lease ran out, so the gate opens the housekeeping.
    due: bool,
    /// A waiting claim on wake hints (it runs the waiter mark).
    waiting: bool,
}

impl Path {
    fn all() -> Vec<Path> {
        let mut paths = Vec::new();
        for mode in [ReceiveMode::PeekLock, ReceiveMode::ReceiveAndDelete] {
            for max in [1, 3] {
                for attempt in [None, Some(false), Some(true)] {
                    for due in [false, true] {
                        for waiting in [false, true] {
                            paths.push(Path {
                                mode,
                                max,
                                attempt,
                                due,
                                waiting,
                            });
                        }
                    }
                }
            }
        }
        paths
    }

    /// BEGIN, head, gate, the housekeeping when due, the claim (peek-lock:
    /// lock, then the attempt record; receive-and-delete: the take, or
    /// with an attempt the record of the picks, then their delete), the
    /// waiter mark when waiting on hints, COMMIT. A replay runs the same
    /// statements, which then take nothing.
    fn expected(&self) -> Vec<&'static str> {
        let mut steps = vec!["BEGIN", "head", "gate"];
        if self.due {
            steps.push("housekeeping");
        }
        match (self.mode, self.attempt.is_some()) {
            (ReceiveMode::PeekLock, false) | (ReceiveMode::ReceiveAndDelete, false) => {
                steps.push("claim")
            }
            (ReceiveMode::PeekLock, true) => steps.extend(["claim", "record"]),
            (ReceiveMode::ReceiveAndDelete, true) => steps.extend(["record", "delete recorded"]),
        }
        if self.waiting {
            steps.push("mark");
        }
        steps.push("COMMIT");
        steps
    }

    fn request(&self) -> ReceiveRequest {
        ReceiveRequest {
            max_messages: self.max,
            mode: self.mode,
            wait_time_ms: if self.waiting { 1 } else { 0 },
            attempt_id: if self.attempt.is_some() {
                "A".into()
            } else {
                String::new()
            },
            ..receive_one()
        }
    }
}

/// Every Receive path's statements, counted exactly: BEGIN, head and gate,
/// then one statement per thing the path must do. Within six unless
/// housekeeping is due on a path that already runs two claim statements
/// (an attempt id) or the waiter mark: 7, and 8 for a waiting claim with an
/// attempt id and housekeeping due (docs/engine.md says why).
#[tokio::test]
async fn every_receive_path_runs_exactly_its_statements() {
    let mut paths = 0;
    for path in Path::all() {
        let (_temp, engine) = setup().await;
        engine.send(&send(6)).await.expect("send");
        if path.due {
            // A lease that has run out by the Receive under test.
            let (leased, _) = engine
                .receive(&receive_one(), &NoWait)
                .await
                .expect("lease");
            assert_eq!(leased.len(), 1);
            engine.clock().advance(LOCK_MS);
        }
        let request = path.request();
        let mut first = Vec::new();
        if path.attempt == Some(true) {
            first = engine
                .receive(&request, &NoWait)
                .await
                .expect("first attempt")
                .0;
            if path.due {
                // The first attempt reaped it; let another lease run out.
                engine
                    .receive(&receive_one(), &NoWait)
                    .await
                    .expect("lease");
                engine.clock().advance(LOCK_MS);
            }
        }
        let got = if path.waiting {
            engine.receive(&request, &Parking).await
        } else {
            engine.receive(&request, &NoWait).await
        }
        .expect("receive")
        .0;
        assert!(!got.is_empty(), "{path:?}");
        if path.attempt == Some(true) {
            assert_eq!(got, first, "{path:?}: a replay");
        }
        let ran = last_run(&engine);
        assert_eq!(labels(&ran), path.expected(), "{path:?}: {ran:#?}");
        // Five, plus one for each of: housekeeping due, an attempt id, the
        // waiter mark. So within six unless two of them meet.
        let extras = [path.due, path.attempt.is_some(), path.waiting];
        let extra = extras.iter().filter(|e| **e).count();
        assert_eq!(ran.len(), 5 + extra, "{path:?}");
        if extra <= 1 {
            assert!(ran.len() <= 6, "{path:?}");
        }
        paths += 1;
    }
    assert_eq!(paths, 48);
}
