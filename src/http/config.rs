//! Deployment configuration from Worker vars and secrets (docs/http-api.md#configuration).

use crate::engine::{Limits, Retention};

/// Request body cap (docs/http-api.md#limits).
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
    /// Broker-wide DLQ retention applied by the cron sweep.
    pub retention: Retention,
    /// Read-only credentials for Observe and `/metrics` (never stored).
    pub monitor_tokens: Vec<String>,
    /// `MQLITE_METRICS=on`: serve `/metrics`.
    pub metrics: bool,
    /// The admin console at `/ui` (docs/http-api.md): on unless `MQLITE_UI` is
    /// `off`, `false`, `0` or `no`.
    pub ui: bool,
    /// The catalog database's URL as Status may show it (docs/http-api.md#rpcs).
    pub location: String,
    /// The databases, the catalog first (`MQLITE_DATABASES`, or `MQLITE_DB`
    /// alone; docs/databases.md).
    pub databases: Vec<super::databases::DatabaseSpec>,
    /// The pgmq dialect's keys, CORS origins and caps.
    pub pgmq: PgmqSettings,
}

/// `PGMQ_API_*` settings (docs/pgmq.md, "Credentials" and "Caps").
#[derive(Debug, Clone, Default)]
pub struct PgmqSettings {
    /// `PGMQ_API_KEY` (named `default`) and `PGMQ_API_KEYS=name:secret,…`:
    /// administrator credentials of the pgmq routes; the name is what logs
    /// may show, never the secret.
    pub keys: Vec<(String, String)>,
    /// `PGMQ_API_CORS_ORIGINS`: allowed origins; `None` follows `MQLITE_CORS`.
    pub cors_origins: Option<Vec<String>>,
    pub caps: crate::wire::pgmq::Caps,
}

impl PgmqSettings {
    fn from_vars(var: &impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let mut keys = Vec::new();
        if let Some(key) = var("PGMQ_API_KEY").map(|k| k.trim().to_owned()) {
            if !key.is_empty() {
                keys.push(("default".to_owned(), key));
            }
        }
        for entry in var("PGMQ_API_KEYS")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            match entry.split_once(':') {
                Some((name, secret)) if !name.trim().is_empty() && !secret.trim().is_empty() => {
                    keys.push((name.trim().to_owned(), secret.trim().to_owned()))
                }
                _ => return Err("PGMQ_API_KEYS entries must be name:secret".into()),
            }
        }
        let cors_origins = var("PGMQ_API_CORS_ORIGINS").map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|o| !o.is_empty())
                .map(str::to_owned)
                .collect()
        });
        let defaults = crate::wire::pgmq::Caps::default();
        let cap = |name: &str, default: i64| {
            var(name)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        Ok(PgmqSettings {
            keys,
            cors_origins,
            caps: crate::wire::pgmq::Caps {
                max_qty: cap("PGMQ_API_MAX_QTY", defaults.max_qty),
                max_batch: cap("PGMQ_API_MAX_BATCH", defaults.max_batch as i64) as usize,
                max_poll_seconds: cap("PGMQ_API_MAX_POLL_SECONDS", defaults.max_poll_seconds),
            },
        })
    }
}

