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
    let t = ADMIN;
    let cases: Vec<(Vec<String>, u16)> = vec![
        (vec!["Bearer nope".into()], 401),
        (vec![format!("bearer {t}")], 200),
        (vec![format!("Bearer   {t}")], 200),
        (vec![t.into()], 401),
        (vec!["Basic dXNlcjpwYXNz".into()], 401),
        (vec![format!("Bearer {t} x")], 401),
        (vec![format!("Bearer {t},x")], 401),
        (vec![ADMIN_AUTH.into(), ADMIN_AUTH.into()], 401),
        // How the Workers runtime folds a repeated header.
        (vec![format!("Bearer {t}, Bearer {t}")], 401),
    ];
    for (values, status) in cases {
        let name = if status == 200 && values[0].starts_with("bearer") {
            "authorization"
        } else {
            "Authorization"
        };
        let headers: Vec<(&str, &str)> = values.iter().map(|v| (name, v.as_str())).collect();
        let r = api.request("POST", LIST, &headers, b"").await;
        assert_eq!(r.status, status, "{headers:?}");
    }
}

#[tokio::test]
async fn several_admin_tokens_each_authenticate() {
    let a = "first-admin-token-0123456789abcdef";
    let b = "second-admin-token-0123456789abcdef";
    let api = Api::new(&[("MQLITE_TOKENS", &format!(" {a} , ,{b} "))]);
    for token in [a, b] {
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
        api.request("POST", LIST, &[("Authorization", ADMIN_AUTH)], b"")
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
        .request("POST", LIST, &[("Authorization", ADMIN_AUTH)], b"")
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
