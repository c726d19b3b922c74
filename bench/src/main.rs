//! `mqlite-bench`: starts the local stack (libSQL server + wrangler dev) and
//! prints latency medians, side by side with a raw database round trip and a
//! storage-free Worker request, plus claim latency at deep backlogs.
//!
//! Usage (via `make bench`): `mqlite-bench [--iterations N] [--backlogs 1000,10000,100000]`

use std::time::{Duration, Instant};

use mqlite_e2e::{b64, Stack, StackOptions, Tools};
use serde_json::{json, Value};

fn main() {
    let mut iterations = 200usize;
    let mut backlogs = vec![1_000usize, 10_000, 100_000];
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--iterations", Some(n)) => iterations = n.parse().unwrap_or(iterations),
            ("--backlogs", Some(list)) => {
                backlogs = list
                    .split(',')
                    .filter_map(|n| n.trim().parse().ok())
                    .collect()
            }
            _ => {
                eprintln!("usage: mqlite-bench [--iterations N] [--backlogs 1000,10000]");
                std::process::exit(2);
            }
        }
    }
    let tools = Tools::from_env().unwrap_or_else(|e| fail(&e));
    let stack = Stack::start(
        &tools,
        StackOptions {
            vars: &[],
            database_url: None,
        },
    )
    .unwrap_or_else(|e| fail(&e));
    stack.ok(
        "AdminService/CreateQueue",
        json!({"name":"bench","config":{}}),
    );

    println!(
        "mqlite-edge latency through wrangler dev (workerd) + {}, {iterations} iterations each",
        tools.database_name()
    );
    println!(
        "{:<44} {:>9} {:>9} {:>9}",
        "operation", "median", "p90", "p99"
    );
    let raw = measure(iterations, || raw_round_trip(&stack.db_url));
    report("raw Hrana round trip (bench → libSQL)", &raw);
    let health = measure(iterations, || {
        stack.raw("GET", "/healthz", None, b"");
    });
    report("GET /healthz (Worker, no database)", &health);

    let mut send = vec![];
    let mut receive = vec![];
    let mut complete = vec![];
    for i in 0..iterations {
        let body = json!({"queue":"bench","messages":[{"body": b64(&format!("message {i}"))}]});
        let (_, t) = timed(|| stack.ok("QueueService/Send", body));
        send.push(t);
        let (got, t) = timed(|| stack.ok("QueueService/Receive", json!({"queue":"bench"})));
        receive.push(t);
        let m = &got["messages"][0];
        let settle =
            json!({"queue":"bench","seq_number":m["seq_number"],"lock_token":m["lock_token"]});
        let (_, t) = timed(|| stack.ok("QueueService/Complete", settle));
        complete.push(t);
    }
    report("Send (1 message)", &send);
    report("Receive (peek-lock, 1 message)", &receive);
    report("Complete", &complete);
    let base = median(&raw);
    println!(
        "ratios to the raw database round trip: Send {:.2}x, Receive {:.2}x, Complete {:.2}x, healthz {:.2}x",
        median(&send) / base,
        median(&receive) / base,
        median(&complete) / base,
        median(&health) / base
    );

    fan_out_and_keys(&stack, iterations, &send);

    println!("\nclaim latency (Receive + Complete of the oldest message) at a standing backlog");
    println!(
        "{:<44} {:>9} {:>9} {:>9}",
        "backlog", "median", "p90", "p99"
    );
    let mut loaded = 0usize;
    for backlog in backlogs {
        let queue = "backlog";
        if loaded == 0 {
            stack.ok(
                "AdminService/CreateQueue",
                json!({"name":queue,"config":{}}),
            );
        }
        while loaded < backlog {
            let n = (backlog - loaded).min(1000);
            let batch: Vec<Value> = (0..n)
                .map(|i| json!({"body": b64(&format!("b{}", loaded + i))}))
                .collect();
            stack.ok("QueueService/Send", json!({"queue":queue,"messages":batch}));
            loaded += n;
        }
        let claim = measure(50, || {
            let got = stack.ok("QueueService/Receive", json!({"queue":queue}));
            let m = &got["messages"][0];
            stack.ok(
                "QueueService/Complete",
                json!({"queue":queue,"seq_number":m["seq_number"],"lock_token":m["lock_token"]}),
            );
        });
        loaded -= 50;
        report(&format!("{backlog} messages"), &claim);
    }

    println!("\nempty poll (Receive, wait 0) with 10000 messages blocked behind one in flight");
    println!(
        "{:<44} {:>9} {:>9} {:>9}",
        "ordering", "median", "p90", "p99"
    );
    for (queue, mode, group) in [
        ("blocked-strict", "strict_fifo", None),
        ("blocked-group", "group_fifo", Some("G")),
    ] {
        stack.ok(
            "AdminService/CreateQueue",
            json!({"name":queue,"config":{"ordering_mode":mode}}),
        );
        for chunk in 0..10 {
            let batch: Vec<Value> = (0..1000)
                .map(|i| json!({"body": b64(&format!("{chunk}-{i}")), "group_id": group}))
                .collect();
            stack.ok("QueueService/Send", json!({"queue":queue,"messages":batch}));
        }
        stack.ok("QueueService/Receive", json!({"queue":queue}));
        let polls = measure(30, || {
            stack.ok("QueueService/Receive", json!({"queue":queue}));
        });
        report(mode, &polls);
        if group.is_some() {
            let polls = measure(30, || {
                stack.ok(
                    "QueueService/Receive",
                    json!({"queue":queue,"receive_mode":1}),
                );
            });
            report(&format!("{mode}, receive-and-delete"), &polls);
        }
    }
}

