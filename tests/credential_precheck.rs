//! A credential that was never valid costs almost nothing (docs/http-api.md, "Credentials"):
//! a managed-format key this isolate has not seen valid is refused before
//! its body is read or any transaction begins, at the cost of at most one
//! read; a refused key is remembered, so repeating it costs no database
//! request; a key known valid keeps the one-round-trip path, and its
//! revocation bites on the very next request.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use mqlite_edge::engine::Clock;
use mqlite_edge::http::{Body, Config, Isolate, Request, Response, Service, PGMQ_ROUTES, ROUTES};
use mqlite_edge::store::{HttpReply, Transport, TransportError};
use mqlite_edge::wire::ApiError;
use serde_json::json;
use support::{b64, json_body, InProcess, RealWaiter, TempDb, ADMIN, T0};

/// Records every pipeline sent to the database.
#[derive(Clone)]
struct Spy {
    inner: InProcess,
    pipelines: Arc<Mutex<Vec<String>>>,
}

impl Transport for Spy {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        if let Ok(mut sent) = self.pipelines.lock() {
            sent.push(body.to_owned());
        }
        self.inner.send_pipeline(body).await
    }

    async fn pause(&self, millis: u32) {
        self.inner.pause(millis).await
    }
}

/// A body that counts how often it is read; reading yields bytes that no
/// RPC could decode.
#[derive(Clone, Default)]
struct Tripwire(Arc<AtomicUsize>);

impl Body for Tripwire {
    async fn read(self, _cap: usize) -> Result<Vec<u8>, ApiError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(b"{not json".to_vec())
    }
}

struct Broker {
    service: Service<Spy>,
    pipelines: Arc<Mutex<Vec<String>>>,
}

impl Broker {
    /// A broker (one isolate) over `temp`.
    fn over(temp: &Arc<TempDb>, clock: &Clock) -> Broker {
        let pipelines = Arc::new(Mutex::new(Vec::new()));
        let spy = Spy {
            inner: InProcess {
                db: temp.db.clone(),
            },
            pipelines: pipelines.clone(),
        };
        let config = Config::from_vars(|name| (name == "MQLITE_TOKENS").then(|| ADMIN.to_owned()));
        let service = Service::new(
            config.map(|c| (c, spy)),
            clock.clone(),
            Arc::new(Isolate::new(T0)),
        );
        Broker { service, pipelines }
    }

    /// Applies the migrations (their requests are not the point here).
    async fn migrated(self) -> Broker {
        let (status, _) = self.rpc(ADMIN, "AdminService/ListQueues", json!({})).await;
        assert_eq!(status, 200);
        self
    }

    fn sent(&self) -> usize {
        self.pipelines.lock().map(|p| p.len()).unwrap_or(usize::MAX)
    }

    fn pipelines_since(&self, from: usize) -> Vec<String> {
        self.pipelines
            .lock()
            .map(|p| p[from..].to_vec())
            .unwrap_or_default()
    }

    async fn call(&self, token: &str, path: &str, body: impl Body) -> Response {
        self.call_with("POST", token, path, body).await
    }

    async fn call_with(&self, method: &str, token: &str, path: &str, body: impl Body) -> Response {
        let request = Request {
            method: method.into(),
            path: path.into(),
            headers: vec![("Authorization".into(), format!("Bearer {token}"))],
        };
        self.service
            .handle(&request, body, &RealWaiter::start())
            .await
    }

    async fn rpc(
        &self,
        token: &str,
        rpc: &str,
        body: serde_json::Value,
    ) -> (u16, serde_json::Value) {
        let r = self
            .call(
                token,
                &format!("/mqlite.v1.{rpc}"),
                body.to_string().into_bytes(),
            )
            .await;
        (r.status, json_body(&r))
    }

    async fn mint(&self, permissions: &[&str]) -> (String, String) {
        let id = mqlite_edge::engine::random_hex(16).expect("entropy");
        let (status, created) = self
            .rpc(
                ADMIN,
                "AuthService/CreateKey",
                json!({"id": id, "name": "k", "permissions": permissions}),
            )
            .await;
        assert_eq!(status, 200, "{created}");
        (created["token"].as_str().expect("token").to_owned(), id)
    }
}

fn unknown_key() -> String {
    format!(
        "mqk_{}",
        mqlite_edge::engine::random_hex(32).expect("entropy")
    )
}

/// A transaction that takes the write lock.
fn writes(pipeline: &str) -> bool {
    pipeline.contains("BEGIN IMMEDIATE")
}

