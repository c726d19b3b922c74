//! Wake hints through workerd (docs/semantics.md#long-polling): `wrangler dev`
//! runs the `QueueWaker` Durable Object locally. Each scenario starts its
//! own stack, with the binding, without it (`MQLITE_WAKE=off`), or with a
//! wake object that fails (`MQLITE_WAKE_FAULT=error`) or loses every hint
//! (`MQLITE_WAKE_FAULT=drop`; `drop-notify` loses only the Worker's, to show
//! the object waking its own waiters): a message is never lost or delayed beyond
//! the re-polling schedule. Seeded (`MQLITE_WAKE_SEED`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use mqlite_e2e::rng::Rng;
use mqlite_e2e::wake::{empty_wait, quantile, wake_once};
use mqlite_e2e::{b64, Stack, StackOptions, Tools};
use serde_json::json;

macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

type Scenario = fn(&Tools, &mut Rng) -> Result<(), String>;

fn main() {
    let tools = match Tools::from_env() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("wake: {e}");
            std::process::exit(1);
        }
    };
    let seed = Rng::seed_from_env("MQLITE_WAKE_SEED");
    println!(
        "wake: database is {}; seed {seed} (replay with MQLITE_WAKE_SEED={seed})",
        tools.database_name()
    );
    let scenarios: &[(&str, Scenario)] = &[
        (
            "c100_a_hint_wakes_a_waiting_receive_in_milliseconds",
            hinted_wakes,
        ),
        (
            "c101_an_empty_wait_parks_until_its_deadline",
            hinted_empty_wait,
        ),
        ("duplicated_and_stale_hints_cost_nothing", duplicated_hints),
        ("without_the_binding_long_poll_re_polls", without_binding),
        (
            "an_erroring_wake_object_falls_back_to_re_polling",
            erroring_object,
        ),
        ("a_lost_hint_is_covered_by_the_re_check", lost_hints),
        (
            "the_object_wakes_its_waiters_on_its_own_commits",
            own_commits_wake,
        ),
    ];
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut rng = Rng::new(seed);
    let (mut passed, mut failed) = (0, 0);
    for (name, scenario) in scenarios {
        if !only.is_empty() && !only.iter().any(|w| name.contains(w.as_str())) {
            continue;
        }
        let started = Instant::now();
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| scenario(&tools, &mut rng)))
                .unwrap_or_else(|_| Err("panicked".into()));
        match outcome {
            Ok(()) => {
                passed += 1;
                println!("test {name} ... ok ({} ms)", started.elapsed().as_millis());
            }
            Err(e) => {
                failed += 1;
                println!("test {name} ... FAILED\n    {e}");
            }
        }
    }
    println!("\nwake: {passed} passed, {failed} failed");
    if failed > 0 {
        std::process::exit(1);
    }
}

/// A stack with these Worker vars and a fresh queue named `queue`.
fn stack(tools: &Tools, vars: &[(&str, &str)], queues: &[&str]) -> Result<Arc<Stack>, String> {
    let stack = Stack::start(
        tools,
        StackOptions {
            vars,
            database_url: None,
        },
    )?;
    for queue in queues {
        stack.ok(
            "AdminService/CreateQueue",
            json!({"name": queue, "config": {}}),
        );
    }
    Ok(Arc::new(stack))
}

/// A moment in `from_ms..to_ms`.
fn moment(rng: &mut Rng, from_ms: u64, to_ms: u64) -> Duration {
    Duration::from_millis(from_ms + rng.below((to_ms - from_ms) as usize) as u64)
}

/// No panic and no worker error in the log.
fn clean_log(stack: &Stack) -> Result<(), String> {
    let log = stack.worker_log();
    check!(!log.contains("panicked at"), "the Worker panicked:\n{log}");
    Ok(())
}

