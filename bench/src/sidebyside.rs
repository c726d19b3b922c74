//! `mqlite-sidebyside`: what the Worker costs and delivers on sqld, under
//! `wrangler dev` and under plain `workerd` (no dev proxy), side by side
//! with pgmq's reference HTTP adapter — all in one run, so the ratios hold
//! on a shared, noisy machine.
//!
//! 0. Peak memory of one Send under each runtime (`memory.rs`): a Send of
//!    1 MiB bodies up to the 32 MiB cap and one of 10,000 empty messages.
//! 1. Worker CPU per RPC: `--requests` sequential requests per RPC over one
//!    keep-alive connection; the CPU (utime + stime from `/proc`) of the
//!    runtime's whole process tree before and after, split into workerd
//!    processes and the rest (wrangler's Node), per request and above the
//!    no-op `GET /healthz`; latency p50 / p99 of the same requests. The
//!    Peek of an empty queue (one database fetch, nothing to process) is
//!    the floor every RPC pays for its round trip.
//! 2. Throughput, for each of `--clients` (default 1, 4, 16, 64) concurrent
//!    clients, `--seconds` per cell: send → receive → complete cycles/s,
//!    batch-64 sends (messages/s) and a batch's whole life (send 64 →
//!    receive 64 → CompleteBatch, messages/s), against pgmq's adapter
//!    (`PGMQ_URL`) and mqlite-edge on plain workerd three ways: group commit
//!    off (`MQLITE_COALESCE=off`), on, and on over two workerd processes
//!    (clients alternate between them; the first hosts one object per queue
//!    for both, as on Cloudflare, and the second reaches them over HTTP on a
//!    Unix socket).
//!    Under each row: p50 / p99 per unit of work, sqld's CPU per RPC, and how
//!    busy each server's process tree was (CPU time / wall time, 100% = one
//!    core), to show where the time went, and for mqlite-edge the batches
//!    that formed (`Observe`'s batch-size histogram, before and after).
//! 3. Through a proxy that counts database requests (the mean batch size is
//!    RPCs / requests) and the rows sqld reports written (per cycle: one
//!    message's life), cycles at the largest client count, grouped and
//!    direct, then again with every answer delayed by `--delay-ms` (20 ms:
//!    Turso in a nearby region).
//!
//! Environment (set by `scripts/bench.sh`): `SQLD_BIN`, `MQLITE_BENCH_WORKERD`
//! (the workerd binary), `PGMQ_URL` and `PGMQ_PIDS` (the adapter's and
//! PostgreSQL's process ids), and the `MQLITE_E2E_*` fixture paths.
//! 4. Several databases (docs/databases.md): cycles through one plain
//!    workerd over each of `--databases` (default 1, 2, 3) sqld databases,
//!    each client on a queue of its own, at the client counts from 16 up,
//!    with every process's CPU share and the databases' sqld CPU per RPC.
//!
//! `--think-ms N` makes each client pause a random 0..=N ms (uniform, seeded
//! per client) before each request of a unit of work, so that arrivals are not
//! in step (the closed loop's clients otherwise move together: docs/bench.md);
//! a unit's latency leaves its pauses out.
//! `--workloads cycles,batch,life` runs only those throughput rows;
//! `--throughput-only` runs step 2 alone (a quick comparison of one change).
//!
//! Usage: `mqlite-sidebyside [--requests N] [--seconds S] [--clients 1,4,16,64] [--delay-ms 20] [--think-ms 0] [--databases 1,2,3] [--only-databases] [--throughput-only] [--workloads cycles,batch,life]`

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use mqlite_e2e::proxy::{Fault, FaultProxy};
use mqlite_e2e::{b64, Stack, StackOptions, Tools};
use serde_json::{json, Value};

mod memory;
mod sqld;
use mqlite_e2e::workerd::{Objects, Workerd};
use sqld::Sqld;

struct Settings {
    requests: usize,
    seconds: u64,
    /// Client counts, one throughput table each.
    clients: Vec<usize>,
    /// Round trip added between the Worker and the database in the
    /// delayed run (a delaying proxy, as Turso in a nearby region).
    delay_ms: u64,
    /// `--think-ms`: the longest pause a client makes before each request.
    think_ms: u64,
    /// Database counts of the scaling run (docs/databases.md).
    databases: Vec<usize>,
    /// `--only-databases`: the scaling run alone.
    only_databases: bool,
    /// `--throughput-only`: step 2 alone.
    throughput_only: bool,
    /// The throughput rows to run.
    workloads: Vec<Workload>,
}

