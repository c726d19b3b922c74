//! Fault injection through workerd (issue 9 item 7):
//!
//! * `database_killed_and_restarted_under_load`: the database server (the
//!   local one, or sqld when `MQLITE_E2E_SQLD` names it) is SIGKILLed and
//!   restarted on the same data and port while senders and receivers run.
//!   Every acknowledged message is delivered and completed afterwards, none
//!   is delivered twice within a live lease, no message id gets two seqs,
//!   every failure is a 503 `outcome_unknown` or `unavailable`, and the
//!   isolate serves on.
//! * `slow_and_cut_answers_through_a_fault_proxy`: a proxy between the
//!   Worker and the database holds answers past the fetch timeout, stalls or
//!   cuts them mid-body, or replaces them with 500/502/522. Writes are
//!   `503 outcome_unknown` (they did commit), reads are retried, and a Send
//!   retried with its message id, or a Receive whose answer was lost,
//!   delivers nothing twice.
//! * `one_of_three_databases_killed_under_load`: the Worker spans three
//!   databases (`MQLITE_DATABASES`, docs/databases.md); one that holds
//!   queues is SIGKILLed while senders write to every queue. Only that
//!   database's queues fail (503), the others answer every write; after a
//!   restart every acknowledged message of every queue is delivered, none
//!   under two seqs.
//!
//! Seeded (`MQLITE_FAULTS_SEED`) and bounded in time; prints its figures.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mqlite_e2e::proxy::{Fault, FaultProxy};
use mqlite_e2e::rng::Rng;
use mqlite_e2e::{b64, Database, Reply, Stack, StackOptions, Tools};
use serde_json::{json, Value};

macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

type Scenario = fn(&Tools, u64) -> Result<String, String>;

fn main() {
    let tools = match Tools::from_env() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("faults: {e}");
            std::process::exit(1);
        }
    };
    let seed = Rng::seed_from_env("MQLITE_FAULTS_SEED");
    println!(
        "faults: database is {}; seed {seed} (replay with MQLITE_FAULTS_SEED={seed})",
        tools.database_name()
    );
    let scenarios: &[(&str, Scenario)] = &[
        (
            "database_killed_and_restarted_under_load",
            killed_and_restarted,
        ),
        ("slow_and_cut_answers_through_a_fault_proxy", slow_and_cut),
        (
            "one_of_three_databases_killed_under_load",
            one_of_three_killed,
        ),
    ];
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut failed = 0;
    for (name, scenario) in scenarios {
        if !only.is_empty() && !only.iter().any(|w| name.contains(w.as_str())) {
            continue;
        }
        let started = Instant::now();
        match scenario(&tools, seed) {
            Ok(figures) => println!(
                "test {name} ... ok ({} ms)\n    {figures}",
                started.elapsed().as_millis()
            ),
            Err(e) => {
                failed += 1;
                println!("test {name} ... FAILED (seed {seed})\n    {e}");
            }
        }
    }
    if failed > 0 {
        std::process::exit(1);
    }
}

/// Codes a failure may carry while the database is down or faulty: the
/// write may have applied, or nothing applied. Never `internal`: a database
/// that cannot be reached is not a broken request.
const FAULT_CODES: [&str; 2] = ["outcome_unknown", "unavailable"];

/// A non-200 answer must be a 503 contract envelope with a fault code.
fn clear_failure(reply: &Reply) -> Result<String, String> {
    let body = reply.json();
    let code = body["code"].as_str().unwrap_or("");
    if reply.status == 503 && body["message"].is_string() && FAULT_CODES.contains(&code) {
        Ok(code.to_owned())
    } else {
        Err(format!("not a clear 5xx: {} {}", reply.status, reply.text))
    }
}

const KILL_QUEUE: &str = "killed";
const KILL_LOCK_MS: i64 = 4_000;
const SENDERS: usize = 3;
const RECEIVERS: usize = 3;
const SEND_BATCH: usize = 5;
/// Senders start batches for this long; the database is down in between.
const SEND_FOR: Duration = Duration::from_secs(8);
const KILL_AT: Duration = Duration::from_millis(2_500);
const RESTART_AT: Duration = Duration::from_millis(4_500);
const KILL_DEADLINE: Duration = Duration::from_secs(120);

