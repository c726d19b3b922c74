//! Shared test fixtures: the engine over an in-process libSQL server (the
//! same Hrana JSON path the Worker uses), a manual clock, and a round-trip
//! counter.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use mqlite_edge::engine::{Clock, Effects, Engine, Limits, Waiter};
use mqlite_edge::store::{HttpReply, Transport, TransportError};
use mqlite_libsql::Database;

/// 2025-06-15T15:06:40Z, an arbitrary fixed start for manual clocks.
pub const T0: i64 = 1_750_000_000_000;

/// A database file in a fresh temporary directory, removed on drop.
pub struct TempDb {
    pub db: Arc<Database>,
    dir: PathBuf,
}

impl TempDb {
    pub fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mqlite-edge-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let db = Database::open(dir.join("test.db"), None).expect("open test database");
        TempDb {
            db: Arc::new(db),
            dir,
        }
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Transport that hands the pipeline body to the in-process server.
#[derive(Clone)]
pub struct InProcess {
    pub db: Arc<Database>,
}

impl Transport for InProcess {
    async fn send_pipeline(&self, body: &str) -> Result<HttpReply, TransportError> {
        let db = self.db.clone();
        // The blocking task outlives the borrow: it gets its own copy.
        let body = body.to_owned();
        let reply = tokio::task::spawn_blocking(move || db.pipeline(None, body.as_bytes()))
            .await
            .map_err(|e| TransportError::AnswerLost(e.to_string()))?;
        Ok(HttpReply {
            status: reply.status,
            body: reply.body.into_bytes(),
        })
    }

    async fn pause(&self, millis: u32) {
        tokio::time::sleep(std::time::Duration::from_millis(millis.into())).await;
    }
}

/// Engine + database + manual clock.
pub struct Harness {
    pub engine: Engine<InProcess>,
    pub clock: Clock,
    pub temp: TempDb,
}

impl Harness {
    pub fn new() -> Self {
        Self::with_limits(Limits::default())
    }

    pub fn with_limits(limits: Limits) -> Self {
        let temp = TempDb::new();
        let clock = Clock::manual(T0);
        let engine = Engine::new(
            InProcess {
                db: temp.db.clone(),
            },
            clock.clone(),
            limits,
        );
        Harness {
            engine,
            clock,
            temp,
        }
    }

    /// Same database, database clock (real time).
    pub fn real_time() -> Self {
        let temp = TempDb::new();
        let clock = Clock::Database;
        let engine = Engine::new(
            InProcess {
                db: temp.db.clone(),
            },
            clock.clone(),
            Limits::default(),
        );
        Harness {
            engine,
            clock,
            temp,
        }
    }

    pub fn now(&self) -> i64 {
        self.clock.manual_now().expect("manual clock")
    }

    pub fn advance(&self, ms: i64) {
        self.clock.advance(ms);
    }

    /// Pipeline requests the database has served so far.
    pub fn round_trips(&self) -> u64 {
        self.temp.db.pipeline_requests()
    }

    /// A second engine over the same database and clock that records what
    /// it reports (events, wake hints) in the returned journal.
    pub fn journaled_engine(&self) -> (Engine<InProcess>, Arc<Effects>) {
        let effects = Arc::new(Effects::default());
        let engine = Engine::new(
            InProcess {
                db: self.temp.db.clone(),
            },
            self.clock.clone(),
            Limits::default(),
        )
        .with_effects(effects.clone());
        (engine, effects)
    }
}

/// Real-time waiter for long polls.
pub struct RealWaiter(pub Instant);

impl RealWaiter {
    pub fn start() -> Self {
        RealWaiter(Instant::now())
    }
}

impl Waiter for RealWaiter {
    fn elapsed_ms(&self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }

    async fn sleep(&self, millis: u64) {
        tokio::time::sleep(std::time::Duration::from_millis(millis)).await;
    }
}

/// A waiter that takes wake hints and whose parks time out at once; its
/// request has taken `elapsed_ms` whenever it is asked.
pub struct Hinting {
    pub elapsed_ms: u64,
}

impl Waiter for Hinting {
    fn elapsed_ms(&self) -> u64 {
        self.elapsed_ms
    }

    async fn sleep(&self, _millis: u64) {}

    fn hints(&self) -> bool {
        true
    }

    async fn park(
        &self,
        _queue: &str,
        _since_ms: i64,
        _millis: u64,
    ) -> mqlite_edge::engine::Parked {
        mqlite_edge::engine::Parked::TimedOut
    }
}

/// A waiter that never waits (for wait_time_ms = 0 paths).
pub struct NoWait;

impl Waiter for NoWait {
    fn elapsed_ms(&self) -> u64 {
        u64::MAX / 2
    }

