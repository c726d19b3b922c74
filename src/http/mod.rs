//! HTTP routing, authentication, caps and error responses, on plain request
//! and response types so the whole pipeline runs natively in tests. The
//! Worker shell only converts `worker::Request`/`Response` to these.
//!
//! Check order (docs/http-api.md#check-order): CORS preflight → open paths (`/`, `/healthz`,
//! `/ui`, and the contract's documents `/openapi.json`, `/docs`, `/redoc`) → authentication →
//! route lookup → permission → method → body cap → strict decoding → handler.

mod assets;
mod auth;
mod card;
mod config;
mod console;
mod databases;
mod docs;
mod known_keys;
mod pgmq;
mod routes;
mod rpc;

pub use auth::{Access, Permission, Principal};
pub use config::{masked_location, AuthMode, Config, PgmqSettings};
pub use databases::{database_specs, rendezvous, DatabaseSpec, Databases, Placements};
pub use docs::OPENAPI_ETAG;
#[cfg(not(target_arch = "wasm32"))]
pub use docs::OPENAPI_JSON;
pub use known_keys::{Known, KnownKeys};
pub use pgmq::{Handler as PgmqHandler, PgmqRoute, PGMQ_ROUTES};
pub use routes::{Route, Rpc, ROUTES};

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::engine::{
    Clock, Effect, Effects, Engine, EngineError, KeyCheck, KeyState, Permissions, TopicCache,
    Waiter,
};
use crate::observe::{prometheus, AuthOutcome, Registry};
use crate::store::{Policy, Transport, WriteHealth};
use crate::wire::{ApiError, ErrorCode};

/// The parts of a request the broker looks at.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Header names in any case; repeated headers appear repeatedly.
    pub headers: Vec<(String, String)>,
}

impl Request {
    fn header_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The error code of an error answer, kept for the request counters.
    code: Option<ErrorCode>,
    /// What an internal error or an unknown outcome really was, for the
    /// operator's log only: the answer carries just the id in this line.
    log: Option<String>,
    /// Queues to notify once the answer is on its way (docs/semantics.md#long-polling).
    wake: Vec<WakeHint>,
    /// On a Worker, the static asset whose bytes are this answer's body
    /// (`assets`); the platform shell fills it in.
    asset: Option<&'static str>,
}

/// A wake hint for the platform to send after the response: messages
/// became claimable on `queue`, which has waiters, by a change committed at
/// database time `at_ms`. A hint decides nothing; losing one costs a waiter
/// at most one park.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WakeHint {
    pub queue: String,
    pub at_ms: i64,
}

/// One hint per queue the request's committed effects made claimable, with
/// the latest commit time.
fn wake_hints(effects: &[Effect]) -> Vec<WakeHint> {
    let mut hints: Vec<WakeHint> = Vec::new();
    for effect in effects {
        if let Effect::Claimable { queue, at_ms } = effect {
            match hints.iter_mut().find(|h| &h.queue == queue) {
                Some(hint) => hint.at_ms = hint.at_ms.max(*at_ms),
                None => hints.push(WakeHint {
                    queue: queue.clone(),
                    at_ms: *at_ms,
                }),
            }
        }
    }
    hints
}

impl Response {
    fn new(status: u16, headers: Vec<(String, String)>, body: Vec<u8>) -> Self {
        Response {
            status,
            headers,
            body,
            code: None,
            log: None,
            wake: Vec::new(),
            asset: None,
        }
    }

    /// A `200` whose body is the static file at `path`: its bytes where
    /// they are compiled in, or a reference for the Worker to resolve.
    fn static_file(headers: Vec<(String, String)>, path: &'static str) -> Self {
        #[cfg(not(target_arch = "wasm32"))]
        let response = Self::new(200, headers, assets::bytes(path).to_vec());
        #[cfg(target_arch = "wasm32")]
        let response = Response {
            asset: Some(path),
            ..Self::new(200, headers, Vec::new())
        };
        response
    }

