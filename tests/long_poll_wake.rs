//! Wake hints (docs/semantics.md#long-polling): the engine's signals (which
//! committed changes report "claimable on a queue someone waits on") and the
//! waiting schedule with a fake wake object, database requests counted.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mqlite_edge::engine::pgmq::PgmqRead;
use mqlite_edge::engine::{
    Clock, Effect, Effects, Engine, Limits, OutgoingMessage, Parked, QueueConfigInput,
    ReceiveRequest, ReceivedMessage, SendRequest, SettleRequest, Settlement, Waiter, FOLDS,
    PARK_MAX_MS,
};
use mqlite_edge::store::group::{Bounds, GroupedTransport};
use support::*;

/// How the fake wake object answers a park.
#[derive(Clone, Copy)]
enum Answer {
    TimedOut,
    Failed,
    /// Sends one message to the queue (another client, same database)
    /// during the park, then wakes the waiter.
    SendThenWake,
}

/// A virtual clock that jumps by every sleep and park, and a fake wake
/// object that records each park.
struct Hinted {
    elapsed: AtomicU64,
    answer: Answer,
    parks: Mutex<Vec<(String, i64, u64)>>,
    sender: Option<Engine<InProcess>>,
    /// A manual database clock that moves with the waiter's time.
    clock: Option<Clock>,
    /// Whether a sleep sends one message through `sender`, like
    /// [`Answer::SendThenWake`]'s park.
    send_while_sleeping: bool,
}

impl Hinted {
    fn new(answer: Answer) -> Self {
        Hinted {
            elapsed: AtomicU64::new(0),
            answer,
            parks: Mutex::new(Vec::new()),
            sender: None,
            clock: None,
            send_while_sleeping: false,
        }
    }

    fn parks(&self) -> Vec<(String, i64, u64)> {
        self.parks.lock().map(|p| p.clone()).unwrap_or_default()
    }
}

impl Waiter for Hinted {
    fn elapsed_ms(&self) -> u64 {
        self.elapsed.load(Ordering::SeqCst)
    }

    async fn sleep(&self, millis: u64) {
        self.elapsed.fetch_add(millis, Ordering::SeqCst);
        if let (true, Some(sender)) = (self.send_while_sleeping, &self.sender) {
            sender.send(&one("q")).await.expect("send during the sleep");
        }
    }

    fn hints(&self) -> bool {
        true
    }

    async fn park(&self, queue: &str, since_ms: i64, millis: u64) -> Parked {
        if let Ok(mut parks) = self.parks.lock() {
            parks.push((queue.to_owned(), since_ms, millis));
        }
        match self.answer {
            Answer::TimedOut => {
                self.elapsed.fetch_add(millis, Ordering::SeqCst);
                if let Some(clock) = &self.clock {
                    clock.advance(millis as i64);
                }
                Parked::TimedOut
            }
            Answer::Failed => Parked::Failed,
            Answer::SendThenWake => {
                self.elapsed.fetch_add(7, Ordering::SeqCst);
                if let Some(sender) = &self.sender {
                    sender.send(&one("q")).await.expect("send during the park");
                }
                Parked::Woken
            }
        }
    }
}

