//! `mqlite-dbcost`: what each RPC costs the database, from the database's
//! own answers. Starts sqld (the libSQL server behind Turso: `SQLD_BIN`), or
//! uses `LIBSQL_URL`, drives the engine natively over Hrana (the same
//! pipelines the Worker sends), and prints per RPC: executed statements
//! (BEGIN and COMMIT included), rows read and written, and the summed
//! `query_duration_ms` with and without the COMMIT (its durable flush is a
//! floor no statement design can lower). Medians over `--iterations`.
//!
//! The deep-queue rows are measured at a 1,000-message backlog and again at
//! `--backlog` (default 1,000,000), with the ratio of the claim's work.
//!
//! A pgmq conditional read is measured at a 10,000-message backlog of
//! JSON messages of which 1 in 100 matches, and where none does.
//!
//! Usage: `mqlite-dbcost [--iterations N] [--backlog N]`

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use mqlite_edge::engine::{
    Clock, Engine, Limits, OutgoingMessage, QueueConfigInput, ReceiveMode, ReceiveRequest,
    ReceivedMessage, SendRequest, SettleRequest, Waiter,
};
use mqlite_edge::store::native::HttpTransport;
use mqlite_edge::store::{HttpReply, Transport, TransportError};
use serde_json::Value;

mod sqld;
use sqld::Sqld;

/// What sqld reported for the pipelines of one RPC.
#[derive(Debug, Clone, Copy, Default)]
struct Cost {
    requests: u32,
    statements: u32,
    rows_read: u64,
    rows_written: u64,
    /// Every executed statement's `query_duration_ms`.
    total_ms: f64,
    /// The same without COMMIT.
    work_ms: f64,
}

impl std::ops::Add for Cost {
    type Output = Cost;

    /// Two RPCs' costs together (a message's or a batch's whole life).
    fn add(self, other: Cost) -> Cost {
        Cost {
            requests: self.requests + other.requests,
            statements: self.statements + other.statements,
            rows_read: self.rows_read + other.rows_read,
            rows_written: self.rows_written + other.rows_written,
            total_ms: self.total_ms + other.total_ms,
            work_ms: self.work_ms + other.work_ms,
        }
    }
}

/// A transport that adds up sqld's per-statement figures.
struct Metered {
    inner: HttpTransport,
    cost: Rc<RefCell<Cost>>,
}

impl Transport for Metered {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        let sqls: Vec<String> = serde_json::from_str::<Value>(body)
            .ok()
            .and_then(|v| {
                v["requests"][0]["batch"]["steps"].as_array().map(|steps| {
                    steps
                        .iter()
                        .map(|s| s["stmt"]["sql"].as_str().unwrap_or("").to_owned())
                        .collect()
                })
            })
            .unwrap_or_default();
        let reply = self.inner.send_pipeline(body).await?;
        let answer: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
        let result = &answer["results"][0]["response"]["result"];
        let mut cost = self.cost.borrow_mut();
        cost.requests += 1;
        let results = result["step_results"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let errors = result["step_errors"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (i, step) in results.iter().enumerate() {
            let ran = !step.is_null() || errors.get(i).is_some_and(|e| !e.is_null());
            if !ran {
                continue;
            }
            cost.statements += 1;
            if std::env::var_os("MQLITE_DBCOST_TRACE").is_some() {
                let sql = sqls.get(i).map(String::as_str).unwrap_or("");
                eprintln!(
                    "  {:>6} rd {:>5} wr {:>7.3} ms  {}",
                    step["rows_read"],
                    step["rows_written"],
                    step["query_duration_ms"].as_f64().unwrap_or(0.0),
                    sql.chars().take(90).collect::<String>().replace('\n', " ")
                );
            }
            cost.rows_read += step["rows_read"].as_u64().unwrap_or(0);
            cost.rows_written += step["rows_written"].as_u64().unwrap_or(0);
            let ms = step["query_duration_ms"].as_f64().unwrap_or(0.0);
            cost.total_ms += ms;
            if sqls.get(i).map(String::as_str) != Some("COMMIT") {
                cost.work_ms += ms;
            }
        }
        Ok(reply)
    }

    async fn pause(&self, millis: u32) {
        std::thread::sleep(Duration::from_millis(millis.into()));
    }
}

struct NoWait;

impl Waiter for NoWait {
    fn elapsed_ms(&self) -> u64 {
        u64::MAX
    }

