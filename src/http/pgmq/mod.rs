//! The pgmq dialect over HTTP (docs/pgmq.md): CORS, route lookup (404/405
//! before any credential, as the reference), credentials (§4), then the
//! handler. Every handler is one engine call, so one database round trip
//! (read-poll: bounded re-polling, like Receive).

mod handlers;
pub mod routes;

pub use routes::{Handler, PgmqRoute, PGMQ_ROUTES};

use std::sync::Arc;

use super::auth::{self, Access, Principal};
use super::config::{AuthMode, Config};
use super::{admit, allow_origin, Body, NotAdmitted, Request, Response, Service};
use crate::engine::Waiter;
use crate::store::Transport;
use crate::wire::pgmq::{PgmqCode, PgmqError};
use routes::Lookup;

pub use routes::serves;

impl<T: Transport> Service<T> {
    /// Serves a request whose path [`serves`] claims.
    pub(super) async fn pgmq(
        &self,
        request: &Request,
        path: &str,
        query: &str,
        body: impl Body,
        waiter: &impl Waiter,
    ) -> Response {
        let config = self.setup.as_ref().ok().map(|(c, _)| c);
        let cors = config.and_then(|c| allowed_origin(c, request));
        let mut response = if request.method == "OPTIONS" && cors.is_some() {
            preflight()
        } else {
            self.pgmq_route(request, path, query, body, waiter).await
        };
        if let Some(origin) = cors {
            allow_origin(&mut response, origin);
        }
        response
    }

    async fn pgmq_route(
        &self,
        request: &Request,
        path: &str,
        query: &str,
        body: impl Body,
        waiter: &impl Waiter,
    ) -> Response {
        let (route, params) = match routes::find(&request.method, path) {
            Lookup::Found(route, params) => (route, params),
            Lookup::WrongMethod => return detail(405, "Method Not Allowed"),
            Lookup::NotFound => return detail(404, "Not Found"),
        };
        let (config, databases) = match &self.setup {
            Ok((config, databases)) => (config, databases),
            Err(_) if route.handler == Handler::Health => {
                return handlers::health(true);
            }
            Err(message) => {
                return error(&PgmqError::new(
                    PgmqCode::InternalError,
                    format!("invalid configuration: {message}"),
                ))
            }
        };
        let Some(permission) = route.permission else {
            return handlers::public(route.handler, config, databases).await;
        };
        let principal = match credential(config, request) {
            Ok(principal) => principal,
            Err(refused) => return error(&refused),
        };
        let call = handlers::Call {
            route,
            params: &params,
            query,
            config,
            waiter,
        };
        match principal.access(permission) {
            Access::Granted => call.serve(databases, body).await,
            Access::Denied | Access::AuthDisabled => error(&PgmqError::unauthorized()),
            Access::AskDatabase => {
                let Some(key) = principal.key_check(permission.key_bits()).map(Arc::new) else {
                    return error(&PgmqError::unauthorized());
                };
                // A key this isolate has not seen valid is looked up (one
                // read) before the body is read; one remembered as refused
                // costs nothing (docs/http-api.md, "Credentials").
                // Managed keys are looked up in the catalog (docs/databases.md).
                let catalog = databases.catalog();
                let looked_up = match self.screen(catalog, &key, true, false).await {
                    Ok(looked_up) => looked_up,
                    Err(refused) => return error(&key_refusal(refused)),
                };
                let response = call.serve(&databases.for_key(key.clone()), body).await;
                if key.is_verified() || (looked_up && response.status != 401) {
                    return response;
                }
                // Nothing ran that checked the key, or its check refused:
                // only the key store can say whether the answer stands, and
                // what it says is remembered.
                match admit(catalog, &self.isolate.keys, &key, true).await {
                    Ok(()) if response.status == 401 && databases.all().len() > 1 => {
                        let message = super::heal_key(databases, &key).await;
                        error(&PgmqError::new(PgmqCode::DependencyUnavailable, message))
                    }
                    Ok(()) => response,
                    Err(refused) => error(&key_refusal(refused)),
                }
            }
        }
    }
}

