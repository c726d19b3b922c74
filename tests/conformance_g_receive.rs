//! Conformance section G (Receive) and the Complete cases of section I that
//! this slice serves.

mod support;

use std::collections::HashSet;
use std::sync::Arc;

use mqlite_edge::engine::Waiter;
use serde_json::{json, Value};
use support::*;

async fn receive(api: &Api, body: Value) -> Vec<Value> {
    messages(&api.ok("QueueService/Receive", body).await)
}

async fn complete(api: &Api, queue: &str, m: &Value) -> (u16, Value) {
    api.rpc(
        "QueueService/Complete",
        json!({"queue":queue,"seq_number":m["seq_number"],"lock_token":m["lock_token"]}),
    )
    .await
}

#[tokio::test]
async fn c095_peek_lock_shape() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"lock_duration_ms":45000}))
        .await;
    let seq = api.send_text("q", "x").await;
    let now = api.clock.manual_now().unwrap_or(0);
    let got = receive(&api, json!({"queue":"q"})).await;
    let m = &got[0];
    assert_eq!(m["seq_number"], seq);
    assert_eq!(m["delivery_count"], 1);
    assert_eq!(m["enqueued_at_ms"], now);
    assert_eq!(m["locked_until_ms"], now + 45000);
    let token = m["lock_token"].as_str().unwrap_or("");
    assert!(
        token.len() == 32
            && token
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    for absent in ["state", "visible_at_ms", "expires_at_ms"] {
        assert!(m.get(absent).is_none(), "{absent}");
    }
}

#[tokio::test]
async fn c096_exclusive_while_locked() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_text("q", "x").await;
    assert_eq!(receive(&api, json!({"queue":"q"})).await.len(), 1);
    assert!(receive(&api, json!({"queue":"q"})).await.is_empty());
}

#[tokio::test]
async fn c097_max_messages_ascending() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let mut sent = vec![];
    for i in 0..5 {
        sent.push(api.send_text("q", &format!("m{i}")).await);
    }
    let got = receive(&api, json!({"queue":"q","max_messages":3})).await;
    let seqs: Vec<i64> = got
        .iter()
        .filter_map(|m| m["seq_number"].as_i64())
        .collect();
    assert_eq!(seqs, sent[..3]);
}

#[tokio::test]
async fn c098_defaults_and_clamps() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let batch: Vec<Value> = (0..300)
        .map(|i| json!({"body": b64(&i.to_string())}))
        .collect();
    api.ok("QueueService/Send", json!({"queue":"q","messages":batch}))
        .await;
    assert_eq!(
        receive(&api, json!({"queue":"q","max_messages":0}))
            .await
            .len(),
        1
    );
    assert_eq!(
        receive(&api, json!({"queue":"q","max_messages":-4}))
            .await
            .len(),
        1
    );
    let got = receive(&api, json!({"queue":"q","max_messages":1000})).await;
    assert_eq!(got.len(), 256);
    let tokens: HashSet<&str> = got
        .iter()
        .filter_map(|m| m["lock_token"].as_str())
        .collect();
    assert_eq!(tokens.len(), 256, "every claimed message has its own token");
}

#[tokio::test]
async fn c099_no_wait_returns_immediately() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let started = std::time::Instant::now();
    assert_eq!(
        api.ok(
            "QueueService/Receive",
            json!({"queue":"q","wait_time_ms":0})
        )
        .await,
        json!({"messages":[]})
    );
    assert!(started.elapsed().as_millis() < 1000);
}

#[tokio::test]
async fn c100_long_poll_wakes_on_a_concurrent_send() {
    let h = Arc::new(Harness::real_time());
    h.engine
        .create_queue("q", &mqlite_edge::engine::QueueConfigInput::default())
        .await
        .expect("create");
    let sender = h.clone();
    let send = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        sender
            .engine
            .send(&mqlite_edge::engine::SendRequest {
                queue: "q".into(),
                messages: vec![Default::default()],
                ..Default::default()
            })
            .await
    });
    let started = std::time::Instant::now();
    let request = mqlite_edge::engine::ReceiveRequest {
        queue: "q".into(),
        wait_time_ms: 3000,
        ..Default::default()
    };
    let (got, poll) = h
        .engine
        .receive(&request, &RealWaiter::start())
        .await
        .expect("receive");
    let waited = started.elapsed().as_millis();
    assert!(send.await.is_ok());
    assert_eq!(got.len(), 1);
    assert!((500..1500).contains(&waited), "woke after {waited} ms");
    assert!(poll.attempts > 1 && poll.attempts <= 40, "{poll:?}");
}