impl Config {
    /// Reads the configuration through `var` (a Worker env lookup, or a map
    /// in tests). A configuration the reference would refuse to start with
    /// is an error, answered as 500 on every RPC.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        let auth = admin_tokens(var("MQLITE_TOKENS"))?;
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
        let retention = retention(&var);
        let monitor_tokens = monitor_tokens(&var, &auth)?;
        let metrics = var("MQLITE_METRICS").is_some_and(|v| v.trim().eq_ignore_ascii_case("on"));
        if metrics && auth == AuthMode::Off {
            return Err("MQLITE_METRICS=on requires authentication (MQLITE_TOKENS)".into());
        }
        let ui = !var("MQLITE_UI").is_some_and(|v| {
            ["off", "false", "0", "no"]
                .iter()
                .any(|off| v.trim().eq_ignore_ascii_case(off))
        });
        let pgmq = PgmqSettings::from_vars(&var)?;
        let databases = super::databases::database_specs(&var)?;
        let location = databases
            .first()
            .and_then(|catalog| catalog.url.as_deref())
            .map_or_else(|| "remote".into(), masked_location);
        Ok(Config {
            databases,
            pgmq,
            auth,
            cors,
            retention,
            monitor_tokens,
            metrics,
            ui,
            location,
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

/// Shortest token accepted: 32 characters, 128 bits if drawn at random. A
/// shorter one is a footgun (guessable, or a test value left in place).
pub const MIN_TOKEN_CHARS: usize = 32;

/// `MQLITE_TOKENS` (docs/http-api.md#credentials): unset or blank fails closed, `off` alone
/// disables auth, otherwise a comma-separated list whose blanks are
/// dropped. Refused as a configuration error: `off` beside tokens (was auth
/// meant to be off, or is `off` a token?), a token shorter than
/// [`MIN_TOKEN_CHARS`] or one that no `Authorization` header could carry
/// (whitespace), the same token twice, and a list of nothing but blanks.
fn admin_tokens(raw: Option<String>) -> Result<AuthMode, String> {
    let Some(raw) = raw.filter(|v| !v.trim().is_empty()) else {
        return Ok(AuthMode::On {
            admin_tokens: Vec::new(),
        });
    };
    if raw.trim().eq_ignore_ascii_case("off") {
        return Ok(AuthMode::Off);
    }
    let tokens: Vec<String> = raw
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    if tokens.is_empty() {
        return Err("MQLITE_TOKENS lists no usable token".into());
    }
    if tokens.iter().any(|t| t.eq_ignore_ascii_case("off")) {
        return Err(
            "MQLITE_TOKENS mixes `off` with tokens: set `off` alone, or only tokens".into(),
        );
    }
    check_tokens("MQLITE_TOKENS", &tokens)?;
    Ok(AuthMode::On {
        admin_tokens: tokens,
    })
}

/// Length, carriable characters and uniqueness of a token list.
fn check_tokens(name: &str, tokens: &[String]) -> Result<(), String> {
    for (i, token) in tokens.iter().enumerate() {
        if token.chars().count() < MIN_TOKEN_CHARS {
            return Err(format!(
                "{name}: token {} is shorter than {MIN_TOKEN_CHARS} characters",
                i + 1
            ));
        }
        if token.contains([' ', '\t', '\r', '\n', ',']) {
            return Err(format!("{name}: token {} contains whitespace", i + 1));
        }
        if tokens[..i].contains(token) {
            return Err(format!("{name}: token {} is listed twice", i + 1));
        }
    }
    Ok(())
}

/// `MQLITE_MONITOR_TOKENS` (docs/http-api.md#credentials): each token non-empty, free of
/// spaces, tabs, line breaks and commas, different from every administrator
/// token, and only with authentication on and an administrator configured;
/// like administrator tokens, at least [`MIN_TOKEN_CHARS`] long and each
/// listed once.
fn monitor_tokens(
    var: &impl Fn(&str) -> Option<String>,
    auth: &AuthMode,
) -> Result<Vec<String>, String> {
    let Some(raw) = var("MQLITE_MONITOR_TOKENS").filter(|v| !v.trim().is_empty()) else {
        return Ok(Vec::new());
    };
    let invalid = || "invalid monitoring credential configuration".to_owned();
    let AuthMode::On { admin_tokens } = auth else {
        return Err(invalid());
    };
    if admin_tokens.is_empty() {
        return Err(invalid());
    }
    // Empty, short, spaced and repeated tokens are `check_tokens`' to refuse.
    let mut tokens = Vec::new();
    for token in raw.split(',').map(str::trim) {
        if admin_tokens.iter().any(|a| a == token) {
            return Err(invalid());
        }
        tokens.push(token.to_owned());
    }
    check_tokens("MQLITE_MONITOR_TOKENS", &tokens).map_err(|e| format!("{}: {e}", invalid()))?;
    Ok(tokens)
}

/// A database URL without credentials: scheme, `://***`, and the host
/// minus its first label (`libsql://db-org.turso.io` → `libsql://***.turso.io`);
/// `remote` when it does not parse.
pub fn masked_location(url: &str) -> String {
    let Some((scheme, rest)) = url.trim().split_once("://") else {
        return "remote".into();
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host_port.split(':').next().unwrap_or_default(),
    };
    if scheme.is_empty() || host.is_empty() {
        return "remote".into();
    }
    match host.split_once('.') {
        Some((_, parent)) if !host_port.starts_with('[') => format!("{scheme}://***.{parent}"),
        _ => format!("{scheme}://***"),
    }
}

/// `MQLITE_DLQ_RETENTION=off` disables all three bounds; otherwise each
/// unparseable value keeps its default, as the reference does.
fn retention(var: &impl Fn(&str) -> Option<String>) -> Retention {
    if var("MQLITE_DLQ_RETENTION").is_some_and(|v| v.trim().eq_ignore_ascii_case("off")) {
        return Retention::off();
    }
    let defaults = Retention::default();
    let int = |name: &str, default: i64| {
        var(name)
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|v| *v >= 0)
            .unwrap_or(default)
    };
    Retention {
        max_age_ms: var("MQLITE_DLQ_MAX_AGE")
            .and_then(|v| go_duration_ms(v.trim()))
            .unwrap_or(defaults.max_age_ms),
        max_count: int("MQLITE_DLQ_MAX_COUNT", defaults.max_count),
        max_bytes: int("MQLITE_DLQ_MAX_BYTES", defaults.max_bytes),
    }
}

/// A Go duration (`336h`, `1h30m`, `1.5h`, `250ms`) in whole milliseconds;
/// `None` when it does not parse or is negative.
pub fn go_duration_ms(text: &str) -> Option<i64> {
    if text == "0" {
        return Some(0);
    }
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest.get(..number_len)?.parse().ok()?;
        rest = rest.get(number_len..)?;
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit_ms = match rest.get(..unit_len)? {
            "ns" => 1e-6,
            "us" | "µs" => 1e-3,
            "ms" => 1.0,
            "s" => 1e3,
            "m" => 60e3,
            "h" => 3_600e3,
            _ => return None,
        };
        rest = rest.get(unit_len..)?;
        total += number * unit_ms;
    }
    Some(total as i64)
}

#[cfg(test)]
mod tests {
    use super::{go_duration_ms, AuthMode, Config};

