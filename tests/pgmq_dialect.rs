//! The pgmq dialect (docs/pgmq.md) through the whole HTTP pipeline:
//! shapes, status codes, caps and errors of every route, one round trip
//! per request, credentials and CORS, and how the two dialects meet on the
//! same queues.

mod support;

use serde_json::{json, Value};
use support::*;

const ADMIN_HEADER: (&str, &str) = ("Authorization", ADMIN_AUTH);

/// A pgmq request as the admin: status, JSON (Null when empty), round trips.
async fn pg(api: &Api, method: &str, path: &str, body: Option<Value>) -> (u16, Value, u64) {
    pg_with(api, method, path, body, &[ADMIN_HEADER]).await
}

async fn pg_with(
    api: &Api,
    method: &str,
    path: &str,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> (u16, Value, u64) {
    let before = api.round_trips();
    let bytes = body.map(|b| b.to_string()).unwrap_or_default();
    let response = api.request(method, path, headers, bytes.as_bytes()).await;
    let trips = api.round_trips() - before;
    let json = if response.body.is_empty() {
        Value::Null
    } else {
        json_body(&response)
    };
    (response.status, json, trips)
}

/// Queue `a`, created with two empty messages sent to it: their ids.
async fn queue_a_with_two_messages(api: &Api) -> Vec<i64> {
    pg(api, "PUT", "/v1/queues/a", None).await;
    let (_, b, _) = pg(
        api,
        "POST",
        "/v1/queues/a/messages/batch",
        Some(json!({"messages":[{},{}]})),
    )
    .await;
    ids(&b["msg_ids"])
}

fn ids(v: &Value) -> Vec<i64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|i| i.as_i64().expect("id"))
        .collect()
}

