//! `mqlite-wake`: long-poll wake-up through wrangler dev (docs/bench.md,
//! "Wake hints"), with the `QueueWaker` binding and without it
//! (`MQLITE_WAKE=off`): wake latency p50/p99 over N waits (a Receive
//! waiting 20 s, a Send at a random moment 0.2–6 s into it), database
//! requests per empty 20 s wait, and Send latency with and without a
//! waiter on the queue. Seeded and bounded.
//!
//! Usage (via `make bench`): `mqlite-wake [--waits N] [--sends N] [--seed S]`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mqlite_e2e::rng::Rng;
use mqlite_e2e::wake::{empty_wait, quantile, wake_once};
use mqlite_e2e::{b64, Stack, StackOptions, Tools};
use serde_json::json;

fn main() {
    let mut waits = 16usize;
    let mut sends = 100usize;
    let mut seed = Rng::seed_from_env("MQLITE_WAKE_SEED");
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (
            flag.as_str(),
            args.next().and_then(|v| v.parse::<u64>().ok()),
        ) {
            ("--waits", Some(n)) => waits = (n as usize).clamp(1, 200),
            ("--sends", Some(n)) => sends = (n as usize).clamp(1, 10_000),
            ("--seed", Some(n)) => seed = n,
            _ => {
                eprintln!("usage: mqlite-wake [--waits N] [--sends N] [--seed S]");
                std::process::exit(2);
            }
        }
    }
    let tools = Tools::from_env().unwrap_or_else(|e| fail(&e));
    println!(
        "long-poll wake-up through wrangler dev (workerd) + {}: {waits} waits of 20 s, \
         a Send 0.2-6 s in; seed {seed} (MQLITE_WAKE_SEED)",
        tools.database_name()
    );
    println!(
        "{:<30} {:>9} {:>9} {:>9} {:>13} {:>10} {:>10}",
        "configuration", "wake p50", "wake p99", "wake max", "db req/empty", "send p50", "send p99"
    );
    for (name, vars) in [
        ("QueueWaker binding", &[][..]),
        (
            "MQLITE_WAKE=off (re-polling)",
            &[("MQLITE_WAKE", "off")][..],
        ),
    ] {
        let stack = Stack::start(
            &tools,
            StackOptions {
                vars,
                database_url: None,
            },
        )
        .unwrap_or_else(|e| fail(&e));
        let stack = Arc::new(stack);
        for queue in ["wake", "empty", "quiet", "busy"] {
            stack.ok(
                "AdminService/CreateQueue",
                json!({"name": queue, "config": {}}),
            );
        }
        let mut rng = Rng::new(seed);
        let mut latencies = Vec::with_capacity(waits);
        for _ in 0..waits {
            let at = Duration::from_millis(200 + rng.below(5_800) as u64);
            let woken = wake_once(&stack, "wake", 20_000, at).unwrap_or_else(|e| fail(&e));
            latencies.push(woken.latency);
        }
        let mut empty = Vec::new();
        for _ in 0..2 {
            let (_, requests) = empty_wait(&stack, "empty", 20_000).unwrap_or_else(|e| fail(&e));
            empty.push(requests);
        }
        let (quiet, busy) = send_latency(&stack, sends);
        println!(
            "{:<30} {:>9} {:>9} {:>9} {:>13} {:>10} {:>10}",
            name,
            ms(quantile(&latencies, 0.5)),
            ms(quantile(&latencies, 0.99)),
            ms(quantile(&latencies, 1.0)),
            if stack.counts_round_trips() {
                format!("{:?}", empty)
            } else {
                "n/a (sqld)".into()
            },
            format!("{}/{}", ms(quantile(&quiet, 0.5)), ms(quantile(&busy, 0.5))),
            format!(
                "{}/{}",
                ms(quantile(&quiet, 0.99)),
                ms(quantile(&busy, 0.99))
            ),
        );
    }
    println!(
        "send p50/p99: to a queue nobody waits on / to a queue with a waiting Receive. \
         Wake latency: from the Send's answer to the waiting Receive's answer."
    );
}

/// Send latency to a queue nobody waits on, then to one where a Receive
/// is always waiting (a consumer thread re-waits as soon as it got one).
fn send_latency(stack: &Arc<Stack>, sends: usize) -> (Vec<Duration>, Vec<Duration>) {
    let send = |queue: &str, i: usize| {
        let started = Instant::now();
        stack.ok(
            "QueueService/Send",
            json!({"queue": queue, "messages": [{"body": b64(&format!("s{i}"))}]}),
        );
        started.elapsed()
    };
    let quiet: Vec<Duration> = (0..sends).map(|i| send("quiet", i)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let consumer = {
        let stack = stack.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let got = stack.ok(
                    "QueueService/Receive",
                    json!({"queue": "busy", "max_messages": 256, "wait_time_ms": 2_000,
                           "receive_mode": 1}),
                );
                drop(got);
            }
        })
    };
    // Let the consumer park before the first send.
    std::thread::sleep(Duration::from_millis(300));
    let busy: Vec<Duration> = (0..sends)
        .map(|i| {
            let t = send("busy", i);
            std::thread::sleep(Duration::from_millis(20));
            t
        })
        .collect();
    stop.store(true, Ordering::SeqCst);
    let _ = consumer.join();
    (quiet, busy)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn fail(message: &str) -> ! {
    eprintln!("mqlite-wake: {message}");
    std::process::exit(1);
}
