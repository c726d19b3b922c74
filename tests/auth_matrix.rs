//! The auth matrix (docs/http-api.md#credentials): every served route, plus `/metrics`,
//! against every kind of credential. Refused credentials are 401 whatever
//! the route; valid ones are 403 exactly where the route's permission is
//! not held, and otherwise reach the handler (whose own answer may be any
//! non-auth status for the minimal body sent).

mod support;

use mqlite_edge::http::{Permission, ROUTES};
use serde_json::json;
use support::{json_body, Api, ADMIN};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    Unauthenticated,
    Denied,
    Allowed,
}

#[derive(Debug, Clone, Copy)]
enum Who {
    NoToken,
    Malformed,
    Unknown,
    Revoked,
    Expired,
    Send,
    Listen,
    Manage,
    Monitor,
    Admin,
}

const EVERYONE: [Who; 10] = [
    Who::NoToken,
    Who::Malformed,
    Who::Unknown,
    Who::Revoked,
    Who::Expired,
    Who::Send,
    Who::Listen,
    Who::Manage,
    Who::Monitor,
    Who::Admin,
];

fn expected(who: Who, permission: Permission) -> Expect {
    use Permission as P;
    let allowed = match who {
        Who::NoToken | Who::Malformed | Who::Unknown | Who::Revoked | Who::Expired => {
            return Expect::Unauthenticated
        }
        Who::Manage | Who::Admin => true,
        Who::Send => permission == P::Send,
        Who::Listen => permission == P::Listen,
        Who::Monitor => permission == P::Observe,
    };
    if allowed {
        Expect::Allowed
    } else {
        Expect::Denied
    }
}

#[tokio::test]
async fn every_route_against_every_credential() {
    let api = Api::new(&[("MQLITE_METRICS", "on"), ("MQLITE_MONITOR_TOKENS", "M")]);
    api.create_queue("q", json!({})).await;
    let send = api.mint_key(&["send"]).await;
    let listen = api.mint_key(&["listen"]).await;
    let manage = api.mint_key(&["manage"]).await;
    let expired = api.mint_key_expiring(&["manage"], api.now() + 1000).await;
    api.advance(1000);
    let revoked_id = "f".repeat(32);
    let created = api
        .ok(
            "AuthService/CreateKey",
            json!({"id": revoked_id, "name": "revoked", "permissions": ["manage"]}),
        )
        .await;
    let revoked = created["token"].as_str().expect("token").to_owned();
    api.ok("AuthService/RevokeKey", json!({"id": revoked_id}))
        .await;
    let unknown = format!("mqk_{}", "c".repeat(64));

    let header = |who: Who| -> Option<String> {
        let token = match who {
            Who::NoToken => return None,
            Who::Malformed => return Some(format!("Bearer {ADMIN} x")),
            Who::Unknown => unknown.clone(),
            Who::Revoked => revoked.clone(),
            Who::Expired => expired.clone(),
            Who::Send => send.clone(),
            Who::Listen => listen.clone(),
            Who::Manage => manage.clone(),
            Who::Monitor => "M".into(),
            Who::Admin => ADMIN.into(),
        };
        Some(format!("Bearer {token}"))
    };

    let mut targets: Vec<(&str, &str, Permission)> = ROUTES
        .iter()
        .map(|r| ("POST", r.path, r.permission))
        .collect();
    targets.push(("GET", "/metrics", Permission::Observe));

    let mut cells = 0;
    for (method, path, permission) in &targets {
        for who in EVERYONE {
            let auth = header(who);
            let headers: Vec<(&str, &str)> = auth
                .as_deref()
                .map(|a| vec![("Authorization", a)])
                .unwrap_or_default();
            let body: &[u8] = if *method == "POST" { b"{}" } else { b"" };
            let r = api.request(method, path, &headers, body).await;
            let want = expected(who, *permission);
            let got = match r.status {
                401 => Expect::Unauthenticated,
                403 => Expect::Denied,
                _ => Expect::Allowed,
            };
            assert_eq!(
                got,
                want,
                "{path} as {who:?}: {} {}",
                r.status,
                json_body(&r)
            );
            if want == Expect::Unauthenticated {
                assert_eq!(
                    json_body(&r),
                    json!({"code":"unauthenticated","message":"missing or invalid Bearer token"})
                );
            }
            cells += 1;
        }
    }
    assert_eq!(cells, (ROUTES.len() + 1) * EVERYONE.len());
    assert_eq!(ROUTES.len(), 27, "26 catalogued RPCs plus DeleteQueue");
}
