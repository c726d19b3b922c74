//! HTTP routing, authentication, caps and error responses, on plain request
//! and response types so the whole pipeline runs natively in tests. The
//! Worker shell only converts `worker::Request`/`Response` to these.
//!
//! Check order (wire §1.2): CORS preflight → open paths → authentication →
//! route lookup → permission → method → body cap → strict decoding → handler.

mod auth;
mod card;
mod config;
mod routes;
mod rpc;

pub use auth::{Access, Permission, Principal};
pub use config::{masked_location, AuthMode, Config};
pub use routes::{Route, Rpc, ROUTES};

use std::future::Future;
use std::sync::Arc;

use crate::engine::{Clock, Engine, KeyCheck, KeyState, Permissions, TopicCache, Waiter};
use crate::store::Transport;
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
}

impl Response {
    fn json(status: u16, body: String) -> Self {
        Response {
            status,
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: body.into_bytes(),
        }
    }

    fn error(error: &ApiError) -> Self {
        Self::json(error.status(), error.body())
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
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

/// What outlives a request inside one isolate: when it started and the
/// compiled topic filters it has seen.
pub struct Isolate {
    pub started_at_ms: i64,
    pub topics: Arc<TopicCache>,
}

impl Isolate {
    pub fn new(started_at_ms: i64) -> Self {
        Isolate {
            started_at_ms,
            topics: Arc::default(),
        }
    }
}

/// The broker for one request: configuration plus an engine over a
/// database transport.
pub struct Service<T> {
    setup: Result<(Config, Engine<T>), String>,
    isolate: Arc<Isolate>,
}

impl<T: Transport> Service<T> {
    /// A configuration error (including a missing database) is kept and
    /// answered as 500 on every RPC, never by serving with a weaker
    /// configuration.
    pub fn new(setup: Result<(Config, T), String>, clock: Clock, isolate: Arc<Isolate>) -> Self {
        let setup = setup.map(|(config, transport)| {
            let engine = Engine::new(transport, clock, config.limits.clone())
                .with_topics(isolate.topics.clone());
            (config, engine)
        });
        Service { setup, isolate }
    }

    /// The engine, when the configuration is valid.
    pub fn engine(&self) -> Option<&Engine<T>> {
        self.setup.as_ref().ok().map(|(_, engine)| engine)
    }

    pub async fn handle(
        &self,
        request: &Request,
        body: impl Body,
        waiter: &impl Waiter,
    ) -> Response {
        let cors = self.setup.as_ref().ok().and_then(|(c, _)| c.cors.clone());
        let mut response = if request.method == "OPTIONS" && cors.is_some() {
            preflight()
        } else {
            self.route(request, body, waiter).await
        };
        if let Some(origin) = cors {
            if origin != "*" {
                response.headers.push(("Vary".into(), "Origin".into()));
            }
            response
                .headers
                .push(("Access-Control-Allow-Origin".into(), origin));
        }
        response
    }

    async fn route(&self, request: &Request, body: impl Body, waiter: &impl Waiter) -> Response {
        let path = request.path.as_str();
        let (config, engine) = match &self.setup {
            Ok((config, engine)) => (config, engine),
            Err(_) if path == "/healthz" => return healthz(),
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
                    card::discovery_card(config.auth_enabled(), config.metrics),
                )
            }
            "/healthz" => return healthz(),
            // The console is not bundled: its open paths answer 404.
            "/ui" => return Response::error(&ApiError::no_such_path(path)),
            _ if path.starts_with("/ui/") => return Response::error(&ApiError::no_such_path(path)),
            _ => {}
        }
        let principal = match auth::authenticate(
            &config.auth,
            &config.monitor_tokens,
            request.header_values("Authorization"),
        ) {
            Ok(p) => p,
            Err(e) => return Response::error(&e),
        };
        let Some(route) = routes::find(path) else {
            // A managed key must be valid before a 404 may answer it.
            if let Some(key) = principal.key_check(Permissions::SEND) {
                if let Err(e) = admit(engine, &key, false).await {
                    return Response::error(&e);
                }
            }
            return Response::error(&ApiError::no_such_path(path));
        };
        let key = match principal.access(route.permission) {
            Access::Granted => None,
            Access::Denied => return Response::error(&ApiError::permission_denied()),
            Access::AuthDisabled => {
                return Response::error(&ApiError::new(
                    ErrorCode::PermissionDenied,
                    "key management requires authentication to be enabled",
                ))
            }
            Access::AskDatabase => principal
                .key_check(route.permission.key_bits())
                .map(Arc::new),
        };
        let response = self
            .serve(
                config,
                engine,
                route,
                &principal,
                key.as_ref(),
                request,
                body,
                waiter,
            )
            .await;
        match key {
            // Every program of the request checked the key; or none ran,
            // and only the key store can say whether the answer stands.
            Some(key) if !key.is_verified() => match admit(engine, &key, true).await {
                Ok(()) => response,
                Err(e) => Response::error(&e),
            },
            _ => response,
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn serve(
        &self,
        config: &Config,
        engine: &Engine<T>,
        route: &Route,
        principal: &Principal,
        key: Option<&Arc<KeyCheck>>,
        request: &Request,
        body: impl Body,
        waiter: &impl Waiter,
    ) -> Response {
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
        let context = rpc::Context {
            config,
            isolate: &self.isolate,
            principal,
            waiter,
        };
        let result = match key {
            Some(key) => rpc::call(&engine.for_key(key.clone()), route.rpc, &body, &context).await,
            None => rpc::call(engine, route.rpc, &body, &context).await,
        };
        match result {
            Ok(json) => Response::json(200, json),
            Err(e) => Response::error(&e),
        }
    }
}

/// Asks the key store about a managed key: 401 unless it is live; with
/// `check_permission`, 403 unless it holds what its route requires. A
/// storage failure is a server error, never a pass.
async fn admit<T: Transport>(
    engine: &Engine<T>,
    key: &KeyCheck,
    check_permission: bool,
) -> Result<(), ApiError> {
    match engine.key_state(key).await? {
        KeyState::Valid(held) if !check_permission || held.includes(key.required()) => Ok(()),
        KeyState::Valid(_) => Err(ApiError::permission_denied()),
        KeyState::Unknown | KeyState::Revoked | KeyState::Expired => {
            Err(ApiError::unauthenticated())
        }
    }
}

fn healthz() -> Response {
    Response {
        status: 200,
        headers: vec![("Content-Type".into(), "text/plain; charset=utf-8".into())],
        body: b"ok".to_vec(),
    }
}

fn preflight() -> Response {
    Response {
        status: 204,
        headers: vec![
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
        body: Vec::new(),
    }
}
