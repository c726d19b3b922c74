//! Conformance B (managed-key authorization, cases 24–37) and R (access
//! keys, cases 219–231), through the whole HTTP pipeline.

mod support;

use serde_json::json;
use support::{b64, json_body, Api, ADMIN, ADMIN_AUTH, MONITOR};

fn key_id(n: u8) -> String {
    format!("{n:032x}")
}

async fn status_as(api: &Api, token: &str, rpc: &str, body: serde_json::Value) -> u16 {
    api.rpc_as(token, rpc, body).await.0
}

#[tokio::test]
async fn c024_c029_send_key() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let send = api.mint_key(&["send"]).await;
    let msg = json!({"queue":"q","messages":[{"body":b64("x")}]});
    assert_eq!(
        status_as(&api, &send, "QueueService/Send", msg.clone()).await,
        200
    );
    let later = api.now() + 60_000;
    let schedule =
        json!({"queue":"q","messages":[{"body":b64("y")}],"scheduled_enqueue_time_ms":later});
    assert_eq!(
        status_as(&api, &send, "QueueService/Schedule", schedule).await,
        200
    );
    for (rpc, body) in [
        ("QueueService/Receive", json!({"queue":"q"})),
        ("QueueService/Peek", json!({"queue":"q"})),
        ("AdminService/ListQueues", json!({})),
        (
            "AuthService/CreateKey",
            json!({"id":key_id(9),"name":"n","permissions":["send"]}),
        ),
    ] {
        let (status, body) = api.rpc_as(&send, rpc, body).await;
        assert_eq!(
            body,
            json!({"code":"permission_denied","message":"access key lacks the required permission"}),
            "{rpc}"
        );
        assert_eq!(status, 403, "{rpc}");
    }
    // c029: the denied Receive had no side effect.
    assert_eq!(api.stats("q").await["active"], 1);
}

#[tokio::test]
async fn c025_listen_key() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    api.send_text("q", "x").await;
    let listen = api.mint_key(&["listen"]).await;
    assert_eq!(
        status_as(
            &api,
            &listen,
            "QueueService/Send",
            json!({"queue":"q","messages":[{"body":b64("x")}]})
        )
        .await,
        403
    );
    let (status, received) = api
        .rpc_as(&listen, "QueueService/Receive", json!({"queue":"q"}))
        .await;
    assert_eq!(status, 200);
    let m = &received["messages"][0];
    let settle = json!({"queue":"q","seq_number":m["seq_number"],"lock_token":m["lock_token"]});
    for (rpc, body) in [
        ("QueueService/Renew", settle.clone()),
        (
            "QueueService/RenewBatch",
            json!({"queue":"q","items":[settle.clone()]}),
        ),
        ("QueueService/Peek", json!({"queue":"q"})),
        ("QueueService/Stats", json!({"queue":"q"})),
        (
            "QueueService/ReceiveDeferred",
            json!({"queue":"q","seq_numbers":[]}),
        ),
        ("QueueService/Complete", settle.clone()),
        (
            "QueueService/CompleteBatch",
            json!({"queue":"q","items":[settle.clone()]}),
        ),
    ] {
        assert_ne!(status_as(&api, &listen, rpc, body).await, 403, "{rpc}");
    }
    assert_eq!(
        status_as(
            &api,
            &listen,
            "QueueService/Cancel",
            json!({"queue":"q","seq_number":1})
        )
        .await,
        403
    );
}