    async fn sleep(&self, _millis: u64) {}
}

/// The whole HTTP pipeline (routing, auth, wire, engine, store) natively.
pub struct Api {
    pub service: mqlite_edge::http::Service<InProcess>,
    pub clock: Clock,
    pub temp: Arc<TempDb>,
}

/// The admin token configured by [`Api::new`] (tokens are at least 32
/// characters).
pub const ADMIN: &str = "test-admin-token-0123456789abcdef";
/// [`ADMIN`] as an `Authorization` value.
pub const ADMIN_AUTH: &str = "Bearer test-admin-token-0123456789abcdef";
/// A monitor token for tests that configure `MQLITE_MONITOR_TOKENS`.
pub const MONITOR: &str = "test-monitor-token-0123456789abcdef";

impl Api {
    /// A broker with `MQLITE_TOKENS=`[`ADMIN`] plus `vars`, on a manual clock.
    pub fn new(vars: &[(&str, &str)]) -> Self {
        Self::build(Arc::new(TempDb::new()), Clock::manual(T0), vars)
    }

    /// A second broker (a fresh isolate) over `other`'s database and clock.
    pub fn over(other: &Api, vars: &[(&str, &str)]) -> Self {
        Self::build(other.temp.clone(), other.clock.clone(), vars)
    }

    /// A broker whose database refuses every request (storage unavailable).
    pub fn unreachable(vars: &[(&str, &str)]) -> Self {
        let temp = TempDb::new();
        let refusing = Database::open(temp.dir.join("refusing.db"), Some("not-ours".into()))
            .expect("open refusing database");
        let temp = TempDb {
            db: Arc::new(refusing),
            dir: temp.dir.clone(),
        };
        Self::build(Arc::new(temp), Clock::manual(T0), vars)
    }

    fn build(temp: Arc<TempDb>, clock: Clock, vars: &[(&str, &str)]) -> Self {
        let mut all: Vec<(String, String)> = vec![("MQLITE_TOKENS".into(), ADMIN.into())];
        for (k, v) in vars {
            all.retain(|(name, _)| name != k);
            all.push((k.to_string(), v.to_string()));
        }
        let config = mqlite_edge::http::Config::from_vars(|name| {
            all.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        });
        let transport = InProcess {
            db: temp.db.clone(),
        };
        let setup = config.map(|config| (config, transport));
        let isolate = Arc::new(mqlite_edge::http::Isolate::new(T0));
        let service = mqlite_edge::http::Service::new(setup, clock.clone(), isolate);
        Api {
            service,
            clock,
            temp,
        }
    }

    /// The manual clock's current time.
    pub fn now(&self) -> i64 {
        self.clock.manual_now().expect("manual clock")
    }

