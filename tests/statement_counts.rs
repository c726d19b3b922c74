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

/// The in-process database, recording the SQL of every step that ran.
struct Recording {
    inner: InProcess,
    ran: Mutex<Vec<Vec<String>>>,
}

impl Transport for Recording {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        let reply = self.inner.send_pipeline(body).await?;
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
    assert!(ran.len() <= 7, "{ran:#?}");
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

/// Receive-and-delete without an attempt id deletes its picks in the claim
/// statement itself, one message or several: no lock, no second statement
/// (docs/engine.md, "What each hot RPC runs"); with an attempt id the claim
/// is followed by its record (and receive-and-delete by the delete), each
/// right after the claim.
#[tokio::test]
async fn receive_and_delete_and_attempts_stay_within_their_counts() {
    let (_temp, engine) = setup().await;
    engine.send(&send(9)).await.expect("send");
    for max in [1, 3] {
        let request = ReceiveRequest {
            max_messages: max,
            mode: ReceiveMode::ReceiveAndDelete,
            ..receive_one()
        };
        let (got, _) = engine.receive(&request, &NoWait).await.expect("take");
        assert_eq!(got.len(), max as usize);
        let ran = last_run(&engine);
        assert_eq!(ran.len(), 5, "BEGIN, head, gate, take, COMMIT: {ran:#?}");
        assert!(
            ran[3].starts_with("WITH") || ran[3].starts_with("DELETE"),
            "{ran:#?}"
        );
    }
    for (max, mode, want) in [
        (1, ReceiveMode::PeekLock, 6),
        (2, ReceiveMode::PeekLock, 6),
        (2, ReceiveMode::ReceiveAndDelete, 7),
    ] {
        let request = ReceiveRequest {
            max_messages: max,
            mode,
            attempt_id: format!("{max}-{mode:?}"),
            ..receive_one()
        };
        let (got, _) = engine.receive(&request, &NoWait).await.expect("claim");
        assert_eq!(got.len(), max as usize);
        let ran = last_run(&engine);
        assert_eq!(ran.len(), want, "{max} {mode:?}: {ran:#?}");
        assert!(
            ran[4].starts_with("INSERT OR REPLACE INTO receive_attempts"),
            "the record follows the claim: {ran:#?}"
        );
    }
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

/// docs/semantics.md#long-polling: a waiting claim with wake hints adds one
/// statement (the waiter mark), still within six; a Send that reads the
/// waiter mark stays within its own cap.
#[tokio::test]
async fn a_waiting_claim_with_hints_runs_at_most_six_statements() {
    let (_temp, engine) = setup().await;
    let request = ReceiveRequest {
        wait_time_ms: 1,
        ..receive_one()
    };
    // The fake clock never advances: the request budget ends the poll,
    // every claim of which ran the mark.
    let (got, poll) = engine.receive(&request, &Parking).await.expect("poll");
    assert!(got.is_empty());
    assert!(poll.parks > 0, "{poll:?}");
    let ran = last_run(&engine);
    assert_eq!(
        ran.len(),
        6,
        "BEGIN, head, gate, claim, mark, COMMIT: {ran:#?}"
    );
    assert!(
        ran[4].starts_with("UPDATE queues SET waiters_until"),
        "{ran:#?}"
    );
    engine.send(&send(1)).await.expect("send");
    assert!(last_run(&engine).len() <= 6);
}