fn fail(message: &str) -> ! {
    eprintln!("mqlite-bench: {message}");
    std::process::exit(1);
}

fn raw_round_trip(db_url: &str) {
    let body = r#"{"baton":null,"requests":[{"type":"execute","stmt":{"sql":"SELECT 1"}},{"type":"close"}]}"#;
    let _ = ureq::post(&format!("{db_url}/v2/pipeline")).send_string(body);
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let value = f();
    (value, started.elapsed())
}

fn measure(n: usize, mut f: impl FnMut()) -> Vec<Duration> {
    (0..n).map(|_| timed(&mut f).1).collect()
}

fn percentile(samples: &[Duration], p: f64) -> f64 {
    let mut ms: Vec<f64> = samples.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    let index = ((ms.len() as f64 - 1.0) * p).round() as usize;
    ms.get(index).copied().unwrap_or(0.0)
}

fn median(samples: &[Duration]) -> f64 {
    percentile(samples, 0.5)
}

fn report(name: &str, samples: &[Duration]) {
    println!(
        "{:<44} {:>7.2}ms {:>7.2}ms {:>7.2}ms",
        name,
        median(samples),
        percentile(samples, 0.9),
        percentile(samples, 0.99)
    );
}

/// Publish to topics (filters evaluated in the Worker, copies inserted in
/// the same transaction) and a managed-key Send, beside the plain Send.
fn fan_out_and_keys(stack: &Stack, iterations: usize, plain_send: &[Duration]) {
    println!("\npublish fan-out and managed keys, beside Send (1 message) to a queue");
    println!(
        "{:<44} {:>9} {:>9} {:>9}",
        "operation", "median", "p90", "p99"
    );
    for subscriptions in [1usize, 10] {
        let topic = format!("bench-topic-{subscriptions}");
        for i in 0..subscriptions {
            let filter = if i % 2 == 1 {
                json!({"expr":"subject startsWith \"order.\" && properties[\"tier\"] != \"free\""})
            } else {
                json!({"expr":""})
            };
            stack.ok(
                "AdminService/Subscribe",
                json!({"topic":topic,"name":format!("{topic}-s{i}"),"filter":filter}),
            );
        }
        let body = json!({"queue":topic,"messages":[{"body":b64("p"),"subject":"order.new","properties":{"tier":"gold"}}]});
        stack.ok("QueueService/Send", body.clone());
        let before = stack.round_trips();
        let publish = measure(iterations, || {
            stack.ok("QueueService/Send", body.clone());
        });
        let name = if stack.counts_round_trips() {
            let per_call = (stack.round_trips() - before) as f64 / iterations as f64;
            format!("publish to {subscriptions} subscription(s) ({per_call:.2} db req/call)")
        } else {
            format!("publish to {subscriptions} subscription(s)")
        };
        report(&name, &publish);
    }
    let created = stack.ok(
        "AuthService/CreateKey",
        json!({"id":"b0000000000000000000000000000b00","name":"bench","permissions":["send"]}),
    );
    let token = created["token"].as_str().unwrap_or_default().to_owned();
    let body = json!({"queue":"bench","messages":[{"body":b64("k")}]}).to_string();
    let keyed = measure(iterations, || {
        stack.raw(
            "POST",
            "/mqlite.v1.QueueService/Send",
            Some(&token),
            body.as_bytes(),
        );
    });
    report("Send with a managed key", &keyed);
    println!(
        "ratio managed-key Send / admin-token Send: {:.2}x",
        median(&keyed) / median(plain_send)
    );
}