#[tokio::test]
async fn c101_long_poll_timeout_waits_the_full_budget() {
    let h = Harness::real_time();
    h.engine
        .create_queue("q", &mqlite_edge::engine::QueueConfigInput::default())
        .await
        .expect("create");
    let started = std::time::Instant::now();
    let request = mqlite_edge::engine::ReceiveRequest {
        queue: "q".into(),
        wait_time_ms: 1000,
        ..Default::default()
    };
    let (got, poll) = h
        .engine
        .receive(&request, &RealWaiter::start())
        .await
        .expect("receive");
    let waited = started.elapsed().as_millis();
    assert!(got.is_empty());
    assert!((1000..1800).contains(&waited), "returned after {waited} ms");
    assert!(poll.attempts <= 40, "{poll:?}");
}

#[tokio::test]
async fn c102_wait_is_clamped_to_20_s_within_the_request_budget() {
    // A fake waiter whose clock jumps by each sleep: the 60 s request ends
    // at 20 s of waiting and never spends more than the request budget.
    struct Jumping(std::sync::atomic::AtomicU64);
    impl Waiter for Jumping {
        fn elapsed_ms(&self) -> u64 {
            self.0.load(std::sync::atomic::Ordering::SeqCst)
        }
        async fn sleep(&self, millis: u64) {
            self.0
                .fetch_add(millis, std::sync::atomic::Ordering::SeqCst);
        }
    }
    let h = Harness::new();
    h.engine
        .create_queue("q", &mqlite_edge::engine::QueueConfigInput::default())
        .await
        .expect("create");
    let waiter = Jumping(Default::default());
    let before = h.round_trips();
    let request = mqlite_edge::engine::ReceiveRequest {
        queue: "q".into(),
        wait_time_ms: 60_000,
        ..Default::default()
    };
    let (got, poll) = h.engine.receive(&request, &waiter).await.expect("receive");
    assert!(got.is_empty());
    assert_eq!(
        waiter.elapsed_ms(),
        20_000,
        "slept exactly until the clamped deadline"
    );
    assert_eq!(h.round_trips() - before, u64::from(poll.attempts));
    assert!(
        poll.attempts <= 40,
        "{poll:?} fits the Free plan's 50 subrequests"
    );
    assert!(
        poll.attempts >= 10,
        "{poll:?} keeps polling through the wait"
    );
}

#[tokio::test]
async fn c103_unknown_queue_is_404() {
    let api = Api::new(&[]);
    api.fails(
        "QueueService/Receive",
        json!({"queue":"nope"}),
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn c104_receive_and_delete() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let seq = api.send_text("q", "x").await;
    let got = receive(&api, json!({"queue":"q","receive_mode":1})).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["delivery_count"], 1);
    assert!(got[0].get("lock_token").is_none() && got[0].get("locked_until_ms").is_none());
    assert_eq!(api.stats("q").await["total"], 0);
    api.fails(
        "QueueService/Complete",
        json!({"queue":"q","seq_number":seq,"lock_token":""}),
        409,
        "lock_lost",
    )
    .await;
}

#[tokio::test]
async fn c105_lease_expiry_redelivers() {
    let api = Api::new(&[]);
    api.create_queue(
        "q",
        json!({"lock_duration_ms":1000,"max_delivery_count":10}),
    )
    .await;
    let seq = api.send_text("q", "x").await;
    let first = receive(&api, json!({"queue":"q"})).await;
    api.advance(999);
    assert!(
        receive(&api, json!({"queue":"q"})).await.is_empty(),
        "lease still live"
    );
    api.advance(1);
    let again = receive(&api, json!({"queue":"q"})).await;
    assert_eq!(again[0]["seq_number"], seq);
    assert_eq!(again[0]["delivery_count"], 2);
    assert_ne!(again[0]["lock_token"], first[0]["lock_token"]);
}

#[tokio::test]
async fn c106_ttl_expired_is_never_claimed() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"default_ttl_ms":1000})).await;
    api.send_text("q", "x").await;
    api.advance(999);
    assert_eq!(api.stats("q").await["active"], 1, "alive until its TTL");
    api.advance(1);
    assert!(receive(&api, json!({"queue":"q"})).await.is_empty());
    let stats = api.stats("q").await;
    assert_eq!(
        (stats["dead_lettered"].as_i64(), stats["active"].as_i64()),
        (Some(1), Some(0))
    );
    api.create_queue(
        "discard",
        json!({"default_ttl_ms":1000,"dead_letter_on_expire":false}),
    )
    .await;
    api.send_text("discard", "x").await;
    api.advance(1500);
    assert!(receive(&api, json!({"queue":"discard"})).await.is_empty());
    assert_eq!(api.stats("discard").await["total"], 0);
}

