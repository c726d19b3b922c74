//! Deployment configuration from Worker vars and secrets (wire §11).

use crate::engine::Limits;

/// Request body cap (wire §8).
const DEFAULT_MAX_REQUEST_BYTES: usize = 33_554_432;

/// Who may call RPCs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthMode {
    /// `MQLITE_TOKENS=off`: every RPC is open.
    Off,
    /// Bearer tokens required. Zero configured administrators (unset
    /// `MQLITE_TOKENS`) fails closed: nothing authenticates.
    On { admin_tokens: Vec<String> },
}

/// Everything a request needs to know about the deployment.
#[derive(Debug, Clone)]
pub struct Config {
    pub auth: AuthMode,
    /// `Access-Control-Allow-Origin` value; `None` when CORS is off.
    pub cors: Option<String>,
    pub max_request_bytes: usize,
    pub limits: Limits,
}

impl Config {
    /// Reads the configuration through `var` (a Worker env lookup, or a map
    /// in tests). A configuration the reference would refuse to start with
    /// is an error, answered as 500 on every RPC.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let auth = match var("MQLITE_TOKENS") {
            None => AuthMode::On {
                admin_tokens: Vec::new(),
            },
            Some(raw) if raw.trim().is_empty() => AuthMode::On {
                admin_tokens: Vec::new(),
            },
            Some(raw) if raw.trim().eq_ignore_ascii_case("off") => AuthMode::Off,
            Some(raw) => {
                let tokens: Vec<String> = raw
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned)
                    .collect();
                if tokens.is_empty() {
                    return Err("MQLITE_TOKENS lists no usable token".into());
                }
                AuthMode::On {
                    admin_tokens: tokens,
                }
            }
        };
        let cors_default = match auth {
            AuthMode::Off => None,
            AuthMode::On { .. } => Some("*".to_owned()),
        };
        let cors = match var("MQLITE_CORS").map(|v| v.trim().to_owned()) {
            Some(v) if v.eq_ignore_ascii_case("off") => None,
            Some(v) if !v.is_empty() => Some(v),
            _ => cors_default,
        };
        let defaults = Limits::default();
        let positive = |name: &str, default: usize| {
            var(name)
                .and_then(|v| v.trim().parse::<usize>().ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        Ok(Config {
            auth,
            cors,
            max_request_bytes: positive("MQLITE_MAX_REQUEST_BYTES", DEFAULT_MAX_REQUEST_BYTES),
            limits: Limits {
                max_message_bytes: positive("MQLITE_MAX_MESSAGE_BYTES", defaults.max_message_bytes),
                response_budget_bytes: positive(
                    "MQLITE_RESPONSE_BUDGET_BYTES",
                    defaults.response_budget_bytes as usize,
                ) as i64,
                poll_max_requests: positive(
                    "MQLITE_POLL_MAX_REQUESTS",
                    defaults.poll_max_requests as usize,
                ) as u32,
            },
        })
    }

    pub fn auth_enabled(&self) -> bool {
        self.auth != AuthMode::Off
    }
}
