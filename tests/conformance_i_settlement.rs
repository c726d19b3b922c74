//! Conformance sections I (settlement), J (batch settlement), K
//! (ReceiveDeferred, Cancel) and P (Peek, Stats).

mod support;

use serde_json::{json, Value};
use support::*;

async fn receive(api: &Api, queue: &str) -> Value {
    messages(&api.ok("QueueService/Receive", json!({"queue":queue})).await)
        .into_iter()
        .next()
        .unwrap_or(Value::Null)
}

async fn settle(api: &Api, verb: &str, queue: &str, m: &Value, extra: Value) -> u16 {
    let body = with(
        json!({"queue":queue,"seq_number":m["seq_number"],"lock_token":m["lock_token"]}),
        extra,
    );
    api.rpc(&format!("QueueService/{verb}"), body).await.0
}

async fn peek_one(api: &Api, queue: &str) -> Value {
    messages(&api.ok("QueueService/Peek", json!({"queue":queue})).await)
        .into_iter()
        .next()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn c129_every_verb_is_fenced_at_the_deadline_instant() {
    for verb in ["Complete", "Abandon", "Reject", "Defer", "Renew"] {
        let api = Api::new(&[]);
        api.create_queue("q", json!({"lock_duration_ms":1000}))
            .await;
        api.send_text("q", "x").await;
        let m = receive(&api, "q").await;
        api.advance(1000);
        assert_eq!(settle(&api, verb, "q", &m, json!({})).await, 409, "{verb}");
    }
}

#[tokio::test]
async fn c131_abandon_redelivers() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let seq = api.send_text("q", "x").await;
    let m = receive(&api, "q").await;
    assert_eq!(
        settle(&api, "Abandon", "q", &m, json!({"delay_ms":0})).await,
        200
    );
    let again = receive(&api, "q").await;
    assert_eq!(
        (
            again["seq_number"].as_i64(),
            again["delivery_count"].as_i64()
        ),
        (Some(seq), Some(2))
    );
}

#[tokio::test]
async fn c132_abandon_at_max_dead_letters_and_still_answers_ok() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"max_delivery_count":2})).await;
    api.send_text("q", "x").await;
    for _ in 0..2 {
        let m = receive(&api, "q").await;
        assert_eq!(settle(&api, "Abandon", "q", &m, json!({})).await, 200);
    }
    let p = peek_one(&api, "q").await;
    assert_eq!(
        (p["state"].as_str(), p["dead_letter_reason"].as_str()),
        (Some("dead_lettered"), Some("MaxDeliveryCountExceeded"))
    );
    assert_eq!(api.stats("q").await["dead_lettered"], 1);
    assert_eq!(
        api.ok("QueueService/Receive", json!({"queue":"q"})).await,
        json!({"messages":[]})
    );
}

#[tokio::test]
async fn c133_abandon_with_delay_parks_as_scheduled() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_text("q", "x").await;
    let m = receive(&api, "q").await;
    let abandoned_at = api.clock.manual_now().unwrap_or(0);
    assert_eq!(
        settle(&api, "Abandon", "q", &m, json!({"delay_ms":1500})).await,
        200
    );
    let p = peek_one(&api, "q").await;
    assert_eq!(
        (p["state"].as_str(), p["visible_at_ms"].as_i64()),
        (Some("scheduled"), Some(abandoned_at + 1500))
    );
    assert!(api.ok("QueueService/Receive", json!({"queue":"q"})).await["messages"][0].is_null());
    api.advance(1500);
    assert_eq!(receive(&api, "q").await["delivery_count"], 2);
}

#[tokio::test]
async fn c134_abandon_replay_depends_on_delay() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_text("q", "x").await;
    let m = receive(&api, "q").await;
    assert_eq!(
        settle(&api, "Abandon", "q", &m, json!({"delay_ms":5000})).await,
        200
    );
    let visible = peek_one(&api, "q").await["visible_at_ms"].clone();
    api.advance(10);
    assert_eq!(
        settle(&api, "Abandon", "q", &m, json!({"delay_ms":5000})).await,
        200
    );
    assert_eq!(
        settle(&api, "Abandon", "q", &m, json!({"delay_ms":60000})).await,
        409
    );
    assert_eq!(peek_one(&api, "q").await["visible_at_ms"], visible);
}