fn hinted_wakes(tools: &Tools, rng: &mut Rng) -> Result<(), String> {
    let stack = stack(tools, &[], &["wake", "pg", "abandon"])?;
    let mut latencies = Vec::new();
    for _ in 0..8 {
        let woken = wake_once(&stack, "wake", 20_000, moment(rng, 200, 2_500))?;
        check!(
            woken.latency < Duration::from_millis(1_000),
            "woke {:?} after the send",
            woken.latency
        );
        latencies.push(woken.latency);
    }
    let p50 = quantile(&latencies, 0.5);
    println!(
        "    wake latency over 8 waits: p50 {p50:?}, max {:?}",
        quantile(&latencies, 1.0)
    );
    check!(
        p50 < Duration::from_millis(250),
        "median wake latency {p50:?} is not far under the re-poll interval: {latencies:?}"
    );

    // pgmq read-poll waits on the same hints.
    let sender = stack.clone();
    let send = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(800));
        let body = json!({"message": {"n": 1}}).to_string();
        let sent = sender.raw(
            "POST",
            "/v1/queues/pg/messages",
            Some(&sender.token),
            body.as_bytes(),
        );
        (sent.status, Instant::now())
    });
    let body = json!({"vt": 30, "qty": 1, "max_poll_seconds": 10}).to_string();
    let read = stack.raw(
        "POST",
        "/v1/queues/pg/read-poll",
        Some(&stack.token),
        body.as_bytes(),
    );
    let answered = Instant::now();
    let (status, sent) = send.join().map_err(|_| "sender panicked")?;
    check!(
        status == 201 || status == 200,
        "pgmq send answered {status}"
    );
    check!(
        read.status == 200,
        "read-poll: {} {}",
        read.status,
        read.text
    );
    check!(
        read.json()["messages"].as_array().map(Vec::len) == Some(1),
        "{}",
        read.text
    );
    let latency = answered.saturating_duration_since(sent);
    check!(
        latency < Duration::from_millis(1_000),
        "read-poll woke after {latency:?}"
    );

    // An Abandon makes the message claimable again: it wakes a waiter.
    stack.ok(
        "QueueService/Send",
        json!({"queue": "abandon", "messages": [{"body": b64("again")}]}),
    );
    let first = stack.ok("QueueService/Receive", json!({"queue": "abandon"}));
    let m = first["messages"][0].clone();
    let settler = stack.clone();
    let abandon = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(800));
        let reply = settler.rpc(
            "QueueService/Abandon",
            &json!({"queue": "abandon", "seq_number": m["seq_number"],
                    "lock_token": m["lock_token"]}),
        );
        (reply.status, Instant::now())
    });
    let again = stack.ok(
        "QueueService/Receive",
        json!({"queue": "abandon", "wait_time_ms": 20_000}),
    );
    let answered = Instant::now();
    let (status, abandoned) = abandon.join().map_err(|_| "abandon panicked")?;
    check!(status == 200, "abandon answered {status}");
    check!(again["messages"][0]["delivery_count"] == 2, "{again}");
    let latency = answered.saturating_duration_since(abandoned);
    check!(
        latency < Duration::from_millis(1_000),
        "abandon woke after {latency:?}"
    );
    clean_log(&stack)
}

fn hinted_empty_wait(tools: &Tools, _rng: &mut Rng) -> Result<(), String> {
    let stack = stack(tools, &[], &["empty"])?;
    let (waited, requests) = empty_wait(&stack, "empty", 10_000)?;
    check!(
        waited >= Duration::from_millis(10_000) && waited < Duration::from_millis(12_000),
        "a 10 s wait answered after {waited:?}"
    );
    // Claims at 0, 5 and 10 s; parks in between.
    check!(
        requests == 3 || !stack.counts_round_trips(),
        "{requests} database requests for an empty 10 s wait"
    );
    clean_log(&stack)
}