    /// The static asset that is this answer's body, for the Worker to
    /// fetch from its `ASSETS` binding; `None` when the body is complete.
    pub fn asset(&self) -> Option<&'static str> {
        self.asset
    }

    /// The answer when a static asset cannot be had (no `ASSETS` binding,
    /// the platform failing): `503 unavailable`, like any backend outage.
    pub fn asset_unavailable() -> Self {
        Response::error(&ApiError::new(
            ErrorCode::Unavailable,
            "static asset unavailable",
        ))
    }

    fn json(status: u16, body: String) -> Self {
        Self::new(
            status,
            vec![("Content-Type".into(), "application/json".into())],
            body.into_bytes(),
        )
    }

    /// An error answer. The text of an internal error, of a lost outcome
    /// or of an unreachable database (database or fetch error text, a
    /// configuration problem) is never sent to the caller: the answer names
    /// an id that the log line carries beside the text.
    fn error(error: &ApiError) -> Self {
        let (shown, log) = match error.code {
            ErrorCode::Internal | ErrorCode::OutcomeUnknown | ErrorCode::Unavailable => {
                let id = incident_id();
                let generic = match error.code {
                    ErrorCode::Internal => format!("internal error (id {id})"),
                    ErrorCode::Unavailable => format!(
                        "mqlite: the database is unavailable; nothing was applied, retry \
                         later (id {id})"
                    ),
                    _ => format!(
                        "mqlite: commit outcome unknown: the write may or may not have \
                         applied (id {id})"
                    ),
                };
                let line = format!("{} (id {id}): {}", error.code.as_str(), error.message);
                (ApiError::new(error.code, generic), Some(line))
            }
            _ => (error.clone(), None),
        };
        let mut response = Response {
            code: Some(error.code),
            log,
            ..Self::json(shown.status(), shown.body())
        };
        if let Some(ms) = error.retry_after_ms {
            // Whole seconds, rounded up, never 0: "now" would invite a storm.
            let seconds = (ms.max(1) + 999) / 1000;
            response
                .headers
                .push(("Retry-After".into(), seconds.to_string()));
        }
        response
    }

    /// The line to log for this answer, when it hides what happened.
    pub fn log_line(&self) -> Option<&str> {
        self.log.as_deref()
    }

    /// The queues to notify after this answer (committed changes only).
    pub fn wake_hints(&self) -> &[WakeHint] {
        &self.wake
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The path and query of a URL as the runtime serialized it (WHATWG: the
/// first `/` after the host begins the path; `?` and `#` inside path and
/// query are percent-encoded), without a URL parser: the Worker's module
/// carries none (docs/bench.md, "Module size").
pub fn path_and_query(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[after_scheme..];
    let Some(start) = rest.find('/') else {
        return "/";
    };
    let path_and_query = &rest[start..];
    path_and_query
        .split_once('#')
        .map_or(path_and_query, |(before, _)| before)
}

/// An id that ties a generic error answer to its log line: random, or an
/// isolate-wide sequence number when the random source fails.
fn incident_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    crate::engine::random_hex(8)
        .unwrap_or_else(|_| format!("seq{:013x}", NEXT.fetch_add(1, Ordering::Relaxed)))
}

/// A request body that is read only once the checks before it passed, and
/// never past `cap` bytes.
pub trait Body {
    fn read(self, cap: usize) -> impl Future<Output = Result<Vec<u8>, ApiError>>;
}

impl Body for Vec<u8> {
    async fn read(self, cap: usize) -> Result<Vec<u8>, ApiError> {
        if self.len() > cap {
            Err(body_too_large(cap))
        } else {
            Ok(self)
        }
    }
}

pub fn body_too_large(cap: usize) -> ApiError {
    ApiError::new(
        ErrorCode::MessageTooLarge,
        format!("request body over {cap} bytes"),
    )
}

/// What outlives a request inside one isolate: when it started, the
/// compiled topic filters it has seen, its counters, whether the database
/// is taking writes, and which managed keys it has seen valid or refused.
pub struct Isolate {
    pub started_at_ms: i64,
    pub topics: Arc<TopicCache>,
    pub registry: Arc<Registry>,
    /// The catalog database's write breaker (the first database listed).
    pub write_health: Arc<WriteHealth>,
    /// The write breakers of the other databases, in configuration order:
    /// a stalled database pauses only its own writes.
    other_health: std::sync::Mutex<Vec<Arc<WriteHealth>>>,
    /// Where the names this isolate has seen live (docs/databases.md).
    pub placements: Arc<Placements>,
    pub keys: KnownKeys,
    /// The deployment's configuration, read on the isolate's first request:
    /// vars and secrets do not change during an isolate's life.
    config: OnceLock<Result<Config, String>>,
}

impl Isolate {
    pub fn new(started_at_ms: i64) -> Self {
        let routes: Vec<&str> = ROUTES.iter().map(|r| r.path).collect();
        Isolate {
            started_at_ms,
            topics: Arc::default(),
            registry: Arc::new(Registry::new(&routes, started_at_ms)),
            write_health: Arc::new(WriteHealth::new(
                Policy::default(),
                Arc::new(|| Clock::Database.wall_ms()),
            )),
            other_health: Default::default(),
            placements: Arc::default(),
            keys: KnownKeys::default(),
            config: OnceLock::new(),
        }
    }

    /// The write breaker of the `index`-th database (0: the catalog), made
    /// on first use with the catalog's policy and clock.
    pub fn write_health_of(&self, index: usize) -> Arc<WriteHealth> {
        let Some(other) = index.checked_sub(1) else {
            return self.write_health.clone();
        };
        let Ok(mut others) = self.other_health.lock() else {
            return self.write_health.clone();
        };
        while others.len() <= other {
            others.push(Arc::new(self.write_health.fresh()));
        }
        others[other].clone()
    }

    /// Whether any database's writes are paused.
    pub fn writes_paused(&self) -> bool {
        let paused = |h: &WriteHealth| h.state() == crate::store::WriteState::Paused;
        paused(&self.write_health)
            || self
                .other_health
                .lock()
                .is_ok_and(|others| others.iter().any(|h| paused(h)))
    }

    /// The configuration, parsed through `var` the first time only.
    pub fn config(&self, var: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        self.config.get_or_init(|| Config::from_vars(var)).clone()
    }

    /// Replaces the write breaker (tests pick the policy and the clock).
    pub fn with_write_health(mut self, health: WriteHealth) -> Self {
        self.write_health = Arc::new(health);
        self
    }
}

/// The broker for one request: configuration plus an engine over each
/// database's transport.
pub struct Service<T> {
    setup: Result<(Config, Databases<T>), String>,
    isolate: Arc<Isolate>,
    /// What the engine did for the request being served, recorded into the
    /// isolate's counters when it finishes.
    effects: Arc<Effects>,
}

impl<T: Transport> Service<T> {
    /// A broker over one database. A configuration error (including a
    /// missing database) is kept and answered as 500 on every RPC, never by
    /// serving with a weaker configuration.
    pub fn new(setup: Result<(Config, T), String>, clock: Clock, isolate: Arc<Isolate>) -> Self {
        Self::over(setup.map(|(config, t)| (config, vec![t])), clock, isolate)
    }

    /// A broker over `transports`, one per configured database in
    /// configuration order (docs/databases.md).
    pub fn over(
        setup: Result<(Config, Vec<T>), String>,
        clock: Clock,
        isolate: Arc<Isolate>,
    ) -> Self {
        let effects = Arc::new(Effects::default());
        let setup = setup.and_then(|(config, transports)| {
            if transports.len() != config.databases.len() {
                return Err(format!(
                    "{} database transports for {} configured databases",
                    transports.len(),
                    config.databases.len()
                ));
            }
            let engines = transports
                .into_iter()
                .enumerate()
                .map(|(index, transport)| {
                    Engine::new(transport, clock.clone(), config.limits.clone())
                        .with_topics(isolate.topics.clone())
                        .with_effects(effects.clone())
                        .with_write_health(isolate.write_health_of(index))
                })
                .collect();
            let names = config.databases.iter().map(|d| d.name.clone()).collect();
            let databases = Databases::new(names, engines, isolate.placements.clone());
            Ok((config, databases))
        });
        Service {
            setup,
            isolate,
            effects,
        }
    }

    /// The catalog database's engine, when the configuration is valid.
    pub fn engine(&self) -> Option<&Engine<T>> {
        self.setup.as_ref().ok().map(|(_, dbs)| dbs.catalog())
    }

    pub async fn handle(
        &self,
        request: &Request,
        body: impl Body,
        waiter: &impl Waiter,
    ) -> Response {
        // The Worker shell keeps the query string; only the pgmq dialect
        // reads it (Connect-JSON routes ignore it).
        let (path, query) = request
            .path
            .split_once('?')
            .unwrap_or((request.path.as_str(), ""));
        if pgmq::serves(path) {
            let mut response = self.pgmq(request, path, query, body, waiter).await;
            self.drain_effects(&mut response);
            return response;
        }
        let cors = self.setup.as_ref().ok().and_then(|(c, _)| c.cors.clone());
        let mut response = if request.method == "OPTIONS" && cors.is_some() {
            preflight()
        } else {
            self.route(request, body, waiter).await
        };
        self.drain_effects(&mut response);
        if let Some(origin) = cors {
            allow_origin(&mut response, origin);
        }
        response
    }

    /// Records the request's journal in the isolate's counters and hands
    /// its wake hints to the platform with the answer.
    fn drain_effects(&self, response: &mut Response) {
        let effects = self.effects.take();
        response.wake = wake_hints(&effects);
        self.isolate.registry.record_effects(effects);
    }

    async fn route(&self, request: &Request, body: impl Body, waiter: &impl Waiter) -> Response {
        let path = request.path.split('?').next().unwrap_or_default();
        // The contract's documents need neither configuration nor database.
        let revalidating = request.header_values("If-None-Match").next();
        if let Some(response) = docs::serve(&request.method, path, revalidating) {
            return response;
        }
        let (config, databases) = match &self.setup {
            Ok((config, databases)) => (config, databases),
            Err(_) if path == "/healthz" => return healthz(),
            // The answer does not describe the configuration to whoever
            // asks: the log line does.
            Err(message) => {
                return Response::error(&ApiError::new(
                    ErrorCode::Internal,
                    format!("invalid configuration: {message}"),
                ))
            }
        };
        match path {
            "/" => {
                return Response::json(
                    200,
                    card::discovery_card(config.auth_enabled(), config.metrics, config.ui),
                )
            }
            "/healthz" => return healthz(),
            // Open paths (docs/http-api.md, "Check order"): exactly `/ui` and what lies under `/ui/`.
            _ if console::owns(path) => return console::serve(config.ui, request, path),
            _ => {}
        }
        let target = match path {
            METRICS_PATH if config.metrics => Some(Target::Metrics),
            _ => routes::find(path).map(Target::Rpc),
        };
        let registry = &self.isolate.registry;
        // Managed keys are looked up in the catalog (docs/databases.md).
        let engine = databases.catalog();
        let principal = match auth::authenticate(
            &config.auth,
            &config.monitor_tokens,
            request.header_values("Authorization"),
        ) {
            Ok(p) => p,
            Err(e) => {
                let missing = request.header_values("Authorization").next().is_none();
                registry.record_auth(if missing {
                    AuthOutcome::Missing
                } else {
                    AuthOutcome::Invalid
                });
                let response = Response::error(&e);
                self.record(target, &response, waiter);
                return response;
            }
        };
        let Some(target) = target else {
            // A managed key must be valid before a 404 may answer it.
            if let Some(key) = principal.key_check(Permissions::SEND) {
                if let Err(refused) = self.screen(engine, &key, false, false).await {
                    let (e, outcome) = refused.into_api();
                    registry.record_auth(outcome);
                    return Response::error(&e);
                }
            }
            return Response::error(&ApiError::no_such_path(path));
        };
        let (key, looked_up) = match principal.access(target.permission()) {
            Access::Granted => (None, false),
            Access::Denied => {
                registry.record_auth(AuthOutcome::PermissionDenied);
                let response = Response::error(&ApiError::permission_denied());
                self.record(Some(target), &response, waiter);
                return response;
            }
            Access::AuthDisabled => {
                let response = Response::error(&ApiError::new(
                    ErrorCode::PermissionDenied,
                    "key management requires authentication to be enabled",
                ));
                self.record(Some(target), &response, waiter);
                return response;
            }
            Access::AskDatabase => {
                let Some(key) = principal.key_check(target.permission().key_bits()) else {
                    return Response::error(&ApiError::unauthenticated());
                };
                // TestFilter never reaches the database, so no transaction
                // of its own would check the key: look it up every time.
                let always = matches!(target, Target::Rpc(r) if !rpc::reaches_database(r.rpc));
                match self.screen(engine, &key, true, always).await {
                    Ok(looked_up) => (Some(Arc::new(key)), looked_up),
                    Err(refused) => {
                        let (e, outcome) = refused.into_api();
                        registry.record_auth(outcome);
                        let response = Response::error(&e);
                        self.record(Some(target), &response, waiter);
                        return response;
                    }
                }
            }
        };
        let response = match &key {
            Some(key) => {
                let databases = databases.for_key(key.clone());
                self.serve(
                    config, &databases, target, &principal, request, body, waiter,
                )
                .await
            }
            None => {
                self.serve(config, databases, target, &principal, request, body, waiter)
                    .await
            }
        };
        // Every program of the request checked the key, or the key was
        // looked up for this request; otherwise (nothing ran, or the check
        // inside the transaction refused) only the key store can say
        // whether the answer stands.
        let refused = response.code == Some(ErrorCode::Unauthenticated);
        let (response, outcome) = match key {
            Some(key) if !key.is_verified() && (!looked_up || refused) => {
                match admit(engine, &self.isolate.keys, &key, true).await {
                    Ok(()) if refused && databases.all().len() > 1 => {
                        let message = heal_key(databases, &key).await;
                        let e = ApiError::new(ErrorCode::Unavailable, message);
                        (Response::error(&e), AuthOutcome::Success)
                    }
                    Ok(()) => (response, AuthOutcome::Success),
                    Err(refused) => {
                        let (e, outcome) = refused.into_api();
                        (Response::error(&e), outcome)
                    }
                }
            }
            _ => (response, AuthOutcome::Success),
        };
        if config.auth_enabled() {
            registry.record_auth(outcome);
        }
        self.record(Some(target), &response, waiter);
        response
    }

    /// Decides a managed key before the request's body is read or any
    /// transaction begins: a key remembered as refused is 401 at no cost; a
    /// key known valid and holding what the route needs passes at no cost
    /// (unless `always`), its request's own transaction checking it again;
    /// any other key is looked up now. Says whether it was looked up.
    async fn screen(
        &self,
        engine: &Engine<T>,
        key: &KeyCheck,
        check_permission: bool,
        always: bool,
    ) -> Result<bool, NotAdmitted> {
        match self.isolate.keys.get(key.digest()) {
            Known::Refused(outcome) => {
                return Err(NotAdmitted::Refused(ApiError::unauthenticated(), outcome))
            }
            Known::Valid(held)
                if !always && (!check_permission || held.includes(key.required())) =>
            {
                return Ok(false)
            }
            Known::Valid(_) | Known::Unseen => {}
        }
        admit(engine, &self.isolate.keys, key, check_permission).await?;
        Ok(true)
    }

    /// Counts a finished request against its route (registered RPCs only).
    fn record(&self, target: Option<Target>, response: &Response, waiter: &impl Waiter) {
        if let Some(Target::Rpc(route)) = target {
            let code = response.code.map_or("ok", ErrorCode::as_str);
            let seconds = waiter.elapsed_ms() as f64 / 1000.0;
            self.isolate
                .registry
                .record_request(route.path, code, seconds);
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn serve(
        &self,
        config: &Config,
        databases: &Databases<T>,
        target: Target,
        principal: &Principal,
        request: &Request,
        body: impl Body,
        waiter: &impl Waiter,
    ) -> Response {
        let context = rpc::Context {
            config,
            isolate: &self.isolate,
            effects: &self.effects,
            principal,
            waiter,
        };
        let route = match target {
            Target::Metrics => return metrics(databases, &context).await,
            Target::Rpc(route) => route,
        };
        if request.method != "POST" {
            return Response::error(&ApiError::new(ErrorCode::Unimplemented, "POST required"));
        }
        let body = if rpc::reads_body(route.rpc) {
            match body.read(config.max_request_bytes).await {
                Ok(bytes) => bytes,
                Err(e) => return Response::error(&e),
            }
        } else {
            Vec::new()
        };
        let mut response = match rpc::call(databases, route.rpc, body, &context).await {
            Ok(json) => Response::json(200, json),
            Err(e) => Response::error(&e),
        };
        // docs/http-api.md#transport: secrets and live observations are never cached.
        if matches!(
            route.rpc,
            Rpc::Observe | Rpc::CreateKey | Rpc::ListKeys | Rpc::RevokeKey
        ) {
            response
                .headers
                .push(("Cache-Control".into(), "no-store".into()));
        }
        response
    }
}

/// `GET /metrics` (docs/http-api.md#metrics): the Observe observation as Prometheus text.
async fn metrics<T: Transport, W: Waiter>(
    databases: &Databases<T>,
    context: &rpc::Context<'_, W>,
) -> Response {
    match rpc::observe(databases, context).await {
        Ok(observation) => Response::new(
            200,
            vec![
                ("Content-Type".into(), prometheus::CONTENT_TYPE.into()),
                ("Cache-Control".into(), "no-store".into()),
            ],
            prometheus::render(&observation).into_bytes(),
        ),
        Err(e) => Response::error(&e),
    }
}

/// What an authenticated path addresses.
#[derive(Debug, Clone, Copy)]
enum Target {
    Rpc(&'static Route),
    Metrics,
}

impl Target {
    fn permission(self) -> Permission {
        match self {
            Target::Rpc(route) => route.permission,
            Target::Metrics => Permission::Observe,
        }
    }
}

/// Served only when `MQLITE_METRICS=on`; otherwise an unknown path.
const METRICS_PATH: &str = "/metrics";

/// The routes besides the RPC catalogue, as (method, path): the card and the
/// liveness probe (which answer any method), `/metrics`, the contract's
/// documents and the console. `/openapi.json` must describe exactly these plus [`ROUTES`]
/// (`tests/openapi_drift.rs`).
pub const FIXED_ROUTES: &[(&str, &str)] = &[
    ("GET", "/"),
    ("GET", "/healthz"),
    ("GET", METRICS_PATH),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/redoc"),
    ("GET", "/ui"),
    ("GET", "/ui/"),
];

/// Asks the key store about a managed key (one read) and remembers the
/// answer: 401 unless it is live; with `check_permission`, 403 unless it
/// holds what its route requires. A storage failure is a server error,
/// never a pass.
async fn admit<T: Transport>(
    engine: &Engine<T>,
    known: &KnownKeys,
    key: &KeyCheck,
    check_permission: bool,
) -> Result<(), NotAdmitted> {
    let state = engine
        .key_state(key)
        .await
        .map_err(NotAdmitted::Unanswered)?;
    known.learn(*key.digest(), state);
    let refused = |outcome| Err(NotAdmitted::Refused(ApiError::unauthenticated(), outcome));
    match state {
        KeyState::Valid(held) if !check_permission || held.includes(key.required()) => Ok(()),
        KeyState::Valid(_) => Err(NotAdmitted::Refused(
            ApiError::permission_denied(),
            AuthOutcome::PermissionDenied,
        )),
        KeyState::Unknown => refused(AuthOutcome::Invalid),
        KeyState::Revoked => refused(AuthOutcome::Revoked),
        KeyState::Expired => refused(AuthOutcome::Expired),
    }
}

/// Why a managed key was not let through: the key store refused it (401,
/// or 403 for a missing permission), or it could not answer. The second
/// keeps the engine's error so each dialect answers it from its own error
/// table, as it answers any other call the database failed: a server
/// error, never a pass and never a 401.
enum NotAdmitted {
    Refused(ApiError, AuthOutcome),
    Unanswered(EngineError),
}

impl NotAdmitted {
    /// The Connect dialect's error, and how the attempt is counted.
    fn into_api(self) -> (ApiError, AuthOutcome) {
        match self {
            NotAdmitted::Refused(e, outcome) => (e, outcome),
            NotAdmitted::Unanswered(e) => (ApiError::from(e), AuthOutcome::BackendError),
        }
    }
}

/// After a database refused a managed key the catalog holds valid: that
/// database lacked its copy (it was added after the key was minted), which
/// is made now. Nothing ran, so the request answers `503` with these words,
/// and its retry passes (docs/databases.md).
async fn heal_key<T: Transport>(databases: &Databases<T>, key: &KeyCheck) -> String {
    match databases.copy_key_everywhere(key).await {
        Ok(()) => "a database had no copy of this key yet; it has one now: retry".to_owned(),
        Err(e) => format!("a database has no copy of this key, and copying it failed: {e:?}"),
    }
}

/// The CORS answer for an allowed origin, on both dialects: the origin,
/// and `Vary: Origin` unless every origin is allowed.
fn allow_origin(response: &mut Response, origin: String) {
    if origin != "*" {
        response.headers.push(("Vary".into(), "Origin".into()));
    }
    response
        .headers
        .push(("Access-Control-Allow-Origin".into(), origin));
}

fn healthz() -> Response {
    Response::new(
        200,
        vec![("Content-Type".into(), "text/plain; charset=utf-8".into())],
        b"ok".to_vec(),
    )
}

fn preflight() -> Response {
    Response::new(
        204,
        vec![
            (
                "Access-Control-Allow-Methods".into(),
                "GET, POST, OPTIONS".into(),
            ),
            (
                "Access-Control-Allow-Headers".into(),
                "Authorization, Content-Type".into(),
            ),
            ("Access-Control-Max-Age".into(), "86400".into()),
        ],
        Vec::new(),
    )
}

#[cfg(test)]
mod tests {
    use super::{path_and_query, Body};

    #[test]
    fn a_body_of_exactly_the_cap_is_read_and_one_byte_more_is_refused() {
        let read = |len: usize, cap: usize| pollster::block_on(vec![7u8; len].read(cap));
        assert_eq!(read(3, 3).map(|b| b.len()), Ok(3));
        let refused = read(4, 3).expect_err("over the cap");
        assert_eq!(refused.code, crate::wire::ErrorCode::MessageTooLarge);
    }

    #[test]
    fn the_path_and_query_are_cut_from_a_serialized_url() {
        let cases = [
            (
                "https://q.example/mqlite.v1.QueueService/Send",
                "/mqlite.v1.QueueService/Send",
            ),
            (
                "http://127.0.0.1:8787/v1/queues/q/messages?unlogged=true",
                "/v1/queues/q/messages?unlogged=true",
            ),
            ("https://q.example/ui/#queues", "/ui/"),
            ("https://q.example/a%3Fb?x=%23y#frag", "/a%3Fb?x=%23y"),
            ("https://user:pw@q.example:443/p?", "/p?"),
            ("https://q.example", "/"),
            ("http://h.io/p", "/p"),
            (
                "https://queue-waker/wait?since=5&ms=100",
                "/wait?since=5&ms=100",
            ),
        ];
        for (url, expected) in cases {
            assert_eq!(path_and_query(url), expected, "{url}");
        }
    }
}
