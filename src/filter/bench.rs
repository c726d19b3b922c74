//! Compile and evaluation timings of typical filters, through the public API
//! only, so the same harness measures any implementation. Ignored by default;
//! run optimised with
//! `cargo test --release --lib filter::bench -- --ignored --nocapture`.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Instant;

use super::{Filter, FilterInput};

/// Filters as subscribers write them (docs/semantics.md#filters, cases 182–203).
const TYPICAL: [&str; 4] = [
    r#"subject startsWith "payment." && properties["tier"] == "gold""#,
    r#""amount" in body_json && body_json.amount > 100 && content_type contains "json""#,
    r#"subject_parts[0] == "orders" and (properties["region"] in ["eu", "us"] or subject matches "^orders\\.(eu|us)\\.")"#,
    r#"visible_at - enqueued_at > hours(1) || any(property_keys, # startsWith "x-") && enqueued_at.Hour() >= 9"#,
];

/// Average nanoseconds per call of `f` over `rounds` calls.
fn per_call(rounds: u32, mut f: impl FnMut()) -> f64 {
    let started = Instant::now();
    for _ in 0..rounds {
        f();
    }
    started.elapsed().as_nanos() as f64 / f64::from(rounds)
}

#[test]
#[ignore = "timing harness, run with --release --ignored --nocapture"]
fn bench_compile_and_evaluate() {
    let mut properties = BTreeMap::new();
    properties.insert("tier".to_string(), "gold".to_string());
    properties.insert("region".to_string(), "eu".to_string());
    properties.insert("x-trace".to_string(), "1".to_string());
    let body = br#"{"amount": 150, "currency": "EUR", "items": [1, 2, 3]}"#;
    let input = FilterInput {
        subject: "orders.eu.new",
        group_id: "",
        correlation_id: "c1",
        reply_to: "",
        message_id: "m1",
        content_type: "application/json",
        properties: &properties,
        body,
        enqueued_at_ms: 1_710_496_800_000,
        visible_at_ms: 1_710_496_800_000,
        now_ms: 1_710_496_800_000,
    };
    let mut compile_total = 0.0;
    let mut evaluate_total = 0.0;
    for source in TYPICAL {
        let compile = per_call(2_000, || {
            black_box(Filter::compile(black_box(source)).is_ok());
        });
        let filter = Filter::compile(source).unwrap_or_else(|e| panic!("{source}: {e}"));
        let evaluate = per_call(20_000, || {
            black_box(filter.evaluate(black_box(&input)).is_ok());
        });
        println!(
            "compile {:>9.1} µs   evaluate {:>7.2} µs   {source}",
            compile / 1e3,
            evaluate / 1e3
        );
        compile_total += compile;
        evaluate_total += evaluate;
    }
    let n = TYPICAL.len() as f64;
    println!(
        "mean: compile {:.1} µs, evaluate {:.2} µs per message",
        compile_total / n / 1e3,
        evaluate_total / n / 1e3
    );
}
