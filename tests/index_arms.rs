//! No index holds every row of a queue (migration 0008; docs/engine.md,
//! "Where a queue's rows are found"): an ungrouped active row is only in
//! `messages_ungrouped_active`, an ungrouped locked row only in
//! `messages_lease_expiry`, the rest in `messages_by_state`. Every statement
//! over a queue's rows must still find each of them: one queue holding a
//! grouped and an ungrouped row in each of the five states, seen through
//! Stats, Peek (all states and each one), Observe, pgmq's metrics, the
//! emptiness check of DeleteQueue and both purges; and strict FIFO picks
//! across grouped and ungrouped rows in seq order.

mod support;

use serde_json::{json, Value};
use support::*;

const STATES: [&str; 5] = ["active", "locked", "deferred", "scheduled", "dead_lettered"];

/// Sends one message and receives it (it is the only claimable one).
async fn send_and_lock(api: &Api, queue: &str, body: &str, group: Option<&str>) -> Value {
    let seq = api.send_grouped(queue, body, group).await;
    let got = api.ok("QueueService/Receive", json!({"queue":queue})).await["messages"][0].clone();
    assert_eq!(got["seq_number"], seq, "the only claimable message");
    got
}

async fn settle(api: &Api, verb: &str, queue: &str, m: &Value) {
    api.ok(
        &format!("QueueService/{verb}"),
        json!({"queue":queue,"seq_number":m["seq_number"],"lock_token":m["lock_token"]}),
    )
    .await;
}

/// Queue `q` with, per state, an ungrouped row and a grouped one (each in
/// its own group), in this seq order; returns the seqs by state.
async fn one_of_each(api: &Api, queue: &str) -> Vec<(&'static str, Vec<i64>)> {
    api.create_queue(queue, json!({})).await;
    let mut by_state = Vec::new();
    let mut locked = Vec::new();
    for group in [None, Some("gl")] {
        locked.push(send_and_lock(api, queue, "l", group).await["seq_number"].clone());
    }
    let mut deferred = Vec::new();
    for group in [None, Some("gd")] {
        let m = send_and_lock(api, queue, "d", group).await;
        settle(api, "Defer", queue, &m).await;
        deferred.push(m["seq_number"].clone());
    }
    let mut dead = Vec::new();
    for group in [None, Some("gx")] {
        let m = send_and_lock(api, queue, "x", group).await;
        settle(api, "Reject", queue, &m).await;
        dead.push(m["seq_number"].clone());
    }
    let mut scheduled = Vec::new();
    for group in [None, Some("gs")] {
        let mut m = json!({"body": b64("s")});
        if let Some(g) = group {
            m["group_id"] = g.into();
        }
        let at = api.now() + 60_000;
        let answer = api
            .ok(
                "QueueService/Schedule",
                json!({"queue":queue,"messages":[m],"scheduled_enqueue_time_ms":at}),
            )
            .await;
        scheduled.push(answer["seq_numbers"][0].clone());
    }
    let mut active = Vec::new();
    for group in [None, Some("ga")] {
        active.push(json!(api.send_grouped(queue, "a", group).await));
    }
    let ints = |v: Vec<Value>| v.iter().filter_map(Value::as_i64).collect::<Vec<_>>();
    by_state.push(("active", ints(active)));
    by_state.push(("locked", ints(locked)));
    by_state.push(("deferred", ints(deferred)));
    by_state.push(("scheduled", ints(scheduled)));
    by_state.push(("dead_lettered", ints(dead)));
    by_state
}

