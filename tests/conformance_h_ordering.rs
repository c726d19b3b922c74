//! Conformance section H: ordering modes and head-of-line blocking.

mod support;

use serde_json::{json, Value};
use support::*;

fn bodies(v: &Value) -> Vec<String> {
    v["messages"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|m| m["body"].as_str())
                .map(|b| b.to_owned())
                .collect()
        })
        .unwrap_or_default()
}

async fn recv(api: &Api, queue: &str, extra: Value) -> Value {
    let body = with(json!({"queue":queue}), extra);
    api.ok("QueueService/Receive", body).await
}

async fn verb(api: &Api, verb: &str, queue: &str, m: &Value, extra: Value) {
    let body = with(
        json!({"queue":queue,"seq_number":m["seq_number"],"lock_token":m["lock_token"]}),
        extra,
    );
    api.ok(&format!("QueueService/{verb}"), body).await;
}

#[tokio::test]
async fn c109_group_fifo_on_standard() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_grouped("q", "s1", Some("orderA")).await;
    api.send_grouped("q", "s2", Some("orderA")).await;
    let first = recv(&api, "q", json!({})).await;
    assert_eq!(bodies(&first), [b64("s1")]);
    assert!(bodies(&recv(&api, "q", json!({})).await).is_empty());
    verb(&api, "Complete", "q", &first["messages"][0], json!({})).await;
    assert_eq!(bodies(&recv(&api, "q", json!({})).await), [b64("s2")]);
}

#[tokio::test]
async fn c110_groups_in_parallel() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_grouped("q", "a", Some("A")).await;
    api.send_grouped("q", "b", Some("B")).await;
    assert_eq!(
        bodies(&recv(&api, "q", json!({"max_messages":2})).await),
        [b64("a"), b64("b")]
    );
}

#[tokio::test]
async fn c111_ungrouped_defer_does_not_block() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_grouped("q", "a", None).await;
    api.send_grouped("q", "b", None).await;
    let a = recv(&api, "q", json!({})).await;
    verb(&api, "Defer", "q", &a["messages"][0], json!({})).await;
    assert_eq!(bodies(&recv(&api, "q", json!({})).await), [b64("b")]);
}

#[tokio::test]
async fn c112_deferred_head_blocks_its_group() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"ordering_mode":"group_fifo"}))
        .await;
    let g1a = api.send_grouped("q", "g1a", Some("G1")).await;
    api.send_grouped("q", "g1b", Some("G1")).await;
    api.send_grouped("q", "g2a", Some("G2")).await;
    let first = recv(&api, "q", json!({})).await;
    assert_eq!(bodies(&first), [b64("g1a")]);
    verb(&api, "Defer", "q", &first["messages"][0], json!({})).await;
    assert_eq!(bodies(&recv(&api, "q", json!({})).await), [b64("g2a")]);
    assert!(bodies(&recv(&api, "q", json!({})).await).is_empty());
    let deferred = api
        .ok(
            "QueueService/ReceiveDeferred",
            json!({"queue":"q","seq_numbers":[g1a]}),
        )
        .await;
    verb(&api, "Complete", "q", &deferred["messages"][0], json!({})).await;
    assert_eq!(bodies(&recv(&api, "q", json!({})).await), [b64("g1b")]);
}

#[tokio::test]
async fn c113_c114_strict_fifo_one_at_a_time() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"ordering_mode":"strict_fifo"}))
        .await;
    for b in ["m1", "m2", "m3"] {
        api.send_grouped("q", b, None).await;
    }
    let mut held = recv(&api, "q", json!({"max_messages":10})).await;
    assert_eq!(
        bodies(&held),
        [b64("m1")],
        "c114: a batch returns exactly one"
    );
    for next in ["m2", "m3"] {
        assert!(
            bodies(&recv(&api, "q", json!({})).await).is_empty(),
            "blocked while {next}'s predecessor is held"
        );
        verb(&api, "Complete", "q", &held["messages"][0], json!({})).await;
        held = recv(&api, "q", json!({})).await;
        assert_eq!(bodies(&held), [b64(next)]);
    }
}

#[tokio::test]
async fn c115_strict_fifo_deferred_stalls_the_queue() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"ordering_mode":"strict_fifo"}))
        .await;
    let m1 = api.send_grouped("q", "m1", None).await;
    api.send_grouped("q", "m2", None).await;
    let first = recv(&api, "q", json!({})).await;
    verb(&api, "Defer", "q", &first["messages"][0], json!({})).await;
    assert!(bodies(&recv(&api, "q", json!({})).await).is_empty());
    let d = api
        .ok(
            "QueueService/ReceiveDeferred",
            json!({"queue":"q","seq_numbers":[m1]}),
        )
        .await;
    verb(&api, "Complete", "q", &d["messages"][0], json!({})).await;
    assert_eq!(bodies(&recv(&api, "q", json!({})).await), [b64("m2")]);
}