#[tokio::test]
async fn c026_c027_send_listen_is_not_manage_but_manage_is_admin() {
    let api = Api::new(&[]);
    let both = api.mint_key(&["listen", "send"]).await;
    assert_eq!(
        status_as(
            &api,
            &both,
            "AdminService/CreateQueue",
            json!({"name":"q","config":{}})
        )
        .await,
        403
    );
    let manage = api.mint_key(&["manage"]).await;
    assert_eq!(
        status_as(
            &api,
            &manage,
            "AdminService/CreateQueue",
            json!({"name":"q","config":{}})
        )
        .await,
        200
    );
    let (status, created) = api
        .rpc_as(
            &manage,
            "AuthService/CreateKey",
            json!({"id":key_id(7),"name":"minted by a key","permissions":["manage"]}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let minted = created["token"].as_str().expect("token");
    assert_eq!(
        status_as(&api, minted, "AdminService/ListQueues", json!({})).await,
        200
    );
}

#[tokio::test]
async fn c028_403_comes_before_405() {
    let api = Api::new(&[]);
    let listen = api.mint_key(&["listen"]).await;
    let auth = format!("Bearer {listen}");
    let r = api
        .request(
            "GET",
            "/mqlite.v1.AdminService/CreateQueue",
            &[("Authorization", &auth)],
            b"",
        )
        .await;
    assert_eq!(r.status, 403);
    // With the permission, the method check answers.
    let r = api
        .request(
            "GET",
            "/mqlite.v1.QueueService/Stats",
            &[("Authorization", &auth)],
            b"",
        )
        .await;
    assert_eq!(r.status, 405);
}

#[tokio::test]
async fn c030_revocation_applies_to_the_next_request() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let id = key_id(1);
    let created = api
        .ok(
            "AuthService/CreateKey",
            json!({"id":id,"name":"p","permissions":["send"]}),
        )
        .await;
    let token = created["token"].as_str().expect("token").to_owned();
    let msg = json!({"queue":"q","messages":[{"body":b64("x")}]});
    assert_eq!(
        status_as(&api, &token, "QueueService/Send", msg.clone()).await,
        200
    );
    api.ok("AuthService/RevokeKey", json!({"id":id})).await;
    let (status, body) = api.rpc_as(&token, "QueueService/Send", msg).await;
    assert_eq!(
        (status, body),
        (
            401,
            json!({"code":"unauthenticated","message":"missing or invalid Bearer token"})
        )
    );
    assert_eq!(api.stats("q").await["active"], 1);
}

#[tokio::test]
async fn c031_expiry_instant_counts_as_expired() {
    let api = Api::new(&[]);
    let token = api.mint_key_expiring(&["manage"], api.now() + 1000).await;
    assert_eq!(
        status_as(&api, &token, "AdminService/ListQueues", json!({})).await,
        200
    );
    api.advance(999);
    assert_eq!(
        status_as(&api, &token, "AdminService/ListQueues", json!({})).await,
        200
    );
    api.advance(1);
    assert_eq!(
        status_as(&api, &token, "AdminService/ListQueues", json!({})).await,
        401
    );
}

#[tokio::test]
async fn c032_uppercase_managed_format_is_401() {
    let api = Api::new(&[]);
    let token = format!("mqk_{}", "A".repeat(64));
    assert_eq!(
        status_as(&api, &token, "AdminService/ListQueues", json!({})).await,
        401
    );
    let unknown = format!("mqk_{}", "a".repeat(64));
    assert_eq!(
        status_as(&api, &unknown, "AdminService/ListQueues", json!({})).await,
        401
    );
}

#[tokio::test]
async fn c033_configured_token_wins_over_a_revoked_record() {
    let api = Api::new(&[]);
    let id = key_id(3);
    let created = api
        .ok(
            "AuthService/CreateKey",
            json!({"id":id,"name":"k","permissions":["send"]}),
        )
        .await;
    let token = created["token"].as_str().expect("token").to_owned();
    let both = format!("{ADMIN},{token}");
    let configured = support::Api::over(&api, &[("MQLITE_TOKENS", &both)]);
    configured
        .ok("AuthService/RevokeKey", json!({"id":id}))
        .await;
    assert_eq!(
        status_as(
            &configured,
            &token,
            "AdminService/CreateQueue",
            json!({"name":"q","config":{}})
        )
        .await,
        200
    );
    assert_eq!(
        status_as(&api, &token, "AdminService/ListQueues", json!({})).await,
        401
    );
}

#[tokio::test]
async fn c034_key_management_refused_with_auth_off() {
    let api = Api::new(&[("MQLITE_TOKENS", "off")]);
    for (path, body) in [
        (
            "/mqlite.v1.AuthService/CreateKey",
            json!({"id":key_id(1),"name":"n","permissions":["send"]}),
        ),
        ("/mqlite.v1.AuthService/ListKeys", json!({})),
        ("/mqlite.v1.AuthService/RevokeKey", json!({"id":key_id(1)})),
    ] {
        let r = api
            .request("POST", path, &[], body.to_string().as_bytes())
            .await;
        assert_eq!(
            (r.status, json_body(&r)),
            (
                403,
                json!({"code":"permission_denied","message":"key management requires authentication to be enabled"})
            ),
            "{path}"
        );
    }
}

#[tokio::test]
async fn c035_monitor_token_reaches_only_observe() {
    let api = Api::new(&[("MQLITE_MONITOR_TOKENS", MONITOR)]);
    api.create_queue("q", json!({})).await;
    for (rpc, body) in [
        ("AdminService/ListQueues", json!({})),
        (
            "QueueService/Send",
            json!({"queue":"q","messages":[{"body":b64("x")}]}),
        ),
        ("QueueService/Peek", json!({"queue":"q"})),
        ("QueueService/Receive", json!({"queue":"q"})),
        ("AdminService/Status", json!({})),
        ("AuthService/ListKeys", json!({})),
    ] {
        assert_eq!(status_as(&api, MONITOR, rpc, body).await, 403, "{rpc}");
    }
}

#[tokio::test]
async fn c036_monitor_configuration_is_validated() {
    for vars in [
        vec![("MQLITE_MONITOR_TOKENS", ADMIN)],
        vec![("MQLITE_TOKENS", "off"), ("MQLITE_MONITOR_TOKENS", MONITOR)],
        vec![(
            "MQLITE_MONITOR_TOKENS",
            "test-monitor-token-0123456789abcdef,",
        )],
    ] {
        let api = Api::new(&vars);
        let r = api
            .request(
                "POST",
                "/mqlite.v1.AdminService/ListQueues",
                &[("Authorization", ADMIN_AUTH)],
                b"{}",
            )
            .await;
        assert_eq!(r.status, 500, "{vars:?}");
        assert_eq!(json_body(&r)["code"], "internal");
    }
}

#[tokio::test]
async fn c037_key_store_failure_is_not_a_bypass() {
    let api = Api::new(&[]);
    let token = api.mint_key(&["manage"]).await;
    let down = support::Api::unreachable(&[]);
    let (key_status, key_body) = down
        .rpc_as(&token, "AdminService/ListQueues", json!({}))
        .await;
    assert!(key_status >= 500, "{key_status}");
    // A configured administrator still authenticates (and then meets the
    // outage); the key's lookup failed the same way, so it answers the same.
    let (status, body) = down.rpc("AdminService/ListQueues", json!({})).await;
    assert!(status >= 500, "{status} {body}");
    assert_eq!((key_status, &key_body["code"]), (status, &body["code"]));
    let r = down
        .request("POST", "/nope", &[("Authorization", ADMIN_AUTH)], b"")
        .await;
    assert_eq!(r.status, 404);
}

#[tokio::test]
async fn c219_create() {
    let api = Api::new(&[]);
    let id = key_id(0xab);
    let created = api
        .ok(
            "AuthService/CreateKey",
            json!({"id":id,"name":"orders-producer","permissions":["send"]}),
        )
        .await;
    let key = &created["key"];
    assert_eq!(key["id"], id.as_str());
    assert_eq!(key["name"], "orders-producer");
    assert_eq!(key["permissions"], json!(["send"]));
    assert!(key["created_at_ms"].as_i64().expect("created") > 0);
    assert_eq!(
        (key["expires_at_ms"].clone(), key["revoked_at_ms"].clone()),
        (json!(0), json!(0))
    );
    assert_eq!(key.as_object().expect("object").len(), 6);
    let token = created["token"].as_str().expect("token");
    assert!(token.starts_with("mqk_") && token.len() == 68);
    assert!(token[4..]
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    // Only the digest is stored.
    let stored = support::query(
        api.engine(),
        "SELECT hex(token_hash), length(token_hash) FROM access_keys",
    )
    .await;
    assert_eq!(stored[0][1], 32);
    assert_ne!(
        stored[0][0].as_str().expect("hex").to_lowercase(),
        token[4..]
    );
}

#[tokio::test]
async fn c220_duplicate_id_is_key_conflict_without_token() {
    let api = Api::new(&[]);
    let body = json!({"id":key_id(5),"name":"k","permissions":["send"]});
    api.ok("AuthService/CreateKey", body.clone()).await;
    let (status, answer) = api.rpc("AuthService/CreateKey", body).await;
    assert_eq!(
        (status, answer["code"].as_str()),
        (409, Some("key_conflict"))
    );
    assert!(answer.get("token").is_none());
}

#[tokio::test]
async fn c221_id_and_name_validation() {
    let api = Api::new(&[]);
    let bad_ids = ["a".repeat(31), "A".repeat(32), "g".repeat(32)];
    for id in bad_ids {
        api.fails(
            "AuthService/CreateKey",
            json!({"id":id,"name":"n","permissions":["send"]}),
            400,
            "invalid_argument",
        )
        .await;
    }
    for name in [
        "".to_owned(),
        " x".into(),
        "x ".into(),
        "x".repeat(129),
        "a\u{0}b".into(),
    ] {
        api.fails(
            "AuthService/CreateKey",
            json!({"id":key_id(1),"name":name,"permissions":["send"]}),
            400,
            "invalid_argument",
        )
        .await;
    }
    api.ok(
        "AuthService/CreateKey",
        json!({"id":key_id(1),"name":"é".repeat(64),"permissions":["send"]}),
    )
    .await;
}

#[tokio::test]
async fn c222_permissions() {
    let api = Api::new(&[]);
    for perms in [json!([]), json!(["admin"])] {
        api.fails(
            "AuthService/CreateKey",
            json!({"id":key_id(1),"name":"n","permissions":perms}),
            400,
            "invalid_argument",
        )
        .await;
    }
    let a = api
        .ok(
            "AuthService/CreateKey",
            json!({"id":key_id(2),"name":"n","permissions":["send","manage"]}),
        )
        .await;
    assert_eq!(a["key"]["permissions"], json!(["manage"]));
    let b = api
        .ok(
            "AuthService/CreateKey",
            json!({"id":key_id(3),"name":"n","permissions":["listen","send"]}),
        )
        .await;
    assert_eq!(b["key"]["permissions"], json!(["send", "listen"]));
    let listed = api.ok("AuthService/ListKeys", json!({})).await;
    assert_eq!(listed["keys"][0]["permissions"], json!(["manage"]));
    assert_eq!(listed["keys"][1]["permissions"], json!(["send", "listen"]));
}

#[tokio::test]
async fn c223_expiry_validation() {
    let api = Api::new(&[]);
    let now = api.now();
    for expires in [now - 1, now, -5] {
        api.fails(
            "AuthService/CreateKey",
            json!({"id":key_id(1),"name":"n","permissions":["send"],"expires_at_ms":expires}),
            400,
            "invalid_argument",
        )
        .await;
    }
    api.ok(
        "AuthService/CreateKey",
        json!({"id":key_id(1),"name":"n","permissions":["send"],"expires_at_ms":now + 1}),
    )
    .await;
}

#[tokio::test]
async fn c224_list_keys_paging() {
    let api = Api::new(&[]);
    for n in [3u8, 1, 2] {
        api.ok(
            "AuthService/CreateKey",
            json!({"id":key_id(n),"name":"k","permissions":["send"]}),
        )
        .await;
    }
    let mut seen = Vec::new();
    let mut after = String::new();
    loop {
        let page = api
            .ok("AuthService/ListKeys", json!({"limit":2,"after_id":after}))
            .await;
        let text = page.to_string();
        assert!(
            !text.contains("\"token\"") && !text.contains("token_hash"),
            "{text}"
        );
        for key in page["keys"].as_array().expect("keys") {
            seen.push(key["id"].as_str().expect("id").to_owned());
        }
        match page.get("next_after_id") {
            Some(next) => after = next.as_str().expect("cursor").to_owned(),
            None => break,
        }
    }
    assert_eq!(seen, vec![key_id(1), key_id(2), key_id(3)]);
    let first = api
        .ok("AuthService/ListKeys", json!({"limit":2,"after_id":""}))
        .await;
    assert_eq!(first["next_after_id"], key_id(2).as_str());
}

#[tokio::test]
async fn c225_list_keys_validation() {
    let api = Api::new(&[]);
    api.ok(
        "AuthService/CreateKey",
        json!({"id":key_id(1),"name":"k","permissions":["send"]}),
    )
    .await;
    for body in [
        json!({"limit":1001}),
        json!({"sort":"bogus"}),
        json!({"after_id":"xyz"}),
        json!({"sort":"created_desc","after_id":key_id(9)}),
    ] {
        api.fails("AuthService/ListKeys", body, 400, "invalid_argument")
            .await;
    }
    let page = api.ok("AuthService/ListKeys", json!({"limit":0})).await;
    assert_eq!(page["keys"].as_array().expect("keys").len(), 1);
    api.ok(
        "AuthService/ListKeys",
        json!({"sort":"id_asc","after_id":key_id(9)}),
    )
    .await;
}

#[tokio::test]
async fn c226_created_desc_order_and_stable_cursor() {
    let api = Api::new(&[]);
    for n in [1u8, 2, 3] {
        api.ok(
            "AuthService/CreateKey",
            json!({"id":key_id(n),"name":"k","permissions":["send"]}),
        )
        .await;
        api.advance(10);
    }
    // A tie on created_at is broken by id descending.
    api.ok(
        "AuthService/CreateKey",
        json!({"id":key_id(5),"name":"k","permissions":["send"]}),
    )
    .await;
    api.ok(
        "AuthService/CreateKey",
        json!({"id":key_id(4),"name":"k","permissions":["send"]}),
    )
    .await;
    let page1 = api
        .ok(
            "AuthService/ListKeys",
            json!({"sort":"created_desc","limit":2}),
        )
        .await;
    let ids = |page: &serde_json::Value| -> Vec<String> {
        page["keys"]
            .as_array()
            .expect("keys")
            .iter()
            .map(|k| k["id"].as_str().expect("id").to_owned())
            .collect()
    };
    assert_eq!(ids(&page1), vec![key_id(5), key_id(4)]);
    api.advance(10);
    api.ok(
        "AuthService/CreateKey",
        json!({"id":key_id(6),"name":"k","permissions":["send"]}),
    )
    .await;
    let page2 = api
        .ok(
            "AuthService/ListKeys",
            json!({"sort":"created_desc","limit":2,"after_id":page1["next_after_id"]}),
        )
        .await;
    assert_eq!(ids(&page2), vec![key_id(3), key_id(2)]);
    let page3 = api
        .ok(
            "AuthService/ListKeys",
            json!({"sort":"created_desc","limit":2,"after_id":page2["next_after_id"]}),
        )
        .await;
    assert_eq!(ids(&page3), vec![key_id(1)]);
    assert!(page3.get("next_after_id").is_none());
}

#[tokio::test]
async fn c227_c228_revoke() {
    let api = Api::new(&[]);
    let id = key_id(8);
    let created = api
        .ok(
            "AuthService/CreateKey",
            json!({"id":id,"name":"k","permissions":["send"]}),
        )
        .await;
    let token = created["token"].as_str().expect("token").to_owned();
    assert_eq!(
        api.ok("AuthService/RevokeKey", json!({"id":id})).await,
        json!({"ok":true})
    );
    let first = api.ok("AuthService/ListKeys", json!({})).await["keys"][0]["revoked_at_ms"].clone();
    assert!(first.as_i64().expect("revoked") > 0);
    api.advance(5000);
    assert_eq!(
        api.ok("AuthService/RevokeKey", json!({"id":id})).await,
        json!({"ok":true})
    );
    let again = api.ok("AuthService/ListKeys", json!({})).await["keys"][0]["revoked_at_ms"].clone();
    assert_eq!(first, again);
    api.fails(
        "AuthService/RevokeKey",
        json!({"id":key_id(9)}),
        404,
        "not_found",
    )
    .await;
    api.fails(
        "AuthService/RevokeKey",
        json!({"id":"nope"}),
        400,
        "invalid_argument",
    )
    .await;
    assert_eq!(
        status_as(
            &api,
            &token,
            "QueueService/Send",
            json!({"queue":"q","messages":[]})
        )
        .await,
        401
    );
}

#[tokio::test]
async fn c229_keys_issued_by_a_key_are_independent() {
    let api = Api::new(&[]);
    let k1_id = key_id(1);
    let k1 = api
        .ok(
            "AuthService/CreateKey",
            json!({"id":k1_id,"name":"k1","permissions":["manage"]}),
        )
        .await;
    let k1 = k1["token"].as_str().expect("token").to_owned();
    let (status, k2) = api
        .rpc_as(
            &k1,
            "AuthService/CreateKey",
            json!({"id":key_id(2),"name":"k2","permissions":["manage"]}),
        )
        .await;
    assert_eq!(status, 200);
    let k2 = k2["token"].as_str().expect("token").to_owned();
    // A key may revoke its own record.
    assert_eq!(
        status_as(&api, &k1, "AuthService/RevokeKey", json!({"id":k1_id})).await,
        200
    );
    assert_eq!(
        status_as(&api, &k1, "AdminService/ListQueues", json!({})).await,
        401
    );
    assert_eq!(
        status_as(&api, &k2, "AdminService/ListQueues", json!({})).await,
        200
    );
}

#[tokio::test]
async fn c230_application_keys_cannot_administer_keys() {
    let api = Api::new(&[]);
    for perms in [&["send"][..], &["listen"], &["send", "listen"]] {
        let token = api.mint_key(perms).await;
        for (rpc, body) in [
            ("AuthService/ListKeys", json!({})),
            ("AuthService/RevokeKey", json!({"id":key_id(1)})),
            (
                "AuthService/CreateKey",
                json!({"id":key_id(1),"name":"n","permissions":["send"]}),
            ),
        ] {
            assert_eq!(
                status_as(&api, &token, rpc, body).await,
                403,
                "{perms:?} {rpc}"
            );
        }
    }
}

#[tokio::test]
async fn c231_keys_survive_a_new_isolate() {
    let api = Api::new(&[]);
    let token = api.mint_key(&["manage"]).await;
    let restarted = support::Api::over(&api, &[]);
    assert_eq!(
        status_as(&restarted, &token, "AdminService/ListQueues", json!({})).await,
        200
    );
}

#[tokio::test]
async fn managed_key_requests_stay_one_round_trip() {
    let api = Api::new(&[]);
    api.create_queue("q", json!({})).await;
    let token = api.mint_key(&["send"]).await;
    let msg = json!({"queue":"q","messages":[{"body":b64("x")}]});
    // Minted by this isolate: known valid from the start.
    let before = api.round_trips();
    assert_eq!(
        status_as(&api, &token, "QueueService/Send", msg.clone()).await,
        200
    );
    assert_eq!(api.round_trips() - before, 1);
    let before = api.round_trips();
    assert_eq!(status_as(&api, &token, "QueueService/Send", msg).await, 200);
    assert_eq!(api.round_trips() - before, 1);
    // A route the key lacks: one lookup (401 or 403?), no transaction.
    let before = api.round_trips();
    assert_eq!(
        status_as(&api, &token, "QueueService/Stats", json!({"queue":"q"})).await,
        403
    );
    assert_eq!(api.round_trips() - before, 1);
    assert_eq!(api.stats("q").await["active"], 2);
}

#[tokio::test]
async fn invalid_body_with_an_unknown_key_is_401_not_400() {
    let api = Api::new(&[]);
    let unknown = format!("mqk_{}", "b".repeat(64));
    let auth = format!("Bearer {unknown}");
    let r = api
        .request(
            "POST",
            "/mqlite.v1.QueueService/Send",
            &[("Authorization", &auth)],
            b"{not json",
        )
        .await;
    assert_eq!(r.status, 401);
    let r = api
        .request(
            "POST",
            "/mqlite.v1.QueueService/Send",
            &[("Authorization", &auth)],
            br#"{"queue":"q","messages":[]}"#,
        )
        .await;
    assert_eq!(
        r.status, 401,
        "an empty send touches no data but still needs a live key"
    );
    let r = api
        .request("POST", "/nope", &[("Authorization", &auth)], b"")
        .await;
    assert_eq!(r.status, 401);
}

/// docs/http-api.md#transport: key-management responses are never cached (the secret of a
/// CreateKey exists only in its answer).
#[tokio::test]
async fn key_management_answers_carry_no_store() {
    let api = Api::new(&[]);
    let auth = format!("Bearer {ADMIN}");
    let headers = [("Authorization", auth.as_str())];
    let create = br#"{"id":"0123456789abcdef0123456789abcdef","name":"k","permissions":["send"]}"#;
    for (rpc, body) in [
        ("CreateKey", create.as_slice()),
        ("ListKeys", b"{}".as_slice()),
        (
            "RevokeKey",
            br#"{"id":"0123456789abcdef0123456789abcdef"}"#.as_slice(),
        ),
        // An error answer too.
        (
            "RevokeKey",
            br#"{"id":"ffffffffffffffffffffffffffffffff"}"#.as_slice(),
        ),
    ] {
        let path = format!("/mqlite.v1.AuthService/{rpc}");
        let response = api.request("POST", &path, &headers, body).await;
        assert_eq!(response.header("Cache-Control"), Some("no-store"), "{rpc}");
    }
    // Positive control: an ordinary RPC answer may be cached by the client.
    let response = api
        .request(
            "POST",
            "/mqlite.v1.AdminService/ListQueues",
            &headers,
            b"{}",
        )
        .await;
    assert_eq!(response.header("Cache-Control"), None);
}