#[tokio::test]
async fn decision10_negative_abandon_delay_is_zero_for_effect_and_replay() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_text("q", "x").await;
    let m = receive(&api, "q").await;
    assert_eq!(
        settle(&api, "Abandon", "q", &m, json!({"delay_ms":-500})).await,
        200
    );
    assert_eq!(peek_one(&api, "q").await["state"], "active");
    assert_eq!(
        settle(&api, "Abandon", "q", &m, json!({"delay_ms":0})).await,
        200,
        "same request"
    );
}

#[tokio::test]
async fn c135_c136_reject_reason_and_default() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_text("q", "x").await;
    let m = receive(&api, "q").await;
    assert_eq!(settle(&api, "Reject", "q", &m, json!({"dead_letter_reason":"Unprocessable","dead_letter_description":"schema mismatch"})).await, 200);
    let p = peek_one(&api, "q").await;
    assert_eq!(
        (
            p["dead_letter_reason"].as_str(),
            p["dead_letter_description"].as_str()
        ),
        (Some("Unprocessable"), Some("schema mismatch"))
    );

    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_text("q", "x").await;
    let m = receive(&api, "q").await;
    assert_eq!(settle(&api, "Reject", "q", &m, json!({})).await, 200);
    let p = peek_one(&api, "q").await;
    assert_eq!(p["dead_letter_reason"], "AppRequested");
    assert!(p.get("dead_letter_description").is_none());
    assert_eq!(
        settle(
            &api,
            "Reject",
            "q",
            &m,
            json!({"dead_letter_reason":"AppRequested"})
        )
        .await,
        200
    );
    assert_eq!(
        settle(
            &api,
            "Reject",
            "q",
            &m,
            json!({"dead_letter_reason":"Other"})
        )
        .await,
        409
    );
}

#[tokio::test]
async fn c137_defer() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_text("q", "x").await;
    let m = receive(&api, "q").await;
    assert_eq!(settle(&api, "Defer", "q", &m, json!({})).await, 200);
    assert_eq!(
        api.ok("QueueService/Receive", json!({"queue":"q"})).await,
        json!({"messages":[]})
    );
    assert_eq!(peek_one(&api, "q").await["state"], "deferred");
}

#[tokio::test]
async fn c138_cross_verb_receipts() {
    let verbs = ["Complete", "Abandon", "Reject", "Defer"];
    let resulting = |verb: &str| match verb {
        "Complete" => None,
        "Abandon" => Some("active"),
        "Reject" => Some("dead_lettered"),
        _ => Some("deferred"),
    };
    for first in verbs {
        for second in verbs {
            let api = Api::new(&[]);
            api.create_queue("q", json!({})).await;
            api.send_text("q", "x").await;
            let m = receive(&api, "q").await;
            assert_eq!(settle(&api, first, "q", &m, json!({})).await, 200);
            let expected = if first == second { 200 } else { 409 };
            assert_eq!(
                settle(&api, second, "q", &m, json!({})).await,
                expected,
                "{first} then {second}"
            );
            let state = peek_one(&api, "q").await["state"]
                .as_str()
                .map(str::to_owned);
            assert_eq!(state.as_deref(), resulting(first), "{first} then {second}");
        }
    }
}

#[tokio::test]
async fn c139_receipt_is_bound_to_its_message() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_text("q", "a").await;
    api.send_text("q", "b").await;
    let got = messages(
        &api.ok(
            "QueueService/Receive",
            json!({"queue":"q","max_messages":2}),
        )
        .await,
    );
    assert_eq!(settle(&api, "Complete", "q", &got[0], json!({})).await, 200);
    let wrong = json!({"seq_number":got[1]["seq_number"],"lock_token":got[0]["lock_token"]});
    assert_eq!(settle(&api, "Complete", "q", &wrong, json!({})).await, 409);
    assert_eq!(api.stats("q").await["locked"], 1);
}