#[tokio::test]
async fn c116_order_survives_lease_expiry() {
    let api = Api::new(&[]);
    api.create_queue(
        "q",
        json!({"ordering_mode":"group_fifo","lock_duration_ms":1000}),
    )
    .await;
    api.send_grouped("q", "g1a", Some("G1")).await;
    api.send_grouped("q", "g1b", Some("G1")).await;
    api.send_grouped("q", "g2a", Some("G2")).await;
    assert_eq!(bodies(&recv(&api, "q", json!({})).await), [b64("g1a")]);
    api.advance(1000);
    let again = recv(&api, "q", json!({})).await;
    assert_eq!(
        bodies(&again),
        [b64("g1a")],
        "the expired head is redelivered first"
    );
    assert_eq!(again["messages"][0]["delivery_count"], 2);
    verb(&api, "Complete", "q", &again["messages"][0], json!({})).await;
    assert_eq!(
        bodies(&recv(&api, "q", json!({"max_messages":5})).await),
        [b64("g1b"), b64("g2a")]
    );
}

#[tokio::test]
async fn c117_strict_fifo_across_lease_expiry() {
    let api = Api::new(&[]);
    api.create_queue(
        "q",
        json!({"ordering_mode":"strict_fifo","lock_duration_ms":1000}),
    )
    .await;
    api.send_grouped("q", "m1", None).await;
    api.send_grouped("q", "m2", None).await;
    recv(&api, "q", json!({})).await;
    api.advance(1000);
    let again = recv(&api, "q", json!({})).await;
    assert_eq!(
        (
            bodies(&again),
            again["messages"][0]["delivery_count"].as_i64()
        ),
        (vec![b64("m1")], Some(2))
    );
}

#[tokio::test]
async fn c118_backoff_holds_the_group() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"ordering_mode":"group_fifo"}))
        .await;
    api.send_grouped("q", "g1a", Some("G1")).await;
    api.send_grouped("q", "g1b", Some("G1")).await;
    api.send_grouped("q", "g2a", Some("G2")).await;
    let first = recv(&api, "q", json!({})).await;
    verb(
        &api,
        "Abandon",
        "q",
        &first["messages"][0],
        json!({"delay_ms":10000}),
    )
    .await;
    assert_eq!(bodies(&recv(&api, "q", json!({})).await), [b64("g2a")]);
    assert!(
        bodies(&recv(&api, "q", json!({})).await).is_empty(),
        "g1b must not overtake"
    );
    api.advance(11_000);
    let again = recv(&api, "q", json!({})).await;
    assert_eq!(
        (
            bodies(&again),
            again["messages"][0]["delivery_count"].as_i64()
        ),
        (vec![b64("g1a")], Some(2))
    );
    verb(&api, "Complete", "q", &again["messages"][0], json!({})).await;
    assert_eq!(bodies(&recv(&api, "q", json!({})).await), [b64("g1b")]);
}

#[tokio::test]
async fn c119_backoff_stalls_a_strict_queue() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"ordering_mode":"strict_fifo"}))
        .await;
    api.send_grouped("q", "m1", None).await;
    api.send_grouped("q", "m2", None).await;
    let first = recv(&api, "q", json!({})).await;
    verb(
        &api,
        "Abandon",
        "q",
        &first["messages"][0],
        json!({"delay_ms":10000}),
    )
    .await;
    assert!(bodies(&recv(&api, "q", json!({})).await).is_empty());
    api.advance(11_000);
    assert_eq!(bodies(&recv(&api, "q", json!({})).await), [b64("m1")]);
}

#[tokio::test]
async fn c120_zero_delay_abandon_redelivers_the_head() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"ordering_mode":"group_fifo"}))
        .await;
    api.send_grouped("q", "a", Some("G")).await;
    api.send_grouped("q", "b", Some("G")).await;
    let first = recv(&api, "q", json!({})).await;
    verb(
        &api,
        "Abandon",
        "q",
        &first["messages"][0],
        json!({"delay_ms":0}),
    )
    .await;
    assert_eq!(bodies(&recv(&api, "q", json!({})).await), [b64("a")]);
}

#[tokio::test]
async fn c121_scheduled_head_blocks_its_group() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let t = api.clock.manual_now().unwrap_or(0) + 60_000;
    api.ok("QueueService/Schedule", json!({"queue":"q","scheduled_enqueue_time_ms":t,"messages":[{"body":b64("g-1"),"group_id":"G"}]})).await;
    api.send_grouped("q", "g-2", Some("G")).await;
    api.send_grouped("q", "u", None).await;
    assert_eq!(
        bodies(&recv(&api, "q", json!({"max_messages":5})).await),
        [b64("u")]
    );
}