fn one(queue: &str) -> SendRequest {
    SendRequest {
        queue: queue.into(),
        messages: vec![OutgoingMessage {
            body: b"m".to_vec(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn waiting(queue: &str, wait_time_ms: i64) -> ReceiveRequest {
    ReceiveRequest {
        queue: queue.into(),
        max_messages: 1,
        wait_time_ms,
        ..Default::default()
    }
}

/// Engine with a journal over a fresh database and manual clock, queues
/// `q` and `idle` created.
async fn journaled() -> (Harness, Engine<InProcess>, Arc<Effects>) {
    let h = Harness::new();
    let (engine, effects) = h.journaled_engine();
    let config = QueueConfigInput {
        lock_duration_ms: 10_000,
        ..Default::default()
    };
    for name in ["q", "idle"] {
        engine.create_queue(name, &config).await.expect("create");
    }
    effects.take();
    (h, engine, effects)
}

/// The wake hints in the journal, oldest first, drained.
fn claimable(effects: &Effects) -> Vec<(String, i64)> {
    effects
        .take()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Claimable { queue, at_ms } => Some((queue, at_ms)),
            _ => None,
        })
        .collect()
}

/// Parks once (the fake object times out at once), so `q` is marked as
/// waited on; returns the database time the empty claim ran at.
async fn park_once(engine: &Engine<InProcess>, queue: &str) -> i64 {
    let waiter = Hinted::new(Answer::TimedOut);
    let (got, _) = engine
        .receive(&waiting(queue, 1), &waiter)
        .await
        .expect("wait");
    assert!(got.is_empty());
    let parks = waiter.parks();
    assert_eq!(parks.len(), 1, "{parks:?}");
    parks[0].1
}

/// Settles `m` of queue `q` as `how`.
async fn settle(engine: &Engine<InProcess>, m: &ReceivedMessage, how: Settlement, what: &str) {
    let request = SettleRequest {
        queue: "q".into(),
        seq_number: m.seq_number,
        lock_token: m.lock_token.clone().unwrap_or_default(),
    };
    engine.settle(&request, &how).await.expect(what);
}

/// A Peek of queue `q`: a request whose housekeeping observes due rows.
async fn peek(engine: &Engine<InProcess>, queue: &str) {
    engine
        .peek(&mqlite_edge::engine::PeekRequest {
            queue: queue.into(),
            ..Default::default()
        })
        .await
        .expect("peek");
}

#[tokio::test]
async fn a_send_reports_a_wake_hint_only_for_a_queue_someone_waits_on() {
    let (h, engine, effects) = journaled().await;
    // Nobody waits yet: a send costs no hint.
    engine.send(&one("q")).await.expect("send");
    assert_eq!(claimable(&effects), vec![]);
    // Drain it, then wait on q.
    let (got, _) = engine.receive(&waiting("q", 0), &NoWait).await.expect("rx");
    assert_eq!(got.len(), 1);
    let since = park_once(&engine, "q").await;
    assert_eq!(since, h.now(), "the park carries the claim's database time");
    effects.take();
    h.advance(5);
    engine.send(&one("q")).await.expect("send");
    assert_eq!(claimable(&effects), vec![("q".to_owned(), h.now())]);
    // Another queue nobody waits on: still no hint.
    engine.send(&one("idle")).await.expect("send");
    assert_eq!(claimable(&effects), vec![]);
    // A scheduled message is not claimable yet: no hint at send.
    let mut later = one("q");
    later.scheduled_enqueue_time_ms = h.now() + 10_000;
    engine.send(&later).await.expect("schedule");
    assert_eq!(claimable(&effects), vec![]);
    // The mark lapses 30 s after the last waiting claim.
    h.advance(30_000);
    engine.send(&one("q")).await.expect("send");
    assert_eq!(claimable(&effects), vec![]);
}

#[tokio::test]
async fn a_waiter_without_hints_marks_nothing() {
    let (h, engine, effects) = journaled().await;
    let waiter = RealWaiter::start();
    let (got, _) = engine
        .receive(&waiting("q", 60), &waiter)
        .await
        .expect("wait");
    assert!(got.is_empty());
    h.advance(1);
    engine.send(&one("q")).await.expect("send");
    assert_eq!(
        claimable(&effects),
        vec![],
        "no binding: senders pay nothing"
    );
}

#[tokio::test]
async fn abandon_lease_expiry_activation_and_redrive_report_hints() {
    let (h, engine, effects) = journaled().await;
    engine.send(&one("q")).await.expect("send");
    let (got, _) = engine.receive(&waiting("q", 0), &NoWait).await.expect("rx");
    let m = got.first().expect("one message").clone();
    park_once(&engine, "q").await;
    effects.take();

    // Abandon without delay: claimable again.
    h.advance(1);
    settle(&engine, &m, Settlement::Abandon { delay_ms: 0 }, "abandon").await;
    assert_eq!(claimable(&effects), vec![("q".to_owned(), h.now())]);

    // Abandon with a delay parks it as scheduled: no hint now...
    let (got, _) = engine.receive(&waiting("q", 0), &NoWait).await.expect("rx");
    let m = got.first().expect("again").clone();
    effects.take();
    settle(
        &engine,
        &m,
        Settlement::Abandon { delay_ms: 1_000 },
        "abandon later",
    )
    .await;
    assert_eq!(claimable(&effects), vec![]);
    // ...and its activation, observed by a later request, wakes the queue.
    h.advance(1_000);
    peek(&engine, "q").await;
    assert_eq!(claimable(&effects), vec![("q".to_owned(), h.now())]);

    // A lease that expires, observed by a Receive, wakes the queue too.
    let (got, _) = engine.receive(&waiting("q", 0), &NoWait).await.expect("rx");
    assert_eq!(got.len(), 1);
    park_once(&engine, "q").await;
    effects.take();
    h.advance(10_000);
    peek(&engine, "q").await;
    assert_eq!(claimable(&effects), vec![("q".to_owned(), h.now())]);
}

#[tokio::test]
async fn a_redrive_reports_a_hint_for_its_destination() {
    let (h, engine, effects) = journaled().await;
    engine.send(&one("q")).await.expect("send");
    let (got, _) = engine.receive(&waiting("q", 0), &NoWait).await.expect("rx");
    let m = got.first().expect("one").clone();
    settle(
        &engine,
        &m,
        Settlement::Reject {
            reason: String::new(),
            description: String::new(),
        },
        "reject",
    )
    .await;
    park_once(&engine, "idle").await;
    effects.take();
    h.advance(1);
    let moved = engine
        .redrive(
            &mqlite_edge::engine::RedriveRequest {
                queue: "q".into(),
                target: "idle".into(),
                ..Default::default()
            },
            &NoWait,
        )
        .await
        .expect("redrive");
    assert_eq!(moved, 1);
    assert_eq!(claimable(&effects), vec![("idle".to_owned(), h.now())]);
}

#[tokio::test]
async fn busy_waiters_rewrite_the_mark_at_most_every_five_seconds() {
    let (h, engine, _effects) = journaled().await;
    park_once(&engine, "q").await;
    let first = waiters_until(&h, "q");
    assert_eq!(first, h.now() + 30_000);
    h.advance(4_000);
    park_once(&engine, "q").await;
    assert_eq!(waiters_until(&h, "q"), first, "not rewritten within 5 s");
    h.advance(1_001);
    park_once(&engine, "q").await;
    assert_eq!(waiters_until(&h, "q"), h.now() + 30_000);
}

/// `queues.waiters_until` of `queue`, read straight from the database.
fn waiters_until(h: &Harness, queue: &str) -> i64 {
    let body = serde_json::json!({"requests": [{"type": "execute", "stmt": {
        "sql": "SELECT waiters_until FROM queues WHERE name = ?",
        "args": [{"type": "text", "value": queue}]}}]});
    let reply = h.temp.db.pipeline(None, body.to_string().as_bytes());
    let answer: serde_json::Value = serde_json::from_str(&reply.body).expect("json");
    let value = &answer["results"][0]["response"]["result"]["rows"][0][0]["value"];
    value
        .as_str()
        .and_then(|v| v.parse().ok())
        .expect("waiters_until")
}

#[tokio::test]
async fn an_empty_20_s_wait_makes_five_claims_and_four_parks() {
    let h = Harness::new();
    h.engine
        .create_queue("q", &QueueConfigInput::default())
        .await
        .expect("create");
    let waiter = Hinted::new(Answer::TimedOut);
    let before = h.round_trips();
    let (got, poll) = h
        .engine
        .receive(&waiting("q", 20_000), &waiter)
        .await
        .expect("wait");
    assert!(got.is_empty());
    assert_eq!(
        waiter.elapsed_ms(),
        20_000,
        "the last claim is at the deadline"
    );
    assert_eq!(h.round_trips() - before, 5, "{poll:?}");
    assert_eq!((poll.fetches, poll.parks), (5, 4));
    let parks = waiter.parks();
    assert!(
        parks
            .iter()
            .all(|(q, _, ms)| q == "q" && *ms <= PARK_MAX_MS),
        "{parks:?}"
    );
    assert!(
        poll.fetches + poll.parks <= 10,
        "≤ 10 subrequests: {poll:?}"
    );
}

#[tokio::test]
async fn a_failing_wake_object_falls_back_to_re_polling() {
    let h = Harness::new();
    h.engine
        .create_queue("q", &QueueConfigInput::default())
        .await
        .expect("create");
    let waiter = Hinted::new(Answer::Failed);
    let (got, poll) = h
        .engine
        .receive(&waiting("q", 20_000), &waiter)
        .await
        .expect("wait");
    assert!(got.is_empty());
    assert_eq!(
        poll.parks, 1,
        "one failed park, then plain re-polling: {poll:?}"
    );
    assert!(
        poll.attempts >= 10,
        "{poll:?} keeps polling through the wait"
    );
    assert!(poll.fetches + poll.parks <= 40, "{poll:?}");
    assert_eq!(waiter.elapsed_ms(), 20_000);
}

/// A waiter whose park sends a message (another client over the same
/// database and clock) and then wakes it.
fn sending(h: &Harness) -> Hinted {
    let mut waiter = Hinted::new(Answer::SendThenWake);
    waiter.sender = Some(Engine::new(
        InProcess {
            db: h.temp.db.clone(),
        },
        Clock::Manual(match &h.clock {
            Clock::Manual(now) => now.clone(),
            Clock::Database => unreachable!("the harness clock is manual"),
        }),
        Limits::default(),
    ));
    waiter
}

/// With two requests there is no room for a park and the claim after it:
/// the first claim, then a plain wait, then the claim at the deadline,
/// which receives what was sent meanwhile.
#[tokio::test]
async fn with_a_budget_of_two_the_claim_at_the_deadline_receives() {
    let h = Harness::with_limits(Limits {
        poll_max_requests: 2,
        ..Limits::default()
    });
    h.engine
        .create_queue("q", &QueueConfigInput::default())
        .await
        .expect("create");
    let mut waiter = sending(&h);
    waiter.send_while_sleeping = true;
    let (got, poll) = h
        .engine
        .receive(&waiting("q", 20_000), &waiter)
        .await
        .expect("wait");
    assert_eq!(got.len(), 1, "{poll:?}");
    assert_eq!((poll.attempts, poll.fetches, poll.parks), (2, 2, 0));
    assert_eq!(waiter.elapsed_ms(), 20_000, "claimed at the deadline");
}

#[tokio::test]
async fn a_woken_waiter_claims_at_once() {
    let h = Harness::new();
    h.engine
        .create_queue("q", &QueueConfigInput::default())
        .await
        .expect("create");
    let waiter = sending(&h);
    let before = h.round_trips();
    let (got, poll) = h
        .engine
        .receive(&waiting("q", 20_000), &waiter)
        .await
        .expect("wait");
    assert_eq!(got.len(), 1, "claimed right after the wake");
    assert_eq!((poll.attempts, poll.parks), (2, 1), "{poll:?}");
    assert_eq!(waiter.elapsed_ms(), 7, "no re-poll interval was waited");
    // The waiter's two claims and the other client's send.
    assert_eq!(h.round_trips() - before, 3);
}

#[tokio::test]
async fn pgmq_read_poll_parks_on_the_same_hints() {
    let h = Harness::new();
    h.engine
        .create_queue("q", &QueueConfigInput::default())
        .await
        .expect("create");
    let waiter = Hinted::new(Answer::TimedOut);
    let before = h.round_trips();
    let got = h
        .engine
        .pgmq_read(
            &PgmqRead {
                queue: "q".into(),
                qty: 1,
                vt_seconds: 30,
                pop: false,
                conditional: None,
                max_poll_ms: 20_000,
                poll_interval_ms: 100,
            },
            &waiter,
        )
        .await
        .expect("read-poll");
    assert!(got.is_empty());
    assert_eq!(h.round_trips() - before, 5);
    assert_eq!(waiter.parks().len(), 4);
}

#[tokio::test]
async fn a_pgmq_send_reports_a_hint_only_when_visible_at_once() {
    let (h, engine, effects) = journaled().await;
    park_once(&engine, "q").await;
    effects.take();
    h.advance(1);
    let send = |delay| mqlite_edge::engine::pgmq::PgmqSend {
        queue: "q".into(),
        messages: vec![mqlite_edge::engine::pgmq::PgmqOutgoing {
            message: "{}".into(),
            headers: None,
        }],
        delay,
    };
    engine.pgmq_send(&send(None)).await.expect("send");
    assert_eq!(claimable(&effects), vec![("q".to_owned(), h.now())]);
    engine.pgmq_send(&send(None)).await.expect("send");
    assert_eq!(
        claimable(&effects).len(),
        1,
        "every commit reports its own hint"
    );
    // A queue nobody waits on, and a delayed send to q: no hint.
    engine.send(&one("idle")).await.expect("send");
    let mut idle = send(None);
    idle.queue = "idle".into();
    engine.pgmq_send(&idle).await.expect("send");
    assert_eq!(claimable(&effects), vec![]);
    let delayed = send(Some(mqlite_edge::engine::pgmq::VisibleAt::AfterSeconds(10)));
    engine.pgmq_send(&delayed).await.expect("send");
    assert_eq!(claimable(&effects), vec![]);
}

/// Nobody may be there to notify a schedule coming due: the waiter parks
/// only until then, and its re-claim activates and claims it.
#[tokio::test]
async fn a_park_ends_when_a_schedule_comes_due() {
    let h = Harness::new();
    h.engine
        .create_queue("q", &QueueConfigInput::default())
        .await
        .expect("create");
    let mut later = one("q");
    later.scheduled_enqueue_time_ms = h.now() + 1_500;
    h.engine.send(&later).await.expect("schedule");
    let mut waiter = Hinted::new(Answer::TimedOut);
    waiter.clock = Some(h.clock.clone());
    let (got, poll) = h
        .engine
        .receive(&waiting("q", 20_000), &waiter)
        .await
        .expect("wait");
    assert_eq!(got.len(), 1, "claimed when it came due: {poll:?}");
    let parks = waiter.parks();
    assert_eq!(parks.len(), 1, "{parks:?}");
    assert!(
        (1_500..=1_600).contains(&parks[0].2),
        "parked until the activation, not a whole park: {parks:?}"
    );
}

/// With a `receive_attempt_id` the waiter mark runs after the attempt
/// record (which reads the claim's `changes()` right after the claim): an
/// empty claim still marks the queue as waited on, a claim that took a
/// message does not.
#[tokio::test]
async fn a_waiting_claim_with_an_attempt_id_marks_only_when_empty() {
    let (h, engine, _effects) = journaled().await;
    let waiter = Hinted::new(Answer::TimedOut);
    let request = ReceiveRequest {
        attempt_id: "W1".into(),
        ..waiting("q", 1)
    };
    let (got, _) = engine.receive(&request, &waiter).await.expect("wait");
    assert!(got.is_empty());
    assert_eq!(waiters_until(&h, "q"), h.now() + 30_000);
    h.advance(60_000);
    engine.send(&one("q")).await.expect("send");
    let request = ReceiveRequest {
        attempt_id: "W2".into(),
        ..waiting("q", 1)
    };
    let (got, _) = engine.receive(&request, &waiter).await.expect("claim");
    assert_eq!(got.len(), 1);
    assert_eq!(
        waiters_until(&h, "q"),
        h.now() - 60_000 + 30_000,
        "a claim that took a message leaves the mark alone"
    );
}

/// Sends that meet in a batch and fold into one run (docs/engine.md#folding)
/// each report the hint, as they would alone: the run's outcome names the
/// waited-on queues of its members' copies, a direct send's queue and a
/// publish's subscriptions alike.
#[tokio::test]
async fn folded_sends_and_publishes_each_report_a_wake_hint() {
    let (h, direct, _) = journaled().await;
    direct.subscribe("t", "sub", "").await.expect("subscribe");
    for waited in ["q", "sub"] {
        park_once(&direct, waited).await;
    }
    h.advance(5);
    let effects = Arc::new(Effects::default());
    let transport = GroupedTransport::new(
        InProcess {
            db: h.temp.db.clone(),
        },
        Bounds::default(),
    )
    .folding(FOLDS);
    let grouped =
        Engine::new(transport, h.clock.clone(), Limits::default()).with_effects(effects.clone());
    for (name, woken) in [("q", "q"), ("t", "sub")] {
        let sends: Vec<SendRequest> = (0..4).map(|_| one(name)).collect();
        let sent = futures_util::future::join_all(sends.iter().map(|s| grouped.send(s))).await;
        assert!(sent.iter().all(Result::is_ok), "{sent:?}");
        assert_eq!(claimable(&effects), vec![(woken.to_owned(), h.now()); 4]);
    }
    // The Sends behind the first met in a batch.
    assert!(grouped.store().transport().stats().largest >= 3);
}
