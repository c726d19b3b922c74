//! Conformance D (namespace, cases 53–64) and N (topics and filters,
//! cases 182–196), through the whole HTTP pipeline.

mod support;

use serde_json::json;
use support::{b64, Api};

async fn publish(api: &Api, topic: &str, message: serde_json::Value) -> i64 {
    let answer = api
        .ok(
            "QueueService/Send",
            json!({"queue": topic, "messages": [message]}),
        )
        .await;
    answer["seq_numbers"][0].as_i64().expect("seq")
}

async fn active(api: &Api, queue: &str) -> i64 {
    api.stats(queue).await["active"].as_i64().expect("active")
}

#[tokio::test]
async fn c053_queue_under_a_live_topic_is_a_name_conflict() {
    let api = Api::new(&[]);
    api.subscribe("tp", "s1", None).await;
    api.fails(
        "AdminService/CreateQueue",
        json!({"name":"tp","config":{}}),
        409,
        "name_conflict",
    )
    .await;
}

#[tokio::test]
async fn c054_c055_cross_kind_upserts_and_resubscribe_keeps_backing_config() {
    let api = Api::new(&[]);
    api.subscribe("tp", "s1", None).await;
    api.create_queue("q", json!({})).await;
    api.fails(
        "AdminService/CreateQueue",
        json!({"name":"s1","config":{}}),
        409,
        "name_conflict",
    )
    .await;
    api.fails(
        "AdminService/CreateQueue",
        json!({"name":"q","config":{"kind":"subscription"}}),
        409,
        "name_conflict",
    )
    .await;
    api.create_queue(
        "s1",
        json!({"kind":"subscription","lock_duration_ms":60000}),
    )
    .await;
    api.subscribe("tp", "s1", Some("subject == \"x\"")).await;
    let queues = api.ok("AdminService/ListQueues", json!({})).await;
    let s1 = queues["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| q["name"] == "s1")
        .cloned()
        .expect("s1 listed");
    assert_eq!(s1["kind"], "subscription");
    assert_eq!(s1["lock_duration_ms"], 60000);
}

#[tokio::test]
async fn c056_self_reference_is_a_name_conflict() {
    let api = Api::new(&[]);
    api.fails(
        "AdminService/Subscribe",
        json!({"topic":"same","name":"same"}),
        409,
        "name_conflict",
    )
    .await;
}

#[tokio::test]
async fn c057_topic_cannot_shadow_a_queue() {
    let api = Api::new(&[]);
    api.create_queue("orders", json!({})).await;
    api.fails(
        "AdminService/Subscribe",
        json!({"topic":"orders","name":"x"}),
        409,
        "name_conflict",
    )
    .await;
    api.send_text("orders", "o").await;
    assert_eq!(active(&api, "orders").await, 1);
    api.fails("QueueService/Stats", json!({"queue":"x"}), 404, "not_found")
        .await;
}

#[tokio::test]
async fn c058_subscription_name_cannot_be_a_plain_queue() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.fails(
        "AdminService/Subscribe",
        json!({"topic":"t9","name":"q"}),
        409,
        "name_conflict",
    )
    .await;
}