#[tokio::test]
async fn c122_receive_and_delete_drains_a_group_in_order() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.create_queue("s", json!({"ordering_mode":"strict_fifo"}))
        .await;
    for b in ["x1", "x2", "x3"] {
        api.send_grouped("q", b, Some("G")).await;
        api.send_grouped("s", b, None).await;
    }
    for queue in ["q", "s"] {
        let got = recv(&api, queue, json!({"receive_mode":1,"max_messages":3})).await;
        assert_eq!(bodies(&got), [b64("x1"), b64("x2"), b64("x3")], "{queue}");
    }
}

#[tokio::test]
async fn c123_mixed_concurrency_keeps_group_order() {
    let h = std::sync::Arc::new(Harness::real_time());
    use mqlite_edge::engine::*;
    h.engine
        .create_queue("q", &QueueConfigInput::default())
        .await
        .expect("create");
    let mut batch = vec![];
    for i in 0..12 {
        batch.push(OutgoingMessage {
            body: format!("u{i}").into_bytes(),
            ..Default::default()
        });
    }
    for (group, n) in [("A", 3), ("B", 2), ("C", 2)] {
        for i in 0..n {
            batch.push(OutgoingMessage {
                body: format!("{group}{i}").into_bytes(),
                group_id: Some(group.into()),
                ..Default::default()
            });
        }
    }
    h.engine
        .send(&SendRequest {
            queue: "q".into(),
            messages: batch,
            ..Default::default()
        })
        .await
        .expect("send");
    let consumers: Vec<_> = (0..6)
        .map(|_| {
            let h = h.clone();
            tokio::spawn(async move {
                let mut log = vec![];
                loop {
                    let r = ReceiveRequest {
                        queue: "q".into(),
                        max_messages: 2,
                        ..Default::default()
                    };
                    let (got, _) = h.engine.receive(&r, &NoWait).await.expect("receive");
                    if got.is_empty() {
                        let stats = h.engine.stats("q").await.expect("stats");
                        if stats.total == 0 {
                            return log;
                        }
                        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                        continue;
                    }
                    for m in got {
                        let settle = SettleRequest {
                            queue: "q".into(),
                            seq_number: m.seq_number,
                            lock_token: m.lock_token.clone().unwrap_or_default(),
                        };
                        // Record completion order per group, then complete.
                        log.push((std::time::Instant::now(), m.seq_number, m.group_id.clone()));
                        h.engine.complete(&settle).await.expect("complete");
                    }
                }
            })
        })
        .collect();
    let mut all = vec![];
    for c in consumers {
        all.extend(c.await.expect("consumer"));
    }
    assert_eq!(all.len(), 19, "each message exactly once");
    all.sort_by_key(|(t, _, _)| *t);
    for group in ["A", "B", "C"] {
        let seqs: Vec<i64> = all
            .iter()
            .filter(|(_, _, g)| g.as_deref() == Some(group))
            .map(|(_, s, _)| *s)
            .collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "group {group} consumed in send order: {seqs:?}"
        );
    }
}

#[tokio::test]
async fn receive_and_delete_runs_interleave_groups_in_seq_order_and_stop_at_a_blocker() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    for (b, g) in [("A1", "A"), ("B1", "B"), ("A2", "A"), ("B2", "B")] {
        api.send_grouped("q", b, Some(g)).await;
    }
    let peek_lock = recv(&api, "q", json!({"max_messages":4})).await;
    assert_eq!(
        bodies(&peek_lock),
        [b64("A1"), b64("B1")],
        "peek-lock: one per group"
    );
    for m in peek_lock["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        verb(&api, "Abandon", "q", &m, json!({})).await;
    }
    let run = recv(&api, "q", json!({"max_messages":4,"receive_mode":1})).await;
    assert_eq!(
        bodies(&run),
        [b64("A1"), b64("B1"), b64("A2"), b64("B2")],
        "in-order runs, seq order"
    );

    api.create_queue("r", json!({})).await;
    for b in ["x1", "x2", "x3"] {
        api.send_grouped("r", b, Some("G")).await;
    }
    let x1 = recv(&api, "r", json!({})).await;
    verb(&api, "Abandon", "r", &x1["messages"][0], json!({})).await;
    let both = recv(&api, "r", json!({"max_messages":2})).await;
    assert_eq!(bodies(&both), [b64("x1")]);
    verb(&api, "Complete", "r", &both["messages"][0], json!({})).await;
    let x2 = recv(&api, "r", json!({})).await;
    verb(&api, "Defer", "r", &x2["messages"][0], json!({})).await;
    api.send_grouped("r", "x4", Some("G")).await;
    assert!(
        bodies(&recv(&api, "r", json!({"max_messages":5,"receive_mode":1})).await).is_empty(),
        "x3 and x4 wait behind the deferred x2"
    );
}