#[tokio::test]
async fn c107_competing_consumers_get_every_message_exactly_once() {
    let h = Arc::new(Harness::real_time());
    h.engine
        .create_queue("q", &mqlite_edge::engine::QueueConfigInput::default())
        .await
        .expect("create");
    let batch = (0..500)
        .map(|i| mqlite_edge::engine::OutgoingMessage {
            body: i.to_string().into_bytes(),
            ..Default::default()
        })
        .collect();
    let sent = h
        .engine
        .send(&mqlite_edge::engine::SendRequest {
            queue: "q".into(),
            messages: batch,
            ..Default::default()
        })
        .await
        .expect("send");
    let mut consumers = vec![];
    for _ in 0..6 {
        let h = h.clone();
        consumers.push(tokio::spawn(async move {
            let mut seen = vec![];
            loop {
                let request = mqlite_edge::engine::ReceiveRequest {
                    queue: "q".into(),
                    max_messages: 8,
                    ..Default::default()
                };
                let (got, _) = h.engine.receive(&request, &NoWait).await.expect("receive");
                if got.is_empty() {
                    return seen;
                }
                for m in got {
                    let settle = mqlite_edge::engine::SettleRequest {
                        queue: "q".into(),
                        seq_number: m.seq_number,
                        lock_token: m.lock_token.clone().unwrap_or_default(),
                    };
                    h.engine.complete(&settle).await.expect("complete");
                    seen.push(m.seq_number);
                }
            }
        }));
    }
    let mut all = vec![];
    for c in consumers {
        all.extend(c.await.expect("consumer"));
    }
    all.sort_unstable();
    let mut expected = sent.clone();
    expected.sort_unstable();
    assert_eq!(
        all, expected,
        "each message delivered and completed exactly once"
    );
    assert_eq!(h.engine.stats("q").await.expect("stats").total, 0);
}

#[tokio::test]
async fn c108_byte_budget_stops_early_but_never_drops() {
    let api = Api::new(&[("MQLITE_RESPONSE_BUDGET_BYTES", "1000")]);
    api.create_queue("q", json!({})).await;
    let batch: Vec<Value> = (0..5)
        .map(|_| json!({"body": b64(&"x".repeat(500))}))
        .collect();
    api.ok("QueueService/Send", json!({"queue":"q","messages":batch}))
        .await;
    let first = receive(&api, json!({"queue":"q","max_messages":5})).await;
    assert!((1..=4).contains(&first.len()), "{}", first.len());
    assert_eq!(
        api.stats("q").await["locked"],
        first.len(),
        "only returned messages are claimed"
    );
    let mut seen: Vec<i64> = first
        .iter()
        .filter_map(|m| m["seq_number"].as_i64())
        .collect();
    loop {
        let more = receive(&api, json!({"queue":"q","max_messages":5})).await;
        if more.is_empty() {
            break;
        }
        seen.extend(more.iter().filter_map(|m| m["seq_number"].as_i64()));
    }
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), 5);
    // A single body larger than the budget is still returned and locked.
    api.ok(
        "QueueService/Send",
        json!({"queue":"q","messages":[{"body": b64(&"y".repeat(3000))}]}),
    )
    .await;
    assert_eq!(
        receive(&api, json!({"queue":"q","max_messages":5}))
            .await
            .len(),
        1
    );
}

#[tokio::test]
async fn c124_c126_complete_and_replay() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_text("q", "x").await;
    let m = receive(&api, json!({"queue":"q"})).await.remove(0);
    assert_eq!(complete(&api, "q", &m).await, (200, json!({"ok":true})));
    assert_eq!(api.stats("q").await["total"], 0);
    assert_eq!(
        complete(&api, "q", &m).await,
        (200, json!({"ok":true})),
        "exact replay"
    );
}