    async fn sleep(&self, _millis: u64) {}
}

struct Bench {
    engine: Engine<Metered>,
    cost: Rc<RefCell<Cost>>,
}

impl Bench {
    /// Runs `f` and returns what it cost the database.
    fn measure<T>(&self, f: impl std::future::Future<Output = T>) -> (T, Cost) {
        *self.cost.borrow_mut() = Cost::default();
        let out = pollster::block_on(f);
        (out, *self.cost.borrow())
    }
}

fn message(body: &[u8]) -> OutgoingMessage {
    OutgoingMessage {
        body: body.to_vec(),
        ..OutgoingMessage::default()
    }
}

fn send(queue: &str, n: usize) -> SendRequest {
    SendRequest {
        queue: queue.into(),
        messages: (0..n)
            .map(|i| message(format!("m{i}").as_bytes()))
            .collect(),
        ..SendRequest::default()
    }
}

fn receive(queue: &str) -> ReceiveRequest {
    ReceiveRequest {
        queue: queue.into(),
        max_messages: 1,
        ..ReceiveRequest::default()
    }
}

fn median(mut samples: Vec<Cost>) -> Cost {
    samples.sort_by(|a, b| a.work_ms.total_cmp(&b.work_ms));
    let mut m = samples.get(samples.len() / 2).copied().unwrap_or_default();
    let mut totals: Vec<f64> = samples.iter().map(|c| c.total_ms).collect();
    totals.sort_by(f64::total_cmp);
    m.total_ms = totals.get(totals.len() / 2).copied().unwrap_or(0.0);
    m
}

/// The backlog a conditional read is measured at, and how many of its
/// messages match.
const CONDITIONAL_BACKLOG: usize = 10_000;
const CONDITIONAL_EVERY: usize = 100;

/// A pgmq read of one message with `conditional` `{"k":"hit"}` on queue
/// `cond` of [`CONDITIONAL_BACKLOG`] messages like `{"k":"miss","i":N}`,
/// every [`CONDITIONAL_EVERY`]th `{"k":"hit","i":N}`: each read walks past
/// the misses to the next hit (earlier hits are leased, off the active
/// index). Returns the medians with hits, and of reads where nothing matches
/// (`{"k":"none"}`: the walk passes the whole backlog).
fn conditional_reads(bench: &Bench, iterations: usize) -> (Cost, Cost) {
    use mqlite_edge::engine::pgmq::{PgmqOutgoing, PgmqRead, PgmqSend};
    bench
        .measure(bench.engine.pgmq_create("cond"))
        .0
        .expect("create cond");
    for chunk in (0..CONDITIONAL_BACKLOG).collect::<Vec<_>>().chunks(1000) {
        let messages = chunk
            .iter()
            .map(|i| PgmqOutgoing {
                message: if i % CONDITIONAL_EVERY == CONDITIONAL_EVERY / 2 {
                    format!(r#"{{"k":"hit","i":{i}}}"#)
                } else {
                    format!(r#"{{"k":"miss","i":{i}}}"#)
                },
                headers: None,
            })
            .collect();
        let request = PgmqSend {
            queue: "cond".into(),
            messages,
            delay: None,
        };
        bench
            .measure(bench.engine.pgmq_send(&request))
            .0
            .expect("load cond");
    }
    let read = |condition: &str| PgmqRead {
        queue: "cond".into(),
        qty: 1,
        vt_seconds: 300,
        pop: false,
        conditional: Some(condition.into()),
        max_poll_ms: 0,
        poll_interval_ms: 100,
    };
    let mut hits = vec![];
    let mut misses = vec![];
    let rounds = iterations.min(CONDITIONAL_BACKLOG / CONDITIONAL_EVERY);
    for _ in 0..rounds {
        let (got, r) = bench.measure(bench.engine.pgmq_read(&read(r#"{"k":"hit"}"#), &NoWait));
        assert_eq!(got.expect("conditional read").len(), 1, "one hit claimed");
        hits.push(r);
        let (got, r) = bench.measure(bench.engine.pgmq_read(&read(r#"{"k":"none"}"#), &NoWait));
        assert!(got.expect("conditional read").is_empty(), "nothing matches");
        misses.push(r);
    }
    (median(hits), median(misses))
}

/// The small backlog the deep-queue rows are compared against.
const SMALL_BACKLOG: usize = 1_000;

fn row(name: &str, c: Cost) {
    println!(
        "{name:<36} {:>4} {:>6} {:>9} {:>8} {:>9.3} {:>9.3}",
        c.requests, c.statements, c.rows_read, c.rows_written, c.work_ms, c.total_ms
    );
}

/// The lease of the `expiry` queue: short, so the bench waits little for
/// it to run out.
const EXPIRY_LOCK_MS: i64 = 20;

/// A Receive of one message whose housekeeping is due: one message in the
/// `expiry` queue, leased, its lease run out (by the database clock) before
/// each measured Receive, which reaps it and claims it again.
fn expired_lease(bench: &Bench, iterations: usize) -> Cost {
    bench
        .measure(bench.engine.send(&send("expiry", 1)))
        .0
        .expect("send");
    let mut costs = vec![];
    for i in 0..=iterations {
        std::thread::sleep(Duration::from_millis(EXPIRY_LOCK_MS as u64 + 10));
        let (got, r) = bench.measure(bench.engine.receive(&receive("expiry"), &NoWait));
        let (messages, _) = got.expect("receive");
        // The first only takes the lease the others reap.
        if i > 0 {
            assert_eq!(messages.len(), 1, "the expired lease is claimed again");
            costs.push(r);
        }
    }
    median(costs)
}

/// Completes a claimed message outside the figures.
fn complete_unmeasured(bench: &Bench, queue: &str, m: ReceivedMessage) {
    let request = SettleRequest {
        queue: queue.into(),
        seq_number: m.seq_number,
        lock_token: m.lock_token.unwrap_or_default(),
    };
    bench
        .measure(bench.engine.complete(&request))
        .0
        .expect("complete");
}

/// A Receive of one message under a fresh receive attempt id, in `mode`:
/// the claim and its record (docs/engine.md, "Lock tokens have no index");
/// a peek-lock claim is completed after, unmeasured, so the queue stays as
/// it was.
fn with_attempt(bench: &Bench, iterations: usize, mode: ReceiveMode) -> Cost {
    let mut costs = vec![];
    for i in 0..iterations {
        bench
            .measure(bench.engine.send(&send("cost", 1)))
            .0
            .expect("send");
        let request = ReceiveRequest {
            mode,
            attempt_id: format!("bench-{mode:?}-{i}"),
            ..receive("cost")
        };
        let (got, r) = bench.measure(bench.engine.receive(&request, &NoWait));
        let (messages, _) = got.expect("receive");
        assert_eq!(messages.len(), 1, "one message claimed");
        for m in messages.into_iter().filter(|m| m.lock_token.is_some()) {
            complete_unmeasured(bench, "cost", m);
        }
        costs.push(r);
    }
    median(costs)
}

/// The whole life of a batch of 64 on the empty `batch` queue: Send 64,
/// Receive 64, CompleteBatch of the 64. Medians of the Receive, of the
/// CompleteBatch, and of the three together.
fn batch_lives(bench: &Bench, iterations: usize) -> (Cost, Cost, Cost) {
    use mqlite_edge::engine::SettleItem;
    bench
        .measure(
            bench
                .engine
                .create_queue("batch", &QueueConfigInput::default()),
        )
        .0
        .expect("create batch");
    let (mut receives, mut completes, mut lives) = (vec![], vec![], vec![]);
    for _ in 0..iterations {
        let (sent, s) = bench.measure(bench.engine.send(&send("batch", 64)));
        sent.expect("send 64");
        let request = ReceiveRequest {
            max_messages: 64,
            ..receive("batch")
        };
        let (got, r) = bench.measure(bench.engine.receive(&request, &NoWait));
        let (messages, _) = got.expect("receive 64");
        assert_eq!(messages.len(), 64, "the batch claimed whole");
        let items: Vec<SettleItem> = messages
            .into_iter()
            .map(|m| SettleItem {
                seq_number: m.seq_number,
                lock_token: m.lock_token.unwrap_or_default(),
            })
            .collect();
        let (done, c) = bench.measure(bench.engine.complete_batch("batch", &items));
        assert!(
            done.expect("complete 64").iter().all(|r| r.ok),
            "the batch completed whole"
        );
        lives.push(s + r + c);
        receives.push(r);
        completes.push(c);
    }
    (median(receives), median(completes), median(lives))
}

fn main() {
    let mut iterations = 50usize;
    let mut backlog = 1_000_000usize;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next().and_then(|v| v.parse().ok())) {
            ("--iterations", Some(n)) => iterations = n,
            ("--backlog", Some(n)) => backlog = n,
            _ => {
                eprintln!("usage: mqlite-dbcost [--iterations N] [--backlog N]");
                std::process::exit(2);
            }
        }
    }
    let (_server, url) = match std::env::var("LIBSQL_URL") {
        Ok(url) => (None, url),
        Err(_) => match Sqld::start_from_env() {
            Ok(Some(sqld)) => {
                let url = sqld.url.clone();
                (Some(sqld), url)
            }
            Ok(None) => {
                println!(
                    "mqlite-dbcost: SKIPPED: set SQLD_BIN to sqld (e.g. from `turso dev`) or \
                     LIBSQL_URL to a libSQL server to measure database cost"
                );
                return;
            }
            Err(e) => {
                eprintln!("mqlite-dbcost: {e}");
                std::process::exit(1);
            }
        },
    };
    let cost = Rc::new(RefCell::new(Cost::default()));
    let transport = Metered {
        inner: HttpTransport::new(&url, None, Duration::from_secs(10)),
        cost: cost.clone(),
    };
    let bench = Bench {
        engine: Engine::new(transport, Clock::Database, Limits::default()),
        cost,
    };
    let create = |name: &str| {
        bench
            .measure(
                bench
                    .engine
                    .create_queue(name, &QueueConfigInput::default()),
            )
            .0
            .unwrap_or_else(|e| panic!("create {name}: {e:?}"));
    };
    create("cost");
    create("backlog");
    // Leases of 20 ms that may be taken again and again: each measured
    // Receive finds exactly one expired lease, reaps it and claims it anew.
    bench
        .measure(bench.engine.create_queue(
            "expiry",
            &QueueConfigInput {
                lock_duration_ms: EXPIRY_LOCK_MS,
                max_delivery_count: i64::from(u32::MAX),
                ..QueueConfigInput::default()
            },
        ))
        .0
        .expect("create expiry");

    println!("database cost per RPC against {url} (sqld's own figures; medians of {iterations})");
    println!(
        "{:<36} {:>4} {:>6} {:>9} {:>8} {:>9} {:>9}",
        "rpc", "reqs", "stmts", "rows rd", "rows wr", "work ms", "total ms"
    );
    let mut sends1 = vec![];
    let mut receives = vec![];
    let mut completes = vec![];
    let mut empty = vec![];
    let mut lives = vec![];
    for _ in 0..iterations {
        let (seqs, s) = bench.measure(bench.engine.send(&send("cost", 1)));
        let seq = seqs.expect("send")[0];
        let (got, r) = bench.measure(bench.engine.receive(&receive("cost"), &NoWait));
        let (messages, _) = got.expect("receive");
        let m = messages
            .iter()
            .find(|m| m.seq_number == seq)
            .expect("the message just sent");
        let (done, c) = bench.measure(bench.engine.complete(&SettleRequest {
            queue: "cost".into(),
            seq_number: m.seq_number,
            lock_token: m.lock_token.clone().unwrap_or_default(),
        }));
        done.expect("complete");
        let (_, e) = bench.measure(bench.engine.receive(&receive("cost"), &NoWait));
        lives.push(s + r + c);
        sends1.push(s);
        receives.push(r);
        completes.push(c);
        empty.push(e);
    }
    row("Send, 1 message", median(sends1));
    row("Receive, 1", median(receives));
    row("Complete", median(completes));
    row("one message's life (S+R+C)", median(lives));
    row("Receive on an empty queue", median(empty));
    let mut sends64 = vec![];
    for _ in 0..iterations {
        sends64.push(bench.measure(bench.engine.send(&send("cost", 64))).1);
    }
    row("Send, 64 messages", median(sends64));
    let (receives64, completes64, batch_lives) = batch_lives(&bench, iterations);
    row("Receive 64", receives64);
    row("CompleteBatch 64", completes64);
    row("a batch's life (S64+R64+CB64)", batch_lives);
    row(
        "Receive 1 with an expired lease due",
        expired_lease(&bench, iterations),
    );
    row(
        "Receive 1 with an attempt id",
        with_attempt(&bench, iterations, ReceiveMode::PeekLock),
    );
    row(
        "Receive-and-delete 1, attempt id",
        with_attempt(&bench, iterations, ReceiveMode::ReceiveAndDelete),
    );

    let (hits, misses) = conditional_reads(&bench, iterations);
    row(
        &format!("pgmq read, cond., 1/{CONDITIONAL_EVERY} of {CONDITIONAL_BACKLOG}"),
        hits,
    );
    row(
        &format!("pgmq read, cond., 0 of {CONDITIONAL_BACKLOG}"),
        misses,
    );

    // The queue grows through each checkpoint: Stats and a claim are
    // measured at a small backlog and again at `--backlog`, so the claim's
    // cost against its queue's depth is read off one run.
    let mut loaded = 0;
    let mut deep_at = vec![];
    let mut checkpoints = vec![SMALL_BACKLOG.min(backlog), backlog];
    checkpoints.dedup();
    for checkpoint in checkpoints {
        while loaded < checkpoint {
            let n = (checkpoint - loaded).min(1000);
            bench
                .measure(bench.engine.send(&send("backlog", n)))
                .0
                .expect("load backlog");
            loaded += n;
        }
        let mut stats = vec![];
        let mut deep = vec![];
        for _ in 0..iterations.min(20) {
            stats.push(bench.measure(bench.engine.stats("backlog")).1);
            let ((messages, _), r) = {
                let (got, r) = bench.measure(bench.engine.receive(&receive("backlog"), &NoWait));
                (got.expect("receive"), r)
            };
            deep.push(r);
            for m in messages {
                complete_unmeasured(&bench, "backlog", m);
                // Keep the backlog at its checkpoint.
                loaded -= 1;
            }
        }
        row(&format!("Stats at a {checkpoint} backlog"), median(stats));
        let deep = median(deep);
        row(&format!("Receive 1 at a {checkpoint} backlog"), deep);
        deep_at.push((checkpoint, deep.work_ms));
    }
    if let [(small, small_ms), (large, large_ms)] = deep_at[..] {
        println!(
            "Receive 1 work at a {large} backlog / at a {small} backlog: {:.2}x",
            large_ms / small_ms
        );
    }
    println!(
        "work ms = sum of query_duration_ms without COMMIT; total ms includes COMMIT's durable flush"
    );
}
