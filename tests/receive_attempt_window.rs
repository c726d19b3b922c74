//! The attempt record of an idempotent Receive (docs/engine.md, "Rows
//! written"): it finds the rows its claim just leased by their lease
//! deadline, within a window of its own clock reading, and must never record
//! a partial answer. Here the clock the record statement reads is moved away
//! from the claim's (a database clock that jumped between the two
//! statements): within the window the answer is whole and replays exactly;
//! beyond it the transaction fails and claims nothing.

mod support;

use std::sync::atomic::{AtomicI64, Ordering};

use mqlite_edge::engine::{
    Clock, Engine, EngineError, Limits, OutgoingMessage, QueueConfigInput, ReceiveMode,
    ReceiveRequest, ReceivedMessage, SendRequest,
};
use mqlite_edge::store::{HttpReply, StoreError, Transport, TransportError};
use serde_json::Value;
use support::*;

const LOCK_MS: i64 = 30_000;
/// `RECORD_WINDOW_MS` in src/engine/receive.rs.
const WINDOW_MS: i64 = 250;

/// The in-process database, with the clock parameter of the attempt record
/// (the last argument of its statement) moved by `skew` milliseconds.
struct Skewing {
    inner: InProcess,
    skew: AtomicI64,
}

impl Transport for Skewing {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        let skew = self.skew.load(Ordering::SeqCst);
        let mut request: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let mut skewed = 0;
        if let Some(steps) = request["requests"][0]["batch"]["steps"].as_array_mut() {
            for step in steps {
                let sql = step["stmt"]["sql"].as_str().unwrap_or("");
                if !sql.contains("INSERT OR REPLACE INTO receive_attempts") {
                    continue;
                }
                if let Some(clock) = step["stmt"]["args"]
                    .as_array_mut()
                    .and_then(|args| args.last_mut())
                {
                    let now: i64 = clock["value"]
                        .as_str()
                        .and_then(|v| v.parse().ok())
                        .expect("the manual clock is bound as an integer");
                    clock["value"] = Value::String((now + skew).to_string());
                    skewed += 1;
                }
            }
        }
        let body = request.to_string();
        assert!(
            skew == 0 || skewed <= 1,
            "one attempt record per pipeline: {body}"
        );
        self.inner.send_pipeline(&body).await
    }

    async fn pause(&self, _millis: u32) {}
}

async fn setup() -> (TempDb, Engine<Skewing>) {
    let temp = TempDb::new();
    let transport = Skewing {
        inner: InProcess {
            db: temp.db.clone(),
        },
        skew: AtomicI64::new(0),
    };
    let engine = Engine::new(transport, Clock::manual(T0), Limits::default());
    let config = QueueConfigInput {
        lock_duration_ms: LOCK_MS,
        ..Default::default()
    };
    engine.create_queue("q", &config).await.expect("create");
    // Grouped and ungrouped messages, so the claim walks both kinds.
    let messages = ["a", "b", "c", "d"]
        .iter()
        .enumerate()
        .map(|(i, body)| OutgoingMessage {
            body: body.as_bytes().to_vec(),
            group_id: (i % 2 == 1).then(|| format!("g{i}")),
            ..Default::default()
        })
        .collect();
    let send = SendRequest {
        queue: "q".into(),
        messages,
        ..Default::default()
    };
    engine.send(&send).await.expect("send");
    (temp, engine)
}

fn skew(engine: &Engine<Skewing>, ms: i64) {
    engine.store().transport().skew.store(ms, Ordering::SeqCst);
}

fn request(max: i64, mode: ReceiveMode, attempt: &str) -> ReceiveRequest {
    ReceiveRequest {
        queue: "q".into(),
        max_messages: max,
        wait_time_ms: 0,
        mode,
        attempt_id: attempt.into(),
    }
}

async fn receive(
    engine: &Engine<Skewing>,
    request: &ReceiveRequest,
) -> Result<Vec<ReceivedMessage>, EngineError> {
    engine
        .receive(request, &NoWait)
        .await
        .map(|(messages, _)| messages)
}

fn seqs(messages: &[ReceivedMessage]) -> Vec<i64> {
    messages.iter().map(|m| m.seq_number).collect()
}

/// The clock at either edge of the window still finds every claimed row:
/// the answer is whole and a retry replays it exactly.
#[tokio::test]
async fn c213_a_record_within_the_window_replays_the_whole_claim() {
    for (i, at) in [-WINDOW_MS, 0, WINDOW_MS].into_iter().enumerate() {
        let (_temp, engine) = setup().await;
        let attempt = format!("A{i}");
        for mode in [ReceiveMode::PeekLock, ReceiveMode::ReceiveAndDelete] {
            skew(&engine, at);
            let max = if mode == ReceiveMode::PeekLock { 2 } else { 5 };
            let attempt = format!("{attempt}-{mode:?}");
            let first = receive(&engine, &request(max, mode, &attempt))
                .await
                .expect("claim");
            skew(&engine, 0);
            let replay = receive(&engine, &request(max, mode, &attempt))
                .await
                .expect("replay");
            assert_eq!(first, replay, "skew {at} ms, {mode:?}");
            assert_eq!(first.len(), 2, "skew {at} ms, {mode:?}: {first:?}");
        }
        // Peek-lock took the two lowest, receive-and-delete the other two.
        let stats = engine.stats("q").await.expect("stats");
        assert_eq!((stats.locked, stats.total), (2, 2), "skew {at} ms");
    }
}