#[tokio::test]
async fn c125_c127_c128_fencing() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_text("q", "x").await;
    let m = receive(&api, json!({"queue":"q"})).await.remove(0);
    let lost = json!({"code":"lock_lost","message":"mqlite: lock lost or already settled"});
    for token in ["deadbeef", ""] {
        let (status, body) = api
            .rpc(
                "QueueService/Complete",
                json!({"queue":"q","seq_number":m["seq_number"],"lock_token":token}),
            )
            .await;
        assert_eq!((status, body), (409, lost.clone()), "{token:?}");
    }
    assert_eq!(
        api.stats("q").await["locked"],
        1,
        "a wrong token changes nothing"
    );
    let (status, _) = api
        .rpc(
            "QueueService/Complete",
            json!({"queue":"nope","seq_number":m["seq_number"],"lock_token":m["lock_token"]}),
        )
        .await;
    assert_eq!(status, 409, "unknown queue is lock_lost, not 404");
    assert_eq!(complete(&api, "q", &m).await.0, 200);
}

#[tokio::test]
async fn c129_lease_deadline_instant_is_expired_without_any_reaping() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"lock_duration_ms":1000}))
        .await;
    api.send_text("q", "x").await;
    api.send_text("q", "y").await;
    let mut both = receive(&api, json!({"queue":"q","max_messages":2})).await;
    let m = both.remove(1);
    api.advance(999);
    assert_eq!(complete(&api, "q", &both[0]).await.0, 200, "just before");
    api.advance(1);
    assert_eq!(
        complete(&api, "q", &m).await.0,
        409,
        "at locked_until exactly"
    );
    api.advance(500);
    assert_eq!(complete(&api, "q", &m).await.0, 409, "after it");
}

#[tokio::test]
async fn c129_one_ms_before_the_deadline_still_completes() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"lock_duration_ms":1000}))
        .await;
    api.send_text("q", "x").await;
    let m = receive(&api, json!({"queue":"q"})).await.remove(0);
    api.advance(999);
    assert_eq!(complete(&api, "q", &m).await.0, 200);
}

#[tokio::test]
async fn c130_stale_holder_loses() {
    let api = Api::new(&[]);
    api.create_queue(
        "q",
        json!({"lock_duration_ms":1000,"max_delivery_count":50}),
    )
    .await;
    api.send_text("q", "x").await;
    let t1 = receive(&api, json!({"queue":"q"})).await.remove(0);
    api.advance(1000);
    let t2 = receive(&api, json!({"queue":"q"})).await.remove(0);
    assert_ne!(t1["lock_token"], t2["lock_token"]);
    assert_eq!(complete(&api, "q", &t1).await.0, 409);
    assert_eq!(complete(&api, "q", &t2).await.0, 200);
}

#[tokio::test]
async fn decision02_ttl_fences_completion_even_before_any_sweep() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"lock_duration_ms":60000,"default_ttl_ms":2000}))
        .await;
    api.send_text("q", "x").await;
    let m = receive(&api, json!({"queue":"q"})).await.remove(0);
    api.advance(2000);
    assert_eq!(complete(&api, "q", &m).await.0, 409);
}

#[tokio::test]
async fn c140_receipt_is_bound_to_its_queue() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.create_queue("q2", json!({})).await;
    api.send_text("q", "x").await;
    let m = receive(&api, json!({"queue":"q"})).await.remove(0);
    assert_eq!(complete(&api, "q", &m).await.0, 200);
    assert_eq!(complete(&api, "q2", &m).await.0, 409);
}

#[tokio::test]
async fn c143_receipt_lifetime_is_30_minutes() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_text("q", "x").await;
    let m = receive(&api, json!({"queue":"q"})).await.remove(0);
    assert_eq!(complete(&api, "q", &m).await.0, 200);
    api.advance(30 * 60 * 1000 - 1);
    assert_eq!(complete(&api, "q", &m).await.0, 200);
    api.advance(1);
    assert_eq!(complete(&api, "q", &m).await.0, 409);
}

#[tokio::test]
async fn c213_c215_receive_attempt_replays_the_same_batch() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.ok("QueueService/Send", json!({"queue":"q","messages":[{"body":b64("a"),"properties":{"k":"v"}},{"body":b64("b")}]})).await;
    let first = receive(
        &api,
        json!({"queue":"q","max_messages":1,"receive_attempt_id":"A1"}),
    )
    .await;
    let replay = receive(
        &api,
        json!({"queue":"q","max_messages":5,"receive_attempt_id":"A1"}),
    )
    .await;
    assert_eq!(
        first, replay,
        "same seqs, bodies, tokens, counts, deadlines"
    );
    let other = receive(&api, json!({"queue":"q","receive_attempt_id":"A2"})).await;
    assert_ne!(other[0]["seq_number"], first[0]["seq_number"]);
    assert_eq!(complete(&api, "q", &replay[0]).await.0, 200);
}

