//! The auth matrix (docs/http-api.md#credentials): every served route, plus `/metrics`,
//! against every kind of credential. Refused credentials are 401 whatever
//! the route; valid ones are 403 exactly where the route's permission is
//! not held, and otherwise reach the handler (whose own answer may be any
//! non-auth status for the minimal body sent).

mod support;

use mqlite_edge::http::ROUTES;
use serde_json::json;
use support::{json_body, Api, ADMIN, MONITOR};

/// What a route requires, as docs/http-api.md, "Credentials" grants it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Need {
    Send,
    Listen,
    Manage,
    /// `manage` or a configured monitor token.
    ManageOrMonitor,
}

/// Wire §4's catalogue with §3.4's permissions, written from the spec and
/// not from the router's own table: the router must agree with it.
const SPEC: [(&str, Need); 28] = [
    ("/mqlite.v1.QueueService/Send", Need::Send),
    ("/mqlite.v1.QueueService/Receive", Need::Listen),
    ("/mqlite.v1.QueueService/Complete", Need::Listen),
    ("/mqlite.v1.QueueService/CompleteBatch", Need::Listen),
    ("/mqlite.v1.QueueService/RenewBatch", Need::Listen),
    ("/mqlite.v1.QueueService/Abandon", Need::Listen),
    ("/mqlite.v1.QueueService/Reject", Need::Listen),
    ("/mqlite.v1.QueueService/Defer", Need::Listen),
    ("/mqlite.v1.QueueService/ReceiveDeferred", Need::Listen),
    ("/mqlite.v1.QueueService/Renew", Need::Listen),
    ("/mqlite.v1.QueueService/Schedule", Need::Send),
    ("/mqlite.v1.QueueService/Cancel", Need::Send),
    ("/mqlite.v1.QueueService/Peek", Need::Listen),
    ("/mqlite.v1.QueueService/Stats", Need::Listen),
    ("/mqlite.v1.AdminService/CreateQueue", Need::Manage),
    ("/mqlite.v1.AdminService/Subscribe", Need::Manage),
    ("/mqlite.v1.AdminService/ListQueues", Need::Manage),
    ("/mqlite.v1.AdminService/ListSubscriptions", Need::Manage),
    ("/mqlite.v1.AdminService/TestFilter", Need::Manage),
    ("/mqlite.v1.AdminService/Redrive", Need::Manage),
    ("/mqlite.v1.AdminService/Purge", Need::Manage),
    ("/mqlite.v1.AdminService/Status", Need::Manage),
    ("/mqlite.v1.AdminService/DeleteQueue", Need::Manage),
    ("/mqlite.v1.AdminService/Observe", Need::ManageOrMonitor),
    ("/mqlite.v1.AuthService/CreateKey", Need::Manage),
    ("/mqlite.v1.AuthService/ListKeys", Need::Manage),
    ("/mqlite.v1.AuthService/RevokeKey", Need::Manage),
    // Not an RPC (docs/http-api.md, "Metrics"): GET, served only with MQLITE_METRICS=on.
    ("/metrics", Need::ManageOrMonitor),
];

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

fn expected(who: Who, need: Need) -> Expect {
    let allowed = match who {
        Who::NoToken | Who::Malformed | Who::Unknown | Who::Revoked | Who::Expired => {
            return Expect::Unauthenticated
        }
        Who::Manage | Who::Admin => true,
        Who::Send => need == Need::Send,
        Who::Listen => need == Need::Listen,
        Who::Monitor => need == Need::ManageOrMonitor,
    };
    if allowed {
        Expect::Allowed
    } else {
        Expect::Denied
    }
}

#[tokio::test]
async fn every_route_against_every_credential() {
    let api = Api::new(&[("MQLITE_METRICS", "on"), ("MQLITE_MONITOR_TOKENS", MONITOR)]);
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
            Who::Monitor => MONITOR.into(),
            Who::Admin => ADMIN.into(),
        };
        Some(format!("Bearer {token}"))
    };

    // The router serves exactly the catalogued RPCs, no more, no fewer.
    let served: Vec<&str> = ROUTES.iter().map(|r| r.path).collect();
    let catalogued: Vec<&str> = SPEC
        .iter()
        .map(|(path, _)| *path)
        .filter(|path| *path != "/metrics")
        .collect();
    assert_eq!(served, catalogued);
    let targets: Vec<(&str, &str, Need)> = SPEC
        .iter()
        .map(|(path, need)| {
            let method = if *path == "/metrics" { "GET" } else { "POST" };
            (method, *path, *need)
        })
        .collect();

    let mut cells = 0;
    for (method, path, need) in &targets {
        for who in EVERYONE {
            let auth = header(who);
            let headers: Vec<(&str, &str)> = auth
                .as_deref()
                .map(|a| vec![("Authorization", a)])
                .unwrap_or_default();
            let body: &[u8] = if *method == "POST" { b"{}" } else { b"" };
            let r = api.request(method, path, &headers, body).await;
            let want = expected(who, *need);
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
    assert_eq!(cells, SPEC.len() * EVERYONE.len());
}