/// One millisecond beyond the window the record would miss the claimed
/// rows: the transaction fails as `unavailable` (retryable), nothing is
/// claimed, nothing recorded; the retry claims the same rows.
#[tokio::test]
async fn the_record_refuses_a_claim_it_cannot_see_whole() {
    for at in [WINDOW_MS + 1, -WINDOW_MS - 1] {
        let (_temp, engine) = setup().await;
        for (max, mode) in [(1, ReceiveMode::PeekLock), (3, ReceiveMode::PeekLock)] {
            skew(&engine, at);
            let attempt = format!("B-{max}-{mode:?}");
            let refused = receive(&engine, &request(max, mode, &attempt)).await;
            assert!(
                matches!(refused, Err(EngineError::Store(StoreError::Unavailable(_)))),
                "skew {at} ms, {max} {mode:?}: {refused:?}"
            );
            let stats = engine.stats("q").await.expect("stats");
            assert_eq!(
                (stats.active, stats.locked, stats.total),
                (4, 0, 4),
                "skew {at} ms, {max} {mode:?}: nothing claimed"
            );
        }
        // The same attempt id afterwards is a fresh claim (nothing was
        // recorded) of the lowest seqs, delivered for the first time.
        skew(&engine, 0);
        let got = receive(&engine, &request(3, ReceiveMode::PeekLock, "B-3-PeekLock"))
            .await
            .expect("retry");
        assert_eq!(seqs(&got), vec![1, 2, 3]);
        assert!(got.iter().all(|m| m.delivery_count == 1), "{got:?}");
    }
}

/// Leases of other claims whose deadline falls in the window (here: the
/// very same instant) are not part of the answer: only this claim's tokens
/// are recorded, and receive-and-delete deletes only its own rows.
#[tokio::test]
async fn c213_c216_the_record_keeps_only_its_own_claim() {
    let (_temp, engine) = setup().await;
    let other = receive(&engine, &request(2, ReceiveMode::PeekLock, ""))
        .await
        .expect("other claim");
    assert_eq!(seqs(&other), vec![1, 2]);
    let mine = receive(&engine, &request(1, ReceiveMode::PeekLock, "C1"))
        .await
        .expect("claim");
    assert_eq!(seqs(&mine), vec![3]);
    let replay = receive(&engine, &request(5, ReceiveMode::PeekLock, "C1"))
        .await
        .expect("replay");
    assert_eq!(mine, replay);
    let taken = receive(&engine, &request(5, ReceiveMode::ReceiveAndDelete, "C2"))
        .await
        .expect("receive-and-delete");
    assert_eq!(seqs(&taken), vec![4]);
    let replay = receive(&engine, &request(5, ReceiveMode::ReceiveAndDelete, "C2"))
        .await
        .expect("replay");
    assert_eq!(taken, replay);
    let stats = engine.stats("q").await.expect("stats");
    assert_eq!((stats.locked, stats.total), (3, 3));
}

/// Receive-and-delete records its picks before it deletes them, from the
/// claim walk itself: no lease to find again, so no window. A record whose
/// clock reads far from the claim's still answers, deletes and replays
/// exactly the same messages.
#[tokio::test]
async fn c216_receive_and_delete_under_an_attempt_has_no_window() {
    for (i, at) in [WINDOW_MS + 1, -WINDOW_MS - 1, 60_000]
        .into_iter()
        .enumerate()
    {
        let (_temp, engine) = setup().await;
        for (max, want) in [(1, vec![1]), (3, vec![2, 3, 4])] {
            let attempt = format!("D{i}-{max}");
            skew(&engine, at);
            let taken = receive(
                &engine,
                &request(max, ReceiveMode::ReceiveAndDelete, &attempt),
            )
            .await
            .expect("receive-and-delete");
            skew(&engine, 0);
            assert_eq!(seqs(&taken), want, "skew {at} ms");
            assert!(taken.iter().all(|m| m.delivery_count == 1), "{taken:?}");
            let replay = receive(
                &engine,
                &request(5, ReceiveMode::ReceiveAndDelete, &attempt),
            )
            .await
            .expect("replay");
            assert_eq!(taken, replay, "skew {at} ms");
        }
        let stats = engine.stats("q").await.expect("stats");
        assert_eq!(stats.total, 0, "skew {at} ms");
    }
}