#[tokio::test]
async fn c141_c142_renew() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"lock_duration_ms":10000}))
        .await;
    api.send_text("q", "x").await;
    let m = receive(&api, "q").await;
    api.advance(5000);
    assert_eq!(
        api.ok(
            "QueueService/Renew",
            json!({"queue":"q","seq_number":m["seq_number"],"lock_token":m["lock_token"]})
        )
        .await,
        json!({"ok":true})
    );
    let p = peek_one(&api, "q").await;
    assert!(p["locked_until_ms"].as_i64() > m["locked_until_ms"].as_i64());
    assert!(p.get("lock_token").is_none());
    assert_eq!(
        settle(
            &api,
            "Renew",
            "q",
            &json!({"seq_number":m["seq_number"],"lock_token":"bad"}),
            json!({})
        )
        .await,
        409
    );
    assert_eq!(settle(&api, "Renew", "nope", &m, json!({})).await, 404);
    api.advance(10_000);
    assert_eq!(
        settle(&api, "Renew", "q", &m, json!({})).await,
        409,
        "cannot revive"
    );
}

#[tokio::test]
async fn decision11_unknown_queue_before_token_checks() {
    let api = Api::new(&[]);
    api.fails(
        "QueueService/Renew",
        json!({"queue":"nope","seq_number":1,"lock_token":""}),
        404,
        "not_found",
    )
    .await;
    api.fails(
        "QueueService/RenewBatch",
        json!({"queue":"nope","messages":[{"seq_number":1,"lock_token":"x"}]}),
        404,
        "not_found",
    )
    .await;
    api.fails(
        "QueueService/ReceiveDeferred",
        json!({"queue":"nope","seq_numbers":[]}),
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn c144_c145_complete_batch_mixed_and_replay() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"lock_duration_ms":600000}))
        .await;
    for i in 0..5 {
        api.send_text("q", &i.to_string()).await;
    }
    let got = messages(
        &api.ok(
            "QueueService/Receive",
            json!({"queue":"q","max_messages":5}),
        )
        .await,
    );
    let mut items: Vec<Value> = got
        .iter()
        .map(|m| json!({"seq_number":m["seq_number"],"lock_token":m["lock_token"]}))
        .collect();
    items.push(json!({"seq_number":got[0]["seq_number"],"lock_token":"stale"}));
    let r = api
        .ok(
            "QueueService/CompleteBatch",
            json!({"queue":"q","messages":items}),
        )
        .await;
    let results = r["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(results.len(), 6);
    for (i, res) in results.iter().enumerate() {
        assert_eq!(res["ok"], i < 5, "{res}");
        assert!(res.get("locked_until_ms").is_none());
        assert_eq!(res["seq_number"], items[i]["seq_number"]);
    }
    assert_eq!(api.stats("q").await["total"], 0);
    let replay = api
        .ok(
            "QueueService/CompleteBatch",
            json!({"queue":"q","messages":items[..5]}),
        )
        .await;
    assert!(replay["results"]
        .as_array()
        .is_some_and(|r| r.iter().all(|x| x["ok"] == true)));
}

#[tokio::test]
async fn c146_no_self_vouching() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_text("q", "a").await;
    api.send_text("q", "b").await;
    let got = messages(
        &api.ok(
            "QueueService/Receive",
            json!({"queue":"q","max_messages":2}),
        )
        .await,
    );
    let (a, b) = (&got[0], &got[1]);
    let r = api
        .ok(
            "QueueService/CompleteBatch",
            json!({"queue":"q","messages":[
            {"seq_number":b["seq_number"],"lock_token":a["lock_token"]},
            {"seq_number":a["seq_number"],"lock_token":a["lock_token"]}]}),
        )
        .await;
    assert_eq!(
        (
            r["results"][0]["ok"].as_bool(),
            r["results"][1]["ok"].as_bool()
        ),
        (Some(false), Some(true))
    );
    assert_eq!(api.stats("q").await["locked"], 1);
}