#[tokio::test]
async fn an_unknown_key_is_refused_on_every_route_before_its_body_is_read() {
    let temp = Arc::new(TempDb::new());
    let broker = Broker::over(&temp, &Clock::manual(T0)).migrated().await;
    for route in ROUTES {
        let key = unknown_key();
        let body = Tripwire::default();
        let before = broker.sent();
        let r = broker.call(&key, route.path, body.clone()).await;
        assert_eq!(
            (r.status, json_body(&r)["code"].as_str()),
            (401, Some("unauthenticated")),
            "{}",
            route.path
        );
        assert_eq!(
            body.0.load(Ordering::SeqCst),
            0,
            "{} read its body",
            route.path
        );
        let sent = broker.pipelines_since(before);
        assert_eq!(sent.len(), 1, "{}: one lookup, nothing else", route.path);
        assert!(
            !writes(&sent[0]),
            "{}: the lookup takes no write lock",
            route.path
        );
        // The same key again costs no database request at all.
        let again = broker.call(&key, route.path, Tripwire::default()).await;
        assert_eq!(again.status, 401, "{}", route.path);
        assert_eq!(broker.sent(), before + 1, "{}: remembered", route.path);
    }
}

/// The same on every protected route of the pgmq dialect (docs/pgmq.md),
/// whose refusal is its own `401 unauthorized`.
#[tokio::test]
async fn an_unknown_key_is_refused_on_every_pgmq_route_before_its_body_is_read() {
    let temp = Arc::new(TempDb::new());
    let broker = Broker::over(&temp, &Clock::manual(T0)).migrated().await;
    for route in PGMQ_ROUTES.iter().filter(|r| r.permission.is_some()) {
        let path = route.path.replace("{queue}", "q").replace("{msg_id}", "1");
        let key = unknown_key();
        let body = Tripwire::default();
        let before = broker.sent();
        let r = broker
            .call_with(route.method, &key, &path, body.clone())
            .await;
        assert_eq!(
            (r.status, json_body(&r)["error"].as_str()),
            (401, Some("unauthorized")),
            "{} {path}",
            route.method
        );
        assert_eq!(body.0.load(Ordering::SeqCst), 0, "{path} read its body");
        let sent = broker.pipelines_since(before);
        assert_eq!(sent.len(), 1, "{path}: one lookup, nothing else");
        assert!(!writes(&sent[0]), "{path}: the lookup takes no write lock");
        let again = broker
            .call_with(route.method, &key, &path, Tripwire::default())
            .await;
        assert_eq!(again.status, 401, "{path}");
        assert_eq!(broker.sent(), before + 1, "{path}: remembered");
    }
}

#[tokio::test]
async fn an_unknown_key_on_an_unknown_path_is_401_then_free() {
    let temp = Arc::new(TempDb::new());
    let broker = Broker::over(&temp, &Clock::manual(T0)).migrated().await;
    let key = unknown_key();
    let before = broker.sent();
    assert_eq!(broker.call(&key, "/nope", Vec::new()).await.status, 401);
    assert_eq!(broker.call(&key, "/nope", Vec::new()).await.status, 401);
    assert_eq!(broker.sent(), before + 1);
}

#[tokio::test]
async fn a_key_seen_valid_keeps_the_one_round_trip_path() {
    let temp = Arc::new(TempDb::new());
    let clock = Clock::manual(T0);
    let broker = Broker::over(&temp, &clock);
    broker
        .rpc(
            ADMIN,
            "AdminService/CreateQueue",
            json!({"name":"q","config":{}}),
        )
        .await;
    let send = json!({"queue":"q","messages":[{"body":b64("x")}]});
    // Minted by this isolate: one round trip from the first use.
    let (own, _) = broker.mint(&["send"]).await;
    let before = broker.sent();
    assert_eq!(
        broker.rpc(&own, "QueueService/Send", send.clone()).await.0,
        200
    );
    assert_eq!(broker.sent() - before, 1);
    // Minted elsewhere: the first use here looks it up, then the RPC.
    let (key, _) = Broker::over(&temp, &clock).mint(&["send"]).await;
    let before = broker.sent();
    assert_eq!(
        broker.rpc(&key, "QueueService/Send", send.clone()).await.0,
        200
    );
    assert_eq!(broker.sent() - before, 2);
    // From then on, one round trip, the key checked inside it.
    let before = broker.sent();
    assert_eq!(broker.rpc(&key, "QueueService/Send", send).await.0, 200);
    let sent = broker.pipelines_since(before);
    assert_eq!(sent.len(), 1);
    assert!(sent[0].contains("access_keys"), "the check rides along");
}