#[tokio::test]
async fn c216_receive_and_delete_replay_has_no_token() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_text("q", "x").await;
    let first = receive(
        &api,
        json!({"queue":"q","receive_mode":1,"receive_attempt_id":"D1"}),
    )
    .await;
    let replay = receive(
        &api,
        json!({"queue":"q","receive_mode":1,"receive_attempt_id":"D1"}),
    )
    .await;
    assert_eq!(first.len(), 1);
    assert_eq!(first, replay);
    assert!(replay[0].get("lock_token").is_none() && replay[0].get("locked_until_ms").is_none());
    assert_eq!(api.stats("q").await["total"], 0);
}

/// Two messages of group G, one ungrouped, one of group H, in seq order.
async fn grouped_and_ungrouped(api: &Api) -> Vec<i64> {
    let sent = api
        .ok(
            "QueueService/Send",
            json!({"queue":"q","messages":[
                {"body":b64("g1"),"group_id":"G"},
                {"body":b64("g2"),"group_id":"G"},
                {"body":b64("u"),"properties":{"k":"v"}},
                {"body":b64("h1"),"group_id":"H"}]}),
        )
        .await;
    sent["seq_numbers"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default()
}

fn seqs_of(got: &[Value]) -> Vec<i64> {
    got.iter()
        .filter_map(|m| m["seq_number"].as_i64())
        .collect()
}

/// Receive-and-delete of several messages (no attempt id) takes them in
/// seq order, a picked group's later rows included, and leaves nothing.
#[tokio::test]
async fn c104_receive_and_delete_of_several_grouped_and_ungrouped() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let seqs = grouped_and_ungrouped(&api).await;
    let got = receive(
        &api,
        json!({"queue":"q","receive_mode":1,"max_messages":10}),
    )
    .await;
    assert_eq!(seqs_of(&got), seqs);
    assert_eq!(got[2]["body"], b64("u"));
    assert_eq!(got[2]["properties"], json!({"k":"v"}));
    for m in &got {
        assert_eq!(m["delivery_count"], 1);
        assert!(m.get("lock_token").is_none() && m.get("locked_until_ms").is_none());
    }
    assert_eq!(api.stats("q").await["total"], 0);
}

/// A peek-lock claim of several, grouped and ungrouped, under an attempt id
/// replays exactly (every seq, body, property, token and deadline), and
/// every replayed token settles.
#[tokio::test]
async fn c213_c215_receive_attempt_replays_several_grouped_and_ungrouped() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let seqs = grouped_and_ungrouped(&api).await;
    let first = receive(
        &api,
        json!({"queue":"q","max_messages":10,"receive_attempt_id":"S1"}),
    )
    .await;
    // G's second message waits behind its first, which is now in flight.
    assert_eq!(seqs_of(&first), vec![seqs[0], seqs[2], seqs[3]]);
    let replay = receive(
        &api,
        json!({"queue":"q","max_messages":2,"receive_attempt_id":"S1"}),
    )
    .await;
    assert_eq!(first, replay);
    for m in &replay {
        assert_eq!(complete(&api, "q", m).await.0, 200, "{m}");
    }
    let rest = receive(&api, json!({"queue":"q","max_messages":10})).await;
    assert_eq!(seqs_of(&rest), vec![seqs[1]]);
}

/// Receive-and-delete of several under an attempt id: the answer is
/// recorded before the rows go, replays exactly, and nothing is left.
#[tokio::test]
async fn c216_receive_and_delete_replay_of_several_grouped_and_ungrouped() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let seqs = grouped_and_ungrouped(&api).await;
    let request = json!({"queue":"q","receive_mode":1,"max_messages":10,"receive_attempt_id":"D2"});
    let first = receive(&api, request.clone()).await;
    assert_eq!(seqs_of(&first), seqs);
    assert_eq!(first[2]["properties"], json!({"k":"v"}));
    assert_eq!(api.stats("q").await["total"], 0);
    let replay = receive(&api, request).await;
    assert_eq!(first, replay);
    assert!(replay
        .iter()
        .all(|m| m.get("lock_token").is_none() && m.get("locked_until_ms").is_none()));
}