#[tokio::test]
async fn c059_name_already_subscribed_elsewhere_creates_nothing() {
    let api = Api::new(&[]);
    api.subscribe("orders-t", "processor", None).await;
    api.fails(
        "AdminService/Subscribe",
        json!({"topic":"payments","name":"processor"}),
        409,
        "name_conflict",
    )
    .await;
    api.fails(
        "QueueService/Send",
        json!({"queue":"payments","messages":[{"body":b64("p")}]}),
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn c060_subscription_named_after_a_live_topic() {
    let api = Api::new(&[]);
    api.subscribe("billing", "b1", None).await;
    api.fails(
        "AdminService/Subscribe",
        json!({"topic":"t2","name":"billing"}),
        409,
        "name_conflict",
    )
    .await;
    api.fails(
        "QueueService/Send",
        json!({"queue":"t2","messages":[{"body":b64("p")}]}),
        404,
        "not_found",
    )
    .await;
}

#[tokio::test]
async fn c061_topic_naming_a_backing_queue() {
    let api = Api::new(&[]);
    api.subscribe("tp", "s1", None).await;
    api.fails(
        "AdminService/Subscribe",
        json!({"topic":"s1","name":"y"}),
        409,
        "name_conflict",
    )
    .await;
}

#[tokio::test]
async fn c062_resubscribe_is_idempotent() {
    let api = Api::new(&[]);
    api.subscribe("tp", "s1", None).await;
    api.subscribe("tp", "s1", None).await;
    let list = api.ok("AdminService/ListSubscriptions", json!({})).await;
    assert_eq!(list, json!({"subscriptions":[{"topic":"tp","name":"s1"}]}));
}

#[tokio::test]
async fn c063_bad_filter_creates_nothing() {
    let api = Api::new(&[]);
    let (status, body) = api
        .rpc(
            "AdminService/Subscribe",
            json!({"topic":"ev","name":"rej","filter":{"expr":"subject =="}}),
        )
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (400, Some("invalid_argument"))
    );
    assert!(body["message"]
        .as_str()
        .expect("message")
        .starts_with("mqlite: invalid subscription filter expression: "));
    api.fails(
        "QueueService/Stats",
        json!({"queue":"rej"}),
        404,
        "not_found",
    )
    .await;
    let list = api.ok("AdminService/ListSubscriptions", json!({})).await;
    assert_eq!(list, json!({"subscriptions":[]}));
}

#[tokio::test]
async fn c064_empty_topic_or_name() {
    let api = Api::new(&[]);
    for body in [
        json!({"topic":"","name":"n"}),
        json!({"topic":"t","name":""}),
    ] {
        api.fails("AdminService/Subscribe", body, 400, "invalid_argument")
            .await;
    }
}

#[tokio::test]
async fn c182_fan_out_with_filter() {
    let api = Api::new(&[]);
    api.subscribe("ev", "ev_all", None).await;
    api.subscribe("ev", "ev_paid", Some("subject startsWith \"payment.\""))
        .await;
    for subject in ["order.created", "payment.captured"] {
        publish(&api, "ev", json!({"body":b64("e"),"subject":subject})).await;
    }
    assert_eq!(active(&api, "ev_all").await, 2);
    assert_eq!(active(&api, "ev_paid").await, 1);
}

#[tokio::test]
async fn c183_no_match_is_a_no_op() {
    let api = Api::new(&[]);
    api.subscribe("t", "gold", Some("properties[\"tier\"]==\"gold\""))
        .await;
    let silver = publish(
        &api,
        "t",
        json!({"body":b64("s"),"properties":{"tier":"silver"}}),
    )
    .await;
    assert_eq!(silver, 0);
    let gold = publish(
        &api,
        "t",
        json!({"body":b64("g"),"properties":{"tier":"gold"}}),
    )
    .await;
    assert!(gold > 0);
    assert_eq!(active(&api, "gold").await, 1);
}

#[tokio::test]
async fn c184_copies_are_independent() {
    let api = Api::new(&[]);
    api.subscribe("t", "b_sub", None).await;
    api.subscribe("t", "a_sub", None).await;
    let seq = publish(&api, "t", json!({"body":b64("x"),"message_id":"m-1"})).await;
    let peek = |q: &'static str| {
        let api = &api;
        async move { api.ok("QueueService/Peek", json!({"queue": q})).await["messages"][0].clone() }
    };
    let (a, b) = (peek("a_sub").await, peek("b_sub").await);
    assert_eq!(a["message_id"], "m-1");
    assert_eq!(b["message_id"], "m-1");
    assert_ne!(a["seq_number"], b["seq_number"]);
    assert_eq!(
        b["seq_number"], seq,
        "the alphabetically last subscription's copy"
    );
}

#[tokio::test]
async fn c185_no_history() {
    let api = Api::new(&[]);
    api.subscribe("t", "first", None).await;
    publish(&api, "t", json!({"body":b64("x")})).await;
    api.subscribe("t", "later", None).await;
    assert_eq!(api.stats("later").await["total"], 0);
    assert_eq!(active(&api, "first").await, 1);
}

#[tokio::test]
async fn c186_fail_closed() {
    let api = Api::new(&[]);
    api.subscribe("t", "s", Some("subject_parts[5] == \"x\""))
        .await;
    assert_eq!(
        publish(&api, "t", json!({"body":b64("x"),"subject":"orders"})).await,
        0
    );
    assert!(publish(&api, "t", json!({"body":b64("x"),"subject":"a.b.c.d.e.x"})).await > 0);
}