/// `send` with `key` is refused and writes nothing (`q` keeps its `active`
/// messages); the same key again costs no database request and its body is
/// never read.
async fn refused_then_free(broker: &Broker, key: &str, send: serde_json::Value, active: i64) {
    let (status, body) = broker.rpc(key, "QueueService/Send", send).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (401, Some("unauthenticated"))
    );
    let (_, stats) = broker
        .rpc(ADMIN, "QueueService/Stats", json!({"queue":"q"}))
        .await;
    assert_eq!(stats["active"], active, "the refused Send wrote nothing");
    let before = broker.sent();
    let body = Tripwire::default();
    let r = broker
        .call(key, "/mqlite.v1.QueueService/Send", body.clone())
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(broker.sent(), before);
    assert_eq!(body.0.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn revocation_bites_on_the_next_request_then_costs_nothing() {
    let temp = Arc::new(TempDb::new());
    let clock = Clock::manual(T0);
    let broker = Broker::over(&temp, &clock);
    // Revoked through another isolate: this one only learns it from the
    // check inside the next transaction.
    let other = Broker::over(&temp, &clock);
    broker
        .rpc(
            ADMIN,
            "AdminService/CreateQueue",
            json!({"name":"q","config":{}}),
        )
        .await;
    let (key, id) = broker.mint(&["send", "listen"]).await;
    let send = json!({"queue":"q","messages":[{"body":b64("x")}]});
    assert_eq!(
        broker.rpc(&key, "QueueService/Send", send.clone()).await.0,
        200
    );
    assert_eq!(
        broker.rpc(&key, "QueueService/Send", send.clone()).await.0,
        200
    );
    assert_eq!(
        other
            .rpc(ADMIN, "AuthService/RevokeKey", json!({"id": id}))
            .await
            .0,
        200
    );
    // Remembered as revoked: then no database request, body unread.
    refused_then_free(&broker, &key, send, 2).await;
}

#[tokio::test]
async fn expiry_bites_on_the_next_request_then_costs_nothing() {
    let temp = Arc::new(TempDb::new());
    let clock = Clock::manual(T0);
    let broker = Broker::over(&temp, &clock);
    broker
        .rpc(
            ADMIN,
            "AdminService/CreateQueue",
            json!({"name":"q","config":{}}),
        )
        .await;
    let (status, created) = broker
        .rpc(
            ADMIN,
            "AuthService/CreateKey",
            json!({"id":"5e".repeat(16),"name":"k","permissions":["send"],"expires_at_ms":T0 + 1_000}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let key = created["token"].as_str().expect("token").to_owned();
    let send = json!({"queue":"q","messages":[{"body":b64("x")}]});
    assert_eq!(
        broker.rpc(&key, "QueueService/Send", send.clone()).await.0,
        200
    );
    clock.advance(1_000);
    // Remembered as expired, no longer as valid.
    refused_then_free(&broker, &key, send, 1).await;
    // An isolate that never saw it valid: one lookup, then nothing.
    let other = Broker::over(&temp, &clock).migrated().await;
    for lookups in [1, 0] {
        let before = other.sent();
        let r = other
            .call(&key, "/mqlite.v1.QueueService/Send", Tripwire::default())
            .await;
        assert_eq!((r.status, other.sent() - before), (401, lookups));
    }
}

#[tokio::test]
async fn test_filter_checks_a_known_key_every_time() {
    let temp = Arc::new(TempDb::new());
    let clock = Clock::manual(T0);
    let broker = Broker::over(&temp, &clock);
    let other = Broker::over(&temp, &clock);
    let (key, id) = broker.mint(&["manage"]).await;
    let filter = json!({"expr": "true"});
    assert_eq!(
        broker
            .rpc(&key, "AdminService/TestFilter", filter.clone())
            .await
            .0,
        200
    );
    let before = broker.sent();
    assert_eq!(
        broker
            .rpc(&key, "AdminService/TestFilter", filter.clone())
            .await
            .0,
        200
    );
    assert_eq!(broker.sent() - before, 1, "one lookup, no transaction");
    other
        .rpc(ADMIN, "AuthService/RevokeKey", json!({"id": id}))
        .await;
    let body = Tripwire::default();
    let r = broker
        .call(&key, "/mqlite.v1.AdminService/TestFilter", body.clone())
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(
        body.0.load(Ordering::SeqCst),
        0,
        "refused before the filter ran"
    );
}

#[tokio::test]
async fn an_unseen_key_lacking_the_permission_is_403_before_its_body() {
    let temp = Arc::new(TempDb::new());
    let clock = Clock::manual(T0);
    let broker = Broker::over(&temp, &clock);
    let (key, _) = Broker::over(&temp, &clock).mint(&["listen"]).await;
    let body = Tripwire::default();
    let before = broker.sent();
    let r = broker
        .call(&key, "/mqlite.v1.QueueService/Send", body.clone())
        .await;
    assert_eq!(
        (r.status, json_body(&r)["code"].as_str()),
        (403, Some("permission_denied"))
    );
    assert_eq!(body.0.load(Ordering::SeqCst), 0);
    assert_eq!(broker.sent() - before, 1);
    // Known valid, still lacking: a lookup (it may have been revoked since,
    // which would be 401), never the body.
    let body = Tripwire::default();
    let r = broker
        .call(&key, "/mqlite.v1.QueueService/Send", body.clone())
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(body.0.load(Ordering::SeqCst), 0);
}