#[tokio::test]
async fn c147_c148_c149_complete_batch_edges() {
    let api = Api::new(&[]);
    let r = api.ok("QueueService/CompleteBatch", json!({"queue":"nope","messages":[{"seq_number":1,"lock_token":"x"},{"seq_number":2,"lock_token":""}]})).await;
    assert_eq!(
        r,
        json!({"results":[{"seq_number":1,"ok":false},{"seq_number":2,"ok":false}]})
    );
    assert_eq!(
        api.ok(
            "QueueService/CompleteBatch",
            json!({"queue":"q","messages":[]})
        )
        .await,
        json!({"results":[]})
    );

    api.create_queue("q", json!({})).await;
    api.send_text("q", "a").await;
    let m = receive(&api, "q").await;
    assert_eq!(settle(&api, "Complete", "q", &m, json!({})).await, 200);
    let pair = json!({"seq_number":m["seq_number"],"lock_token":m["lock_token"]});
    let r = api
        .ok(
            "QueueService/CompleteBatch",
            json!({"queue":"q","messages":[pair.clone(), pair]}),
        )
        .await;
    assert_eq!(
        (
            r["results"][0]["ok"].as_bool(),
            r["results"][1]["ok"].as_bool()
        ),
        (Some(true), Some(true))
    );

    api.send_text("q", "b").await;
    let m = receive(&api, "q").await;
    let pair = json!({"seq_number":m["seq_number"],"lock_token":m["lock_token"]});
    api.ok(
        "QueueService/CompleteBatch",
        json!({"queue":"q","messages":[pair]}),
    )
    .await;
    assert_eq!(
        settle(&api, "Complete", "q", &m, json!({})).await,
        200,
        "batch then single"
    );

    api.send_text("q", "c").await;
    let m = receive(&api, "q").await;
    assert_eq!(settle(&api, "Abandon", "q", &m, json!({})).await, 200);
    let pair = json!({"seq_number":m["seq_number"],"lock_token":m["lock_token"]});
    let r = api
        .ok(
            "QueueService/CompleteBatch",
            json!({"queue":"q","messages":[pair]}),
        )
        .await;
    assert_eq!(r["results"][0]["ok"], false);
    assert_eq!(api.stats("q").await["active"], 1);
}

#[tokio::test]
async fn c150_large_complete_batch() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let batch: Vec<Value> = (0..600)
        .map(|i| json!({"body": b64(&i.to_string())}))
        .collect();
    api.ok("QueueService/Send", json!({"queue":"q","messages":batch}))
        .await;
    let mut items = vec![];
    for _ in 0..3 {
        let got = messages(
            &api.ok(
                "QueueService/Receive",
                json!({"queue":"q","max_messages":256}),
            )
            .await,
        );
        items.extend(
            got.iter()
                .map(|m| json!({"seq_number":m["seq_number"],"lock_token":m["lock_token"]})),
        );
    }
    assert_eq!(items.len(), 600);
    let before = api.round_trips();
    let r = api
        .ok(
            "QueueService/CompleteBatch",
            json!({"queue":"q","messages":items}),
        )
        .await;
    assert_eq!(api.round_trips() - before, 1);
    assert!(r["results"]
        .as_array()
        .is_some_and(|r| r.len() == 600 && r.iter().all(|x| x["ok"] == true)));
}

#[tokio::test]
async fn c151_c152_c155_c156_renew_batch() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"lock_duration_ms":10000}))
        .await;
    for i in 0..5 {
        api.send_text("q", &i.to_string()).await;
    }
    let got = messages(
        &api.ok(
            "QueueService/Receive",
            json!({"queue":"q","max_messages":5}),
        )
        .await,
    );
    api.advance(3000);
    let now = api.clock.manual_now().unwrap_or(0);
    let mut items: Vec<Value> = got
        .iter()
        .map(|m| json!({"seq_number":m["seq_number"],"lock_token":m["lock_token"]}))
        .collect();
    items.push(json!({"seq_number":got[0]["seq_number"],"lock_token":"stale"}));
    items.push(json!({"seq_number":got[1]["seq_number"],"lock_token":""}));
    let r = api
        .ok(
            "QueueService/RenewBatch",
            json!({"queue":"q","messages":items}),
        )
        .await;
    let results = r["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(results.len(), 7);
    for (i, res) in results.iter().enumerate() {
        assert_eq!(res["seq_number"], items[i]["seq_number"]);
        if i < 5 {
            assert_eq!(
                (res["ok"].as_bool(), res["locked_until_ms"].as_i64()),
                (Some(true), Some(now + 10000)),
                "{res}"
            );
        } else {
            assert!(
                res["ok"] == false && res.get("locked_until_ms").is_none(),
                "{res}"
            );
        }
    }
    let p = peek_one(&api, "q").await;
    assert_eq!(p["locked_until_ms"], now + 10000);
    api.advance(10_000);
    let r = api
        .ok(
            "QueueService/RenewBatch",
            json!({"queue":"q","messages":items[..1]}),
        )
        .await;
    assert_eq!(
        r["results"][0]["ok"], false,
        "expired leases are not revived"
    );
}