/// A replay deletes nothing, even when the recorded messages are claimable
/// again: attempt `R` first names a peek-lock claim, whose lease then runs
/// out (the Receive's own housekeeping reaps it); receive-and-delete with
/// `R` replays the recorded answer and the message stays.
#[tokio::test]
async fn c216_a_replay_deletes_nothing_even_when_its_messages_are_active_again() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"lock_duration_ms":1000}))
        .await;
    api.send_text("q", "x").await;
    let first = receive(&api, json!({"queue":"q","receive_attempt_id":"R"})).await;
    assert_eq!(first.len(), 1);
    api.advance(1000);
    let replay = receive(
        &api,
        json!({"queue":"q","receive_mode":1,"receive_attempt_id":"R"}),
    )
    .await;
    assert_eq!(first, replay);
    let stats = api.stats("q").await;
    assert_eq!((&stats["active"], &stats["total"]), (&json!(1), &json!(1)));
    // A fresh attempt takes it, delivered a second time.
    let taken = receive(
        &api,
        json!({"queue":"q","receive_mode":1,"receive_attempt_id":"S"}),
    )
    .await;
    assert_eq!(taken[0]["seq_number"], first[0]["seq_number"]);
    assert_eq!(taken[0]["delivery_count"], 2);
    assert_eq!(api.stats("q").await["total"], 0);
}

/// Every metadata field, with characters JSON must escape, comes back from
/// every claim shape exactly as it was sent: the claimed row's fields
/// travel packed in one JSON array (docs/engine.md, "What a Receive
/// answers"), escaped by SQLite and unescaped by the engine.
#[tokio::test]
async fn c095_metadata_round_trips_through_every_claim_shape() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let tricky = "q\"uo\\te/\n\t\u{1}\u{7f} é 😀 \u{2028}";
    let properties = json!({"k\"\\": tricky, "ü": ""});
    let sent = |n: usize| {
        (0..n)
            .map(|i| {
                json!({"body": b64(&format!("b{i}")), "message_id": format!("{tricky}{i}"),
                    "correlation_id": tricky, "reply_to": tricky, "subject": tricky,
                    "content_type": tricky, "properties": properties})
            })
            .collect::<Vec<_>>()
    };
    let same = |got: &[Value], n: usize, how: &str| {
        assert_eq!(got.len(), n, "{how}");
        for m in got {
            for field in ["correlation_id", "reply_to", "subject", "content_type"] {
                assert_eq!(m[field], tricky, "{how}: {field}");
            }
            assert!(
                m["message_id"]
                    .as_str()
                    .is_some_and(|id| id.starts_with(tricky)),
                "{how}: {m}"
            );
            assert_eq!(m["properties"], properties, "{how}");
            assert_eq!(m["delivery_count"], 1, "{how}");
        }
    };
    let shapes = [
        ("one, peek-lock", json!({"queue":"q"}), 1),
        (
            "several, peek-lock",
            json!({"queue":"q","max_messages":3}),
            3,
        ),
        (
            "one, receive-and-delete",
            json!({"queue":"q","receive_mode":1}),
            1,
        ),
        (
            "several, receive-and-delete",
            json!({"queue":"q","receive_mode":1,"max_messages":3}),
            3,
        ),
        (
            "peek-lock with an attempt id",
            json!({"queue":"q","max_messages":2,"receive_attempt_id":"A"}),
            2,
        ),
        (
            "receive-and-delete with an attempt id",
            json!({"queue":"q","receive_mode":1,"max_messages":2,"receive_attempt_id":"B"}),
            2,
        ),
    ];
    for (how, request, n) in shapes {
        api.ok("QueueService/Send", json!({"queue":"q","messages":sent(n)}))
            .await;
        let got = receive(&api, request).await;
        same(&got, n, how);
        if got[0].get("lock_token").is_some() {
            for m in &got {
                assert_eq!(complete(&api, "q", m).await.0, 200, "{how}");
            }
        }
    }
    // A deferred message, taken back by its seq number.
    api.ok("QueueService/Send", json!({"queue":"q","messages":sent(1)}))
        .await;
    let got = receive(&api, json!({"queue":"q"})).await;
    api.ok(
        "QueueService/Defer",
        json!({"queue":"q","seq_number":got[0]["seq_number"],"lock_token":got[0]["lock_token"]}),
    )
    .await;
    let again = messages(
        &api.ok(
            "QueueService/ReceiveDeferred",
            json!({"queue":"q","seq_numbers":[got[0]["seq_number"]]}),
        )
        .await,
    );
    assert_eq!(again.len(), 1);
    for field in [
        "correlation_id",
        "reply_to",
        "subject",
        "content_type",
        "message_id",
    ] {
        assert_eq!(again[0][field], got[0][field], "deferred: {field}");
    }
    assert_eq!(again[0]["properties"], properties, "deferred");
}