#[tokio::test]
async fn c187_body_json_is_gated_by_content_type() {
    let api = Api::new(&[]);
    api.subscribe("t", "big", Some("body_json.amount > 100"))
        .await;
    let send = |ct: &'static str, body: &'static str| {
        let api = &api;
        async move { publish(api, "t", json!({"body":b64(body),"content_type":ct})).await }
    };
    assert!(send("application/json", r#"{"amount":150}"#).await > 0);
    assert_eq!(send("application/json", r#"{"amount":50}"#).await, 0);
    assert_eq!(send("text/plain", r#"{"amount":150}"#).await, 0);
}

#[tokio::test]
async fn c188_body_text() {
    let api = Api::new(&[]);
    api.subscribe("t", "urgent", Some("body_text contains \"urgent\""))
        .await;
    let seq = publish(
        &api,
        "t",
        json!({"body":b64("this is urgent"),"content_type":"text/plain"}),
    )
    .await;
    assert!(seq > 0);
    assert_eq!(publish(&api, "t", json!({"body":b64("calm")})).await, 0);
}

#[tokio::test]
async fn c189_delay_routing() {
    let api = Api::new(&[]);
    api.subscribe("t", "delayed", Some("visible_at - enqueued_at > hours(1)"))
        .await;
    api.subscribe(
        "t",
        "immediate",
        Some("visible_at - enqueued_at == seconds(0)"),
    )
    .await;
    publish(&api, "t", json!({"body":b64("now")})).await;
    api.ok(
        "QueueService/Schedule",
        json!({"queue":"t","messages":[{"body":b64("later")}],
               "scheduled_enqueue_time_ms": api.clock.manual_now().expect("manual") + 7_200_000}),
    )
    .await;
    let immediate = api.stats("immediate").await;
    let delayed = api.stats("delayed").await;
    assert_eq!(
        (immediate["active"].clone(), immediate["total"].clone()),
        (json!(1), json!(1))
    );
    assert_eq!(
        (delayed["scheduled"].clone(), delayed["total"].clone()),
        (json!(1), json!(1))
    );
}

#[tokio::test]
async fn c190_c191_resubscribe_recompiles_and_no_filter_matches_all() {
    let api = Api::new(&[]);
    api.subscribe("t", "s", Some("subject == \"a\"")).await;
    publish(&api, "t", json!({"body":b64("1"),"subject":"a"})).await;
    assert_eq!(active(&api, "s").await, 1);
    api.subscribe("t", "s", Some("subject == \"b\"")).await;
    publish(&api, "t", json!({"body":b64("2"),"subject":"a"})).await;
    assert_eq!(active(&api, "s").await, 1);
    publish(&api, "t", json!({"body":b64("3"),"subject":"b"})).await;
    assert_eq!(active(&api, "s").await, 2);
    api.subscribe("t", "s", None).await;
    publish(&api, "t", json!({"body":b64("4"),"subject":"anything"})).await;
    assert_eq!(active(&api, "s").await, 3);
}

#[tokio::test]
async fn c192_group_required_through_a_topic_commits_nothing() {
    let api = Api::new(&[]);
    api.subscribe("t", "plain", None).await;
    api.subscribe("t", "grouped", Some("subject == \"g\""))
        .await;
    api.create_queue(
        "grouped",
        json!({"kind":"subscription","ordering_mode":"group_fifo"}),
    )
    .await;
    // The grouped subscription's filter rejects this one: no group needed.
    assert!(publish(&api, "t", json!({"body":b64("x"),"subject":"other"})).await > 0);
    api.fails(
        "QueueService/Send",
        json!({"queue":"t","messages":[{"body":b64("y"),"subject":"g"}]}),
        400,
        "group_required",
    )
    .await;
    assert_eq!(api.stats("plain").await["total"], 1);
    assert_eq!(api.stats("grouped").await["total"], 0);
}

#[tokio::test]
async fn c193_direct_send_bypasses_filters() {
    let api = Api::new(&[]);
    api.subscribe("ev", "ev_paid", Some("subject startsWith \"payment.\""))
        .await;
    let seq = api
        .ok(
            "QueueService/Send",
            json!({"queue":"ev_paid","messages":[{"body":b64("x"),"subject":"order.created"}]}),
        )
        .await;
    assert!(seq["seq_numbers"][0].as_i64().expect("seq") > 0);
    assert_eq!(active(&api, "ev_paid").await, 1);
}

#[tokio::test]
async fn c194_list_subscriptions() {
    let api = Api::new(&[]);
    api.subscribe("events", "gold", Some("properties[\"tier\"]==\"gold\""))
        .await;
    api.subscribe("events", "all", None).await;
    api.subscribe("alpha", "z", None).await;
    let list = api.ok("AdminService/ListSubscriptions", json!({})).await;
    assert_eq!(
        list,
        json!({"subscriptions":[
            {"topic":"alpha","name":"z"},
            {"topic":"events","name":"all"},
            {"topic":"events","name":"gold","expr":"properties[\"tier\"]==\"gold\""}
        ]})
    );
}

#[tokio::test]
async fn c195_compile_errors_at_subscribe() {
    let api = Api::new(&[]);
    let long = format!("subject == \"{}\"", "x".repeat(4097));
    for expr in [
        "subject ==",
        "nope == \"x\"",
        "frobnicate(subject)",
        "body_size + 1",
        "subject",
        long.as_str(),
    ] {
        api.fails(
            "AdminService/Subscribe",
            json!({"topic":"t","name":"s","filter":{"expr":expr}}),
            400,
            "invalid_argument",
        )
        .await;
    }
    api.fails("QueueService/Stats", json!({"queue":"s"}), 404, "not_found")
        .await;
}

#[tokio::test]
async fn c196_environment_coverage_through_publish() {
    let api = Api::new(&[]);
    let truths = [
        "subject_parts[0] == \"orders\"",
        "len(subject_parts) == 3",
        "subject matches \"^orders\"",
        "\"region\" in properties",
        "properties[\"missing\"] == \"\"",
        "not (\"missing\" in properties)",
        "body_size == 5",
        "len(property_keys) == 2",
        "\"tier\" in property_keys",
        "group_id == \"g1\"",
        "correlation_id == \"c1\"",
        "reply_to == \"r1\"",
        "message_id == \"m1\"",
    ];
    for (i, expr) in truths.iter().enumerate() {
        api.subscribe("t", &format!("s{i:02}"), Some(expr)).await;
    }
    api.subscribe(
        "t",
        "never",
        Some("properties[\"tier\"] == \"silver\" || subject_parts[0] == \"payments\""),
    )
    .await;
    publish(
        &api,
        "t",
        json!({"body":b64("hello"),"subject":"orders.eu.new","properties":{"tier":"gold","region":"eu"},
               "group_id":"g1","correlation_id":"c1","reply_to":"r1","message_id":"m1",
               "content_type":"application/json"}),
    )
    .await;
    for (i, expr) in truths.iter().enumerate() {
        assert_eq!(active(&api, &format!("s{i:02}")).await, 1, "{expr}");
    }
    assert_eq!(api.stats("never").await["total"], 0);
}

#[tokio::test]
async fn fan_out_is_one_round_trip_once_the_topic_is_cached() {
    let api = Api::new(&[]);
    for name in ["a", "b", "c"] {
        api.subscribe("t", name, None).await;
    }
    // The isolate has not seen the topic: one attempt learns it.
    let before = api.round_trips();
    publish(&api, "t", json!({"body":b64("1")})).await;
    assert_eq!(api.round_trips() - before, 2);
    let before = api.round_trips();
    publish(&api, "t", json!({"body":b64("2")})).await;
    assert_eq!(api.round_trips() - before, 1);
    for name in ["a", "b", "c"] {
        assert_eq!(active(&api, name).await, 2);
    }
}

#[tokio::test]
async fn a_subscription_change_elsewhere_is_never_published_with_the_stale_filter() {
    let api = Api::new(&[]);
    api.subscribe("t", "s", Some("subject == \"a\"")).await;
    publish(&api, "t", json!({"body":b64("1"),"subject":"a"})).await;
    // Another isolate changes the filter: this isolate's cache is stale.
    let other = support::InProcess {
        db: api.temp.db.clone(),
    };
    let elsewhere = mqlite_edge::engine::Engine::new(
        other,
        api.clock.clone(),
        mqlite_edge::engine::Limits::default(),
    );
    elsewhere
        .subscribe("t", "s", "subject == \"b\"")
        .await
        .expect("resubscribe");
    assert_eq!(
        publish(&api, "t", json!({"body":b64("2"),"subject":"a"})).await,
        0
    );
    assert!(publish(&api, "t", json!({"body":b64("3"),"subject":"b"})).await > 0);
    assert_eq!(active(&api, "s").await, 2);
}

#[tokio::test]
async fn plain_queue_send_stays_one_round_trip() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let before = api.round_trips();
    api.send_text("q", "x").await;
    assert_eq!(api.round_trips() - before, 1);
}