fn main() {
    let mut settings = Settings {
        requests: 200,
        seconds: 10,
        clients: vec![1, 4, 16, 64],
        delay_ms: 20,
        think_ms: 0,
        databases: vec![1, 2, 3],
        only_databases: false,
        throughput_only: false,
        workloads: vec![Workload::Cycle, Workload::Batch64, Workload::Life64],
    };
    let usage = "usage: mqlite-sidebyside [--requests N] [--seconds S] [--clients 1,4,16,64] [--delay-ms 20] [--think-ms 0] [--databases 1,2,3] [--only-databases] [--throughput-only] [--workloads cycles,batch,life]";
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--only-databases" {
            settings.only_databases = true;
            continue;
        }
        if flag == "--throughput-only" {
            settings.throughput_only = true;
            continue;
        }
        let value = args.next().unwrap_or_default();
        let number = value.parse::<u64>().ok();
        match (flag.as_str(), number) {
            ("--requests", Some(n)) => settings.requests = n as usize,
            ("--seconds", Some(n)) => settings.seconds = n,
            ("--delay-ms", Some(n)) => settings.delay_ms = n,
            ("--think-ms", Some(n)) => settings.think_ms = n,
            ("--clients", _) => {
                settings.clients = numbers(&value);
                if settings.clients.is_empty() {
                    fail(usage);
                }
            }
            ("--workloads", _) => {
                let named: Option<Vec<Workload>> = value.split(',').map(Workload::named).collect();
                settings.workloads = named
                    .filter(|w| !w.is_empty())
                    .unwrap_or_else(|| fail(usage));
            }
            ("--databases", _) => {
                settings.databases = numbers(&value);
                if settings.databases.contains(&0) {
                    fail(usage);
                }
            }
            _ => fail(usage),
        }
    }
    // Errors return here, so every server started is dropped (and stopped).
    if let Err(e) = run(&settings) {
        fail(&e);
    }
}

/// A comma-separated list of numbers.
fn numbers(list: &str) -> Vec<usize> {
    list.split(',')
        .filter_map(|c| c.trim().parse().ok())
        .collect()
}

