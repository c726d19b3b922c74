//! Conformance section B: authentication with configured administrator
//! tokens and `off` mode (managed keys and monitor tokens arrive later).

mod support;

use serde_json::json;
use support::*;

const LIST: &str = "/mqlite.v1.AdminService/ListQueues";

#[tokio::test]
async fn c016_missing_header_is_401_with_fixed_envelope() {
    let api = Api::new(&[]);
    let r = api.request("POST", LIST, &[], b"").await;
    assert_eq!(r.status, 401);
    assert_eq!(
        json_body(&r),
        json!({"code":"unauthenticated","message":"missing or invalid Bearer token"})
    );
}

#[tokio::test]
async fn c017_to_c023_header_forms() {
    let api = Api::new(&[]);
    let cases: &[(&[(&str, &str)], u16)] = &[
        (&[("Authorization", "Bearer nope")], 401),
        (&[("authorization", "bearer T")], 200),
        (&[("Authorization", "Bearer   T")], 200),
        (&[("Authorization", "T")], 401),
        (&[("Authorization", "Basic dXNlcjpwYXNz")], 401),
        (&[("Authorization", "Bearer T x")], 401),
        (&[("Authorization", "Bearer T,x")], 401),
        (
            &[("Authorization", "Bearer T"), ("Authorization", "Bearer T")],
            401,
        ),
        // How the Workers runtime folds a repeated header.
        (&[("Authorization", "Bearer T, Bearer T")], 401),
    ];
    for (headers, status) in cases {
        let r = api.request("POST", LIST, headers, b"").await;
        assert_eq!(r.status, *status, "{headers:?}");
    }
}

#[tokio::test]
async fn several_admin_tokens_each_authenticate() {
    let api = Api::new(&[("MQLITE_TOKENS", " a , ,b ")]);
    for token in ["a", "b"] {
        let auth = format!("Bearer {token}");
        assert_eq!(
            api.request("POST", LIST, &[("Authorization", &auth)], b"")
                .await
                .status,
            200
        );
    }
}

#[tokio::test]
async fn unset_tokens_fail_closed_but_stay_discoverable() {
    let api = Api::new(&[("MQLITE_TOKENS", "")]);
    assert_eq!(
        api.request("POST", LIST, &[("Authorization", "Bearer T")], b"")
            .await
            .status,
        401
    );
    let card = json_body(&api.request("GET", "/", &[], b"").await);
    assert_eq!(card["auth"], "bearer");
}

#[tokio::test]
async fn tokens_listing_nothing_is_a_configuration_error() {
    let api = Api::new(&[("MQLITE_TOKENS", " , ")]);
    let r = api
        .request("POST", LIST, &[("Authorization", "Bearer T")], b"")
        .await;
    assert_eq!(r.status, 500);
    assert_eq!(json_body(&r)["code"], "internal");
    assert_eq!(api.request("GET", "/healthz", &[], b"").await.status, 200);
}

#[tokio::test]
async fn c034_auth_off_opens_every_rpc() {
    let api = Api::new(&[("MQLITE_TOKENS", "OFF ")]);
    let create = br#"{"name":"q","config":{}}"#;
    let r = api
        .request("POST", "/mqlite.v1.AdminService/CreateQueue", &[], create)
        .await;
    assert_eq!(r.status, 200);
    let send = format!(r#"{{"queue":"q","messages":[{{"body":"{}"}}]}}"#, b64("x"));
    let r = api
        .request("POST", "/mqlite.v1.QueueService/Send", &[], send.as_bytes())
        .await;
    assert_eq!(r.status, 200);
}