#[tokio::test]
async fn c153_renew_batch_cap() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"lock_duration_ms":60000}))
        .await;
    let too_many: Vec<Value> = (0..513)
        .map(|i| json!({"seq_number":i,"lock_token":"x"}))
        .collect();
    api.fails(
        "QueueService/RenewBatch",
        json!({"queue":"q","messages":too_many}),
        400,
        "invalid_argument",
    )
    .await;
    let batch: Vec<Value> = (0..512)
        .map(|i| json!({"body": b64(&i.to_string())}))
        .collect();
    api.ok("QueueService/Send", json!({"queue":"q","messages":batch}))
        .await;
    let mut items = vec![];
    for _ in 0..2 {
        let got = messages(
            &api.ok(
                "QueueService/Receive",
                json!({"queue":"q","max_messages":256}),
            )
            .await,
        );
        items.extend(
            got.iter()
                .map(|m| json!({"seq_number":m["seq_number"],"lock_token":m["lock_token"]})),
        );
    }
    let before = api.round_trips();
    let r = api
        .ok(
            "QueueService/RenewBatch",
            json!({"queue":"q","messages":items}),
        )
        .await;
    assert_eq!(api.round_trips() - before, 1, "512 renewals, one request");
    assert!(r["results"]
        .as_array()
        .is_some_and(|r| r.len() == 512 && r.iter().all(|x| x["ok"] == true)));
}

#[tokio::test]
async fn c154_renew_never_shortens() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"lock_duration_ms":30000}))
        .await;
    api.send_text("q", "x").await;
    let m = receive(&api, "q").await;
    let item = json!([{"seq_number":m["seq_number"],"lock_token":m["lock_token"]}]);
    api.advance(5000);
    let first = api
        .ok(
            "QueueService/RenewBatch",
            json!({"queue":"q","messages":item}),
        )
        .await["results"][0]["locked_until_ms"]
        .as_i64();
    api.advance(-4000);
    let second = api
        .ok(
            "QueueService/RenewBatch",
            json!({"queue":"q","messages":item}),
        )
        .await["results"][0]["locked_until_ms"]
        .as_i64();
    assert!(second >= first, "{second:?} >= {first:?}");
}

#[tokio::test]
async fn c157_c158_receive_deferred() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let active = api.send_text("q", "active").await;
    let deferred = api.send_text("q", "deferred").await;
    let got = messages(
        &api.ok(
            "QueueService/Receive",
            json!({"queue":"q","max_messages":2}),
        )
        .await,
    );
    let d = got
        .iter()
        .find(|m| m["seq_number"] == deferred)
        .cloned()
        .unwrap_or_default();
    let a = got
        .iter()
        .find(|m| m["seq_number"] == active)
        .cloned()
        .unwrap_or_default();
    assert_eq!(settle(&api, "Defer", "q", &d, json!({})).await, 200);
    assert_eq!(settle(&api, "Abandon", "q", &a, json!({})).await, 200);
    let r = api
        .ok(
            "QueueService/ReceiveDeferred",
            json!({"queue":"q","seq_numbers":[active, 999999, deferred, deferred]}),
        )
        .await;
    let got = messages(&r);
    assert_eq!(got.len(), 1);
    assert_eq!(
        (
            got[0]["seq_number"].as_i64(),
            got[0]["delivery_count"].as_i64()
        ),
        (Some(deferred), Some(2))
    );
    assert_ne!(got[0]["lock_token"], d["lock_token"]);
    assert_eq!(settle(&api, "Complete", "q", &got[0], json!({})).await, 200);
}