fn peeked(answer: &Value) -> Vec<(i64, String)> {
    answer["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| {
            (
                m["seq_number"].as_i64().expect("seq"),
                m["state"].as_str().expect("state").to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn every_row_is_found_whatever_its_state_and_grouping() {
    let api = Api::new(&[]);
    let by_state = one_of_each(&api, "q").await;

    let stats = api.stats("q").await;
    for state in STATES {
        assert_eq!(stats[state], 2, "{state}: {stats}");
    }
    assert_eq!(stats["total"], 10);

    // Peek over every state: all ten, in seq order, each with its state.
    let mut all: Vec<(i64, String)> = by_state
        .iter()
        .flat_map(|(state, seqs)| seqs.iter().map(|s| (*s, (*state).to_owned())))
        .collect();
    all.sort();
    let answer = api
        .ok("QueueService/Peek", json!({"queue":"q","max":100}))
        .await;
    assert_eq!(peeked(&answer), all);
    // A page boundary inside the merged arms.
    let answer = api
        .ok(
            "QueueService/Peek",
            json!({"queue":"q","from_seq":all[3].0,"max":4}),
        )
        .await;
    assert_eq!(peeked(&answer), all[3..7].to_vec());
    // Peek of one state: exactly its two rows, in seq order.
    for (state, seqs) in &by_state {
        let answer = api
            .ok("QueueService/Peek", json!({"queue":"q","state":state}))
            .await;
        let want: Vec<(i64, String)> = seqs.iter().map(|s| (*s, (*state).to_owned())).collect();
        assert_eq!(peeked(&answer), want, "{state}");
    }
    let answer = api
        .ok("QueueService/Peek", json!({"queue":"q","state":"nonsense"}))
        .await;
    assert!(peeked(&answer).is_empty());

    // Observe's gauges count the same rows, none unexpected.
    let observed = api.ok("AdminService/Observe", json!({})).await;
    let gauge = observed["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| q["queue"] == "q")
        .expect("q's gauge")
        .clone();
    for state in STATES {
        assert_eq!(gauge[state], 2, "{state}: {gauge}");
    }
    assert_eq!(gauge["unexpected"], 0);

    // pgmq's metrics: the unfinished rows (dead letters are outside its
    // queue), of which the two active ones are visible.
    let response = api
        .request(
            "GET",
            "/v1/queues/q/metrics",
            &[("Authorization", ADMIN_AUTH)],
            b"",
        )
        .await;
    let metrics = json_body(&response);
    assert_eq!(metrics["queue_length"], 8, "{metrics}");
    assert_eq!(metrics["queue_visible_length"], 2, "{metrics}");
}

/// DeleteQueue refuses while any row is left, whichever index holds it.
#[tokio::test]
async fn the_emptiness_check_sees_every_index() {
    let api = Api::new(&[]);
    for (queue, state) in [("ua", "active"), ("ul", "locked")] {
        api.create_queue(queue, json!({})).await;
        let m = send_and_lock(&api, queue, "m", None).await;
        if state == "active" {
            settle(&api, "Abandon", queue, &m).await;
        }
        assert_eq!(api.stats(queue).await[state], 1);
        let listed = api.ok("AdminService/ListQueues", json!({})).await;
        let generation = listed["queues"]
            .as_array()
            .expect("queues")
            .iter()
            .find(|q| q["name"] == queue)
            .and_then(|q| q["generation"].as_str())
            .expect("generation")
            .to_owned();
        let (status, body) = api
            .rpc(
                "AdminService/DeleteQueue",
                json!({"name": queue, "generation": generation}),
            )
            .await;
        assert_eq!(status, 409, "{queue}: {body}");
        assert_eq!(body["code"], "queue_not_empty", "{queue}: {body}");
    }
}

/// Both purges delete every row: pgmq's purge (all states) and Connect's
/// (dead letters only, through the dead-letter arm).
#[tokio::test]
async fn purges_reach_every_index() {
    let api = Api::new(&[]);
    one_of_each(&api, "q").await;
    let purged = api.ok("AdminService/Purge", json!({"queue":"q"})).await;
    assert_eq!(purged["purged"], 2);
    assert_eq!(api.stats("q").await["total"], 8);
    let response = api
        .request(
            "POST",
            "/v1/queues/q/purge",
            &[("Authorization", ADMIN_AUTH)],
            b"",
        )
        .await;
    assert_eq!(json_body(&response), json!({"purged": 8}));
    assert_eq!(api.stats("q").await["total"], 0);
    let rows = query(
        api.engine(),
        "SELECT count(*) FROM messages WHERE queue = 'q'",
    )
    .await;
    assert_eq!(rows, vec![vec![json!(0)]]);
}

/// strict_fifo takes the lowest active seq whether it is grouped or not
/// (the two live in different indexes), and any earlier lease blocks.
#[tokio::test]
async fn strict_fifo_walks_grouped_and_ungrouped_rows_in_seq_order() {
    let api = Api::new(&[]);
    api.create_queue("s", json!({"ordering_mode":"strict_fifo"}))
        .await;
    let seqs = [
        api.send_grouped("s", "1", Some("g")).await,
        api.send_grouped("s", "2", None).await,
        api.send_grouped("s", "3", Some("h")).await,
        api.send_grouped("s", "4", None).await,
    ];
    for seq in seqs {
        let got = api.ok("QueueService/Receive", json!({"queue":"s"})).await;
        let m = got["messages"][0].clone();
        assert_eq!(m["seq_number"], seq);
        let blocked = api.ok("QueueService/Receive", json!({"queue":"s"})).await;
        assert_eq!(blocked["messages"], json!([]), "a lease blocks the queue");
        settle(&api, "Complete", "s", &m).await;
    }
    // receive-and-delete takes an in-order run across both kinds.
    let more = [
        api.send_grouped("s", "5", None).await,
        api.send_grouped("s", "6", Some("g")).await,
        api.send_grouped("s", "7", None).await,
    ];
    let got = api
        .ok(
            "QueueService/Receive",
            json!({"queue":"s","max_messages":10,"receive_mode":1}),
        )
        .await;
    let taken: Vec<i64> = got["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["seq_number"].as_i64())
        .collect();
    assert_eq!(taken, more.to_vec());
}