#[tokio::test]
async fn every_route_answers_pgmq_shapes_in_one_round_trip() {
    let api = Api::new(&[]);
    api.create_queue("warm-up", json!({})).await;

    let (s, b, t) = pg(&api, "PUT", "/v1/queues/jobs?unlogged=true", None).await;
    assert_eq!((s, t), (201, 1));
    assert_eq!(b, json!({"queue_name":"jobs","unlogged":true}));
    // A second PUT changes nothing and is not 409.
    let (s, b, _) = pg(&api, "PUT", "/v1/queues/jobs", None).await;
    assert_eq!((s, b), (201, json!({"queue_name":"jobs","unlogged":false})));

    let (s, b, t) = pg(&api, "GET", "/v1/queues", None).await;
    assert_eq!((s, t), (200, 1));
    let names: Vec<&str> = b["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .map(|q| q["queue_name"].as_str().expect("name"))
        .collect();
    // Oldest first; same creation instant (a manual clock): by name.
    assert_eq!(names, vec!["jobs", "warm-up"]);
    assert_eq!(b["queues"][1]["is_partitioned"], json!(false));
    assert!(b["queues"][1]["created_at"]
        .as_str()
        .expect("ts")
        .ends_with('Z'));

    let (s, b, t) = pg(
        &api,
        "POST",
        "/v1/queues/jobs/messages",
        Some(json!({"message":{"n":1,"deep":{"x":[1,2]}},"headers":{"trace":"abc"}})),
    )
    .await;
    assert_eq!((s, t), (201, 1));
    let first = b["msg_id"].as_i64().expect("msg_id");

    let (s, b, t) = pg(
        &api,
        "POST",
        "/v1/queues/jobs/messages/batch",
        Some(json!({"messages":[{"n":2},{"n":3},{"n":4}],"headers":[{"h":2},{"h":3},{"h":4}]})),
    )
    .await;
    assert_eq!((s, t), (201, 1));
    assert_eq!(ids(&b["msg_ids"]), vec![first + 1, first + 2, first + 3]);

    let (s, b, t) = pg(
        &api,
        "POST",
        "/v1/queues/jobs/read",
        Some(json!({"vt":10,"qty":2})),
    )
    .await;
    assert_eq!((s, t), (200, 1));
    let read = b["messages"].as_array().expect("messages");
    assert_eq!(read.len(), 2);
    assert_eq!(read[0]["msg_id"], json!(first));
    assert_eq!(read[0]["read_ct"], json!(1));
    assert_eq!(read[0]["message"], json!({"n":1,"deep":{"x":[1,2]}}));
    assert_eq!(read[0]["headers"], json!({"trace":"abc"}));
    assert_eq!(read[0]["enqueued_at"], json!("2025-06-15T15:06:40.000Z"));
    assert_eq!(read[0]["last_read_at"], json!("2025-06-15T15:06:40.000Z"));
    assert_eq!(read[0]["vt"], json!("2025-06-15T15:06:50.000Z"));

    let (s, b, t) = pg(&api, "POST", "/v1/queues/jobs/pop", Some(json!({}))).await;
    assert_eq!((s, t), (200, 1));
    assert_eq!(b["messages"][0]["msg_id"], json!(first + 2));
    assert_eq!(b["messages"][0]["read_ct"], json!(0));
    assert_eq!(b["messages"][0]["last_read_at"], Value::Null);

    let (s, b, t) = pg(&api, "GET", "/v1/queues/jobs/metrics", None).await;
    assert_eq!((s, t), (200, 1));
    assert_eq!(b["queue_length"], json!(3));
    assert_eq!(b["queue_visible_length"], json!(1));
    assert_eq!(b["total_messages"], json!(4));
    assert_eq!(b["oldest_msg_age_sec"], json!(0));

    let (s, b, t) = pg(&api, "GET", "/v1/metrics", None).await;
    assert_eq!((s, t), (200, 1));
    assert_eq!(b["queues"].as_array().expect("all").len(), 2);

    let path = format!("/v1/queues/jobs/messages/{first}/vt");
    let (s, b, t) = pg(&api, "POST", &path, Some(json!({"vt": 5}))).await;
    assert_eq!((s, t), (200, 1));
    assert_eq!(b["vt"], json!("2025-06-15T15:06:45.000Z"));
    assert_eq!(b["read_ct"], json!(1));
    let (s, b, _) = pg(
        &api,
        "POST",
        &path,
        Some(json!({"vt": "2030-01-01T00:00:00Z"})),
    )
    .await;
    assert_eq!(
        (s, b["vt"].clone()),
        (200, json!("2030-01-01T00:00:00.000Z"))
    );

    let (s, b, t) = pg(
        &api,
        "DELETE",
        &format!("/v1/queues/jobs/messages/{first}"),
        None,
    )
    .await;
    assert_eq!((s, b, t), (204, Value::Null, 1));
    let archive = format!("/v1/queues/jobs/messages/{}/archive", first + 1);
    let (s, _, t) = pg(&api, "POST", &archive, None).await;
    assert_eq!((s, t), (204, 1));
    let (s, b, _) = pg(&api, "POST", &archive, None).await;
    assert_eq!((s, b["error"].clone()), (404, json!("message_not_found")));

    let (s, b, t) = pg(
        &api,
        "POST",
        "/v1/queues/jobs/messages/delete",
        Some(json!({"msg_ids":[first + 3, 999_999]})),
    )
    .await;
    assert_eq!((s, t), (200, 1));
    assert_eq!(ids(&b["msg_ids"]), vec![first + 3]);
    let (s, b, t) = pg(
        &api,
        "POST",
        "/v1/queues/jobs/messages/archive",
        Some(json!({"msg_ids":[first + 3]})),
    )
    .await;
    assert_eq!((s, b, t), (200, json!({"msg_ids":[]}), 1));

    // Archived and deleted messages still count in total_messages only.
    let (_, b, _) = pg(&api, "GET", "/v1/queues/jobs/metrics", None).await;
    assert_eq!(
        (b["queue_length"].clone(), b["total_messages"].clone()),
        (json!(0), json!(4))
    );

    pg(
        &api,
        "POST",
        "/v1/queues/jobs/messages",
        Some(json!({"message":{}})),
    )
    .await;
    let (s, b, t) = pg(&api, "POST", "/v1/queues/jobs/purge", None).await;
    assert_eq!((s, b, t), (200, json!({"purged":1}), 1));

    let (s, b, t) = pg(&api, "DELETE", "/v1/queues/jobs", None).await;
    assert_eq!((s, b, t), (204, Value::Null, 1));
    let (s, b, _) = pg(&api, "DELETE", "/v1/queues/jobs", None).await;
    assert_eq!((s, b["error"].clone()), (404, json!("queue_not_found")));
    let archived = query(api.engine(), "SELECT count(*) FROM archived_messages").await;
    assert_eq!(
        archived,
        vec![vec![json!(0)]],
        "the archive goes with its queue"
    );
}

#[tokio::test]
async fn errors_caps_and_validation_answer_as_the_reference() {
    let api = Api::new(&[("PGMQ_API_MAX_QTY", "5"), ("PGMQ_API_MAX_BATCH", "2")]);
    pg(&api, "PUT", "/v1/queues/q", None).await;
    let err = |b: &Value| b["error"].as_str().map(str::to_owned);

    for (method, path, body) in [
        (
            "POST",
            "/v1/queues/none/messages",
            Some(json!({"message":{}})),
        ),
        ("POST", "/v1/queues/none/read", Some(json!({}))),
        ("POST", "/v1/queues/none/pop", Some(json!({}))),
        ("GET", "/v1/queues/none/metrics", None),
        ("POST", "/v1/queues/none/purge", None),
        ("DELETE", "/v1/queues/none/messages/1", None),
        (
            "POST",
            "/v1/queues/none/messages/1/vt",
            Some(json!({"vt":1})),
        ),
        (
            "POST",
            "/v1/queues/none/messages/batch",
            Some(json!({"messages":[]})),
        ),
    ] {
        let (s, b, _) = pg(&api, method, path, body).await;
        assert_eq!(
            (s, err(&b)),
            (404, Some("queue_not_found".into())),
            "{method} {path}"
        );
    }
    let (s, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/q/messages/7/vt",
        Some(json!({"vt":1})),
    )
    .await;
    assert_eq!((s, err(&b)), (404, Some("message_not_found".into())));
    let (s, b, _) = pg(&api, "DELETE", "/v1/queues/q/messages/7", None).await;
    assert_eq!((s, err(&b)), (404, Some("message_not_found".into())));

    let cases = [
        (
            "/v1/queues/q/messages",
            json!({"message":[1]}),
            "dict_type",
            json!(["body", "message"]),
        ),
        (
            "/v1/queues/q/messages",
            json!({}),
            "missing",
            json!(["body", "message"]),
        ),
        (
            "/v1/queues/q/messages",
            json!({"message":{},"delay":-1}),
            "value_error",
            json!(["body", "delay"]),
        ),
        (
            "/v1/queues/q/read",
            json!({"qty":"x"}),
            "int_parsing",
            json!(["body", "qty"]),
        ),
        (
            "/v1/queues/q/read",
            json!({"vt":1.5}),
            "int_from_float",
            json!(["body", "vt"]),
        ),
        (
            "/v1/queues/q/messages/batch",
            json!({"messages":[1]}),
            "dict_type",
            json!(["body", "messages", 0]),
        ),
        (
            "/v1/queues/q/messages/delete",
            json!({}),
            "missing",
            json!(["body", "msg_ids"]),
        ),
    ];
    for (path, body, kind, loc) in cases {
        let (s, b, t) = pg(&api, "POST", path, Some(body.clone())).await;
        assert_eq!(s, 422, "{path} {body} -> {b}");
        assert_eq!(
            (
                b["detail"][0]["type"].clone(),
                b["detail"][0]["loc"].clone()
            ),
            (json!(kind), loc)
        );
        assert!(b["detail"][0].get("msg").is_some() && b["detail"][0].get("input").is_some());
        assert_eq!(t, 0, "a 422 never reaches the database");
    }
    let (s, b, _) = pg(&api, "POST", "/v1/queues/q/messages/abc/archive", None).await;
    assert_eq!(
        (s, b["detail"][0]["loc"].clone()),
        (422, json!(["path", "msg_id"]))
    );
    let (s, b, _) = pg(&api, "PUT", "/v1/queues/q2?unlogged=maybe", None).await;
    assert_eq!(
        (s, b["detail"][0]["loc"].clone()),
        (422, json!(["query", "unlogged"]))
    );
    let response = api
        .request("POST", "/v1/queues/q/read", &[ADMIN_HEADER], b"{nope")
        .await;
    assert_eq!(
        (
            response.status,
            json_body(&response)["detail"][0]["type"].clone()
        ),
        (422, json!("json_invalid"))
    );
    let response = api
        .request("POST", "/v1/queues/q/read", &[ADMIN_HEADER], b"")
        .await;
    assert_eq!(
        (
            response.status,
            json_body(&response)["detail"][0]["loc"].clone()
        ),
        (422, json!(["body"]))
    );

    // Caps: reject, never clamp.
    for path in [
        "/v1/queues/q/read",
        "/v1/queues/q/pop",
        "/v1/queues/q/read-poll",
    ] {
        let (s, b, _) = pg(&api, "POST", path, Some(json!({"qty":6}))).await;
        assert_eq!(
            (s, err(&b)),
            (400, Some("invalid_request".into())),
            "{path}"
        );
    }
    let (s, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/q/read-poll",
        Some(json!({"max_poll_seconds":21})),
    )
    .await;
    assert_eq!((s, err(&b)), (400, Some("poll_limit_exceeded".into())));
    let (s, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/q/messages/batch",
        Some(json!({"messages":[{},{},{}]})),
    )
    .await;
    assert_eq!((s, err(&b)), (400, Some("invalid_request".into())));
    let (s, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/q/messages/batch",
        Some(json!({"messages":[{}],"headers":[]})),
    )
    .await;
    assert_eq!((s, err(&b)), (400, Some("invalid_request".into())));
    let (s, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/q/messages/batch",
        Some(json!({"messages":[]})),
    )
    .await;
    assert_eq!((s, b), (201, json!({"msg_ids":[]})));
    let (s, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/q/read",
        Some(json!({"conditional":{"a":1}})),
    )
    .await;
    assert_eq!((s, b), (200, json!({"messages":[]})));
    let (s, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/q/read",
        Some(json!({"conditional":{}})),
    )
    .await;
    assert_eq!((s, b), (200, json!({"messages":[]})));

    let long = "a".repeat(48);
    let (s, b, _) = pg(&api, "PUT", &format!("/v1/queues/{long}"), None).await;
    assert_eq!((s, err(&b)), (400, Some("invalid_queue_name".into())));
    let (s, _, _) = pg(&api, "PUT", &format!("/v1/queues/{}", &long[1..]), None).await;
    assert_eq!(s, 201);

    let (s, b, _) = pg(&api, "GET", "/v1/queues/q", None).await;
    assert_eq!((s, b), (405, json!({"detail":"Method Not Allowed"})));
    let (s, b, _) = pg(&api, "GET", "/v1/nothing", None).await;
    assert_eq!((s, b), (404, json!({"detail":"Not Found"})));

    // A topic is not a pgmq queue (§5.1).
    api.create_queue("sub", json!({"kind":"subscription"}))
        .await;
    api.subscribe("events", "sub", None).await;
    let (s, b, _) = pg(&api, "PUT", "/v1/queues/events", None).await;
    assert_eq!((s, err(&b)), (404, Some("queue_not_found".into())));
    let (s, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/events/messages",
        Some(json!({"message":{}})),
    )
    .await;
    assert_eq!((s, err(&b)), (404, Some("queue_not_found".into())));
}

#[tokio::test]
async fn a_message_crosses_dialects_and_is_counted_once() {
    let api = Api::new(&[]);
    pg(&api, "PUT", "/v1/queues/x", None).await;
    // pgmq → Connect-JSON: the body is the message's JSON text.
    let (_, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/x/messages",
        Some(json!({"message":{"k":"v"}})),
    )
    .await;
    let id = b["msg_id"].as_i64().expect("id");
    let got = api
        .ok(
            "QueueService/Receive",
            json!({"queue":"x","max_messages":1}),
        )
        .await;
    let m = &messages(&got)[0];
    assert_eq!(m["seq_number"], json!(id));
    assert_eq!(m["body"], json!(b64(r#"{"k":"v"}"#)));
    let token = m["lock_token"].clone();
    api.ok(
        "QueueService/Complete",
        json!({"queue":"x","seq_number":id,"lock_token":token}),
    )
    .await;

    // Connect-JSON → pgmq: JSON bodies parse, others become strings.
    let json_seq = api.send_text("x", r#"{"from":"connect"}"#).await;
    let text_seq = api.send_text("x", "plain text").await;
    let (_, b, _) = pg(&api, "POST", "/v1/queues/x/read", Some(json!({"qty":5}))).await;
    let read = b["messages"].as_array().expect("messages");
    assert_eq!(read[0]["msg_id"], json!(json_seq));
    assert_eq!(read[0]["message"], json!({"from":"connect"}));
    assert_eq!(read[0]["headers"], Value::Null);
    assert_eq!(read[1]["msg_id"], json!(text_seq));
    assert_eq!(read[1]["message"], json!("plain text"));
    let (_, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/x/messages/delete",
        Some(json!({"msg_ids":[json_seq, text_seq]})),
    )
    .await;
    assert_eq!(ids(&b["msg_ids"]), vec![json_seq, text_seq]);

    let stats = api.stats("x").await;
    assert_eq!(stats["active"], json!(0));
    assert_eq!(stats["locked"], json!(0));
    let (_, b, _) = pg(&api, "GET", "/v1/queues/x/metrics", None).await;
    assert_eq!(
        (b["total_messages"].clone(), b["queue_length"].clone()),
        (json!(3), json!(0))
    );
}

#[tokio::test]
async fn delete_archive_and_set_vt_take_a_message_from_its_mqlite_lease_holder() {
    let api = Api::new(&[]);
    api.create_queue("l", json!({})).await;
    for how in ["delete", "archive", "vt"] {
        let seq = api.send_text("l", "{}").await;
        let got = api
            .ok(
                "QueueService/Receive",
                json!({"queue":"l","max_messages":1}),
            )
            .await;
        let token = messages(&got)[0]["lock_token"].clone();
        let (status, _, _) = match how {
            "delete" => {
                pg(
                    &api,
                    "DELETE",
                    &format!("/v1/queues/l/messages/{seq}"),
                    None,
                )
                .await
            }
            "archive" => {
                pg(
                    &api,
                    "POST",
                    &format!("/v1/queues/l/messages/{seq}/archive"),
                    None,
                )
                .await
            }
            _ => {
                pg(
                    &api,
                    "POST",
                    &format!("/v1/queues/l/messages/{seq}/vt"),
                    Some(json!({"vt":0})),
                )
                .await
            }
        };
        assert!(status == 204 || status == 200, "{how}: {status}");
        api.fails(
            "QueueService/Complete",
            json!({"queue":"l","seq_number":seq,"lock_token":token}),
            409,
            "lock_lost",
        )
        .await;
        if how == "vt" {
            // set_vt made it visible again: a pgmq read takes it.
            let (_, b, _) = pg(&api, "POST", "/v1/queues/l/pop", Some(json!({}))).await;
            assert_eq!(b["messages"][0]["msg_id"], json!(seq));
        }
    }
    let (_, b, _) = pg(&api, "GET", "/v1/queues/l/metrics", None).await;
    assert_eq!(b["queue_length"], json!(0));
}

#[tokio::test]
async fn a_read_without_vt_leases_for_30_seconds() {
    let api = Api::new(&[]);
    pg(&api, "PUT", "/v1/queues/l", None).await;
    let send = Some(json!({"message":{}}));
    pg(&api, "POST", "/v1/queues/l/messages", send).await;
    let (s, b, _) = pg(&api, "POST", "/v1/queues/l/read", Some(json!({}))).await;
    assert_eq!(s, 200);
    assert_eq!(b["messages"][0]["vt"], json!("2025-06-15T15:07:10.000Z"));
    let (_, b, _) = pg(&api, "POST", "/v1/queues/l/read", Some(json!({}))).await;
    assert_eq!(b, json!({"messages":[]}), "leased, not visible");
    api.advance(29_999);
    let (_, b, _) = pg(&api, "POST", "/v1/queues/l/read", Some(json!({}))).await;
    assert_eq!(b, json!({"messages":[]}), "still leased");
    api.advance(1);
    let (_, b, _) = pg(&api, "POST", "/v1/queues/l/read", Some(json!({}))).await;
    assert_eq!(
        b["messages"][0]["read_ct"],
        json!(2),
        "visible again at 30 s"
    );
}

/// The queue's default TTL runs from when a message becomes visible.
#[tokio::test]
async fn a_delayed_send_lives_its_ttl_from_when_it_becomes_visible() {
    let api = Api::new(&[]);
    api.create_queue("t", json!({"default_ttl_ms":5_000})).await;
    let delayed = Some(json!({"message":{"n":1},"delay":10}));
    for _ in 0..2 {
        pg(&api, "POST", "/v1/queues/t/messages", delayed.clone()).await;
    }
    api.advance(10_000);
    let (_, b, _) = pg(&api, "POST", "/v1/queues/t/read", Some(json!({}))).await;
    assert_eq!(b["messages"][0]["message"], json!({"n":1}), "{b}");
    api.advance(4_999);
    let (_, b, _) = pg(&api, "GET", "/v1/queues/t/metrics", None).await;
    assert_eq!(
        b["queue_visible_length"],
        json!(1),
        "the second still lives"
    );
    api.advance(1);
    let (_, b, _) = pg(&api, "POST", "/v1/queues/t/read", Some(json!({}))).await;
    assert_eq!(
        b,
        json!({"messages":[]}),
        "expired 5 s after it became visible"
    );
}

#[tokio::test]
async fn a_pgmq_read_respects_max_delivery_count_and_the_dlq() {
    let api = Api::new(&[]);
    api.create_queue("d", json!({"max_delivery_count":2})).await;
    let (_, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/d/messages",
        Some(json!({"message":{"a":1}})),
    )
    .await;
    let id = b["msg_id"].as_i64().expect("id");
    for round in 1..=2 {
        let (_, b, _) = pg(&api, "POST", "/v1/queues/d/read", Some(json!({"vt":1}))).await;
        assert_eq!(b["messages"][0]["read_ct"], json!(round));
        // Invisible until vt passes.
        let (_, b, _) = pg(&api, "POST", "/v1/queues/d/read", Some(json!({"vt":1}))).await;
        assert_eq!(b, json!({"messages":[]}));
        api.advance(1_000);
    }
    let (_, b, _) = pg(&api, "POST", "/v1/queues/d/read", Some(json!({"vt":1}))).await;
    assert_eq!(
        b,
        json!({"messages":[]}),
        "two deliveries used up: dead-lettered"
    );
    let stats = api.stats("d").await;
    assert_eq!(stats["dead_lettered"], json!(1));
    let (_, b, _) = pg(&api, "GET", "/v1/queues/d/metrics", None).await;
    assert_eq!(
        (b["queue_length"].clone(), b["total_messages"].clone()),
        (json!(0), json!(1))
    );
    let (s, _, _) = pg(&api, "DELETE", &format!("/v1/queues/d/messages/{id}"), None).await;
    assert_eq!(s, 404, "a dead letter is outside pgmq's queue");
    let peek = api
        .ok(
            "QueueService/Peek",
            json!({"queue":"d","state":"dead_lettered","max":5}),
        )
        .await;
    assert_eq!(
        messages(&peek)[0]["dead_letter_reason"],
        json!("MaxDeliveryCountExceeded")
    );
}

#[tokio::test]
async fn read_poll_waits_within_its_bound_and_returns_empty() {
    let api = Api::new(&[]);
    pg(&api, "PUT", "/v1/queues/p", None).await;
    let started = std::time::Instant::now();
    let (s, b, trips) = pg(
        &api,
        "POST",
        "/v1/queues/p/read-poll",
        Some(json!({"max_poll_seconds":1,"poll_interval_ms":100})),
    )
    .await;
    let waited = started.elapsed().as_millis();
    assert_eq!((s, b), (200, json!({"messages":[]})));
    assert!((1000..3000).contains(&waited), "waited {waited} ms");
    assert!((2..=40).contains(&trips), "{trips} polls");
    pg(
        &api,
        "POST",
        "/v1/queues/p/messages",
        Some(json!({"message":{}})),
    )
    .await;
    let (_, b, trips) = pg(
        &api,
        "POST",
        "/v1/queues/p/read-poll",
        Some(json!({"max_poll_seconds":5})),
    )
    .await;
    assert_eq!(
        (b["messages"].as_array().map(Vec::len), trips),
        (Some(1), 1)
    );
}

#[tokio::test]
async fn credentials_bearer_api_key_pgmq_keys_and_managed_keys() {
    let api = Api::new(&[
        ("PGMQ_API_KEY", "legacy"),
        ("PGMQ_API_KEYS", "ci:ci-secret,ops:ops-secret"),
    ]);
    let unauthorized = |s: u16, b: &Value| s == 401 && b["error"] == json!("unauthorized");
    let (s, b, _) = pg_with(&api, "GET", "/v1/queues", None, &[]).await;
    assert!(unauthorized(s, &b), "{s} {b}");
    for headers in [
        vec![("Authorization", ADMIN_AUTH)],
        vec![("X-API-Key", ADMIN)],
        vec![("X-API-Key", "legacy")],
        vec![("Authorization", "Bearer ci-secret")],
        vec![
            ("X-API-Key", "ops-secret"),
            ("Authorization", "Bearer ops-secret"),
        ],
        vec![("X-API-Key", ADMIN), ("Authorization", "Bearer legacy")],
    ] {
        let (s, _, _) = pg_with(&api, "GET", "/v1/queues", None, &headers).await;
        assert_eq!(s, 200, "{headers:?}");
    }
    for headers in [
        vec![("X-API-Key", "nope")],
        vec![("Authorization", "Basic T")],
    ] {
        let (s, b, _) = pg_with(&api, "GET", "/v1/queues", None, &headers).await;
        assert!(unauthorized(s, &b), "{headers:?}: {s} {b}");
    }
    // Managed keys: per-route permissions, checked inside the one round trip.
    pg(&api, "PUT", "/v1/queues/k", None).await;
    let listen = api.mint_key(&["listen"]).await;
    let auth = format!("Bearer {listen}");
    let h = [("Authorization", auth.as_str())];
    let (s, _, t) = pg_with(&api, "POST", "/v1/queues/k/read", Some(json!({})), &h).await;
    assert_eq!((s, t), (200, 1));
    let (s, b, _) = pg_with(
        &api,
        "POST",
        "/v1/queues/k/messages",
        Some(json!({"message":{}})),
        &h,
    )
    .await;
    assert!(unauthorized(s, &b), "{s} {b}");
    let (s, b, _) = pg_with(&api, "GET", "/v1/queues", None, &h).await;
    assert!(unauthorized(s, &b), "{s} {b}");
    // A key that does not exist is refused even when validation fails first.
    let fake = format!("Bearer mqk_{}", "0".repeat(64));
    let (s, b, _) = pg_with(
        &api,
        "POST",
        "/v1/queues/k/read",
        Some(json!({"qty":"x"})),
        &[("Authorization", fake.as_str())],
    )
    .await;
    assert!(unauthorized(s, &b), "{s} {b}");

    // Health is public and reports auth.
    let (s, b, t) = pg_with(&api, "GET", "/health", None, &[]).await;
    assert_eq!(
        (s, b["status"].clone(), b["auth"].clone(), t),
        (200, json!("ok"), json!("enabled"), 0)
    );
    let off = Api::new(&[("MQLITE_TOKENS", "off")]);
    let (s, b, _) = pg_with(&off, "GET", "/v1/health", None, &[]).await;
    assert_eq!((s, b["auth"].clone()), (200, json!("disabled")));
    let (s, _, _) = pg_with(&off, "GET", "/v1/queues", None, &[]).await;
    assert_eq!(s, 200);
}

#[tokio::test]
async fn cors_follows_the_pgmq_origin_list() {
    let api = Api::new(&[(
        "PGMQ_API_CORS_ORIGINS",
        "https://a.example, https://b.example",
    )]);
    let response = api
        .request(
            "OPTIONS",
            "/v1/queues",
            &[
                ("Origin", "https://b.example"),
                ("Access-Control-Request-Method", "PUT"),
            ],
            b"",
        )
        .await;
    assert_eq!(response.status, 204);
    assert_eq!(
        response.header("Access-Control-Allow-Origin"),
        Some("https://b.example")
    );
    assert_eq!(response.header("Vary"), Some("Origin"));
    assert_eq!(
        response.header("Access-Control-Allow-Methods"),
        Some("GET, POST, PUT, DELETE, OPTIONS")
    );
    assert_eq!(
        response.header("Access-Control-Allow-Headers"),
        Some("Authorization, X-API-Key, Content-Type")
    );
    let response = api
        .request(
            "GET",
            "/v1/queues",
            &[ADMIN_HEADER, ("Origin", "https://evil.example")],
            b"",
        )
        .await;
    assert_eq!(
        (
            response.status,
            response.header("Access-Control-Allow-Origin")
        ),
        (200, None)
    );
    // Unset: the Connect-JSON side's rule (`*` with auth on).
    let api = Api::new(&[]);
    let response = api
        .request("GET", "/health", &[("Origin", "https://x.example")], b"")
        .await;
    assert_eq!(response.header("Access-Control-Allow-Origin"), Some("*"));
}

#[tokio::test]
async fn health_never_touches_the_database_and_ready_reports_it_down() {
    let api = Api::new(&[]);
    api.create_queue("warm-up", json!({})).await;
    let (s, b, t) = pg_with(&api, "GET", "/v1/ready", None, &[]).await;
    assert_eq!((s, b, t), (200, json!({"status":"ok"}), 1));
    let down = Api::unreachable(&[]);
    for path in ["/health", "/v1/health"] {
        let (s, b, t) = pg_with(&down, "GET", path, None, &[]).await;
        assert_eq!((s, b["status"].clone(), t), (200, json!("ok"), 0), "{path}");
    }
    let (s, b, _) = pg_with(&down, "GET", "/v1/ready", None, &[]).await;
    assert_eq!(
        (s, b["error"].clone()),
        (503, json!("dependency_unavailable"))
    );
    let (s, b, _) = pg(&down, "GET", "/v1/queues", None).await;
    assert_eq!(
        (s, b["error"].clone()),
        (503, json!("dependency_unavailable"))
    );
    // A managed key the key store cannot look up (here: the database refuses
    // the broker's own credentials) answers what the administrator's call
    // answers: the database is down, never 401 and never a pass.
    let key = format!("Bearer mqk_{}", "0".repeat(64));
    let (s, b, _) = pg_with(&down, "GET", "/v1/queues", None, &[("Authorization", &key)]).await;
    assert_eq!(
        (s, b["error"].clone()),
        (503, json!("dependency_unavailable")),
        "{b}"
    );
}

#[tokio::test]
async fn archived_messages_leave_with_the_dead_letter_age_bound() {
    let api = Api::new(&[]);
    let archived = queue_a_with_two_messages(&api).await;
    pg(
        &api,
        "POST",
        "/v1/queues/a/messages/archive",
        Some(json!({"msg_ids": archived})),
    )
    .await;
    let count = || query(api.engine(), "SELECT count(*) FROM archived_messages");
    assert_eq!(count().await, vec![vec![json!(2)]]);
    let retention = mqlite_edge::engine::Retention::default();
    api.engine().sweep(&retention).await.expect("sweep");
    assert_eq!(
        count().await,
        vec![vec![json!(2)]],
        "younger than the bound"
    );
    api.advance(retention.max_age_ms + 1);
    api.engine().sweep(&retention).await.expect("sweep");
    assert_eq!(count().await, vec![vec![json!(0)]]);
    let (_, b, _) = pg(&api, "GET", "/v1/queues/a/metrics", None).await;
    assert_eq!(b["total_messages"], json!(2));
}

/// `total_messages` counts every message ever inserted into a queue, by
/// every path that inserts: a Connect-JSON batch, a dedup replay (which
/// inserts nothing), a topic publish into two subscriptions, a redrive into
/// another queue, and pgmq sends — and nothing else's inserts.
#[tokio::test]
async fn total_messages_counts_every_insert_path_once() {
    let api = Api::new(&[]);
    api.create_queue("a", json!({"dedup_window_ms": 60000}))
        .await;
    api.create_queue("b", json!({"max_delivery_count": 1}))
        .await;
    let total = |q: &'static str| {
        let api = &api;
        async move {
            let (_, b, _) = pg(api, "GET", &format!("/v1/queues/{q}/metrics"), None).await;
            b["total_messages"].clone()
        }
    };
    let batch: Vec<Value> = (0..5)
        .map(|i| json!({"body": "eA==", "message_id": format!("m{i}")}))
        .collect();
    api.ok("QueueService/Send", json!({"queue":"a","messages":batch}))
        .await;
    // The same message ids again: deduplicated, nothing inserted.
    api.ok("QueueService/Send", json!({"queue":"a","messages":batch}))
        .await;
    assert_eq!(total("a").await, json!(5));
    assert_eq!(total("b").await, json!(0));

    api.subscribe("t", "s1", None).await;
    api.subscribe("t", "s2", None).await;
    let three: Vec<Value> = (0..3).map(|_| json!({"body": "eA=="})).collect();
    api.ok("QueueService/Send", json!({"queue":"t","messages":three}))
        .await;
    assert_eq!(total("s1").await, json!(3));
    assert_eq!(total("s2").await, json!(3));

    // One dead letter in b, redriven into a: a gains one insert.
    api.send_text("b", "x").await;
    let got = api.ok("QueueService/Receive", json!({"queue":"b"})).await;
    let m = &got["messages"][0];
    api.ok(
        "QueueService/Abandon",
        json!({"queue":"b","seq_number":m["seq_number"],"lock_token":m["lock_token"]}),
    )
    .await;
    api.ok("AdminService/Redrive", json!({"queue":"b","target":"a"}))
        .await;
    assert_eq!(total("a").await, json!(6));
    assert_eq!(total("b").await, json!(1));

    let (status, _, _) = pg(
        &api,
        "POST",
        "/v1/queues/b/messages/batch",
        Some(json!({"messages":[{"n":1},{"n":2}]})),
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(total("b").await, json!(3));
    assert_eq!(total("a").await, json!(6));
}

/// pop of several (docs/pgmq.md, 6): the claim's picks in msg_id order,
/// returned as they were (a message read before keeps its read_ct and
/// last_read_at), gone afterwards; one round trip each.
#[tokio::test]
async fn pop_of_several_returns_them_as_they_were_and_leaves_nothing() {
    let api = Api::new(&[]);
    let (s, _, _) = pg(&api, "PUT", "/v1/queues/p", None).await;
    assert_eq!(s, 201);
    let (s, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/p/messages/batch",
        Some(json!({"messages":[{"n":1},{"n":2},{"n":3},{"n":4}]})),
    )
    .await;
    assert_eq!(s, 201);
    let sent = ids(&b["msg_ids"]);
    let (s, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/p/read",
        Some(json!({"vt":1,"qty":1})),
    )
    .await;
    assert_eq!(
        (s, b["messages"][0]["msg_id"].as_i64()),
        (200, Some(sent[0]))
    );
    api.advance(1_000);
    let (s, b, t) = pg(&api, "POST", "/v1/queues/p/pop", Some(json!({"qty":3}))).await;
    assert_eq!((s, t), (200, 1));
    let popped = b["messages"].as_array().expect("messages");
    let got: Vec<i64> = popped.iter().filter_map(|m| m["msg_id"].as_i64()).collect();
    assert_eq!(got, sent[..3].to_vec());
    assert_eq!(popped[0]["read_ct"], json!(1));
    assert_eq!(popped[0]["last_read_at"], json!("2025-06-15T15:06:40.000Z"));
    for (m, n) in popped.iter().zip(1..) {
        assert_eq!(m["message"], json!({ "n": n }));
    }
    for m in &popped[1..] {
        assert_eq!(
            (&m["read_ct"], &m["last_read_at"]),
            (&json!(0), &Value::Null)
        );
    }
    let (_, b, _) = pg(&api, "POST", "/v1/queues/p/pop", Some(json!({"qty":10}))).await;
    let rest: Vec<i64> = b["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["msg_id"].as_i64())
        .collect();
    assert_eq!(rest, vec![sent[3]]);
    let (_, b, _) = pg(&api, "GET", "/v1/queues/p/metrics", None).await;
    assert_eq!(b["queue_length"], json!(0));
}

/// Every combination of `Authorization` (Bearer right / wrong / absent /
/// another scheme) and `X-API-Key` (right / wrong / absent), judged as
/// pgmq's adapter judges it: a Bearer key decides alone, another scheme is
/// passed over for `X-API-Key`; nothing presented is "Missing API key".
#[tokio::test]
async fn credentials_combine_as_the_reference_adapter_judges_them() {
    let api = Api::new(&[("PGMQ_API_KEY", "right-key")]);
    pg(&api, "PUT", "/v1/queues/c", None).await;
    let authorizations = [
        Some("Bearer right-key"),
        Some("Bearer wrong-key"),
        None,
        Some("Basic dXNlcjpwYXNz"),
    ];
    let api_keys = [Some("right-key"), Some("wrong-key"), None];
    for authorization in authorizations {
        for api_key in api_keys {
            let mut headers = Vec::new();
            headers.extend(authorization.map(|a| ("Authorization", a)));
            headers.extend(api_key.map(|k| ("X-API-Key", k)));
            let bearer = authorization.filter(|a| a.starts_with("Bearer"));
            let (accepted, detail) = match (bearer, api_key) {
                (Some(b), _) => (b == "Bearer right-key", "Invalid API key"),
                (None, Some(k)) => (k == "right-key", "Invalid API key"),
                (None, None) => (false, "Missing API key"),
            };
            let (s, b, _) = pg_with(&api, "GET", "/v1/queues/c/metrics", None, &headers).await;
            if accepted {
                assert_eq!(s, 200, "{headers:?}: {b}");
            } else {
                assert_eq!(
                    (s, b),
                    (401, json!({"error":"unauthorized","detail":detail})),
                    "{headers:?}"
                );
            }
        }
    }
}

/// What a client sends is what every reader gets, byte for byte: big and
/// negative integers beyond 64 bits, decimals, exponents, key order,
/// repeated keys, unicode escapes, whitespace inside.
#[tokio::test]
async fn payloads_round_trip_as_the_exact_text_sent_through_both_dialects() {
    let api = Api::new(&[]);
    pg(&api, "PUT", "/v1/queues/x", None).await;
    let message = r#"{"big":1180591620717411303424,"neg":-9223372036854775809,"d":1.50,"e":2.5E+3,"huge":1e400,"z":1,"a":{"u":"\u00e9\ud83d\ude00","s":"\/"},"z":2, "sp" : [ 1 ,2 ]}"#;
    let headers = r#"{"n":123456789012345678901234567890,"b":1,"a":0.10}"#;
    let body = format!(r#"{{"message": {message} ,"headers":{headers}}}"#);
    let batch = format!(r#"{{"messages":[{message},{{"k":1.0}}],"headers":[{headers},{{}}]}}"#);
    // As sent, byte for byte: the status and the answer's text.
    let post = |path: &'static str, body: String| {
        let api = &api;
        async move {
            let r = api
                .request("POST", path, &[ADMIN_HEADER], body.as_bytes())
                .await;
            (r.status, String::from_utf8(r.body).expect("utf-8"))
        }
    };
    let (s, b) = post("/v1/queues/x/messages", body.clone()).await;
    assert_eq!(s, 201, "{b}");
    let (s, b) = post("/v1/queues/x/messages/batch", batch).await;
    assert_eq!(s, 201, "{b}");

    let (_, text) = post("/v1/queues/x/read", r#"{"qty":3}"#.into()).await;
    let spliced = format!(r#""message":{message},"headers":{headers}}}"#);
    assert_eq!(text.matches(&spliced).count(), 2, "{text}");
    assert!(
        text.contains(r#""message":{"k":1.0},"headers":{}}"#),
        "{text}"
    );

    // Connect-JSON receives the same bytes as its body.
    let (_, b, _) = pg(&api, "POST", "/v1/queues/x/purge", None).await;
    assert_eq!(b, json!({"purged":3}));
    let (s, _) = post("/v1/queues/x/messages", body).await;
    assert_eq!(s, 201);
    let got = api
        .ok(
            "QueueService/Receive",
            json!({"queue":"x","max_messages":1}),
        )
        .await;
    assert_eq!(messages(&got)[0]["body"], json!(b64(message)));
}

/// `conditional` claims only the messages that contain it (jsonb's `@>`),
/// in id order, with the lease of a read, in one round trip; `{}` claims
/// every message, and a message that is not JSON never matches.
#[tokio::test]
async fn conditional_reads_claim_only_containing_messages_in_one_round_trip() {
    let api = Api::new(&[]);
    pg(&api, "PUT", "/v1/queues/c", None).await;
    let (_, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/c/messages/batch",
        Some(json!({"messages":[
            {"k":"a","n":1},
            {"k":"b","n":2.0},
            {"k":"a","tags":["x","y"],"deep":{"l":[{"m":1,"o":2}]}},
            {"k":"c"},
            {"n":1.0,"k":"a"}
        ]})),
    )
    .await;
    let sent = ids(&b["msg_ids"]);
    api.send_text("c", "not json k a").await;
    let read = |cond: Value, qty: i64| {
        let api = &api;
        async move {
            let (s, b, trips) = pg(
                api,
                "POST",
                "/v1/queues/c/read",
                Some(json!({"qty":qty,"conditional":cond})),
            )
            .await;
            assert_eq!(s, 200, "{b}");
            let got: Vec<i64> = b["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .map(|m| m["msg_id"].as_i64().expect("id"))
                .collect();
            (got, trips, b)
        }
    };
    let (got, trips, b) = read(json!({"k":"a"}), 2).await;
    assert_eq!((got, trips), (vec![sent[0], sent[2]], 1));
    assert_eq!(b["messages"][0]["read_ct"], json!(1));
    let (got, _, _) = read(json!({"k":"a"}), 5).await;
    assert_eq!(got, vec![sent[4]]);
    let (got, _, _) = read(json!({"n":2}), 5).await;
    assert_eq!(got, vec![sent[1]]);
    let (got, _, _) = read(json!({"k":"c","x":null}), 5).await;
    assert_eq!(got, Vec::<i64>::new());
    pg(
        &api,
        "POST",
        &format!("/v1/queues/c/messages/{}/vt", sent[2]),
        Some(json!({"vt":0})),
    )
    .await;
    let (got, _, _) = read(json!({"deep":{"l":{"o":2}}}), 5).await;
    assert_eq!(got, Vec::<i64>::new());
    let (got, _, _) = read(json!({"deep":{"l":[{"o":2}]},"tags":["y"]}), 5).await;
    assert_eq!(got, vec![sent[2]]);
    let (got, _, _) = read(json!({}), 5).await;
    assert_eq!(got.len(), 2, "k=c and the text message remain");
}

/// Range and kind checks the mutation run found unpinned (docs/testing.md):
/// a delay to an instant before the epoch, a `vt` one second over the
/// longest lease (the longest itself is taken), the ages of an empty
/// queue's metrics, and dropping a subscription's backing queue.
#[tokio::test]
async fn out_of_range_instants_and_leases_empty_ages_and_backing_queues() {
    let api = Api::new(&[]);
    pg(&api, "PUT", "/v1/queues/r", None).await;
    let err = |b: &Value| b["error"].as_str().map(str::to_owned);

    let before_epoch = Some(json!({"message":{},"delay":"1969-12-31T23:59:59Z"}));
    let (s, b, _) = pg(&api, "POST", "/v1/queues/r/messages", before_epoch).await;
    assert_eq!((s, err(&b)), (400, Some("invalid_request".into())), "{b}");
    let at_epoch = Some(json!({"message":{},"delay":"1970-01-01T00:00:00Z"}));
    let (s, b, _) = pg(&api, "POST", "/v1/queues/r/messages", at_epoch).await;
    assert_eq!(s, 201, "{b}");

    let longest = mqlite_edge::engine::MAX_DURATION_MS / 1000;
    let (s, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/r/read",
        Some(json!({"vt": longest + 1})),
    )
    .await;
    assert_eq!((s, err(&b)), (400, Some("invalid_request".into())), "{b}");
    let (s, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/r/read",
        Some(json!({"vt": longest})),
    )
    .await;
    assert_eq!(
        (s, b["messages"].as_array().map(Vec::len)),
        (200, Some(1)),
        "{b}"
    );

    pg(&api, "PUT", "/v1/queues/empty", None).await;
    let (s, b, _) = pg(&api, "GET", "/v1/queues/empty/metrics", None).await;
    assert_eq!(s, 200);
    assert_eq!(
        (
            b["oldest_msg_age_sec"].clone(),
            b["newest_msg_age_sec"].clone()
        ),
        (Value::Null, Value::Null),
        "{b}"
    );

    api.create_queue("backing", json!({"kind":"subscription"}))
        .await;
    api.subscribe("news", "backing", None).await;
    let (s, b, _) = pg(&api, "DELETE", "/v1/queues/backing", None).await;
    assert_eq!((s, err(&b)), (400, Some("invalid_request".into())), "{b}");
    let (s, _, _) = pg(&api, "DELETE", "/v1/queues/empty", None).await;
    assert_eq!(s, 204);
}

/// A send's size limits, at their edges (docs/pgmq.md): one message of
/// exactly the per-message cap is taken, one byte over is refused; four of
/// them, exactly the 4 MiB a send may carry, are taken, and two bytes of
/// headers more are refused; headers count once each (three capped
/// messages with headers are well inside the limit).
#[tokio::test]
async fn send_size_limits_hold_at_their_edges() {
    let api = Api::new(&[]);
    pg(&api, "PUT", "/v1/queues/big", None).await;
    let cap = mqlite_edge::engine::Limits::default().max_message_bytes;
    // The message's text is `{"a":"…"}`: its characters and eight more.
    let capped = json!({"a": "a".repeat(cap - 8)});
    let over = json!({"a": "a".repeat(cap - 7)});
    // A batch's messages are the message values, its headers one per message.
    let batch = |n: usize, headers: Option<Value>| {
        let mut body = json!({ "messages": vec![capped.clone(); n] });
        if let Some(h) = headers {
            body["headers"] = json!(vec![h; n]);
        }
        Some(body)
    };
    let (s, _, _) = pg(
        &api,
        "POST",
        "/v1/queues/big/messages",
        Some(json!({"message": capped})),
    )
    .await;
    assert_eq!(s, 201, "a message of exactly the cap");
    let (s, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/big/messages",
        Some(json!({"message": over})),
    )
    .await;
    assert_eq!(s, 413, "one byte over the cap: {b}");

    // docs/pgmq.md: a send carries at most 4 MiB of message and header text.
    assert_eq!(
        4 * cap,
        4 * 1_048_576,
        "four capped messages fill a send exactly"
    );
    let (s, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/big/messages/batch",
        batch(4, None),
    )
    .await;
    assert_eq!(
        (s, b["msg_ids"].as_array().map(Vec::len)),
        (201, Some(4)),
        "{b}"
    );
    let (s, b, _) = pg(
        &api,
        "POST",
        "/v1/queues/big/messages/batch",
        batch(4, Some(json!({}))),
    )
    .await;
    assert_eq!(
        (s, b["error"].clone()),
        (400, json!("invalid_request")),
        "{b}"
    );
    let every_header = batch(3, Some(json!({"h": 1})));
    let (s, b, _) = pg(&api, "POST", "/v1/queues/big/messages/batch", every_header).await;
    assert_eq!((s, b["msg_ids"].as_array().map(Vec::len)), (201, Some(3)));
}

/// A group_fifo queue takes no pgmq send: its messages would carry no
/// group id (docs/pgmq.md). A missing queue is still 404.
#[tokio::test]
async fn a_group_fifo_queue_refuses_pgmq_sends() {
    let api = Api::new(&[]);
    api.create_queue("fifo", json!({"ordering_mode":"group_fifo"}))
        .await;
    let send = Some(json!({"message":{"a":1}}));
    let (s, b, _) = pg(&api, "POST", "/v1/queues/fifo/messages", send.clone()).await;
    assert_eq!(
        (s, b["error"].clone()),
        (400, json!("invalid_request")),
        "{b}"
    );
    let (s, b, _) = pg(&api, "POST", "/v1/queues/gone/messages", send).await;
    assert_eq!(
        (s, b["error"].clone()),
        (404, json!("queue_not_found")),
        "{b}"
    );
}

/// A pgmq read counts a delivery, and a redelivery only when the message
/// was read before (docs/semantics.md#observability).
#[tokio::test]
async fn a_pgmq_read_counts_redeliveries() {
    let h = Harness::new();
    h.engine
        .create_queue("r", &Default::default())
        .await
        .expect("queue");
    let (engine, effects) = h.journaled_engine();
    let send = mqlite_edge::engine::pgmq::PgmqSend {
        queue: "r".into(),
        messages: vec![mqlite_edge::engine::pgmq::PgmqOutgoing {
            message: "{}".into(),
            headers: None,
        }],
        delay: None,
    };
    engine.pgmq_send(&send).await.expect("send");
    let read = mqlite_edge::engine::pgmq::PgmqRead {
        queue: "r".into(),
        qty: 1,
        vt_seconds: 1,
        pop: false,
        conditional: None,
        max_poll_ms: 0,
        poll_interval_ms: 0,
    };
    let events = |effects: &mqlite_edge::engine::Effects| -> Vec<(String, u64)> {
        effects
            .take()
            .into_iter()
            .filter_map(|e| match e {
                mqlite_edge::engine::Effect::Message { event, count, .. } => {
                    Some((event.as_str().to_owned(), count))
                }
                _ => None,
            })
            .collect()
    };
    events(&effects);
    for round in 0..2 {
        let read_at_once = engine.pgmq_read(&read, &NoWait).await.expect("read");
        assert_eq!(read_at_once.len(), 1);
        // The second read finds the first lease run out.
        let mut expected = vec![("delivered".to_owned(), 1)];
        if round > 0 {
            expected.insert(0, ("lock_expired".to_owned(), 1));
            expected.push(("redelivered".to_owned(), 1));
        }
        assert_eq!(events(&effects), expected, "read {round}");
        h.advance(1_000);
    }
}

#[tokio::test]
async fn deleting_or_archiving_one_message_answers_a_bare_204_and_does_what_it_says() {
    let api = Api::new(&[]);
    let sent = queue_a_with_two_messages(&api).await;
    let auth = [ADMIN_HEADER];
    let archived = || query(api.engine(), "SELECT id FROM archived_messages");
    for (method, path, archived_after) in [
        (
            "DELETE",
            format!("/v1/queues/a/messages/{}", sent[0]),
            json!([]),
        ),
        (
            "POST",
            format!("/v1/queues/a/messages/{}/archive", sent[1]),
            json!([[sent[1]]]),
        ),
        ("DELETE", "/v1/queues/a".to_owned(), json!([])),
    ] {
        let r = api.request(method, &path, &auth, b"").await;
        assert_eq!(r.status, 204, "{method} {path}");
        assert!(r.body.is_empty(), "{method} {path}");
        assert_eq!(r.header("Content-Type"), None, "{method} {path}");
        // Deleting one message never archives it; archiving one keeps it.
        assert_eq!(json!(archived().await), archived_after, "{method} {path}");
    }
}