#[tokio::test]
async fn c159_c160_receive_deferred_unknown_queue_and_expired() {
    let api = Api::new(&[]);
    api.fails(
        "QueueService/ReceiveDeferred",
        json!({"queue":"nope","seq_numbers":[1]}),
        404,
        "not_found",
    )
    .await;
    api.create_queue("q", json!({"default_ttl_ms":1000})).await;
    let seq = api.send_text("q", "x").await;
    let m = receive(&api, "q").await;
    assert_eq!(settle(&api, "Defer", "q", &m, json!({})).await, 200);
    api.advance(1500);
    assert_eq!(
        api.ok(
            "QueueService/ReceiveDeferred",
            json!({"queue":"q","seq_numbers":[seq]})
        )
        .await,
        json!({"messages":[]})
    );
}

#[tokio::test]
async fn c161_c162_c164_cancel() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let t = api.clock.manual_now().unwrap_or(0) + 60_000;
    let schedule =
        |t: i64| json!({"queue":"q","scheduled_enqueue_time_ms":t,"messages":[{"body":b64("x")}]});
    let a = api.ok("QueueService/Schedule", schedule(t)).await["seq_numbers"][0]
        .as_i64()
        .unwrap_or(0);
    assert_eq!(
        messages(
            &api.ok(
                "QueueService/Peek",
                json!({"queue":"q","state":"scheduled"})
            )
            .await
        )
        .len(),
        1
    );
    assert_eq!(
        api.ok("QueueService/Cancel", json!({"queue":"q","seq_number":a}))
            .await,
        json!({"ok":true})
    );
    assert!(messages(
        &api.ok(
            "QueueService/Peek",
            json!({"queue":"q","state":"scheduled"})
        )
        .await
    )
    .is_empty());
    let not_found = json!({"code":"not_found","message":"mqlite: not found"});
    assert_eq!(
        api.rpc("QueueService/Cancel", json!({"queue":"q","seq_number":a}))
            .await,
        (404, not_found.clone())
    );
    let b = api.ok("QueueService/Schedule", schedule(t)).await["seq_numbers"][0]
        .as_i64()
        .unwrap_or(0);
    assert_ne!(a, b);
    assert_eq!(
        api.rpc("QueueService/Cancel", json!({"queue":"q","seq_number":a}))
            .await
            .0,
        404
    );
    assert_eq!(api.stats("q").await["scheduled"], 1);
    let active = api.send_text("q", "now").await;
    assert_eq!(
        api.rpc(
            "QueueService/Cancel",
            json!({"queue":"q","seq_number":active})
        )
        .await
        .0,
        404
    );
    assert_eq!(
        api.rpc(
            "QueueService/Cancel",
            json!({"queue":"nope","seq_number":b})
        )
        .await
        .0,
        404
    );
}

#[tokio::test]
async fn c163_backoff_parking_is_not_cancellable() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let seq = api.send_text("q", "x").await;
    let m = receive(&api, "q").await;
    assert_eq!(
        settle(&api, "Abandon", "q", &m, json!({"delay_ms":60000})).await,
        200
    );
    assert_eq!(
        api.rpc("QueueService/Cancel", json!({"queue":"q","seq_number":seq}))
            .await
            .0,
        404
    );
    api.advance(61_000);
    assert_eq!(receive(&api, "q").await["seq_number"], seq);
}

#[tokio::test]
async fn c204_c205_c206_peek_hides_tokens_and_filters() {
    let api = Api::new(&[]);
    api.fails(
        "QueueService/Stats",
        json!({"queue":"nope"}),
        404,
        "not_found",
    )
    .await;
    assert_eq!(
        api.ok("QueueService/Peek", json!({"queue":"nope"})).await,
        json!({"messages":[]})
    );
    assert_eq!(
        api.ok("QueueService/Peek", json!({"queue":""})).await,
        json!({"messages":[]})
    );
    api.create_queue("q", json!({})).await;
    api.send_text("q", "locked").await;
    let m = receive(&api, "q").await;
    let r = api
        .request(
            "POST",
            "/mqlite.v1.QueueService/Peek",
            &[("Authorization", ADMIN_AUTH)],
            br#"{"queue":"q"}"#,
        )
        .await;
    let text = String::from_utf8_lossy(&r.body).to_string();
    assert!(
        text.contains("\"state\":\"locked\"") && !text.contains("lock_token"),
        "{text}"
    );
    assert!(!text.contains(m["lock_token"].as_str().unwrap_or("-")));
    assert_eq!(
        api.ok("QueueService/Peek", json!({"queue":"q","state":"bogus"}))
            .await,
        json!({"messages":[]})
    );
    assert_eq!(
        messages(
            &api.ok("QueueService/Peek", json!({"queue":"q","state":"locked"}))
                .await
        )
        .len(),
        1
    );
    assert!(messages(
        &api.ok("QueueService/Peek", json!({"queue":"q","state":"deferred"}))
            .await
    )
    .is_empty());
}

