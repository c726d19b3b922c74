//! Group commit (docs/engine.md#group-commit): concurrent writes of a queue
//! share one transaction, and each answers exactly as it would alone.
//!
//! The differential test drives two brokers with the same seeded mix of
//! requests (both dialects, every ordering mode, dedup, attempt ids, dead
//! letters, TTL, settlements with right, wrong and replayed tokens): one
//! sends each round's requests one after another on the direct path, the
//! other sends them all at once through the coalescer, so they meet in
//! batches. The coalescer runs a batch's members in arrival order (on one
//! thread, the order the requests were issued), except that the Sends of a
//! batch run together where the first of them stands (they fold into one
//! statement each, docs/engine.md#folding); the direct broker runs each
//! round in that order (`batch_order`). The two brokers must give the same
//! answers (lock tokens aside) and end with the same rows.

mod support;

use std::sync::Arc;

use mqlite_edge::engine::{Clock, Engine, Limits, FOLDS};
use mqlite_edge::http::{Config, Isolate, Request, Service};
use mqlite_edge::store::group::{Bounds, GroupedTransport};
use mqlite_edge::store::{Carried, Group, HttpReply, Transport, TransportError};
use serde_json::{json, Value};
use support::{b64, query, InProcess, NoWait, TempDb, ADMIN, ADMIN_AUTH, T0};

/// A broker over its own database and manual clock.
struct Broker<T> {
    service: Service<T>,
    clock: Clock,
    temp: TempDb,
}

fn config() -> Config {
    Config::from_vars(|name| (name == "MQLITE_TOKENS").then(|| ADMIN.to_owned()))
        .expect("valid test configuration")
}

/// A broker over a fresh database and manual clock, its transport made
/// from the in-process one.
fn broker<T: Transport>(transport: impl FnOnce(InProcess) -> T) -> Broker<T> {
    broker_with(config(), transport)
}

/// [`broker`] under `config`.
fn broker_with<T: Transport>(config: Config, transport: impl FnOnce(InProcess) -> T) -> Broker<T> {
    let temp = TempDb::new();
    let clock = Clock::manual(T0);
    let transport = transport(InProcess {
        db: temp.db.clone(),
    });
    let service = Service::new(
        Ok((config, transport)),
        clock.clone(),
        Arc::new(Isolate::new(T0)),
    );
    Broker {
        service,
        clock,
        temp,
    }
}

fn direct() -> Broker<InProcess> {
    broker(|db| db)
}

/// Every grouped write through one coalescer, whatever its queue: seqs are
/// drawn from one sequence over all queues, so only one batch at a time
/// keeps the commit order the issue order across queues too.
struct OneGroup(GroupedTransport<Gated>);

impl Transport for OneGroup {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        self.0.send_pipeline(body).await
    }
    async fn send_grouped(
        &self,
        group: Group<'_>,
        body: &str,
    ) -> (Result<HttpReply, TransportError>, Carried) {
        let all = Group {
            queue: "all",
            ..group
        };
        self.0.send_grouped(all, body).await
    }
    async fn pause(&self, millis: u32) {
        self.0.pause(millis).await
    }
}

/// The in-process transport with a gate: while it is closed, a batch
/// (a pipeline with savepoints) waits at it, so the test decides exactly
/// which writes form the batch behind it.
struct Gated {
    inner: InProcess,
    closed: std::sync::atomic::AtomicBool,
    held: std::sync::atomic::AtomicUsize,
}