fn duplicated_hints(tools: &Tools, _rng: &mut Rng) -> Result<(), String> {
    let stack = stack(tools, &[], &["dup"])?;
    // Two waiters, two Sends at the same moment: two hints each reaching
    // both waiters (or one arriving before a park). Each gets one message.
    let waiters: Vec<_> = (0..2)
        .map(|_| {
            let waiter = stack.clone();
            std::thread::spawn(move || {
                let got = waiter.ok(
                    "QueueService/Receive",
                    json!({"queue": "dup", "wait_time_ms": 20_000}),
                );
                (got, Instant::now())
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1_000));
    let senders: Vec<_> = (0..2)
        .map(|i| {
            let sender = stack.clone();
            std::thread::spawn(move || {
                sender.ok(
                    "QueueService/Send",
                    json!({"queue": "dup", "messages": [{"body": b64(&format!("d{i}"))}]}),
                );
                Instant::now()
            })
        })
        .collect();
    let mut sent = Vec::new();
    for s in senders {
        sent.push(s.join().map_err(|_| "sender panicked")?);
    }
    let last_sent = sent.iter().max().copied().unwrap_or_else(Instant::now);
    let mut bodies = Vec::new();
    for w in waiters {
        let (got, at) = w.join().map_err(|_| "waiter panicked")?;
        let latency = at.saturating_duration_since(last_sent);
        check!(
            latency < Duration::from_millis(1_500),
            "woke {latency:?} after the sends"
        );
        bodies.push(got["messages"][0]["body"].as_str().unwrap_or("").to_owned());
    }
    bodies.sort();
    check!(
        bodies == [b64("d0"), b64("d1")],
        "each waiter one message: {bodies:?}"
    );
    // The hints already delivered are older than a new waiter's claim: it
    // waits its whole time, parked, instead of spinning on them.
    let (waited, requests) = empty_wait(&stack, "dup", 3_000)?;
    check!(
        waited >= Duration::from_millis(3_000) && waited < Duration::from_millis(4_500),
        "{waited:?}"
    );
    check!(
        requests <= 2 || !stack.counts_round_trips(),
        "{requests} database requests for an empty 3 s wait after old hints"
    );
    clean_log(&stack)
}

fn without_binding(tools: &Tools, rng: &mut Rng) -> Result<(), String> {
    let stack = stack(tools, &[("MQLITE_WAKE", "off")], &["plain"])?;
    for _ in 0..3 {
        let woken = wake_once(&stack, "plain", 20_000, moment(rng, 200, 2_500))?;
        check!(
            woken.latency < Duration::from_millis(1_500),
            "re-polling found the message {:?} after the send",
            woken.latency
        );
    }
    // Plain bounded re-polling, as before the hints: several claims.
    let (waited, requests) = empty_wait(&stack, "plain", 3_000)?;
    check!(waited >= Duration::from_millis(3_000), "{waited:?}");
    check!(
        (4..=40).contains(&requests) || !stack.counts_round_trips(),
        "{requests} database requests for an empty 3 s re-polling wait"
    );
    clean_log(&stack)
}

fn erroring_object(tools: &Tools, rng: &mut Rng) -> Result<(), String> {
    let stack = stack(tools, &[("MQLITE_WAKE_FAULT", "error")], &["faulty"])?;
    for _ in 0..3 {
        // The Send still answers 200 (its hint fails after the answer); the
        // waiter's park fails and it re-polls.
        let woken = wake_once(&stack, "faulty", 20_000, moment(rng, 200, 2_500))?;
        check!(
            woken.latency < Duration::from_millis(1_500),
            "found {:?} after the send",
            woken.latency
        );
    }
    let (waited, requests) = empty_wait(&stack, "faulty", 3_000)?;
    check!(
        waited >= Duration::from_millis(3_000) && waited < Duration::from_millis(4_500),
        "{waited:?}"
    );
    check!(
        (4..=40).contains(&requests) || !stack.counts_round_trips(),
        "{requests} database requests: the failed park must fall back to re-polling"
    );
    clean_log(&stack)
}

fn lost_hints(tools: &Tools, rng: &mut Rng) -> Result<(), String> {
    let stack = stack(tools, &[("MQLITE_WAKE_FAULT", "drop")], &["lossy"])?;
    // The waiter parks for 5 s; the hint of a Send early in the park is
    // lost; the re-check at the end of the park finds the message.
    let woken = wake_once(&stack, "lossy", 20_000, moment(rng, 300, 1_500))?;
    check!(
        woken.waited < Duration::from_millis(6_500),
        "waited {:?}: the re-check must come within a park",
        woken.waited
    );
    check!(
        woken.latency > Duration::from_millis(2_000),
        "woke {:?} after the send although every hint was dropped",
        woken.latency
    );
    clean_log(&stack)
}

/// Group commit on, the Worker's hints lost (`drop-notify`): a Send that
/// went through the queue's object still wakes a parked waiter in
/// milliseconds, since the object wakes its own board on the commit. With
/// group commit off the same Send goes direct and its lost hint leaves the
/// waiter parked until its re-check.
fn own_commits_wake(tools: &Tools, rng: &mut Rng) -> Result<(), String> {
    let grouped = stack(tools, &[("MQLITE_WAKE_FAULT", "drop-notify")], &["own"])?;
    for _ in 0..3 {
        let woken = wake_once(&grouped, "own", 20_000, moment(rng, 300, 1_500))?;
        check!(
            woken.latency < Duration::from_millis(1_000),
            "woke {:?} after the send: the object did not wake its waiter",
            woken.latency
        );
    }
    clean_log(&grouped)?;
    drop(grouped);
    let direct = stack(
        tools,
        &[
            ("MQLITE_WAKE_FAULT", "drop-notify"),
            ("MQLITE_COALESCE", "off"),
        ],
        &["direct"],
    )?;
    let woken = wake_once(&direct, "direct", 20_000, moment(rng, 300, 1_500))?;
    check!(
        woken.latency > Duration::from_millis(2_000),
        "woke {:?} after a direct Send although its hint was dropped",
        woken.latency
    );
    clean_log(&direct)
}