#[tokio::test]
async fn c207_peek_paging() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let batch: Vec<Value> = (0..40)
        .map(|i| json!({"body": b64(&i.to_string())}))
        .collect();
    let seqs = api
        .ok("QueueService/Send", json!({"queue":"q","messages":batch}))
        .await["seq_numbers"]
        .clone();
    assert_eq!(
        messages(&api.ok("QueueService/Peek", json!({"queue":"q"})).await).len(),
        32
    );
    assert_eq!(
        messages(
            &api.ok("QueueService/Peek", json!({"queue":"q","max":5000}))
                .await
        )
        .len(),
        40
    );
    let from = api
        .ok("QueueService/Peek", json!({"queue":"q","from_seq":seqs[9]}))
        .await;
    assert_eq!(from["messages"][0]["seq_number"], seqs[9]);
}

#[tokio::test]
async fn c208_c209_stats_per_state_and_oldest_age() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.create_queue("other", json!({})).await;
    let t = api.clock.manual_now().unwrap_or(0) + 60_000;
    api.ok(
        "QueueService/Schedule",
        json!({"queue":"other","scheduled_enqueue_time_ms":t,"messages":[{"body":b64("s")}]}),
    )
    .await;
    for i in 0..4 {
        api.send_text("q", &i.to_string()).await;
    }
    let got = messages(
        &api.ok(
            "QueueService/Receive",
            json!({"queue":"q","max_messages":3}),
        )
        .await,
    );
    assert_eq!(settle(&api, "Defer", "q", &got[0], json!({})).await, 200);
    assert_eq!(settle(&api, "Reject", "q", &got[1], json!({})).await, 200);
    api.ok(
        "QueueService/Schedule",
        json!({"queue":"q","scheduled_enqueue_time_ms":t,"messages":[{"body":b64("s")}]}),
    )
    .await;
    api.advance(250);
    let stats = api.stats("q").await;
    assert_eq!(
        stats,
        json!({"queue":"q","active":1,"locked":1,"deferred":1,"scheduled":1,"dead_lettered":1,"total":5,"oldest_message_age_ms":250})
    );
    assert_eq!(api.stats("other").await["oldest_message_age_ms"], 0);
}

#[tokio::test]
async fn c152_renew_batch_with_a_wrong_token_changes_nothing() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({"lock_duration_ms":10000}))
        .await;
    api.send_text("q", "x").await;
    let m = receive(&api, "q").await;
    api.advance(3000);
    let r = api
        .ok(
            "QueueService/RenewBatch",
            json!({"queue":"q","messages":[{"seq_number":m["seq_number"],"lock_token":"wrong"}]}),
        )
        .await;
    assert_eq!(
        r,
        json!({"results":[{"seq_number":m["seq_number"],"ok":false}]})
    );
    assert_eq!(
        peek_one(&api, "q").await["locked_until_ms"],
        m["locked_until_ms"]
    );
}

#[tokio::test]
async fn cancel_of_a_due_scheduled_message_is_404_because_it_is_already_active() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let t = api.clock.manual_now().unwrap_or(0) + 1000;
    let r = api
        .ok(
            "QueueService/Schedule",
            json!({"queue":"q","scheduled_enqueue_time_ms":t,"messages":[{"body":b64("x")}]}),
        )
        .await;
    api.advance(1000);
    let cancel = json!({"queue":"q","seq_number":r["seq_numbers"][0]});
    assert_eq!(api.rpc("QueueService/Cancel", cancel).await.0, 404);
    assert_eq!(api.stats("q").await["active"], 1);
}