impl Gated {
    fn set_closed(&self, closed: bool) {
        self.closed
            .store(closed, std::sync::atomic::Ordering::SeqCst);
    }
    fn held(&self) -> usize {
        self.held.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Transport for Gated {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        use std::sync::atomic::Ordering::SeqCst;
        if body.contains("SAVEPOINT member") {
            self.held.fetch_add(1, SeqCst);
            // Bounded: a test that forgets to open it fails, not hangs.
            for _ in 0..10_000 {
                if !self.closed.load(SeqCst) {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            self.held.fetch_sub(1, SeqCst);
        }
        self.inner.send_pipeline(body).await
    }
    async fn pause(&self, millis: u32) {
        self.inner.pause(millis).await
    }
}

fn one_group() -> Broker<OneGroup> {
    one_group_with(config())
}

/// [`one_group`] under `config`.
fn one_group_with(config: Config) -> Broker<OneGroup> {
    broker_with(config, |db| {
        let gated = Gated {
            inner: db,
            closed: Default::default(),
            held: Default::default(),
        };
        OneGroup(GroupedTransport::new(gated, Bounds::default()).folding(FOLDS))
    })
}

/// Polls `future` once.
async fn poll_once<F: std::future::Future + Unpin>(future: &mut F) -> std::task::Poll<F::Output> {
    std::future::poll_fn(|cx| std::task::Poll::Ready(std::pin::Pin::new(&mut *future).poll(cx)))
        .await
}

type Answer = (u16, Value);

impl Broker<OneGroup> {
    /// Sends `writes` so that they form known batches: the gate closed,
    /// each is driven until it waits (the first at the gate, leading a
    /// batch of its own, the rest in the coalescer, in issue order) or is
    /// answered without reaching it; then the gate opens. Returns the
    /// answers and, in issue order, the writes that reached the coalescer.
    async fn send_round(&self, writes: &[Call]) -> (Vec<Answer>, Vec<usize>) {
        let grouped = &self.service.engine().expect("engine").store().transport().0;
        let entered_so_far = || grouped.inner().held() + grouped.waiting("all");
        grouped.inner().set_closed(true);
        let mut pending: Vec<_> = writes.iter().map(|c| Box::pin(self.call(c))).collect();
        let mut answers: Vec<Option<Answer>> = vec![None; writes.len()];
        let mut entered = Vec::new();
        for (i, future) in pending.iter_mut().enumerate() {
            let before = entered_so_far();
            for _ in 0..5_000 {
                if let std::task::Poll::Ready(answer) = poll_once(future).await {
                    answers[i] = Some(answer);
                    break;
                }
                if entered_so_far() > before {
                    entered.push(i);
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }
        grouped.inner().set_closed(false);
        let rest = futures_util::future::join_all(
            pending
                .into_iter()
                .zip(&answers)
                .filter(|(_, done)| done.is_none())
                .map(|(future, _)| future),
        )
        .await;
        let mut rest = rest.into_iter();
        let answers = answers
            .into_iter()
            .map(|done| done.or_else(|| rest.next()).unwrap_or((0, Value::Null)))
            .collect();
        (answers, entered)
    }
}

fn grouped(bounds: Bounds) -> Broker<GroupedTransport<InProcess>> {
    broker(|db| GroupedTransport::new(db, bounds).folding(FOLDS))
}

/// `n` one-message Sends to `queue`.
fn sends(queue: &str, n: usize) -> Vec<Call> {
    (0..n)
        .map(|i| {
            rpc(
                "QueueService/Send",
                json!({"queue": queue, "messages": [{"body": b64(&format!("b{i}"))}]}),
            )
        })
        .collect()
}

/// A queue's Stats answer.
async fn stats<T: Transport>(broker: &Broker<T>, queue: &str) -> (u16, Value) {
    broker
        .call(&rpc("QueueService/Stats", json!({"queue": queue})))
        .await
}

/// One request of the mix: method, path and JSON body.
#[derive(Debug, Clone)]
struct Call {
    method: &'static str,
    path: String,
    body: Value,
}

impl<T: Transport> Broker<T> {
    async fn call(&self, call: &Call) -> (u16, Value) {
        let request = Request {
            method: call.method.into(),
            path: call.path.clone(),
            headers: vec![
                ("Authorization".into(), ADMIN_AUTH.into()),
                ("Content-Type".into(), "application/json".into()),
            ],
        };
        let body = if call.body.is_null() {
            Vec::new()
        } else {
            call.body.to_string().into_bytes()
        };
        let response = self.service.handle(&request, body, &NoWait).await;
        let json = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
        (response.status, json)
    }

    /// Every row the broker keeps about messages, lock tokens aside.
    async fn rows(&self) -> Vec<Vec<Value>> {
        let inspect = Engine::new(
            InProcess {
                db: self.temp.db.clone(),
            },
            self.clock.clone(),
            Limits::default(),
        );
        let mut rows = query(
            &inspect,
            "SELECT id, queue, state, visible_at, expires_at, delivery_count, group_id,
               message_id, dead_letter_reason, hex(body), locked_until, lock_token IS NULL,
               headers, last_read_at
             FROM messages ORDER BY id",
        )
        .await;
        rows.extend(
            query(
                &inspect,
                "SELECT name, sent_total FROM queues ORDER BY name",
            )
            .await,
        );
        rows.extend(
            query(
                &inspect,
                "SELECT queue, id, read_ct, enqueued_at, last_read_at, vt, archived_at,
                   hex(body), headers
                 FROM archived_messages ORDER BY queue, id",
            )
            .await,
        );
        rows.extend(
            query(
                &inspect,
                "SELECT queue, dedup_key, seq_number FROM dedup ORDER BY queue, dedup_key",
            )
            .await,
        );
        rows
    }
}

/// An answer with its lock tokens replaced by their position among the
/// answer's tokens, so two brokers' answers compare.
fn masked(mut answer: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (k, v) in map.iter_mut() {
                    if k == "lock_token" {
                        *v = json!("<token>");
                    } else {
                        walk(v);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut answer);
    answer
}

/// A message a broker has received, so later settlements can name it.
#[derive(Debug, Clone)]
struct Held {
    queue: String,
    seq: i64,
    token: String,
}

/// The symbolic requests: a settlement names the n-th message received so
/// far, and each broker fills in its own token for it.
#[derive(Debug, Clone)]
enum Op {
    Plain(Call),
    Settle {
        rpc: &'static str,
        held: usize,
        wrong_token: bool,
        extra: Value,
    },
    ReceiveDeferred {
        held: usize,
    },
    /// A CompleteBatch of two held messages (the second's queue taken from
    /// the first: a message of another queue is an item that fails).
    CompleteBatch {
        held: [usize; 2],
        wrong_token: bool,
    },
}

const QUEUES: [&str; 3] = ["std", "grp", "strict"];

fn rpc(name: &str, body: Value) -> Call {
    Call {
        method: "POST",
        path: format!("/mqlite.v1.{name}"),
        body,
    }
}

fn pgmq(method: &'static str, path: &str, body: Value) -> Call {
    Call {
        method,
        path: path.into(),
        body,
    }
}

fn setup_calls() -> Vec<Call> {
    vec![
        rpc(
            "AdminService/CreateQueue",
            json!({"name": "std", "config": {"max_delivery_count": 2, "dedup_window_ms": 60000,
                   "lock_duration_ms": 5000}}),
        ),
        rpc(
            "AdminService/CreateQueue",
            json!({"name": "grp", "config": {"ordering_mode": "group_fifo", "lock_duration_ms": 5000}}),
        ),
        rpc(
            "AdminService/CreateQueue",
            json!({"name": "strict", "config": {"ordering_mode": "strict_fifo",
                   "default_ttl_ms": 20000, "lock_duration_ms": 5000}}),
        ),
        pgmq("PUT", "/v1/queues/pg", Value::Null),
    ]
}

struct Mix {
    rng: support_rng::Rng,
    next_body: u64,
    held: usize,
    /// The ids pgmq's sends to `pg` were given, oldest first.
    pg_ids: Vec<u64>,
}

impl Mix {
    /// An id for a pgmq delete: mostly one of the last few sent to `pg`
    /// (so deletes find messages, and meet on them), now and then any.
    fn pg_id(&mut self) -> u64 {
        let recent = &self.pg_ids[self.pg_ids.len().saturating_sub(8)..];
        if recent.is_empty() || self.rng.one_in(4) {
            1 + self.rng.below(12) as u64
        } else {
            *self.rng.pick(recent)
        }
    }

    fn op(&mut self) -> Op {
        let queue = *self.rng.pick(&QUEUES);
        let roll = self.rng.below(100);
        self.next_body += 1;
        let body = b64(&format!("m{}", self.next_body));
        match roll {
            0..=29 => {
                let mut message = json!({"body": body});
                if queue == "grp" && !self.rng.one_in(8) {
                    message["group_id"] = json!(format!("g{}", self.rng.below(3)));
                }
                if queue == "std" && self.rng.one_in(3) {
                    message["message_id"] = json!(format!("d{}", self.rng.below(4)));
                }
                let mut messages = vec![message];
                if self.rng.one_in(4) {
                    messages.push(json!({"body": b64("second"), "group_id": "g0"}));
                }
                Op::Plain(rpc(
                    "QueueService/Send",
                    json!({"queue": queue, "messages": messages}),
                ))
            }
            30..=49 => {
                let mut request = json!({"queue": queue, "max_messages": 1 + self.rng.below(3)});
                if self.rng.one_in(4) {
                    request["receive_attempt_id"] = json!(format!("a{}", self.rng.below(3)));
                }
                if self.rng.one_in(6) {
                    request["receive_mode"] = json!(1);
                }
                Op::Plain(rpc("QueueService/Receive", request))
            }
            50..=74 if self.held > 0 => {
                let rpc = *self.rng.pick(&[
                    "QueueService/Complete",
                    "QueueService/Complete",
                    "QueueService/Abandon",
                    "QueueService/Reject",
                    "QueueService/Defer",
                    "QueueService/Renew",
                ]);
                Op::Settle {
                    rpc,
                    held: self.rng.below(self.held),
                    wrong_token: self.rng.one_in(6),
                    extra: json!({}),
                }
            }
            75..=77 if self.held > 0 => Op::ReceiveDeferred {
                held: self.rng.below(self.held),
            },
            78..=79 if self.held > 0 => Op::CompleteBatch {
                held: [self.rng.below(self.held), self.rng.below(self.held)],
                wrong_token: self.rng.one_in(4),
            },
            80..=84 => Op::Plain(rpc(
                "QueueService/Schedule",
                json!({"queue": queue, "messages": [{"body": body, "group_id": "g1"}],
                // Now and then in the past: its guard fires inside the batch.
                "scheduled_enqueue_time_ms": if self.rng.one_in(3) {
                    T0 - 1
                } else {
                    T0 + 1_000_000_000
                }}),
            )),
            85..=89 => Op::Plain(pgmq(
                "POST",
                // A missing queue now and then: a guard that fires in the
                // batch; and mqlite's standard queue, both dialects on it.
                match self.rng.below(6) {
                    0 => "/v1/queues/nope/messages",
                    1 => "/v1/queues/std/messages",
                    _ => "/v1/queues/pg/messages",
                },
                json!({"message": {"n": self.next_body}, "headers": {"h": 1}}),
            )),
            90..=92 => {
                let queue = if self.rng.one_in(4) { "std" } else { "pg" };
                let verb = if self.rng.one_in(3) { "pop" } else { "read" };
                Op::Plain(pgmq(
                    "POST",
                    &format!("/v1/queues/{queue}/{verb}"),
                    json!({"vt": 3, "qty": 1 + self.rng.below(2)}),
                ))
            }
            // Deletes by id fold (one of a missing queue now and then: its
            // run does not, and each answers 404 alone).
            93..=96 if self.rng.one_in(2) => {
                let queue = if self.rng.one_in(6) { "nope" } else { "pg" };
                let id = self.pg_id();
                Op::Plain(pgmq(
                    "DELETE",
                    &format!("/v1/queues/{queue}/messages/{id}"),
                    Value::Null,
                ))
            }
            93..=96 => Op::Plain(pgmq(
                "POST",
                "/v1/queues/pg/messages/delete",
                json!({"msg_ids": [self.pg_id(), self.pg_id()]}),
            )),
            97 => Op::Plain(pgmq(
                "POST",
                "/v1/queues/pg/messages/archive",
                json!({"msg_ids": [self.pg_id(), self.pg_id()]}),
            )),
            _ => Op::Plain(rpc("QueueService/Stats", json!({"queue": queue}))),
        }
    }
}

/// Whether `call` was a pgmq delete or archive that removed a message
/// (one id: 204; several: the ids it removed).
fn removed_a_pgmq_message(call: &Call, answer: &(u16, Value)) -> bool {
    let by_ids = call.path.ends_with("/messages/delete") || call.path.ends_with("/archive");
    match call.method {
        "DELETE" => answer.0 == 204,
        _ if by_ids => answer.1["msg_ids"]
            .as_array()
            .is_some_and(|ids| !ids.is_empty()),
        _ => false,
    }
}

/// Whether an op reads only (and so goes to the database directly).
fn is_read(op: &Op) -> bool {
    matches!(op, Op::Plain(call) if call.path.ends_with("/Stats"))
}

/// Fills in a symbolic op against what `held` says this broker received.
fn resolve(op: &Op, held: &[Held]) -> Call {
    match op {
        Op::Plain(call) => call.clone(),
        Op::Settle {
            rpc: name,
            held: n,
            wrong_token,
            extra,
        } => {
            let h = &held[*n];
            let token = if *wrong_token {
                "0".repeat(32)
            } else {
                h.token.clone()
            };
            let mut body = json!({"queue": h.queue, "seq_number": h.seq, "lock_token": token});
            if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
                b.extend(e.clone());
            }
            rpc(name, body)
        }
        Op::CompleteBatch {
            held: [a, b],
            wrong_token,
        } => {
            let (a, b) = (&held[*a], &held[*b]);
            let token = if *wrong_token {
                "0".repeat(32)
            } else {
                b.token.clone()
            };
            rpc(
                "QueueService/CompleteBatch",
                json!({"queue": a.queue, "messages": [
                    {"seq_number": a.seq, "lock_token": a.token},
                    {"seq_number": b.seq, "lock_token": token}]}),
            )
        }
        Op::ReceiveDeferred { held: n } => {
            let h = &held[*n];
            rpc(
                "QueueService/ReceiveDeferred",
                json!({"queue": h.queue, "seq_numbers": [h.seq]}),
            )
        }
    }
}

/// Records the messages an answer handed out (with this broker's tokens).
fn remember(call: &Call, answer: &Value, held: &mut Vec<Held>) {
    let Some(queue) = call.body.get("queue").and_then(Value::as_str) else {
        return;
    };
    for m in answer["messages"].as_array().into_iter().flatten() {
        if let (Some(seq), Some(token)) = (
            m["seq_number"].as_i64(),
            m["lock_token"].as_str().filter(|t| !t.is_empty()),
        ) {
            held.push(Held {
                queue: queue.to_owned(),
                seq,
                token: token.to_owned(),
            });
        }
    }
}

mod support_rng {
    /// splitmix64: a seeded, reproducible stream (`MQLITE_GROUP_SEED`).
    pub struct Rng(u64);

    impl Rng {
        pub fn new(seed: u64) -> Rng {
            Rng(seed)
        }
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        pub fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
        pub fn one_in(&mut self, n: usize) -> bool {
            self.below(n) == 0
        }
        pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[self.below(items.len())]
        }
    }
}

/// The order the coalescer runs a round's writes in, given `entered`, the
/// writes that reached it, in issue order (`send_round`): the first leads
/// a batch of its own, the rest form one batch, in which the writes of a
/// kind that folds (docs/engine.md#folding: Sends; Completes and
/// CompleteBatches; plain peek-lock Receives; pgmq's deletes by id) run
/// together where the first of their kind stands,
/// everything else in issue order. The writes answered before reaching it
/// (refused requests) touch no row: they go first.
fn batch_order(writes: &[Call], entered: &[usize]) -> Vec<usize> {
    let kind = |i: usize| {
        let path = &writes[i].path;
        if path.ends_with(".QueueService/Send") {
            Some(0)
        } else if path.ends_with(".QueueService/Complete")
            || path.ends_with(".QueueService/CompleteBatch")
        {
            Some(1)
        } else if path.ends_with(".QueueService/Receive") && plain_receive(&writes[i].body) {
            Some(2)
        } else if pgmq_delete(&writes[i]) {
            Some(3)
        } else {
            None
        }
    };
    let mut order: Vec<usize> = (0..writes.len()).filter(|i| !entered.contains(i)).collect();
    let Some((&first, batch)) = entered.split_first() else {
        return order;
    };
    order.push(first);
    let mut placed = Vec::new();
    for &i in batch {
        match kind(i) {
            None => order.push(i),
            Some(k) if !placed.contains(&k) => {
                placed.push(k);
                order.extend(batch.iter().copied().filter(|&j| kind(j) == Some(k)));
            }
            Some(_) => {}
        }
    }
    order
}

/// A pgmq delete by id, one or a batch (not an archive): the kind that
/// folds.
fn pgmq_delete(call: &Call) -> bool {
    let path = call.path.as_str();
    path.starts_with("/v1/queues/")
        && ((call.method == "DELETE" && path.contains("/messages/"))
            || (call.method == "POST" && path.ends_with("/messages/delete")))
}

/// A peek-lock Receive without a receive attempt id that does not wait:
/// the kind of Receive that folds.
fn plain_receive(body: &Value) -> bool {
    body.get("receive_attempt_id").is_none()
        && body.get("receive_mode").is_none_or(|m| m == 0)
        && body.get("wait_time_ms").is_none_or(|w| w == 0)
}

/// Runs `rounds` rounds of up to 8 concurrent requests through both brokers
/// and compares every answer and the final rows; answers how many pgmq
/// deletes and archives found their message.
async fn differential(seed: u64, rounds: usize) -> usize {
    let alone = direct();
    let together = one_group();
    for call in setup_calls() {
        let a = alone.call(&call).await;
        let b = together.call(&call).await;
        assert_eq!(a, b, "setup {call:?}");
    }
    let mut mix = Mix {
        rng: support_rng::Rng::new(seed),
        next_body: 0,
        held: 0,
        pg_ids: Vec::new(),
    };
    let (mut held_a, mut held_b) = (Vec::new(), Vec::new());
    let mut batched = 0;
    // pgmq deletes and archives that found their message.
    let mut pg_removed = 0;
    for round in 0..rounds {
        let mut ops: Vec<Op> = (0..1 + mix.rng.below(8)).map(|_| mix.op()).collect();
        // Reads never wait for a batch: they run after the round's writes.
        let reads = ops.iter().filter(|op| is_read(op)).count();
        ops.sort_by_key(is_read);
        let calls_a: Vec<Call> = ops.iter().map(|op| resolve(op, &held_a)).collect();
        let calls_b: Vec<Call> = ops.iter().map(|op| resolve(op, &held_b)).collect();
        let writes = calls_b.len() - reads;
        let (mut answers_b, entered) = together.send_round(&calls_b[..writes]).await;
        for call in &calls_b[writes..] {
            answers_b.push(together.call(call).await);
        }
        let mut answers_a = vec![(0, Value::Null); calls_a.len()];
        let order = batch_order(&calls_a[..writes], &entered)
            .into_iter()
            .chain(writes..calls_a.len());
        for i in order {
            answers_a[i] = alone.call(&calls_a[i]).await;
        }
        for (i, (a, b)) in answers_a.iter().zip(&answers_b).enumerate() {
            assert_eq!(
                (a.0, masked(a.1.clone())),
                (b.0, masked(b.1.clone())),
                "seed {seed} round {round} request {i}: {:?}",
                calls_a[i]
            );
            remember(&calls_a[i], &a.1, &mut held_a);
            if removed_a_pgmq_message(&calls_a[i], a) {
                pg_removed += 1;
            }
            if calls_a[i].path == "/v1/queues/pg/messages" {
                // One message answers `msg_id`, a batch `msg_ids`.
                let one = a.1["msg_id"].as_u64();
                let sent = a.1["msg_ids"].as_array().into_iter().flatten();
                mix.pg_ids
                    .extend(one.into_iter().chain(sent.filter_map(Value::as_u64)));
            }
            remember(&calls_b[i], &b.1, &mut held_b);
        }
        mix.held = held_a.len();
        batched += writes.saturating_sub(1);
        // Leases, TTLs and backoffs run out between some rounds.
        let step = *mix.rng.pick(&[0, 0, 100, 1_000, 6_000, 25_000]);
        alone.clock.advance(step);
        together.clock.advance(step);
    }
    assert_eq!(
        alone.rows().await,
        together.rows().await,
        "seed {seed}: final rows"
    );
    let stats = together
        .service
        .engine()
        .expect("engine")
        .store()
        .transport()
        .0
        .stats();
    assert!(
        stats.largest > 1 && stats.members > stats.batches,
        "seed {seed}: no batch formed ({stats:?}, {batched} requests behind another)"
    );
    // Sends that met in a batch were folded (docs/engine.md#folding).
    let observed = group_commit(&together).await;
    assert!(
        observed["folded_writes"].as_u64() > Some(0),
        "seed {seed}: no Sends folded: {observed}"
    );
    pg_removed
}

fn seeds() -> Vec<u64> {
    match std::env::var("MQLITE_GROUP_SEED") {
        Ok(seed) => vec![seed.parse().expect("MQLITE_GROUP_SEED is a number")],
        Err(_) => vec![1, 2, 3, 4],
    }
}

#[tokio::test]
async fn concurrent_mixes_answer_as_they_would_alone_and_leave_the_same_rows() {
    let mut pg_removed = 0;
    for seed in seeds() {
        pg_removed += differential(seed, 50).await;
    }
    // The default seeds' mix reaches pgmq's deletes and archives of live
    // messages (one seed replayed alone may not).
    let replaying = std::env::var_os("MQLITE_GROUP_SEED").is_some();
    assert!(
        replaying || pg_removed > 0,
        "no pgmq delete or archive found its message"
    );
}

/// The mix above must actually form batches, or it proves nothing.
#[tokio::test]
async fn concurrent_writes_of_a_queue_meet_in_batches() {
    let broker = grouped(Bounds::default());
    broker.call(&setup_calls()[0]).await;
    let sends = sends("std", 8);
    let before = broker.temp.db.pipeline_requests();
    let answers = futures_util::future::join_all(sends.iter().map(|c| broker.call(c))).await;
    let seqs: Vec<i64> = answers
        .iter()
        .map(|(status, json)| {
            assert_eq!(*status, 200, "{json}");
            json["seq_numbers"][0].as_i64().expect("a seq")
        })
        .collect();
    assert_eq!(
        seqs,
        (1..=8).collect::<Vec<_>>(),
        "arrival order is commit order"
    );
    // The first went out alone at once; the other seven formed one batch.
    assert_eq!(broker.temp.db.pipeline_requests() - before, 2);
    let stats = broker
        .service
        .engine()
        .expect("engine")
        .store()
        .transport()
        .stats();
    assert_eq!((stats.batches, stats.members, stats.largest), (2, 8, 7));
    // Observe tells the same: eight writes in batches, two batches (of
    // one and of seven), counted once each.
    let observed = group_commit(&broker).await;
    assert_eq!(
        observed,
        json!({
            "direct_writes": 0,
            "lone_writes": 0,
            "batched_writes": 8,
            "folded_writes": 7,
            "batch_members": {
                "bounds": [1, 2, 4, 8, 16, 32, 64],
                "bucket_counts": [1, 1, 1, 2, 2, 2, 2],
                "count": 2,
                "sum": 8,
            },
        })
    );
}

/// What Observe reports of group commit.
async fn group_commit<T: Transport>(broker: &Broker<T>) -> Value {
    let (status, answer) = broker.call(&rpc("AdminService/Observe", json!({}))).await;
    assert_eq!(status, 200, "{answer}");
    answer["storage"]["group_commit"].clone()
}

/// Without a coalescer every write that could be grouped is counted as
/// carried directly, and no batch forms.
#[tokio::test]
async fn writes_without_a_coalescer_are_observed_as_direct() {
    let broker = direct();
    broker.call(&setup_calls()[0]).await;
    for send in sends("std", 3) {
        assert_eq!(broker.call(&send).await.0, 200);
    }
    let observed = group_commit(&broker).await;
    assert_eq!(observed["direct_writes"], 3, "{observed}");
    assert_eq!(observed["batched_writes"], 0, "{observed}");
    assert_eq!(observed["batch_members"]["count"], 0, "{observed}");
}

/// The in-process transport, recording each pipeline it sends: how many
/// statements it carries, and its size; and what each grouped write is
/// grouped on: its queue, and whether it wakes.
struct Recording {
    inner: InProcess,
    sent: std::sync::Mutex<Vec<(usize, usize)>>,
    groups: std::sync::Mutex<Vec<(String, bool)>>,
}

impl Transport for Recording {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        let pipeline: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let steps = pipeline["requests"][0]["batch"]["steps"]
            .as_array()
            .map_or(0, Vec::len);
        if let Ok(mut sent) = self.sent.lock() {
            sent.push((steps, body.len()));
        }
        self.inner.send_pipeline(body).await
    }
    async fn send_grouped(
        &self,
        group: Group<'_>,
        body: &str,
    ) -> (Result<HttpReply, TransportError>, Carried) {
        if let Ok(mut groups) = self.groups.lock() {
            groups.push((group.queue.to_owned(), group.wakes));
        }
        let sent = self.send_pipeline(body).await;
        (sent, Carried::Direct)
    }
    async fn pause(&self, millis: u32) {
        self.inner.pause(millis).await
    }
}

/// The pipeline a lone one-message Send sends on the direct path, as a
/// member of a batch counts it: its statements and its bytes.
async fn lone_send() -> (usize, usize) {
    let probe = broker(|db| Recording {
        inner: db,
        sent: Default::default(),
        groups: Default::default(),
    });
    probe.call(&setup_calls()[0]).await;
    assert_eq!(probe.call(&sends("std", 1)[0]).await.0, 200);
    let transport = probe.service.engine().expect("engine").store().transport();
    let last = transport.sent.lock().ok().and_then(|s| s.last().copied());
    last.expect("the Send's pipeline")
}

/// Eight one-message Sends to one queue at once through a coalescer with
/// `bounds`: the batches that formed (count, members, largest).
async fn eight_sends_at_once(bounds: Bounds) -> (u64, u64, u64) {
    let broker = grouped(bounds);
    broker.call(&setup_calls()[0]).await;
    let sends = sends("std", 8);
    let answers = futures_util::future::join_all(sends.iter().map(|c| broker.call(c))).await;
    assert!(answers.iter().all(|a| a.0 == 200), "{answers:?}");
    let stats = broker
        .service
        .engine()
        .expect("engine")
        .store()
        .transport()
        .stats();
    (stats.batches, stats.members, stats.largest)
}

/// A batch stops at its statement bound: with room for exactly two
/// one-message Sends, seven Sends waiting behind a lone one go as 2, 2, 2, 1.
#[tokio::test]
async fn batches_respect_their_statement_bound() {
    // The bound counts 3 per batch (its clock included) and, per member,
    // its own steps plus 2 (docs/engine.md#group-commit: SAVEPOINT …
    // RELEASE, ROLLBACK TO, RELEASE).
    let (statements, _) = lone_send().await;
    let member = statements + 2;
    let bounds = Bounds {
        statements: 3 + 2 * member,
        ..Bounds::default()
    };
    assert_eq!(eight_sends_at_once(bounds).await, (5, 8, 2));
}

/// A batch stops at its byte bound: with room for two and a half
/// one-message Sends, seven waiting behind a lone one go as 2, 2, 2, 1.
#[tokio::test]
async fn batches_respect_their_byte_bound() {
    let (_, bytes) = lone_send().await;
    let bounds = Bounds {
        bytes: bytes * 5 / 2,
        ..Bounds::default()
    };
    assert_eq!(eight_sends_at_once(bounds).await, (5, 8, 2));
}

/// A write over `MEMBER_MAX_BYTES` (a Send near the request cap) goes to
/// the database on its own, counted as direct; one under it is batched.
#[tokio::test]
async fn a_member_over_the_size_limit_goes_alone() {
    let broker = grouped(Bounds::default());
    broker.call(&setup_calls()[0]).await;
    // Its pipeline carries the body as base64: a third larger still.
    let big = "x".repeat(mqlite_edge::store::group::MEMBER_MAX_BYTES);
    let send = rpc(
        "QueueService/Send",
        json!({"queue": "std", "messages": [{"body": b64(&big)}]}),
    );
    let (status, answer) = broker.call(&send).await;
    assert_eq!(status, 200, "{answer}");
    let observed = group_commit(&broker).await;
    assert_eq!(observed["direct_writes"], 1, "{observed}");
    assert_eq!(observed["batched_writes"], 0, "{observed}");
    assert_eq!(broker.call(&sends("std", 1)[0]).await.0, 200);
    let observed = group_commit(&broker).await;
    assert_eq!(observed["batched_writes"], 1, "{observed}");
}

/// One member's guard rolls back only its own savepoint: the others in the
/// batch commit, and it answers as it would alone.
#[tokio::test]
async fn a_rejected_member_rolls_back_alone() {
    let broker = grouped(Bounds::default());
    broker.call(&setup_calls()[1]).await;
    let calls = [
        rpc(
            "QueueService/Send",
            json!({"queue": "grp", "messages": [{"body": b64("first"), "group_id": "g"}]}),
        ),
        rpc(
            "QueueService/Send",
            json!({"queue": "grp", "messages": [{"body": b64("a"), "group_id": "g"}]}),
        ),
        // No group id on a group_fifo queue: 400 group_required.
        rpc(
            "QueueService/Send",
            json!({"queue": "grp", "messages": [{"body": b64("b")}]}),
        ),
        rpc(
            "QueueService/Send",
            json!({"queue": "missing", "messages": [{"body": b64("c")}]}),
        ),
        rpc(
            "QueueService/Send",
            json!({"queue": "grp", "messages": [{"body": b64("d"), "group_id": "g"}]}),
        ),
    ];
    let answers = futures_util::future::join_all(calls.iter().map(|c| broker.call(c))).await;
    let statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
    assert_eq!(statuses, vec![200, 200, 400, 404, 200], "{answers:?}");
    assert_eq!(answers[2].1["code"], "group_required");
    assert_eq!(answers[1].1["seq_numbers"], json!([2]));
    assert_eq!(answers[4].1["seq_numbers"], json!([3]));
    let stats = stats(&broker, "grp").await;
    assert_eq!(stats.1["active"], 3, "{stats:?}");
}

/// A batch whose answer is lost makes each of its writes `outcome_unknown`;
/// none gets another's answer.
#[tokio::test]
async fn a_lost_batch_answer_is_outcome_unknown_for_every_member() {
    struct LosesBatches(InProcess);
    impl Transport for LosesBatches {
        async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
            let reply = self.0.send_pipeline(body).await;
            if body.contains("SAVEPOINT member") {
                return Err(TransportError::AnswerLost("cut for the test".into()));
            }
            reply
        }
        async fn pause(&self, _millis: u32) {}
    }
    let broker = broker(|db| GroupedTransport::new(LosesBatches(db), Bounds::default()));
    broker.call(&setup_calls()[0]).await;
    let sends = sends("std", 3);
    let answers = futures_util::future::join_all(sends.iter().map(|c| broker.call(c))).await;
    for (status, json) in &answers {
        assert_eq!(
            (*status, json["code"].as_str()),
            (503, Some("outcome_unknown")),
            "{json}"
        );
    }
    // They did commit (the answer was lost after the commit).
    let stats = stats(&broker, "std").await;
    assert_eq!(stats.1["active"], 3, "{stats:?}");
}

/// The bounds cut batches: with at most 2 members, 7 waiting writes go out
/// as 4 batches after the first.
#[tokio::test]
async fn batches_respect_their_member_bound() {
    let bounds = Bounds {
        members: 2,
        ..Bounds::default()
    };
    assert_eq!(eight_sends_at_once(bounds).await, (5, 8, 2));
}

/// Sends that meet in a batch are folded (docs/engine.md#folding): the
/// seven behind a lone one are written by one savepoint of four statements
/// (schema check, insert, outcomes with seqs per member, sent count), not
/// seven savepoints of theirs, and each gets its own seqs in arrival order.
#[tokio::test]
async fn sends_that_meet_are_folded_into_one_statement_each() {
    let broker = broker(|db| {
        GroupedTransport::new(
            Recording {
                inner: db,
                sent: Default::default(),
                groups: Default::default(),
            },
            Bounds::default(),
        )
        .folding(FOLDS)
    });
    broker.call(&setup_calls()[0]).await;
    let sends = sends("std", 8);
    let answers = futures_util::future::join_all(sends.iter().map(|c| broker.call(c))).await;
    let seqs: Vec<Value> = answers
        .iter()
        .map(|(status, json)| {
            assert_eq!(*status, 200, "{json}");
            json["seq_numbers"].clone()
        })
        .collect();
    assert_eq!(seqs, (1..=8).map(|s| json!([s])).collect::<Vec<_>>());
    let transport = broker.service.engine().expect("engine").store().transport();
    let sent = transport.inner().sent.lock().expect("sent").clone();
    let steps: Vec<usize> = sent.iter().rev().take(2).map(|(steps, _)| *steps).collect();
    // BEGIN, SAVEPOINT, four statements, RELEASE, ROLLBACK TO, RELEASE,
    // the clock (Sends wake), COMMIT, ROLLBACK; before it, the lone Send in
    // a savepoint of its own (its seven steps and five).
    assert_eq!(steps, [12, 12], "{sent:?}");
}

/// Dedup across the members of a folded run answers as one after another:
/// a key seen earlier in the run is a duplicate (same body) or a conflict
/// (another body), a key's first admitted copy is written, a member that
/// fails its own check (a missing group id) writes nothing and leaves the
/// key to the next.
#[tokio::test]
async fn dedup_across_folded_members_answers_as_one_after_another() {
    let send = |queue: &str, id: &str, body: &str| {
        rpc(
            "QueueService/Send",
            json!({"queue": queue, "messages": [{"body": b64(body), "message_id": id}]}),
        )
    };
    let lead = send("std", "k0", "lead");
    let calls = [
        send("std", "k1", "x"),
        send("std", "k1", "x"),
        send("std", "k1", "y"),
        send("std", "k0", "lead"),
        send("nope", "k2", "z"),
        send("std", "k2", "z"),
        rpc(
            "QueueService/Send",
            json!({"queue": "std", "messages": [
                {"body": b64("w"), "message_id": "k3"},
                {"body": b64("w"), "message_id": "k3"},
                {"body": b64("v"), "message_id": "k4"}]}),
        ),
    ];
    let alone = direct();
    // One coalescer for every queue: the missing queue's Send meets the
    // others in the run.
    let together = one_group();
    assert_eq!(alone.call(&setup_calls()[0]).await.0, 200);
    assert_eq!(together.call(&setup_calls()[0]).await.0, 200);
    assert_eq!(alone.call(&lead).await, together.call(&lead).await);
    let mut expected = Vec::new();
    for call in &calls {
        expected.push(alone.call(call).await);
    }
    let answers = futures_util::future::join_all(calls.iter().map(|c| together.call(c))).await;
    assert_eq!(answers, expected);
    // The first went alone; the six behind it, the missing queue's
    // included, were one run.
    assert_eq!(
        group_commit(&together).await["folded_writes"],
        calls.len() - 1
    );
    assert_eq!(alone.rows().await, together.rows().await);
}

/// Six messages sent to `std` and received, with this broker's tokens.
async fn six_received<T: Transport>(broker: &Broker<T>) -> Vec<Held> {
    assert_eq!(broker.call(&setup_calls()[0]).await.0, 200);
    for call in sends("std", 6) {
        assert_eq!(broker.call(&call).await.0, 200);
    }
    let receive = rpc(
        "QueueService/Receive",
        json!({"queue": "std", "max_messages": 6}),
    );
    let (status, answer) = broker.call(&receive).await;
    assert_eq!(status, 200, "{answer}");
    let mut held = Vec::new();
    remember(&receive, &answer, &mut held);
    assert_eq!(held.len(), 6, "{answer}");
    held
}

/// Completes that meet in a batch fold too (docs/engine.md#folding), and
/// each answers as it would have one after another: a right token, a wrong
/// one, the same message and token twice (the second a replay of the
/// first's receipt), a message already completed (a replay too), a
/// CompleteBatch with items of each kind; the rows and receipts end alike,
/// and each deleted row is counted once.
#[tokio::test]
async fn completes_that_meet_fold_and_answer_as_one_after_another() {
    let alone = direct();
    let together = one_group();
    let held = [six_received(&alone).await, six_received(&together).await];
    let complete = |h: &Held| {
        rpc(
            "QueueService/Complete",
            json!({"queue": "std", "seq_number": h.seq, "lock_token": h.token}),
        )
    };
    let round = |held: &[Held]| {
        let wrong = json!({"queue": "std", "seq_number": held[1].seq,
                           "lock_token": "0".repeat(32)});
        vec![
            complete(&held[0]),
            complete(&held[1]),
            rpc("QueueService/Complete", wrong),
            complete(&held[2]),
            complete(&held[2]),
            complete(&held[0]),
            rpc(
                "QueueService/CompleteBatch",
                json!({"queue": "std", "messages": [
                    {"seq_number": held[3].seq, "lock_token": held[3].token},
                    {"seq_number": held[4].seq, "lock_token": "0".repeat(32)},
                    {"seq_number": held[2].seq, "lock_token": held[2].token}]}),
            ),
        ]
    };
    let (calls_a, calls_b) = (round(&held[0]), round(&held[1]));
    let mut expected = Vec::new();
    for call in &calls_a {
        expected.push(alone.call(call).await);
    }
    let (answers, entered) = together.send_round(&calls_b).await;
    assert_eq!(
        entered.len(),
        calls_b.len(),
        "every Complete reached the coalescer: {entered:?} {answers:?}"
    );
    assert_eq!(answers, expected);
    assert_eq!(alone.rows().await, together.rows().await);
    // The first led alone; the six behind it were one run.
    let observed = group_commit(&together).await;
    assert_eq!(observed["folded_writes"], 6, "{observed}");
    // Each deleted row counted once: three Completes and one batch item
    // took effect.
    let (_, stats) = stats(&together, "std").await;
    assert_eq!(stats["total"], 2, "{stats}");
}

/// pgmq's deletes by id that meet in a batch fold too
/// (docs/engine.md#folding), and each answers as it would have one after
/// another: an id deleted twice (the second finds it gone: 404), a batch
/// naming an id an earlier member deleted and one of its own, an id that
/// was never sent; the rows end alike.
#[tokio::test]
async fn pgmq_deletes_that_meet_fold_and_answer_as_one_after_another() {
    let alone = direct();
    let together = one_group();
    let sends = std::iter::once(setup_calls()[3].clone()).chain((0..6).map(|n| {
        pgmq(
            "POST",
            "/v1/queues/pg/messages",
            json!({"message": {"n": n}}),
        )
    }));
    for call in sends {
        assert_eq!(alone.call(&call).await.0, 201, "{call:?}");
        assert_eq!(together.call(&call).await.0, 201, "{call:?}");
    }
    let delete = |id: u32| {
        pgmq(
            "DELETE",
            &format!("/v1/queues/pg/messages/{id}"),
            Value::Null,
        )
    };
    let batch = |ids: &[u32]| {
        pgmq(
            "POST",
            "/v1/queues/pg/messages/delete",
            json!({"msg_ids": ids}),
        )
    };
    let round = vec![
        delete(1),
        delete(2),
        delete(2),
        batch(&[3, 2, 4]),
        delete(4),
        delete(99),
        batch(&[5, 5]),
    ];
    let mut expected = Vec::new();
    for call in &round {
        expected.push(alone.call(call).await);
    }
    let (answers, entered) = together.send_round(&round).await;
    assert_eq!(
        entered.len(),
        round.len(),
        "every delete reached the coalescer: {entered:?}"
    );
    assert_eq!(answers, expected);
    assert_eq!(expected[2].0, 404, "{expected:?}");
    assert_eq!(alone.rows().await, together.rows().await);
    // The first led alone; the six behind it were one run.
    let observed = group_commit(&together).await;
    assert_eq!(observed["folded_writes"], 6, "{observed}");
}

/// Plain peek-lock Receives that meet fold too (docs/engine.md#folding):
/// one walk deals the queue's messages out member after member, each up to
/// its own `max_messages` and body budget (here 5 bytes, so a member stops
/// after two or three bodies), exactly as they would have claimed one after
/// another, in every ordering mode: a picked group is done for later
/// members, a strict queue hands out one message. A Receive with an
/// attempt id or in receive-and-delete mode keeps a savepoint of its own.
#[tokio::test]
async fn receives_that_meet_fold_and_answer_as_one_after_another() {
    let mut limited = config();
    limited.limits.response_budget_bytes = 5;
    for queue in QUEUES {
        let alone = broker_with(limited.clone(), |db| db);
        let together = one_group_with(limited.clone());
        let sends: Vec<Call> = (0..14)
            .map(|i| {
                let mut message = json!({"body": b64(&format!("m{i}"))});
                if queue != "std" && i % 4 != 3 {
                    message["group_id"] = json!(format!("g{}", i % 6));
                }
                rpc(
                    "QueueService/Send",
                    json!({"queue": queue, "messages": [message]}),
                )
            })
            .collect();
        for call in setup_calls().iter().chain(&sends) {
            assert_eq!(
                alone.call(call).await,
                together.call(call).await,
                "{call:?}"
            );
        }
        let receive = |max: usize| {
            rpc(
                "QueueService/Receive",
                json!({"queue": queue, "max_messages": max}),
            )
        };
        let with_attempt = rpc(
            "QueueService/Receive",
            json!({"queue": queue, "max_messages": 2, "receive_attempt_id": "a"}),
        );
        // The leader, alone: a Receive of a missing queue (404 on both).
        let missing = rpc(
            "QueueService/Receive",
            json!({"queue": "nope", "max_messages": 1}),
        );
        let round = vec![
            missing,
            receive(3),
            receive(1),
            with_attempt,
            receive(2),
            receive(4),
            receive(1),
            receive(3),
        ];
        let (answers, entered) = together.send_round(&round).await;
        assert_eq!(entered.len(), round.len(), "{queue}: {answers:?}");
        let mut expected = vec![(0, Value::Null); round.len()];
        for i in batch_order(&round, &entered) {
            expected[i] = alone.call(&round[i]).await;
        }
        let masked_all = |answers: &[Answer]| -> Vec<Answer> {
            answers
                .iter()
                .map(|(status, json)| (*status, masked(json.clone())))
                .collect()
        };
        assert_eq!(masked_all(&answers), masked_all(&expected), "{queue}");
        let claimed: usize = answers
            .iter()
            .map(|(_, a)| a["messages"].as_array().map_or(0, Vec::len))
            .sum();
        // A strict queue hands out one message at a time.
        let least = if queue == "strict" { 1 } else { 6 };
        assert!(claimed >= least, "{queue}: {answers:?}");
        assert_eq!(alone.rows().await, together.rows().await, "{queue}");
        // The missing queue's led alone; the six plain Receives behind it
        // were one run, the one with an attempt id its own savepoint.
        let observed = group_commit(&together).await;
        assert_eq!(observed["folded_writes"], 6, "{queue}: {observed}");
        // Every lease is its own draw's: no two alike, and each token
        // settles its message.
        let mut held = Vec::new();
        for (call, (_, answer)) in round.iter().zip(&answers) {
            remember(call, answer, &mut held);
        }
        let tokens: std::collections::BTreeSet<&str> =
            held.iter().map(|h| h.token.as_str()).collect();
        assert_eq!(tokens.len(), held.len(), "{queue}: {held:?}");
        for h in &held {
            let complete = rpc(
                "QueueService/Complete",
                json!({"queue": h.queue, "seq_number": h.seq, "lock_token": h.token}),
            );
            assert_eq!(together.call(&complete).await.0, 200, "{queue}: {h:?}");
        }
    }
}

/// Publishes fold like Sends (docs/engine.md#folding): each member carries
/// its topic's fingerprint, and a member routed with a stale view writes
/// nothing and retries with the current one, as alone. A topic of two
/// subscriptions (one filtered, one with a dedup window), published to
/// with a cold view, then again while a message id repeats.
#[tokio::test]
async fn publishes_that_meet_fold_and_answer_as_one_after_another() {
    let setup = [
        rpc(
            "AdminService/CreateQueue",
            json!({"name": "all", "config": {"kind": "subscription", "dedup_window_ms": 60000}}),
        ),
        rpc(
            "AdminService/CreateQueue",
            json!({"name": "red", "config": {"kind": "subscription"}}),
        ),
        rpc(
            "AdminService/Subscribe",
            json!({"topic": "news", "name": "all"}),
        ),
        rpc(
            "AdminService/Subscribe",
            json!({"topic": "news", "name": "red", "filter": {"expr": "subject == \"red\""}}),
        ),
    ];
    let alone = direct();
    let together = one_group();
    for call in &setup {
        assert_eq!(
            alone.call(call).await,
            together.call(call).await,
            "{call:?}"
        );
    }
    let publish = |subject: &str, id: &str, body: &str| {
        rpc(
            "QueueService/Send",
            json!({"queue": "news", "messages": [
                {"body": b64(body), "subject": subject, "message_id": id}]}),
        )
    };
    let rounds = [
        vec![
            publish("red", "p1", "one"),
            publish("blue", "p2", "two"),
            publish("red", "p3", "three"),
        ],
        vec![
            publish("red", "p4", "four"),
            publish("red", "p4", "four"),
            publish("blue", "p1", "other"),
            publish("blue", "p5", "five"),
        ],
    ];
    for calls in &rounds {
        let mut expected = Vec::new();
        for call in calls {
            expected.push(alone.call(call).await);
        }
        let (answers, entered) = together.send_round(calls).await;
        assert_eq!(entered.len(), calls.len());
        assert_eq!(answers, expected);
    }
    assert_eq!(alone.rows().await, together.rows().await);
    let observed = group_commit(&together).await;
    assert!(observed["folded_writes"].as_u64() >= Some(5), "{observed}");
}

/// The writes whose commit can make messages claimable (a Send, a pgmq
/// send, an Abandon) ask their carrier to wake the queue's waiters
/// (docs/semantics.md#long-polling); a scheduled or delayed send, a
/// Complete, a Reject, a Renew and a claim do not.
#[tokio::test]
async fn sends_and_abandons_wake_their_queue_and_nothing_else_does() {
    let broker = broker(|db| Recording {
        inner: db,
        sent: Default::default(),
        groups: Default::default(),
    });
    let mut held = six_received(&broker).await;
    assert_eq!(broker.call(&setup_calls()[3]).await.0, 201, "pgmq's queue");
    let seen = || {
        let transport = broker.service.engine().expect("engine").store().transport();
        let seen = transport.groups.lock().map(|mut s| std::mem::take(&mut *s));
        seen.unwrap_or_default()
    };
    let wakes = |queue: &str| vec![(queue.to_owned(), true)];
    let quiet = |queue: &str| vec![(queue.to_owned(), false)];
    // Six Sends (each wakes), then the Receive that claimed them.
    let mut expected: Vec<(String, bool)> = (0..6).map(|_| ("std".to_owned(), true)).collect();
    expected.push(("std".to_owned(), false));
    assert_eq!(seen(), expected);
    let settle = |name: &str, held: &Held, extra: Value| {
        let mut body =
            json!({"queue": held.queue, "seq_number": held.seq, "lock_token": held.token});
        if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
            body.extend(extra);
        }
        rpc(&format!("QueueService/{name}"), body)
    };
    let calls = [
        (settle("Complete", &held.remove(0), json!({})), quiet("std")),
        (settle("Abandon", &held.remove(0), json!({})), wakes("std")),
        (settle("Reject", &held.remove(0), json!({})), quiet("std")),
        (settle("Renew", &held.remove(0), json!({})), quiet("std")),
        (
            rpc(
                "QueueService/Send",
                json!({"queue": "std", "messages": [{"body": b64("later")}],
                       "scheduled_enqueue_time_ms": 4_102_444_800_000_i64}),
            ),
            quiet("std"),
        ),
        (
            pgmq(
                "POST",
                "/v1/queues/pg/messages",
                json!({"message": {"n": 1}}),
            ),
            wakes("pg"),
        ),
        (
            pgmq(
                "POST",
                "/v1/queues/pg/messages",
                json!({"message": {"n": 2}, "delay": 30}),
            ),
            quiet("pg"),
        ),
    ];
    for (call, grouped) in calls {
        let (status, answer) = broker.call(&call).await;
        assert!(status == 200 || status == 201, "{call:?}: {answer}");
        assert_eq!(seen(), grouped, "{call:?}");
    }
}