#[derive(Default)]
struct Ledger {
    /// Acknowledged sends: seq → message id.
    acknowledged: HashMap<i64, String>,
    /// Every delivery of a seq: (lease deadline, message id).
    deliveries: HashMap<i64, Vec<(i64, String)>>,
    completed: HashSet<i64>,
    /// Failures by code; anything unclear is kept verbatim.
    failures: BTreeMap<String, u64>,
    unclear: Vec<String>,
}

struct Run {
    stack: Stack,
    ledger: Mutex<Ledger>,
    sending_done: AtomicBool,
    done: AtomicBool,
    started: Instant,
}

impl Run {
    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn call(&self, rpc: &str, body: &Value) -> Reply {
        let reply = self.stack.rpc(rpc, body);
        if reply.status != 200 {
            let mut ledger = self.ledger();
            match clear_failure(&reply) {
                Ok(code) => *ledger.failures.entry(code).or_default() += 1,
                Err(e) => ledger.unclear.push(format!("{rpc}: {e}")),
            }
        }
        reply
    }

    fn out_of_time(&self) -> bool {
        self.started.elapsed() > KILL_DEADLINE
    }

    /// Sends batches until [`SEND_FOR`]; a failed batch is sent again with
    /// the same message ids (the dedup window answers the original seqs)
    /// until it is acknowledged.
    fn send(&self, sender: usize, rng: &mut Rng) {
        let mut n = 0;
        while self.started.elapsed() < SEND_FOR {
            let size = 1 + rng.below(SEND_BATCH);
            let ids: Vec<String> = (n..n + size).map(|i| format!("s{sender}-{i}")).collect();
            n += size;
            let messages: Vec<Value> = ids
                .iter()
                .map(|id| json!({"body": b64(id), "message_id": id}))
                .collect();
            let body = json!({"queue": KILL_QUEUE, "messages": messages});
            while !self.out_of_time() {
                let reply = self.call("QueueService/Send", &body);
                if reply.status == 200 {
                    let seqs = reply.json()["seq_numbers"].clone();
                    let mut ledger = self.ledger();
                    for (i, id) in ids.iter().enumerate() {
                        if let Some(seq) = seqs[i].as_i64() {
                            ledger.acknowledged.insert(seq, id.clone());
                        }
                    }
                    break;
                }
                std::thread::sleep(Duration::from_millis(100 + rng.below(200) as u64));
            }
        }
    }