fn run(settings: &Settings) -> Result<(), String> {
    let sqld = match Sqld::start_from_env() {
        Ok(Some(sqld)) => sqld,
        Ok(None) => {
            println!("SKIPPED Worker CPU per RPC and throughput against pgmq: they run mqlite-edge on sqld (set SQLD_BIN)");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    let tools = Tools::from_env()?;
    let workerd_bin = std::env::var_os("MQLITE_BENCH_WORKERD")
        .map(PathBuf::from)
        .ok_or("MQLITE_BENCH_WORKERD (the workerd binary) is not set")?;
    let stack = Stack::start(
        &tools,
        StackOptions {
            vars: &[],
            database_url: Some(sqld.url.clone()),
        },
    )?;
    if settings.only_databases {
        return scaling(&workerd_bin, &tools.root, &stack.token, settings);
    }
    // `plain` also serves its queue objects to `front`, which keeps none of
    // its own: the two processes share one object per queue, as Workers
    // spread over machines do on Cloudflare.
    let share = |objects: Objects| {
        let (root, token) = (&tools.root, &stack.token);
        Workerd::start_sharing(&workerd_bin, root, &sqld.url, token, &[], None, objects)
    };
    let plain = share(Objects::Host)?;
    let socket = plain.objects_socket().ok_or("the host serves no objects")?;
    let front = share(Objects::Remote(socket.to_owned()))?;
    let off = [("MQLITE_COALESCE".to_owned(), "off".to_owned())];
    let start = |db: &str, extra: &[(String, String)]| {
        Workerd::start_with(&workerd_bin, &tools.root, db, &stack.token, extra, None)
    };
    let direct = start(&sqld.url, &off)?;
    let second = start(&sqld.url, &[])?;
    let runtimes = [
        Runtime {
            name: "wrangler dev",
            base: stack.base.clone(),
            pid: stack.worker_pid(),
        },
        // A process the memory test above did not grow: the two plain
        // runtimes compared here start alike.
        Runtime {
            name: "plain workerd",
            base: second.base.clone(),
            pid: second.pid(),
        },
        // The same without group commit: the difference is the object's hop.
        Runtime {
            name: "plain workerd, MQLITE_COALESCE=off",
            base: direct.base.clone(),
            pid: direct.pid(),
        },
    ];

    if !settings.throughput_only {
        // First, while both Workers are fresh.
        memory::print_header();
        memory::print_peak_per_send("wrangler dev", &stack.base, &stack.token, &|| {
            stack.workerd_pids()
        })?;
        memory::print_peak_per_send("plain workerd", &plain.base, &stack.token, &|| {
            vec![plain.pid()]
        })?;
        for runtime in &runtimes {
            cpu_per_rpc(runtime, &stack.token, settings.requests)?;
        }
    }

    let mut targets = vec![];
    match std::env::var("PGMQ_URL") {
        Ok(url) => {
            let pids = std::env::var("PGMQ_PIDS").unwrap_or_default();
            let mut pids = pids.split_whitespace().filter_map(|p| p.parse().ok());
            let servers = ["adapter", "postgres"]
                .into_iter()
                .zip(pids.by_ref())
                .collect();
            targets.push(Target {
                name: "pgmq adapter".into(),
                bases: vec![url],
                api: Api::Pgmq,
                servers,
                sqld: vec![],
                own_queues: false,
            })
        }
        Err(_) => {
            println!("\nSKIPPED pgmq's adapter: PGMQ_URL is not set (scripts/bench.sh starts it)")
        }
    }
    // Each process by what it runs: `workerd` (the Worker and its objects),
    // `objects host` and `front` (two processes sharing one object per queue).
    let mqlite = |name: &str, workers: &[(&'static str, &Workerd)]| Target {
        name: name.into(),
        bases: workers.iter().map(|(_, w)| w.base.clone()).collect(),
        api: Api::Mqlite(stack.token.clone()),
        servers: workers
            .iter()
            .map(|(role, w)| (*role, w.pid()))
            .chain([("sqld", sqld.child.id())])
            .collect(),
        sqld: vec![sqld.child.id()],
        own_queues: false,
    };
    targets.push(mqlite("workerd direct", &[("workerd", &direct)]));
    targets.push(mqlite("workerd grouped", &[("workerd", &plain)]));
    let two = [("objects host", &plain), ("front", &front)];
    targets.push(mqlite("2 workerd grouped", &two));
    for &clients in &settings.clients {
        throughput(&targets, settings, clients);
    }
    drop((direct, second, front));
    if settings.throughput_only {
        return Ok(());
    }
    delayed(&workerd_bin, &tools.root, &sqld, &stack.token, settings)?;
    scaling(&workerd_bin, &tools.root, &stack.token, settings)
}

fn fail(message: &str) -> ! {
    eprintln!("mqlite-sidebyside: {message}");
    std::process::exit(1);
}

struct Runtime {
    name: &'static str,
    base: String,
    /// Root of the process tree whose CPU is counted.
    pid: u32,
}

/// One HTTP call over `agent`; non-2xx answers and transport errors are `Err`.
fn call(
    agent: &ureq::Agent,
    method: &str,
    url: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> Result<Value, String> {
    let mut request = agent.request(method, url);
    if let Some(token) = token {
        request = request.set("Authorization", &format!("Bearer {token}"));
    }
    let reply = match body {
        Some(body) => request
            .set("Content-Type", "application/json")
            .send_string(&body.to_string()),
        None => request.call(),
    };
    match reply {
        Ok(response) => {
            let text = response.into_string().map_err(|e| e.to_string())?;
            Ok(serde_json::from_str(&text).unwrap_or(Value::Null))
        }
        Err(ureq::Error::Status(status, response)) => Err(format!(
            "{method} {url} -> {status} {}",
            response.into_string().unwrap_or_default()
        )),
        Err(e) => Err(format!("{method} {url} -> {e}")),
    }
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new()
        .timeout(Duration::from_secs(60))
        .build()
}

/// CPU seconds of `root` and all its descendants: (workerd processes, others).
fn tree_cpu(root: u32) -> (f64, f64) {
    let ticks_per_second = clock_ticks();
    let mut parents = vec![];
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the parenthesised command name: state ppid … utime(14) stime(15).
        let Some((head, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let number = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let comm = head.split_once('(').map(|(_, c)| c).unwrap_or("");
        parents.push((
            pid,
            number(1) as u32,
            comm == "workerd",
            number(11) + number(12),
        ));
    }
    let mut tree = vec![root];
    let mut grew = true;
    while grew {
        grew = false;
        for (pid, ppid, _, _) in &parents {
            if tree.contains(ppid) && !tree.contains(pid) {
                tree.push(*pid);
                grew = true;
            }
        }
    }
    let (mut workerd, mut other) = (0u64, 0u64);
    for (pid, _, is_workerd, ticks) in &parents {
        if tree.contains(pid) {
            if *is_workerd {
                workerd += ticks;
            } else {
                other += ticks;
            }
        }
    }
    (
        workerd as f64 / ticks_per_second,
        other as f64 / ticks_per_second,
    )
}

/// `getconf CLK_TCK` (the unit of `/proc/<pid>/stat` times), 100 if unknown.
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

fn percentile(samples: &[Duration], p: f64) -> f64 {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    let index = ((ms.len() as f64 - 1.0) * p).round() as usize;
    ms.get(index).copied().unwrap_or(0.0)
}

fn cpu_per_rpc(runtime: &Runtime, token: &str, n: usize) -> Result<(), String> {
    let agent = agent();
    let rpc = |name: &str, body: &Value| {
        call(
            &agent,
            "POST",
            &format!("{}/mqlite.v1.{name}", runtime.base),
            Some(token),
            Some(body),
        )
    };
    let (one, batch, empty) = (
        format!("cpu-{}", runtime.pid),
        format!("cpu64-{}", runtime.pid),
        format!("cpu-empty-{}", runtime.pid),
    );
    for queue in [&one, &batch, &empty] {
        rpc(
            "AdminService/CreateQueue",
            &json!({"name":queue,"config":{}}),
        )?;
    }
    let message = |i: usize| json!({"body": b64(&format!("message {i}"))});
    let complete = |m: &Value| {
        let body = json!({"queue":one,"seq_number":m["seq_number"],"lock_token":m["lock_token"]});
        rpc("QueueService/Complete", &body).map(drop)
    };
    // Warm-up: compiled wasm, open connections, prepared database pages.
    for i in 0..20 {
        rpc(
            "QueueService/Send",
            &json!({"queue":one,"messages":[message(i)]}),
        )?;
        complete(&rpc("QueueService/Receive", &json!({"queue":one}))?["messages"][0])?;
    }

    println!(
        "\nWorker CPU per RPC under {} on sqld ({n} sequential requests each, one keep-alive connection)",
        runtime.name
    );
    println!(
        "{:<22} {:>9} {:>9} {:>14} {:>12} {:>16}",
        "request", "p50", "p99", "workerd CPU", "above no-op", "other processes"
    );
    let mut received = Vec::with_capacity(n);
    let mut noop = None;
    type Request<'a> = &'a mut dyn FnMut(usize) -> Result<(), String>;
    let mut row = |name: &str, f: Request| -> Result<(), String> {
        let before = tree_cpu(runtime.pid);
        let mut samples = Vec::with_capacity(n);
        for i in 0..n {
            let started = Instant::now();
            f(i)?;
            samples.push(started.elapsed());
        }
        let after = tree_cpu(runtime.pid);
        let per_request = |a: f64, b: f64| (b - a) * 1000.0 / n as f64;
        let workerd = per_request(before.0, after.0);
        let other = per_request(before.1, after.1);
        let base = *noop.get_or_insert(workerd);
        println!(
            "{:<22} {:>7.2}ms {:>7.2}ms {:>12.3}ms {:>10.3}ms {:>14.3}ms",
            name,
            percentile(&samples, 0.5),
            percentile(&samples, 0.99),
            workerd,
            workerd - base,
            other
        );
        Ok(())
    };
    let healthz = format!("{}/healthz", runtime.base);
    row("no-op GET /healthz", &mut |_| {
        call(&agent, "GET", &healthz, None, None).map(drop)
    })?;
    // The floor of any RPC: one database fetch and nothing to do with its
    // answer (an empty queue's Peek); what an RPC costs above it is ours.
    row("Peek, empty queue", &mut |_| {
        rpc("QueueService/Peek", &json!({"queue":empty})).map(drop)
    })?;
    row("Send 1", &mut |i| {
        let body = json!({"queue":one,"messages":[message(i)]});
        rpc("QueueService/Send", &body).map(drop)
    })?;
    row("Receive 1", &mut |_| {
        let got = rpc("QueueService/Receive", &json!({"queue":one}))?;
        received.push(got["messages"][0].clone());
        Ok(())
    })?;
    let mut settle = received.iter();
    row("Complete", &mut |_| {
        complete(settle.next().unwrap_or(&Value::Null))
    })?;
    row("Send 64", &mut |i| {
        let messages: Vec<Value> = (0..64).map(|j| message(i * 64 + j)).collect();
        let body = json!({"queue":batch,"messages":messages});
        rpc("QueueService/Send", &body).map(drop)
    })
}

/// Which HTTP API a target speaks.
enum Api {
    /// mqlite's Connect-JSON, with this admin token.
    Mqlite(String),
    /// pgmq's adapter (auth off).
    Pgmq,
}

struct Target {
    name: String,
    /// Where clients send; client `i` uses `bases[i % len]` (one per
    /// workerd process).
    bases: Vec<String>,
    api: Api,
    /// The server processes (roots of process trees) whose CPU is watched.
    servers: Vec<(&'static str, u32)>,
    /// The sqld processes, for their CPU per RPC (mqlite targets).
    sqld: Vec<u32>,
    /// Each client drives a queue of its own (so that queues spread over
    /// the databases), instead of all sharing one.
    own_queues: bool,
}

impl Target {
    fn token(&self) -> Option<&str> {
        match &self.api {
            Api::Mqlite(token) => Some(token),
            Api::Pgmq => None,
        }
    }

    /// The base URL client `client` talks to.
    fn base(&self, client: usize) -> &str {
        &self.bases[client % self.bases.len()]
    }

    fn create_queue(&self, agent: &ureq::Agent, queue: &str) -> Result<(), String> {
        let base = self.base(0);
        match &self.api {
            Api::Mqlite(_) => self.rpc(
                agent,
                base,
                "AdminService/CreateQueue",
                json!({"name":queue,"config":{}}),
            ),
            Api::Pgmq => call(
                agent,
                "PUT",
                &format!("{base}/v1/queues/{queue}"),
                None,
                None,
            ),
        }
        .map(drop)
    }

    fn rpc(
        &self,
        agent: &ureq::Agent,
        base: &str,
        name: &str,
        body: Value,
    ) -> Result<Value, String> {
        let url = format!("{base}/mqlite.v1.{name}");
        call(agent, "POST", &url, self.token(), Some(&body))
    }

    /// Sends `n` small JSON messages in one request.
    fn send(
        &self,
        agent: &ureq::Agent,
        base: &str,
        queue: &str,
        n: usize,
        tag: u64,
    ) -> Result<(), String> {
        let payload = |i: usize| json!({"client_message": tag, "i": i});
        match &self.api {
            Api::Mqlite(_) => {
                let messages: Vec<Value> = (0..n)
                    .map(|i| json!({"body": b64(&payload(i).to_string())}))
                    .collect();
                self.rpc(
                    agent,
                    base,
                    "QueueService/Send",
                    json!({"queue":queue,"messages":messages}),
                )
            }
            Api::Pgmq if n == 1 => {
                let url = format!("{base}/v1/queues/{queue}/messages");
                call(
                    agent,
                    "POST",
                    &url,
                    None,
                    Some(&json!({"message": payload(0)})),
                )
            }
            Api::Pgmq => {
                let url = format!("{base}/v1/queues/{queue}/messages/batch");
                let messages: Vec<Value> = (0..n).map(payload).collect();
                call(
                    agent,
                    "POST",
                    &url,
                    None,
                    Some(&json!({"messages": messages})),
                )
            }
        }
        .map(drop)
    }

    /// Receives (leases / reads with a 30 s visibility timeout) up to `n`
    /// messages.
    fn receive(
        &self,
        agent: &ureq::Agent,
        base: &str,
        queue: &str,
        n: usize,
    ) -> Result<Vec<Value>, String> {
        let got = match &self.api {
            Api::Mqlite(_) => self.rpc(
                agent,
                base,
                "QueueService/Receive",
                json!({"queue":queue,"max_messages":n}),
            )?,
            Api::Pgmq => {
                let url = format!("{base}/v1/queues/{queue}/read");
                call(agent, "POST", &url, None, Some(&json!({"vt":30,"qty":n})))?
            }
        };
        Ok(got["messages"].as_array().cloned().unwrap_or_default())
    }

    /// Completes (mqlite) or deletes (pgmq) received messages: one request
    /// for one message (Complete / DELETE by id), one for many
    /// (CompleteBatch / the batch delete).
    fn complete(
        &self,
        agent: &ureq::Agent,
        base: &str,
        queue: &str,
        ms: &[Value],
    ) -> Result<(), String> {
        match (&self.api, ms) {
            (Api::Mqlite(_), [m]) => self.rpc(
                agent,
                base,
                "QueueService/Complete",
                json!({"queue":queue,"seq_number":m["seq_number"],"lock_token":m["lock_token"]}),
            ),
            (Api::Mqlite(_), _) => {
                let items: Vec<Value> = ms
                    .iter()
                    .map(|m| json!({"seq_number":m["seq_number"],"lock_token":m["lock_token"]}))
                    .collect();
                self.rpc(
                    agent,
                    base,
                    "QueueService/CompleteBatch",
                    json!({"queue":queue,"messages":items}),
                )
            }
            (Api::Pgmq, [m]) => {
                let url = format!("{base}/v1/queues/{queue}/messages/{}", m["msg_id"]);
                call(agent, "DELETE", &url, None, None)
            }
            (Api::Pgmq, _) => {
                let ids: Vec<Value> = ms.iter().map(|m| m["msg_id"].clone()).collect();
                let url = format!("{base}/v1/queues/{queue}/messages/delete");
                call(agent, "POST", &url, None, Some(&json!({"msg_ids": ids})))
            }
        }
        .map(drop)
    }
}

#[derive(Clone, Copy)]
enum Workload {
    /// Send 1, Receive 1, Complete it: counts completed cycles.
    Cycle,
    /// Send 64 in one request: counts messages.
    Batch64,
    /// Send 64, Receive up to 64, CompleteBatch them: counts messages
    /// completed (a batch's whole life).
    Life64,
}

impl Workload {
    /// The workload `--workloads` names `name`.
    fn named(name: &str) -> Option<Workload> {
        match name.trim() {
            "cycles" => Some(Workload::Cycle),
            "batch" => Some(Workload::Batch64),
            "life" => Some(Workload::Life64),
            _ => None,
        }
    }

    /// The row's label in the throughput table.
    fn label(self) -> &'static str {
        match self {
            Workload::Cycle => "send→receive→complete cycles/s",
            Workload::Batch64 => "batch-64 send messages/s",
            Workload::Life64 => "send 64→receive 64→CompleteBatch msgs/s",
        }
    }

    /// RPCs one unit of work makes (for per-RPC costs).
    fn rpcs(self) -> u64 {
        match self {
            Workload::Cycle | Workload::Life64 => 3,
            Workload::Batch64 => 1,
        }
    }
}

/// What one throughput cell measured.
struct Cell {
    per_second: f64,
    /// Units of work (cycles, sends, lives) done, and their latency.
    units: u64,
    latencies: Vec<Duration>,
    errors: u64,
    first_error: Option<String>,
    /// Per watched server: CPU time / wall time.
    busy: Vec<(&'static str, f64)>,
    /// sqld CPU seconds spent in the cell.
    sqld_cpu: Option<f64>,
    /// The batches that formed in the cell (mqlite targets).
    batches: Option<Batches>,
}

/// A batch-size histogram from `Observe`'s `storage.group_commit.batch_members`
/// (docs/engine.md#group-commit), summed over a target's processes.
#[derive(Default)]
struct Batches {
    bounds: Vec<u64>,
    /// `cumulative[i]`: batches of at most `bounds[i]` members.
    cumulative: Vec<u64>,
    count: u64,
    members: u64,
}

impl Batches {
    /// The batches counted by each of `target`'s processes (one isolate
    /// each), summed; `None` for pgmq or when Observe fails.
    fn observed(target: &Target) -> Option<Batches> {
        let token = target.token()?;
        let agent = agent();
        let mut all = Batches::default();
        for base in &target.bases {
            let url = format!("{base}/mqlite.v1.AdminService/Observe");
            let reply = call(&agent, "POST", &url, Some(token), Some(&json!({}))).ok()?;
            let histogram = &reply["storage"]["group_commit"]["batch_members"];
            let numbers = |key: &str| -> Vec<u64> {
                let list = histogram[key].as_array().map(Vec::as_slice).unwrap_or(&[]);
                list.iter().filter_map(Value::as_u64).collect()
            };
            all.bounds = numbers("bounds");
            let cumulative = numbers("bucket_counts");
            all.cumulative.resize(cumulative.len(), 0);
            for (sum, n) in all.cumulative.iter_mut().zip(cumulative) {
                *sum += n;
            }
            all.count += histogram["count"].as_u64()?;
            all.members += histogram["sum"].as_u64()?;
        }
        Some(all)
    }

    /// What formed between `before` and `self`.
    fn since(&self, before: &Batches) -> Batches {
        let cumulative = self.cumulative.iter().enumerate();
        Batches {
            bounds: self.bounds.clone(),
            cumulative: cumulative
                .map(|(i, n)| n.saturating_sub(before.cumulative.get(i).copied().unwrap_or(0)))
                .collect(),
            count: self.count.saturating_sub(before.count),
            members: self.members.saturating_sub(before.members),
        }
    }

    /// "N batches, mean M members; 1: a%, 2: b%, 3-4: c% ..." (buckets
    /// that hold none left out).
    fn describe(&self) -> String {
        let mut below = 0;
        let mut low = 1;
        let mut shares = vec![];
        for (&bound, &cumulative) in self.bounds.iter().zip(&self.cumulative) {
            let n = cumulative.saturating_sub(below);
            if n > 0 {
                let range = match low == bound {
                    true => bound.to_string(),
                    false => format!("{low}-{bound}"),
                };
                let share = n as f64 * 100.0 / self.count as f64;
                shares.push(format!("{range}: {share:.0}%"));
            }
            below = cumulative;
            low = bound + 1;
        }
        format!(
            "{} batches, mean {:.1} members; {}",
            self.count,
            self.members as f64 / self.count.max(1) as f64,
            shares.join(", ")
        )
    }
}

fn drive(target: &Target, workload: Workload, settings: &Settings, clients: usize) -> Cell {
    let kind = match workload {
        Workload::Cycle => "cycle",
        Workload::Batch64 => "batch",
        Workload::Life64 => "life",
    };
    let queue = format!("tp-{kind}-{clients}-{}", std::process::id());
    let failed = |e: String| Cell {
        per_second: 0.0,
        units: 0,
        latencies: vec![],
        errors: 1,
        first_error: Some(e),
        busy: vec![],
        sqld_cpu: None,
        batches: None,
    };
    let queue_of = |client: usize| match target.own_queues {
        true => format!("{queue}-{client}"),
        false => queue.clone(),
    };
    let mut queues: Vec<String> = (0..clients).map(queue_of).collect();
    queues.dedup();
    for queue in &queues {
        if let Err(e) = target.create_queue(&agent(), queue) {
            return failed(e);
        }
    }
    let cpu = || -> Vec<f64> {
        let trees = target.servers.iter().map(|(_, pid)| tree_cpu(*pid));
        trees.map(|(workerd, other)| workerd + other).collect()
    };
    let sqld_cpu = || {
        let each = target.sqld.iter().map(|pid| {
            let (a, b) = tree_cpu(*pid);
            a + b
        });
        (!target.sqld.is_empty()).then(|| each.sum::<f64>())
    };
    let batches_before = Batches::observed(target);
    let cpu_before = cpu();
    let sqld_before = sqld_cpu();
    let done = AtomicU64::new(0);
    let units = AtomicU64::new(0);
    let errors = AtomicU64::new(0);
    let first_error = Mutex::new(None);
    let latencies = Mutex::new(Vec::new());
    let started = Instant::now();
    let deadline = started + Duration::from_secs(settings.seconds);
    std::thread::scope(|scope| {
        for client in 0..clients {
            let queue = queue_of(client);
            let (done, units, errors, first_error, latencies) =
                (&done, &units, &errors, &first_error, &latencies);
            scope.spawn(move || {
                let queue = &queue;
                let agent = agent();
                let base = target.base(client);
                let mut tag = (client as u64) << 32;
                let mut mine = Vec::new();
                let mut think = Think::new(client, settings.think_ms);
                while Instant::now() < deadline {
                    tag += 1;
                    let began = Instant::now();
                    let outcome = unit(target, &agent, base, queue, workload, tag, &mut think);
                    let paused = think.take_paused();
                    match outcome {
                        Ok(n) => {
                            done.fetch_add(n, Ordering::Relaxed);
                            units.fetch_add(1, Ordering::Relaxed);
                            mine.push(began.elapsed().saturating_sub(paused));
                        }
                        Err(e) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                            if let Ok(mut first) = first_error.lock() {
                                first.get_or_insert(e);
                            }
                        }
                    }
                }
                if let Ok(mut all) = latencies.lock() {
                    all.extend(mine);
                }
            });
        }
    });
    let elapsed = started.elapsed().as_secs_f64();
    let busy = target
        .servers
        .iter()
        .zip(cpu().into_iter().zip(cpu_before))
        .map(|((name, _), (after, before))| (*name, (after - before) / elapsed))
        .collect();
    let sqld_after = sqld_cpu();
    let batches = Batches::observed(target)
        .zip(batches_before)
        .map(|(after, before)| after.since(&before))
        .filter(|formed| formed.count > 0);
    Cell {
        per_second: done.load(Ordering::Relaxed) as f64 / elapsed,
        units: units.load(Ordering::Relaxed),
        latencies: latencies.into_inner().unwrap_or_default(),
        errors: errors.load(Ordering::Relaxed),
        first_error: first_error.into_inner().unwrap_or_default(),
        busy,
        sqld_cpu: sqld_after
            .zip(sqld_before)
            .map(|(after, before)| after - before),
        batches,
    }
}

/// One unit of `workload` by one client, pausing before each request.
/// Returns the messages it got through.
fn unit(
    target: &Target,
    agent: &ureq::Agent,
    base: &str,
    queue: &str,
    workload: Workload,
    tag: u64,
    think: &mut Think,
) -> Result<u64, String> {
    let size = match workload {
        Workload::Cycle => 1,
        Workload::Batch64 | Workload::Life64 => 64,
    };
    think.pause();
    target.send(agent, base, queue, size, tag)?;
    if matches!(workload, Workload::Batch64) {
        return Ok(size as u64);
    }
    think.pause();
    let got = target.receive(agent, base, queue, size)?;
    if got.is_empty() {
        return Ok(0);
    }
    think.pause();
    target.complete(agent, base, queue, &got)?;
    Ok(got.len() as u64)
}

/// A client's pauses before its requests (`--think-ms`): uniform in
/// 0..=max ms from a xorshift generator seeded by the client's number, so
/// runs repeat and clients differ.
struct Think {
    max_ms: u64,
    state: u64,
    paused: Duration,
}

impl Think {
    fn new(client: usize, max_ms: u64) -> Think {
        let state = (client as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        Think {
            max_ms,
            state,
            paused: Duration::ZERO,
        }
    }

    fn pause(&mut self) {
        let pause = self.next_pause();
        if !pause.is_zero() {
            std::thread::sleep(pause);
            self.paused += pause;
        }
    }

    /// The next pause, to the microsecond.
    fn next_pause(&mut self) -> Duration {
        if self.max_ms == 0 {
            return Duration::ZERO;
        }
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        Duration::from_micros(self.state % (self.max_ms * 1000 + 1))
    }

    /// The pauses made since the last call.
    fn take_paused(&mut self) -> Duration {
        std::mem::take(&mut self.paused)
    }
}

fn throughput(targets: &[Target], settings: &Settings, clients: usize) {
    println!(
        "\nthroughput, {clients} concurrent clients, {} s per cell (mqlite-edge on sqld, plain workerd; ratio = mqlite-edge / pgmq)",
        settings.seconds
    );
    print!("{:<34}", "workload");
    for target in targets {
        print!(" {:>20}", target.name);
    }
    println!();
    for &workload in &settings.workloads {
        let label = workload.label();
        let mut cells = vec![];
        let mut notes = vec![];
        for target in targets {
            let cell = drive(target, workload, settings, clients);
            let busy: Vec<String> = cell
                .busy
                .iter()
                .map(|(name, share)| format!("{name} {:.0}%", share * 100.0))
                .collect();
            let sqld = match cell.sqld_cpu {
                Some(cpu) if cell.units > 0 => format!(
                    ", sqld CPU {:.3} ms per RPC",
                    cpu * 1000.0 / (cell.units * workload.rpcs()) as f64
                ),
                _ => String::new(),
            };
            notes.push(format!(
                "  {}: p50 {:.1} ms, p99 {:.1} ms per unit{sqld}; CPU busy {}",
                target.name,
                percentile(&cell.latencies, 0.5),
                percentile(&cell.latencies, 0.99),
                busy.join(", ")
            ));
            if let Some(batches) = &cell.batches {
                notes.push(format!("  {}: {}", target.name, batches.describe()));
            }
            if cell.errors > 0 {
                notes.push(format!(
                    "  {}: {} failed requests, first: {}",
                    target.name,
                    cell.errors,
                    cell.first_error.unwrap_or_default()
                ));
            }
            cells.push((matches!(target.api, Api::Pgmq), cell.per_second));
        }
        let pgmq = cells.iter().find(|(is_pgmq, _)| *is_pgmq).map(|c| c.1);
        print!("{label:<34}");
        for (is_pgmq, rate) in &cells {
            let cell = match pgmq {
                Some(base) if !is_pgmq && base > 0.0 => format!("{rate:.0} ({:.2}x)", rate / base),
                _ => format!("{rate:.0}"),
            };
            print!(" {cell:>20}");
        }
        println!();
        for note in notes {
            println!("{note}");
        }
    }
}

/// Cycles through a proxy that counts database requests (so the mean batch
/// size shows) and then also delays every answer by `--delay-ms`, grouped
/// and direct, at the largest client count.
fn delayed(
    workerd_bin: &std::path::Path,
    root: &std::path::Path,
    sqld: &Sqld,
    token: &str,
    settings: &Settings,
) -> Result<(), String> {
    let clients = settings.clients.iter().copied().max().unwrap_or(16);
    println!(
        "\nthrough a counting proxy between workerd and sqld, {clients} clients, cycles/s (database requests per RPC = 1 / mean batch size)"
    );
    for delay in [0, settings.delay_ms] {
        for (name, extra) in [
            (
                "direct",
                vec![("MQLITE_COALESCE".to_owned(), "off".to_owned())],
            ),
            ("grouped", vec![]),
        ] {
            let proxy = FaultProxy::start(&sqld.url)?;
            if delay > 0 {
                proxy.fault_next(Fault::Delay(delay), 1_000_000);
            }
            let worker = Workerd::start_with(workerd_bin, root, &proxy.url, token, &extra, None)?;
            let target = Target {
                name: name.into(),
                bases: vec![worker.base.clone()],
                api: Api::Mqlite(token.to_owned()),
                servers: vec![("workerd", worker.pid()), ("sqld", sqld.child.id())],
                sqld: vec![sqld.child.id()],
                own_queues: false,
            };
            let (before, written_before) = (proxy.forwarded(), proxy.rows_written());
            let cell = drive(&target, Workload::Cycle, settings, clients);
            let requests = proxy.forwarded() - before;
            let written = proxy.rows_written() - written_before;
            let rpcs = cell.units * Workload::Cycle.rpcs();
            println!(
                "  +{delay} ms, {name:<8} {:>7.0} cycles/s, p50 {:.1} ms, p99 {:.1} ms, {:.2} database requests per RPC ({requests} for {rpcs} RPCs), {:.2} rows written per message's life{}",
                cell.per_second,
                percentile(&cell.latencies, 0.5),
                percentile(&cell.latencies, 0.99),
                requests as f64 / rpcs.max(1) as f64,
                written as f64 / cell.units.max(1) as f64,
                if cell.errors > 0 {
                    format!(", {} failed: {}", cell.errors, cell.first_error.unwrap_or_default())
                } else {
                    String::new()
                }
            );
        }
    }
    Ok(())
}

/// Cycles through one plain workerd over 1, 2 and 3 sqld databases
/// (`MQLITE_DATABASES`, docs/databases.md), each client on a queue of its
/// own so that the queues spread over the databases: what adding a database
/// buys, and which process stops it on this machine.
fn scaling(
    workerd_bin: &std::path::Path,
    root: &std::path::Path,
    token: &str,
    settings: &Settings,
) -> Result<(), String> {
    let clients: Vec<usize> = match settings
        .clients
        .iter()
        .copied()
        .filter(|c| *c >= 16)
        .collect::<Vec<_>>()
    {
        many if !many.is_empty() => many,
        _ => vec![16, 64],
    };
    println!(
        "\nseveral databases: cycles/s through one plain workerd (grouped), each client on a queue of its own, {} s per cell",
        settings.seconds
    );
    for &n in &settings.databases {
        let mut databases = Vec::new();
        for _ in 0..n {
            match Sqld::start_from_env()? {
                Some(sqld) => databases.push(sqld),
                None => return Ok(()),
            }
        }
        let list: Vec<String> = databases
            .iter()
            .enumerate()
            .map(|(i, db)| format!("db{}={}", i + 1, db.url))
            .collect();
        let extra = [("MQLITE_DATABASES".to_owned(), list.join(","))];
        let worker = Workerd::start_with(workerd_bin, root, "", token, &extra, None)?;
        let sqld: Vec<u32> = databases.iter().map(|d| d.child.id()).collect();
        let target = Target {
            name: format!("{n} database(s)"),
            bases: vec![worker.base.clone()],
            api: Api::Mqlite(token.to_owned()),
            servers: std::iter::once(("workerd", worker.pid()))
                .chain(sqld.iter().map(|pid| ("sqld", *pid)))
                .collect(),
            sqld,
            own_queues: true,
        };
        for &c in &clients {
            let cell = drive(&target, Workload::Cycle, settings, c);
            let busy: Vec<String> = cell
                .busy
                .iter()
                .map(|(name, share)| format!("{name} {:.0}%", share * 100.0))
                .collect();
            let rpcs = (cell.units * Workload::Cycle.rpcs()).max(1) as f64;
            println!(
                "  {n} database(s), {c:>2} clients: {:>6.0} cycles/s, p50 {:.1} ms, p99 {:.1} ms, sqld CPU {:.3} ms per RPC (all databases); CPU busy {}{}",
                cell.per_second,
                percentile(&cell.latencies, 0.5),
                percentile(&cell.latencies, 0.99),
                cell.sqld_cpu.unwrap_or(0.0) * 1000.0 / rpcs,
                busy.join(", "),
                if cell.errors > 0 {
                    format!("; {} failed: {}", cell.errors, cell.first_error.unwrap_or_default())
                } else {
                    String::new()
                }
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Batches, Think};
    use std::time::Duration;

    #[test]
    fn pauses_spread_over_the_whole_range_and_differ_between_clients() {
        let draw = |client: usize, max_ms: u64| -> Vec<Duration> {
            let mut think = Think::new(client, max_ms);
            (0..2000).map(|_| think.next_pause()).collect()
        };
        let pauses = draw(0, 5);
        let max = Duration::from_millis(5);
        assert!(pauses.iter().all(|p| *p <= max));
        assert!(pauses.iter().any(|p| *p < max / 10));
        assert!(pauses.iter().any(|p| *p > max * 9 / 10));
        let mean = pauses.iter().sum::<Duration>() / pauses.len() as u32;
        assert!(mean > Duration::from_micros(2000) && mean < Duration::from_micros(3000));
        assert_ne!(
            pauses,
            draw(1, 5),
            "clients pause alike: arrivals stay in step"
        );
        assert_eq!(pauses, draw(0, 5), "a run does not repeat");
        assert!(draw(3, 0).iter().all(|p| p.is_zero()));
    }

    #[test]
    fn batches_formed_in_a_cell_are_described_by_their_buckets() {
        let bounds = vec![1, 2, 4, 8, 16, 32, 64];
        let before = Batches {
            bounds: bounds.clone(),
            cumulative: vec![1, 1, 1, 1, 1, 1, 1],
            count: 1,
            members: 1,
        };
        let after = Batches {
            bounds,
            cumulative: vec![2, 2, 3, 5, 5, 5, 5],
            count: 5,
            members: 1 + 1 + 4 + 7 + 8,
        };
        let formed = after.since(&before);
        assert_eq!(formed.cumulative, [1, 1, 2, 4, 4, 4, 4]);
        assert_eq!(
            formed.describe(),
            "4 batches, mean 5.0 members; 1: 25%, 3-4: 25%, 5-8: 50%"
        );
    }
}