/// The request's credential, judged as pgmq's adapter judges it (§4, its
/// `verify_key`): the `Authorization` credentials when the scheme is
/// `Bearer` (any case) and carries some, else a non-empty `X-API-Key`.
/// A Bearer key decides alone (an `X-API-Key` beside it is never looked
/// at); another scheme, such as a proxy's `Basic`, is passed over. Of a
/// repeated header the first counts. No credential is 401 "Missing API
/// key"; one that matches nothing, "Invalid API key". Administrators are
/// `MQLITE_TOKENS` plus `PGMQ_API_KEY(S)`; managed keys are looked up.
/// A managed key not let through, in pgmq's terms: the reference has no
/// 403, so a missing permission is 401 like a refused key; a key store that
/// could not answer is answered from the error table, as any call the
/// database failed (`503 dependency_unavailable` when it is down).
fn key_refusal(refused: NotAdmitted) -> PgmqError {
    match refused {
        NotAdmitted::Refused(..) => PgmqError::unauthorized(),
        NotAdmitted::Unanswered(e) => PgmqError::from(e),
    }
}

fn credential(config: &Config, request: &Request) -> Result<Principal, PgmqError> {
    let AuthMode::On { admin_tokens } = &config.auth else {
        return Ok(Principal::Anonymous);
    };
    let presented = request
        .header_values("Authorization")
        .next()
        .and_then(bearer_credentials)
        .or_else(|| {
            let key = request.header_values("X-API-Key").next()?.trim();
            (!key.is_empty()).then_some(key)
        })
        .ok_or_else(|| PgmqError::new(PgmqCode::Unauthorized, "Missing API key"))?;
    let admins: Vec<String> = admin_tokens
        .iter()
        .cloned()
        .chain(config.pgmq.keys.iter().map(|(_, secret)| secret.clone()))
        .collect();
    auth::authenticate(
        &AuthMode::On {
            admin_tokens: admins,
        },
        &[],
        std::iter::once(format!("Bearer {presented}").as_str()),
    )
    .map_err(|_| PgmqError::unauthorized())
}

/// FastAPI's `HTTPBearer`: the value split at its first space into scheme
/// and credentials (trimmed); `None` unless both are there and the scheme
/// is `Bearer`.
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, param) = value.split_once(' ').unwrap_or((value, ""));
    let credentials = param.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !credentials.is_empty()).then_some(credentials)
}

/// The `Access-Control-Allow-Origin` value for this request, if any:
/// `PGMQ_API_CORS_ORIGINS` (or the Connect-JSON side's `MQLITE_CORS` when
/// unset); `*` allows every origin, otherwise the request's origin is
/// echoed when listed.
fn allowed_origin(config: &Config, request: &Request) -> Option<String> {
    let listed: Vec<String> = match &config.pgmq.cors_origins {
        Some(list) => list.clone(),
        None => config.cors.iter().cloned().collect(),
    };
    if listed.iter().any(|o| o == "*") {
        return Some("*".into());
    }
    let origin = request.header_values("Origin").next()?;
    listed
        .iter()
        .any(|o| o == origin)
        .then(|| origin.to_owned())
}

fn preflight() -> Response {
    Response::new(
        204,
        vec![
            (
                "Access-Control-Allow-Methods".into(),
                "GET, POST, PUT, DELETE, OPTIONS".into(),
            ),
            (
                "Access-Control-Allow-Headers".into(),
                "Authorization, X-API-Key, Content-Type".into(),
            ),
            ("Access-Control-Max-Age".into(), "86400".into()),
        ],
        Vec::new(),
    )
}

/// FastAPI's answer for an unknown path or method: `{"detail": TEXT}`.
fn detail(status: u16, text: &str) -> Response {
    Response::json(status, serde_json::json!({ "detail": text }).to_string())
}

/// An error answer. Like the Connect-JSON side (docs/http-api.md,
/// "Errors"), a server-side failure never shows database, fetch or
/// configuration text: the answer names an id that the log line carries
/// beside the real text.
fn error(e: &PgmqError) -> Response {
    let PgmqError::App { code, detail } = e else {
        return Response::json(e.status(), e.body());
    };
    let generic = match code {
        PgmqCode::InternalError => "internal error",
        PgmqCode::SendFailed => "the message could not be sent",
        PgmqCode::DependencyUnavailable => "the database is unavailable",
        PgmqCode::OutcomeUnknown => {
            "the database's answer was lost: the write may or may not have applied"
        }
        _ => return Response::json(e.status(), e.body()),
    };
    let id = super::incident_id();
    let shown = PgmqError::new(*code, format!("{generic} (id {id})"));
    Response {
        log: Some(format!("pgmq {} (id {id}): {detail}", code.as_str())),
        ..Response::json(shown.status(), shown.body())
    }
}