    const A: &str = "admin-token-0123456789abcdef-0123";
    const B: &str = "admin-token-0123456789abcdef-4567";
    const M: &str = "monitor-token-0123456789abcdef-01";

    fn config(vars: &[(&str, &str)]) -> Result<Config, String> {
        Config::from_vars(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn token_footguns_are_configuration_errors() {
        let short = "x".repeat(31);
        let mixed_a = format!("off,{A}");
        let mixed_b = format!("{A}, OFF ");
        let twice = format!("{A},{B},{A}");
        let monitor_twice = format!("{M},{M}");
        let inner_space = format!("{A} x");
        let monitor_inner_space = format!("{M}\tx");
        let monitor_empty_entry = format!("{M},,");
        for (tokens, monitors) in [
            (short.as_str(), ""),
            (mixed_a.as_str(), ""),
            (mixed_b.as_str(), ""),
            (twice.as_str(), ""),
            (inner_space.as_str(), ""),
            (A, short.as_str()),
            (A, monitor_twice.as_str()),
            (A, A),
            (A, monitor_inner_space.as_str()),
            (A, monitor_empty_entry.as_str()),
        ] {
            let result = config(&[
                ("MQLITE_TOKENS", tokens),
                ("MQLITE_MONITOR_TOKENS", monitors),
            ]);
            assert!(result.is_err(), "{tokens:?} / {monitors:?} was accepted");
        }
    }

    #[test]
    fn valid_token_lists_are_accepted() {
        let two = format!(" {A} , ,{B} ");
        let exactly_32 = "y".repeat(32);
        for (tokens, monitors, admins) in [
            (two.as_str(), M, vec![A, B]),
            (exactly_32.as_str(), "", vec![exactly_32.as_str()]),
        ] {
            let parsed = config(&[
                ("MQLITE_TOKENS", tokens),
                ("MQLITE_MONITOR_TOKENS", monitors),
            ]);
            let Ok(parsed) = parsed else {
                panic!("{tokens:?} refused: {parsed:?}")
            };
            assert_eq!(
                parsed.auth,
                AuthMode::On {
                    admin_tokens: admins.iter().map(|t| t.to_string()).collect()
                }
            );
        }
        assert_eq!(
            config(&[("MQLITE_TOKENS", " Off ")]).map(|c| c.auth),
            Ok(AuthMode::Off)
        );
    }

    #[test]
    fn pgmq_key_lists_need_a_name_and_a_secret_in_each_entry() {
        for keys in ["ci:", ":secret", " : ", "ci: ,ops:s", "ci:s,:t", "nocolon"] {
            let result = config(&[("MQLITE_TOKENS", A), ("PGMQ_API_KEYS", keys)]);
            assert!(result.is_err(), "{keys:?} was accepted");
        }
        let parsed = config(&[
            ("MQLITE_TOKENS", A),
            ("PGMQ_API_KEY", " solo "),
            ("PGMQ_API_KEYS", " ci : s1 ,, ops:s:2"),
        ]);
        let Ok(parsed) = parsed else {
            panic!("refused: {parsed:?}")
        };
        let owned = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(n, s)| (n.to_string(), s.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            parsed.pgmq.keys,
            owned(&[("default", "solo"), ("ci", "s1"), ("ops", "s:2")])
        );
    }

    #[test]
    fn zero_empty_and_unreadable_settings_take_their_defaults() {
        let default_qty = crate::wire::pgmq::Caps::default().max_qty;
        for (value, bytes, qty) in [
            ("0", super::DEFAULT_MAX_REQUEST_BYTES, default_qty),
            ("-3", super::DEFAULT_MAX_REQUEST_BYTES, default_qty),
            ("many", super::DEFAULT_MAX_REQUEST_BYTES, default_qty),
            (" 1 ", 1, 1),
            ("7", 7, 7),
        ] {
            let parsed = config(&[
                ("MQLITE_TOKENS", A),
                ("MQLITE_MAX_REQUEST_BYTES", value),
                ("PGMQ_API_MAX_QTY", value),
            ]);
            let Ok(parsed) = parsed else {
                panic!("{value:?} refused: {parsed:?}")
            };
            assert_eq!(
                (parsed.max_request_bytes, parsed.pgmq.caps.max_qty),
                (bytes, qty),
                "{value:?}"
            );
        }
        // An empty CORS setting is no setting: with authentication on, any origin.
        for cors in ["", "  "] {
            let parsed = config(&[("MQLITE_TOKENS", A), ("MQLITE_CORS", cors)]);
            assert_eq!(parsed.map(|c| c.cors), Ok(Some("*".to_owned())), "{cors:?}");
        }
    }

    #[test]
    fn c212_location_is_masked() {
        use super::masked_location;
        assert_eq!(
            masked_location("libsql://db-org.turso.io"),
            "libsql://***.turso.io"
        );
        assert_eq!(
            masked_location("https://user:secret@db-org.aws.turso.io:443/path?authToken=x"),
            "https://***.aws.turso.io"
        );
        assert_eq!(masked_location("http://localhost:8080"), "http://***");
        assert_eq!(masked_location("not a url"), "remote");
        // No scheme or no host: nothing to show.
        for nameless in ["://db-org.turso.io", "libsql://", "https://user@/path"] {
            assert_eq!(masked_location(nameless), "remote", "{nameless}");
        }
        // An IPv6 literal is hidden whole, even one with dots in it.
        assert_eq!(
            masked_location("http://[::ffff:10.0.0.7]:8080"),
            "http://***"
        );
    }

    #[test]
    fn dlq_retention_reads_its_three_bounds_or_turns_off() {
        use super::Retention;
        let retention = |vars: &[(&str, &str)]| {
            let mut all = vec![("MQLITE_TOKENS", A)];
            all.extend_from_slice(vars);
            config(&all).map(|c| c.retention)
        };
        assert_eq!(retention(&[]), Ok(Retention::default()));
        assert_eq!(
            retention(&[("MQLITE_DLQ_RETENTION", " OFF ")]),
            Ok(Retention::off())
        );
        assert_eq!(
            retention(&[
                ("MQLITE_DLQ_MAX_AGE", "90m"),
                ("MQLITE_DLQ_MAX_COUNT", "0"),
                ("MQLITE_DLQ_MAX_BYTES", " 4096 "),
            ]),
            Ok(Retention {
                max_age_ms: 5_400_000,
                max_count: 0,
                max_bytes: 4096,
            })
        );
        // A negative or unreadable bound keeps its default.
        assert_eq!(
            retention(&[
                ("MQLITE_DLQ_MAX_AGE", "-1h"),
                ("MQLITE_DLQ_MAX_COUNT", "-1"),
                ("MQLITE_DLQ_MAX_BYTES", "lots"),
            ]),
            Ok(Retention::default())
        );
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration_ms("336h"), Some(1_209_600_000));
        assert_eq!(go_duration_ms("1h30m"), Some(5_400_000));
        assert_eq!(go_duration_ms("1.5s"), Some(1500));
        assert_eq!(go_duration_ms("250ms"), Some(250));
        assert_eq!(go_duration_ms("2500000ns"), Some(2));
        assert_eq!(go_duration_ms("1500us"), Some(1));
        assert_eq!(go_duration_ms("3000µs"), Some(3));
        assert_eq!(go_duration_ms("2m"), Some(120_000));
        assert_eq!(go_duration_ms("0"), Some(0));
        for bad in ["", "1d", "h", "-1h", "1x"] {
            assert_eq!(go_duration_ms(bad), None, "{bad}");
        }
    }
}
