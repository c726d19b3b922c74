//! Conformance O: TestFilter (cases 197–203), through the HTTP pipeline.

mod support;

use serde_json::json;
use support::{b64, Api};

async fn test_filter(api: &Api, body: serde_json::Value) -> serde_json::Value {
    api.ok("AdminService/TestFilter", body).await
}

#[tokio::test]
async fn c197_compile_only() {
    let api = Api::new(&[]);
    let r = test_filter(&api, json!({"expr":"subject == \"a\""})).await;
    assert_eq!(r, json!({"valid":true,"ran":false,"matched":false}));
}

#[tokio::test]
async fn c198_invalid() {
    let api = Api::new(&[]);
    let r = test_filter(&api, json!({"expr":"subject =="})).await;
    assert_eq!(
        (r["valid"].clone(), r["ran"].clone(), r["matched"].clone()),
        (json!(false), json!(false), json!(false))
    );
    assert!(!r["error"].as_str().expect("error").is_empty());
}

#[tokio::test]
async fn c199_match_and_no_match() {
    let api = Api::new(&[]);
    let expr = "properties[\"tier\"]==\"gold\"";
    for (tier, matched) in [("gold", true), ("silver", false)] {
        let r = test_filter(
            &api,
            json!({"expr":expr,"message":{"body":b64("x"),"properties":{"tier":tier}}}),
        )
        .await;
        assert_eq!(
            r,
            json!({"valid":true,"ran":true,"matched":matched}),
            "{tier}"
        );
    }
}

#[tokio::test]
async fn c200_runtime_error_fails_closed() {
    let api = Api::new(&[]);
    let r = test_filter(
        &api,
        json!({"expr":"subject_parts[5] == \"x\"","message":{"subject":"a"}}),
    )
    .await;
    assert_eq!(
        (r["valid"].clone(), r["ran"].clone(), r["matched"].clone()),
        (json!(true), json!(true), json!(false))
    );
    assert!(!r["error"].as_str().expect("error").is_empty());
}

#[tokio::test]
async fn c201_empty_expression_with_sample_matches() {
    let api = Api::new(&[]);
    let r = test_filter(&api, json!({"expr":"  ","message":{"subject":"a"}})).await;
    assert_eq!(r, json!({"valid":true,"ran":true,"matched":true}));
}

#[tokio::test]
async fn c202_time_fields_come_from_the_sample() {
    let api = Api::new(&[]);
    // 2026-03-02T10:00:00Z
    let e: i64 = 1_772_445_600_000;
    let r = test_filter(
        &api,
        json!({"expr":"visible_at - enqueued_at == hours(2)",
               "message":{"enqueued_at_ms":e,"visible_at_ms":e + 7_200_000}}),
    )
    .await;
    assert_eq!(r["matched"], true, "{r}");
    for expr in [
        "enqueued_at.Hour() == 10",
        "enqueued_at.Month() == 3",
        "enqueued_at.Weekday() == 1",
    ] {
        let r = test_filter(&api, json!({"expr":expr,"message":{"enqueued_at_ms":e}})).await;
        assert_eq!(r["matched"], true, "{expr}: {r}");
    }
}

#[tokio::test]
async fn c203_duration_helpers() {
    let api = Api::new(&[]);
    for expr in [
        "duration(\"1w\") == days(7)",
        "duration(\"1d12h\") == hours(36)",
        "minutes(60) == hours(1)",
        "duration(\"1.5d\") == hours(36)",
    ] {
        let r = test_filter(&api, json!({"expr":expr,"message":{}})).await;
        assert_eq!(r["matched"], true, "{expr}: {r}");
    }
    let r = test_filter(
        &api,
        json!({"expr":"duration(\"1y\") == days(365)","message":{}}),
    )
    .await;
    assert_eq!(r["matched"], false, "{r}");
    assert!(!r["error"].as_str().unwrap_or_default().is_empty(), "{r}");
}

#[tokio::test]
async fn test_filter_stores_nothing() {
    let api = Api::new(&[]);
    let before = api.round_trips();
    test_filter(
        &api,
        json!({"expr":"subject == \"a\"","message":{"subject":"a"}}),
    )
    .await;
    assert_eq!(api.round_trips(), before);
    let list = api.ok("AdminService/ListSubscriptions", json!({})).await;
    assert_eq!(list, json!({"subscriptions":[]}));
}