    /// Sends a raw request.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> mqlite_edge::http::Response {
        let request = mqlite_edge::http::Request {
            method: method.into(),
            path: path.into(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        self.service
            .handle(&request, body.to_vec(), &RealWaiter::start())
            .await
    }

    /// POSTs a JSON body to `/mqlite.v1.<rpc>` as the admin; returns status and JSON.
    pub async fn rpc(&self, rpc: &str, body: serde_json::Value) -> (u16, serde_json::Value) {
        self.rpc_as(ADMIN, rpc, body).await
    }

    /// POSTs a JSON body to `/mqlite.v1.<rpc>` with `token`.
    pub async fn rpc_as(
        &self,
        token: &str,
        rpc: &str,
        body: serde_json::Value,
    ) -> (u16, serde_json::Value) {
        let auth = format!("Bearer {token}");
        let response = self
            .request(
                "POST",
                &format!("/mqlite.v1.{rpc}"),
                &[("Authorization", &auth)],
                body.to_string().as_bytes(),
            )
            .await;
        (response.status, json_body(&response))
    }

    /// Mints a managed key as the admin; returns its token.
    pub async fn mint_key(&self, permissions: &[&str]) -> String {
        self.mint_key_expiring(permissions, 0).await
    }

    /// Mints a managed key with an expiry; returns its token.
    pub async fn mint_key_expiring(&self, permissions: &[&str], expires_at_ms: i64) -> String {
        let id = mqlite_edge::engine::random_hex(16).expect("entropy");
        let created = self
            .ok(
                "AuthService/CreateKey",
                serde_json::json!({"id": id, "name": "test key", "permissions": permissions,
                                   "expires_at_ms": expires_at_ms}),
            )
            .await;
        created["token"].as_str().expect("token").to_owned()
    }

    /// Subscribes `name` to `topic` with an optional filter expression.
    pub async fn subscribe(&self, topic: &str, name: &str, expr: Option<&str>) {
        let mut body = serde_json::json!({"topic": topic, "name": name});
        if let Some(expr) = expr {
            body["filter"] = serde_json::json!({"expr": expr});
        }
        self.ok("AdminService/Subscribe", body).await;
    }

    /// An RPC that must succeed; returns its JSON.
    pub async fn ok(&self, rpc: &str, body: serde_json::Value) -> serde_json::Value {
        let (status, json) = self.rpc(rpc, body.clone()).await;
        assert_eq!(status, 200, "{rpc} {body} -> {json}");
        json
    }

    /// An RPC that must fail with `status` and `code`.
    pub async fn fails(&self, rpc: &str, body: serde_json::Value, status: u16, code: &str) {
        let (got, json) = self.rpc(rpc, body.clone()).await;
        assert_eq!(
            (got, json["code"].as_str()),
            (status, Some(code)),
            "{rpc} {body} -> {json}"
        );
    }

    pub async fn create_queue(&self, name: &str, config: serde_json::Value) {
        self.ok(
            "AdminService/CreateQueue",
            serde_json::json!({"name": name, "config": config}),
        )
        .await;
    }

    /// Sends one message with `body` text; returns its seq.
    pub async fn send_text(&self, queue: &str, body: &str) -> i64 {
        let json = self
            .ok(
                "QueueService/Send",
                serde_json::json!({"queue": queue, "messages": [{"body": b64(body)}]}),
            )
            .await;
        json["seq_numbers"][0].as_i64().expect("seq")
    }

    /// Sends one message with `body` text, in group `group` if any;
    /// returns its seq.
    pub async fn send_grouped(&self, queue: &str, body: &str, group: Option<&str>) -> i64 {
        let mut message = serde_json::json!({"body": b64(body)});
        if let Some(g) = group {
            message["group_id"] = g.into();
        }
        let json = self
            .ok(
                "QueueService/Send",
                serde_json::json!({"queue": queue, "messages": [message]}),
            )
            .await;
        json["seq_numbers"][0].as_i64().expect("seq")
    }

    pub async fn stats(&self, queue: &str) -> serde_json::Value {
        self.ok("QueueService/Stats", serde_json::json!({"queue": queue}))
            .await
    }

    pub fn advance(&self, ms: i64) {
        self.clock.advance(ms);
    }

    pub fn round_trips(&self) -> u64 {
        self.temp.db.pipeline_requests()
    }

    /// The engine behind the service (the test configurations are valid).
    pub fn engine(&self) -> &Engine<InProcess> {
        self.service.engine().expect("a valid test configuration")
    }
}

pub fn json_body(response: &mqlite_edge::http::Response) -> serde_json::Value {
    serde_json::from_slice(&response.body).unwrap_or(serde_json::Value::Null)
}

/// Standard padded base64 of UTF-8 text.
pub fn b64(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
}

/// Reads rows straight from the database (test inspection only).
pub async fn query(engine: &Engine<InProcess>, sql: &str) -> Vec<Vec<serde_json::Value>> {
    use mqlite_edge::store::hrana::Value;
    // Test inspection only: leaking gives the ad-hoc text the 'static
    // lifetime the engine's constant statements have.
    let statement: &'static mqlite_edge::store::Statement =
        Box::leak(Box::new(mqlite_edge::store::Statement {
            sql: Box::leak(sql.to_owned().into_boxed_str()),
            clock_param: 0,
        }));
    let mut program = mqlite_edge::store::Program::read();
    let step = program.step(statement, vec![]);
    let committed = engine
        .store()
        .run(&program)
        .await
        .expect("inspection query");
    let _ = step;
    committed
        .raw_rows(step)
        .iter()
        .map(|row| {
            row.iter()
                .map(|v| match v {
                    Value::Null => serde_json::Value::Null,
                    Value::Integer { value } => (*value).into(),
                    Value::Float { value } => (*value).into(),
                    Value::Text { value } => value.clone().into(),
                    Value::Blob { base64 } => base64.clone().into(),
                })
                .collect()
        })
        .collect()
}

/// The `messages` array of a Receive/Peek answer.
pub fn messages(answer: &serde_json::Value) -> Vec<serde_json::Value> {
    answer["messages"].as_array().cloned().unwrap_or_default()
}

/// `base` with the members of `extra` added (or replaced).
pub fn with(mut base: serde_json::Value, extra: serde_json::Value) -> serde_json::Value {
    if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    base
}