    fn receive(&self) {
        while !self.done.load(Ordering::SeqCst) && !self.out_of_time() {
            let reply = self.call(
                "QueueService/Receive",
                &json!({"queue": KILL_QUEUE, "max_messages": 8, "wait_time_ms": 500}),
            );
            if reply.status != 200 {
                std::thread::sleep(Duration::from_millis(150));
                continue;
            }
            let messages = reply.json()["messages"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let mut items = Vec::new();
            {
                let mut ledger = self.ledger();
                for m in &messages {
                    let seq = m["seq_number"].as_i64().unwrap_or(0);
                    let id = m["message_id"].as_str().unwrap_or("").to_owned();
                    let until = m["locked_until_ms"].as_i64().unwrap_or(0);
                    ledger.deliveries.entry(seq).or_default().push((until, id));
                    items.push(json!({"seq_number": seq, "lock_token": m["lock_token"]}));
                }
            }
            if !items.is_empty() {
                let body = json!({"queue": KILL_QUEUE, "messages": items});
                // A failed CompleteBatch is sent again as it was: an exact
                // replay is answered from receipts, so one whose answer was
                // lost reports what it did and nothing completes twice. An
                // item that is not ok (its lease ran out meanwhile) is
                // redelivered.
                while !self.out_of_time() {
                    let reply = self.call("QueueService/CompleteBatch", &body);
                    if reply.status != 200 {
                        std::thread::sleep(Duration::from_millis(150));
                        continue;
                    }
                    let results = reply.json()["results"].as_array().cloned();
                    let mut ledger = self.ledger();
                    for (item, result) in items.iter().zip(results.iter().flatten()) {
                        if result["ok"] == true {
                            ledger
                                .completed
                                .insert(item["seq_number"].as_i64().unwrap_or(0));
                        }
                    }
                    break;
                }
            }
            if self.sending_done.load(Ordering::SeqCst) {
                let ledger = self.ledger();
                if ledger
                    .acknowledged
                    .keys()
                    .all(|s| ledger.completed.contains(s))
                {
                    self.done.store(true, Ordering::SeqCst);
                }
            }
        }
    }
}

fn killed_and_restarted(tools: &Tools, seed: u64) -> Result<String, String> {
    let mut database = Database::start(tools)?;
    let stack = Stack::start(
        tools,
        StackOptions {
            vars: &[("MQLITE_DB_TIMEOUT_MS", "2000")],
            database_url: Some(database.url.clone()),
        },
    )?;
    let created = stack.rpc(
        "AdminService/CreateQueue",
        &json!({"name": KILL_QUEUE, "config": {"lock_duration_ms": KILL_LOCK_MS,
                "dedup_window_ms": 600_000}}),
    );
    check!(created.status == 200, "CreateQueue: {created:?}");
    let run = Arc::new(Run {
        stack,
        ledger: Mutex::default(),
        sending_done: AtomicBool::new(false),
        done: AtomicBool::new(false),
        started: Instant::now(),
    });
    let senders: Vec<_> = (0..SENDERS)
        .map(|i| {
            let run = run.clone();
            let mut rng = Rng::new(seed.wrapping_add(i as u64));
            std::thread::spawn(move || run.send(i, &mut rng))
        })
        .collect();
    let receivers: Vec<_> = (0..RECEIVERS)
        .map(|_| {
            let run = run.clone();
            std::thread::spawn(move || run.receive())
        })
        .collect();
    std::thread::sleep(KILL_AT);
    database.kill();
    let killed_at = run.started.elapsed();
    std::thread::sleep(RESTART_AT.saturating_sub(run.started.elapsed()));
    database.restart()?;
    let restarted_at = run.started.elapsed();
    for s in senders {
        s.join().map_err(|_| "a sender panicked")?;
    }
    run.sending_done.store(true, Ordering::SeqCst);
    for r in receivers {
        r.join().map_err(|_| "a receiver panicked")?;
    }
    // The isolate serves after the restart: a write and a read succeed.
    let after = run.stack.rpc(
        "QueueService/Send",
        &json!({"queue": KILL_QUEUE, "messages": [{"body": b64("after")}]}),
    );
    let stats = run
        .stack
        .rpc("QueueService/Stats", &json!({"queue": KILL_QUEUE}));
    let ledger = run.ledger();
    let delivered = ledger
        .acknowledged
        .keys()
        .filter(|s| ledger.deliveries.contains_key(s))
        .count();
    let lost = ledger.acknowledged.len() - delivered;
    let uncompleted: Vec<_> = ledger
        .acknowledged
        .keys()
        .filter(|s| !ledger.completed.contains(s))
        .take(5)
        .collect();
    let overlapping: Vec<_> = ledger
        .deliveries
        .iter()
        .filter(|(_, d)| d.windows(2).any(|w| w[1].0 - KILL_LOCK_MS < w[0].0))
        .map(|(s, _)| *s)
        .take(5)
        .collect();
    let mut seqs_per_id: HashMap<&str, HashSet<i64>> = HashMap::new();
    for (seq, deliveries) in &ledger.deliveries {
        for (_, id) in deliveries {
            seqs_per_id.entry(id).or_default().insert(*seq);
        }
    }
    let duplicated: Vec<_> = seqs_per_id
        .iter()
        .filter(|(_, seqs)| seqs.len() > 1)
        .map(|(id, _)| id.to_string())
        .take(5)
        .collect();
    let redelivered = ledger.deliveries.values().filter(|d| d.len() > 1).count();
    let failures: u64 = ledger.failures.values().sum();
    let figures = format!(
        "killed at {:.1} s, restarted at {:.1} s; acknowledged {}, delivered {delivered}, \
         lost {lost}, never completed {}, duplicated {} (message ids under two seqs), \
         redelivered after a lease {redelivered}, two live leases {}; 5xx by code {:?}",
        killed_at.as_secs_f64(),
        restarted_at.as_secs_f64(),
        ledger.acknowledged.len(),
        uncompleted.len(),
        duplicated.len(),
        overlapping.len(),
        ledger.failures
    );
    let check = |ok: bool, problem: String| {
        if ok {
            Ok(())
        } else {
            Err(format!("{problem}; {figures}"))
        }
    };
    check(
        !run.out_of_time(),
        format!("not finished within {KILL_DEADLINE:?}"),
    )?;
    check(
        ledger.unclear.is_empty(),
        format!("unclear failures: {:?}", ledger.unclear),
    )?;
    check(
        failures > 0,
        "the kill caused no failure: it tested nothing".to_owned(),
    )?;
    check(
        !ledger.acknowledged.is_empty(),
        "nothing acknowledged".to_owned(),
    )?;
    check(lost == 0, format!("{lost} acknowledged, never delivered"))?;
    check(
        uncompleted.is_empty(),
        format!("acknowledged, never completed: {uncompleted:?}"),
    )?;
    check(
        overlapping.is_empty(),
        format!("two live leases at once: {overlapping:?}"),
    )?;
    check(
        duplicated.is_empty(),
        format!("message ids with two seqs: {duplicated:?}"),
    )?;
    check(
        after.status == 200,
        format!("no write after the restart: {after:?}"),
    )?;
    check(
        stats.status == 200 && stats.json()["total"] == 1,
        format!("only the last message remains: {stats:?}"),
    )?;
    Ok(figures)
}

/// What one fault did to a write, a read and a Receive.
fn slow_and_cut(tools: &Tools, seed: u64) -> Result<String, String> {
    let database = Database::start(tools)?;
    let proxy = FaultProxy::start(&database.url)?;
    let stack = Stack::start(
        tools,
        StackOptions {
            vars: &[("MQLITE_DB_TIMEOUT_MS", "1500")],
            database_url: Some(proxy.url.clone()),
        },
    )?;
    // Well above the fetch timeout: the lease a lost Receive took is still
    // live when the next Receive looks, even on a loaded machine.
    const LOCK_MS: u64 = 4_000;
    let queue = "faulty";
    let created = stack.rpc(
        "AdminService/CreateQueue",
        &json!({"name": queue, "config": {"lock_duration_ms": LOCK_MS,
                "dedup_window_ms": 600_000}}),
    );
    check!(created.status == 200, "CreateQueue: {created:?}");
    let mut faults = vec![
        Fault::Delay(3_000),
        Fault::StallMidBody(3_000),
        Fault::CutMidBody,
        Fault::Status(500),
        Fault::Status(502),
        Fault::Status(522),
    ];
    // The order is seeded; every fault runs once.
    let mut rng = Rng::new(seed);
    for i in (1..faults.len()).rev() {
        faults.swap(i, rng.below(i + 1));
    }
    let mut outcome_unknown = 0;
    let mut reads_retried = 0;
    for (i, fault) in faults.iter().enumerate() {
        let id = format!("m-{i}");
        let send = json!({"queue": queue, "messages": [{"body": b64(&id), "message_id": id}]});
        proxy.fault_next(*fault, 1);
        let lost = stack.rpc("QueueService/Send", &send);
        check!(
            lost.status == 503 && lost.json()["code"] == "outcome_unknown",
            "{fault:?}: a write whose answer was lost: {lost:?}"
        );
        check!(proxy.pending() == 0, "{fault:?}: the fault was not used");
        outcome_unknown += 1;
        // Reconcile by retrying with the same message id: the original seq.
        let again = stack.rpc("QueueService/Send", &send);
        check!(again.status == 200, "{fault:?}: the retry: {again:?}");
        let seq = again.json()["seq_numbers"][0].clone();

        proxy.fault_next(*fault, 1);
        let before = proxy.forwarded();
        let read = stack.rpc("AdminService/ListQueues", &json!({}));
        check!(read.status == 200, "{fault:?}: a read is retried: {read:?}");
        check!(
            proxy.forwarded() - before == 2,
            "{fault:?}: one retry expected, {} requests",
            proxy.forwarded() - before
        );
        reads_retried += 1;

        // A Receive whose answer is lost still took the lease.
        proxy.fault_next(*fault, 1);
        let claim = json!({"queue": queue, "max_messages": 4});
        let lost = stack.rpc("QueueService/Receive", &claim);
        check!(
            lost.status == 503 && lost.json()["code"] == "outcome_unknown",
            "{fault:?}: a Receive whose answer was lost: {lost:?}"
        );
        let during = stack.rpc("QueueService/Receive", &claim);
        check!(
            during.status == 200 && during.json()["messages"] == json!([]),
            "{fault:?}: redelivered within the lease: {during:?}"
        );
        std::thread::sleep(Duration::from_millis(LOCK_MS + 300));
        let after = stack.rpc("QueueService/Receive", &claim);
        let messages = after.json()["messages"].clone();
        check!(
            after.status == 200
                && messages.as_array().map(Vec::len) == Some(1)
                && messages[0]["seq_number"] == seq
                && messages[0]["message_id"] == json!(id)
                && messages[0]["delivery_count"] == 2,
            "{fault:?}: exactly the one message, once more after the lease: {after:?}"
        );
        let done = stack.rpc(
            "QueueService/Complete",
            &json!({"queue": queue, "seq_number": seq, "lock_token": messages[0]["lock_token"]}),
        );
        check!(done.status == 200, "{fault:?}: {done:?}");
    }
    // A read that never gets an answer is a 5xx once its retries run out.
    proxy.fault_next(Fault::CutMidBody, 5);
    let read = stack.rpc("AdminService/ListQueues", &json!({}));
    check!(
        read.status == 503 && read.json()["code"] == "unavailable",
        "a read whose every answer is cut: {read:?}"
    );
    let stats = stack.rpc("QueueService/Stats", &json!({"queue": queue}));
    check!(
        stats.status == 200 && stats.json()["total"] == 0,
        "nothing left, nothing duplicated: {stats:?}"
    );
    Ok(format!(
        "faults {faults:?}: {outcome_unknown} writes and {outcome_unknown} Receives \
         outcome_unknown, {reads_retried} reads retried, every retried Send deduplicated, \
         no Receive redelivered within its lease; {} requests forwarded, {} faulted",
        proxy.forwarded(),
        proxy.faulted()
    ))
}

const SHARD_QUEUES: usize = 9;
const SHARD_SENDERS: usize = 3;
const SHARD_SEND_FOR: Duration = Duration::from_secs(6);
const SHARD_KILL_AT: Duration = Duration::from_millis(2_000);

/// What the senders of the three-database run saw, by queue.
#[derive(Default)]
struct ShardLedger {
    /// Acknowledged sends: (queue, seq) → message id.
    acknowledged: HashMap<(String, i64), String>,
    /// Failed Sends by queue while the victim was down, and unclear answers.
    failed: BTreeMap<String, u64>,
    unclear: Vec<String>,
}

fn one_of_three_killed(tools: &Tools, seed: u64) -> Result<String, String> {
    let mut databases = (0..3)
        .map(|_| Database::start(tools))
        .collect::<Result<Vec<_>, _>>()?;
    let names = ["main", "db2", "db3"];
    let list: Vec<String> = names
        .iter()
        .zip(&databases)
        .map(|(name, db)| format!("{name}={}", db.url))
        .collect();
    let list = list.join(",");
    let stack = Stack::start(
        tools,
        StackOptions {
            vars: &[
                ("MQLITE_DB_TIMEOUT_MS", "2000"),
                ("MQLITE_DATABASES", &list),
            ],
            database_url: Some(String::new()),
        },
    )?;
    let queues: Vec<String> = (0..SHARD_QUEUES).map(|i| format!("shard-{i}")).collect();
    for queue in &queues {
        let created = stack.rpc(
            "AdminService/CreateQueue",
            &json!({"name": queue, "config": {"dedup_window_ms": 600_000}}),
        );
        check!(created.status == 200, "CreateQueue {queue}: {created:?}");
    }
    // Where each queue lives, as ListQueues reports it.
    let listed = stack.rpc("AdminService/ListQueues", &json!({}));
    check!(listed.status == 200, "ListQueues: {listed:?}");
    let home: HashMap<String, String> = listed.json()["queues"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|q| {
            let field = |k: &str| q[k].as_str().unwrap_or("").to_owned();
            (field("name"), field("database"))
        })
        .collect();
    check!(home.len() == SHARD_QUEUES, "ListQueues: {home:?}");
    // The victim: a database other than the catalog that holds a queue.
    let victim = [1usize, 2]
        .into_iter()
        .find(|&i| home.values().any(|d| d == names[i]))
        .ok_or_else(|| format!("no queue outside the catalog: {home:?}"))?;
    let victim_name = names[victim];
    let survivors: Vec<&String> = queues.iter().filter(|q| home[*q] != victim_name).collect();
    check!(
        !survivors.is_empty(),
        "every queue on {victim_name}: {home:?}"
    );

    let stack = Arc::new(stack);
    let ledger = Arc::new(Mutex::new(ShardLedger::default()));
    let down = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let senders: Vec<_> = (0..SHARD_SENDERS)
        .map(|sender| {
            let (stack, ledger, down) = (stack.clone(), ledger.clone(), down.clone());
            let queues = queues.clone();
            let mut rng = Rng::new(seed.wrapping_add(sender as u64));
            std::thread::spawn(move || {
                let mut n = 0usize;
                while started.elapsed() < SHARD_SEND_FOR {
                    let queue = &queues[rng.below(queues.len())];
                    let ids: Vec<String> = (n..n + 3)
                        .map(|i| format!("{queue}-s{sender}-{i}"))
                        .collect();
                    n += 3;
                    let messages: Vec<Value> = ids
                        .iter()
                        .map(|id| json!({"body": b64(id), "message_id": id}))
                        .collect();
                    let body = json!({"queue": queue, "messages": messages});
                    // Sent again with the same ids until acknowledged: the
                    // dedup window answers a batch that did commit.
                    while started.elapsed() < KILL_DEADLINE {
                        let reply = stack.rpc("QueueService/Send", &body);
                        let mut ledger = ledger.lock().unwrap_or_else(|e| e.into_inner());
                        if reply.status == 200 {
                            let seqs = reply.json()["seq_numbers"].clone();
                            for (i, id) in ids.iter().enumerate() {
                                if let Some(seq) = seqs[i].as_i64() {
                                    ledger.acknowledged.insert((queue.clone(), seq), id.clone());
                                }
                            }
                            break;
                        }
                        if let Err(e) = clear_failure(&reply) {
                            ledger.unclear.push(format!("{queue}: {e}"));
                        }
                        if down.load(Ordering::SeqCst) {
                            *ledger.failed.entry(queue.clone()).or_default() += 1;
                        }
                        drop(ledger);
                        std::thread::sleep(Duration::from_millis(100 + rng.below(100) as u64));
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(SHARD_KILL_AT);
    down.store(true, Ordering::SeqCst);
    databases[victim].kill();
    std::thread::sleep(
        SHARD_SEND_FOR.saturating_sub(started.elapsed()) + Duration::from_millis(500),
    );
    down.store(false, Ordering::SeqCst);
    databases[victim].restart()?;
    for s in senders {
        s.join().map_err(|_| "a sender panicked")?;
    }
    // Every acknowledged message of every queue is there to receive.
    let mut delivered: HashMap<(String, i64), String> = HashMap::new();
    for queue in &queues {
        loop {
            let got = stack.rpc(
                "QueueService/Receive",
                &json!({"queue": queue, "max_messages": 100}),
            );
            check!(
                got.status == 200,
                "Receive {queue} after the restart: {got:?}"
            );
            let messages = got.json()["messages"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            if messages.is_empty() {
                break;
            }
            let mut items = Vec::new();
            for m in &messages {
                let seq = m["seq_number"].as_i64().unwrap_or(0);
                let id = m["message_id"].as_str().unwrap_or("").to_owned();
                delivered.insert((queue.clone(), seq), id);
                items.push(json!({"seq_number": seq, "lock_token": m["lock_token"]}));
            }
            let done = stack.rpc(
                "QueueService/CompleteBatch",
                &json!({"queue": queue, "messages": items}),
            );
            check!(done.status == 200, "CompleteBatch {queue}: {done:?}");
        }
    }
    let ledger = ledger.lock().unwrap_or_else(|e| e.into_inner());
    let lost: Vec<_> = ledger
        .acknowledged
        .keys()
        .filter(|k| !delivered.contains_key(*k))
        .take(5)
        .collect();
    let mut seqs_per_id: HashMap<&str, usize> = HashMap::new();
    for id in delivered.values() {
        *seqs_per_id.entry(id).or_default() += 1;
    }
    let duplicated = seqs_per_id.values().filter(|n| **n > 1).count();
    let victim_failures: u64 = ledger
        .failed
        .iter()
        .filter(|(q, _)| home[*q] == victim_name)
        .map(|(_, n)| n)
        .sum();
    let figures = format!(
        "killed {victim_name} (holding {} of {SHARD_QUEUES} queues); acknowledged {}, delivered {}, \
         lost {}, duplicated {duplicated}; failed Sends while it was down by queue {:?}",
        SHARD_QUEUES - survivors.len(),
        ledger.acknowledged.len(),
        delivered.len(),
        lost.len(),
        ledger.failed
    );
    check!(
        ledger.unclear.is_empty(),
        "unclear failures: {:?}; {figures}",
        ledger.unclear
    );
    check!(
        victim_failures > 0,
        "the kill failed no write: it tested nothing; {figures}"
    );
    for queue in &survivors {
        check!(
            !ledger.failed.contains_key(*queue),
            "{queue} lives on a live database yet failed; {figures}"
        );
    }
    check!(
        lost.is_empty(),
        "acknowledged, never delivered: {lost:?}; {figures}"
    );
    check!(duplicated == 0, "message ids under two seqs; {figures}");
    Ok(figures)
}
