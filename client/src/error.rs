//! What a call can fail with: the broker's error table (docs/http-api.md#errors) as an
//! enum, kept apart from "no answer" (transport) and "an answer we cannot read".

use std::fmt;

/// Every error code of the contract, plus any code this client does not know yet.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorCode {
    InvalidArgument,
    GroupRequired,
    Unauthenticated,
    PermissionDenied,
    NotFound,
    Unimplemented,
    AlreadyExists,
    NameConflict,
    KeyConflict,
    LockLost,
    QueueChanged,
    QueueNotEmpty,
    MessageTooLarge,
    Canceled,
    Internal,
    /// A write whose answer was lost inside the broker: it may or may not have applied.
    OutcomeUnknown,
    /// mqlite-edge: the database did not take the request; nothing applied, retry later.
    Unavailable,
    /// A code this client does not know, or none at all (an empty string: a proxy's page).
    Other(String),
}

impl ErrorCode {
    pub fn parse(code: &str) -> ErrorCode {
        match code {
            "invalid_argument" => ErrorCode::InvalidArgument,
            "group_required" => ErrorCode::GroupRequired,
            "unauthenticated" => ErrorCode::Unauthenticated,
            "permission_denied" => ErrorCode::PermissionDenied,
            "not_found" => ErrorCode::NotFound,
            "unimplemented" => ErrorCode::Unimplemented,
            "already_exists" => ErrorCode::AlreadyExists,
            "name_conflict" => ErrorCode::NameConflict,
            "key_conflict" => ErrorCode::KeyConflict,
            "lock_lost" => ErrorCode::LockLost,
            "queue_changed" => ErrorCode::QueueChanged,
            "queue_not_empty" => ErrorCode::QueueNotEmpty,
            "message_too_large" => ErrorCode::MessageTooLarge,
            "canceled" => ErrorCode::Canceled,
            "internal" => ErrorCode::Internal,
            "outcome_unknown" => ErrorCode::OutcomeUnknown,
            "unavailable" => ErrorCode::Unavailable,
            other => ErrorCode::Other(other.to_owned()),
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::InvalidArgument => "invalid_argument",
            ErrorCode::GroupRequired => "group_required",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Unimplemented => "unimplemented",
            ErrorCode::AlreadyExists => "already_exists",
            ErrorCode::NameConflict => "name_conflict",
            ErrorCode::KeyConflict => "key_conflict",
            ErrorCode::LockLost => "lock_lost",
            ErrorCode::QueueChanged => "queue_changed",
            ErrorCode::QueueNotEmpty => "queue_not_empty",
            ErrorCode::MessageTooLarge => "message_too_large",
            ErrorCode::Canceled => "canceled",
            ErrorCode::Internal => "internal",
            ErrorCode::OutcomeUnknown => "outcome_unknown",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Other(code) => code,
        }
    }

    /// The reference SDK's wording for the codes it names (mqlite-clients.md §1.3).
    fn sentinel(&self) -> Option<&'static str> {
        Some(match self {
            ErrorCode::NotFound => "mqlite: not found",
            ErrorCode::Unauthenticated => "mqlite: unauthenticated",
            ErrorCode::LockLost => "mqlite: lock lost or already settled",
            ErrorCode::AlreadyExists => "mqlite: dedup conflict",
            ErrorCode::NameConflict => "mqlite: name conflict",
            ErrorCode::GroupRequired => "mqlite: group id required",
            ErrorCode::InvalidArgument => "mqlite: invalid argument",
            ErrorCode::MessageTooLarge => "mqlite: message too large",
            ErrorCode::OutcomeUnknown => "mqlite: outcome unknown",
            _ => return None,
        })
    }
}

/// A failed call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The broker answered with an error status.
    Api {
        status: u16,
        code: ErrorCode,
        message: String,
        /// From `Retry-After`, when the broker said "not now".
        retry_after_ms: Option<i64>,
    },
    /// `404` with `no such path: …` (or no code): this broker lacks the route.
    Unsupported { route: String },
    /// No answer: not connected, cut, or past the call's timeout. A write may have
    /// applied if the request was sent.
    Transport(String),
    /// A 2xx answer that is not the expected JSON.
    Decode(String),
    /// A mistake found before anything was sent (an endpoint that does not parse).
    Invalid(String),
}

impl Error {
    /// The broker's code, when it answered with one.
    pub fn code(&self) -> Option<&ErrorCode> {
        match self {
            Error::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether retrying cannot help: the credential is refused, the queue or route does
    /// not exist, or the call is malformed before sending (mqlite-clients.md §4.4; and
    /// `permission_denied`, docs/deviations.md "Clients").
    pub fn is_permanent(&self) -> bool {
        match self {
            Error::Api { code, .. } => matches!(
                code,
                ErrorCode::Unauthenticated | ErrorCode::NotFound | ErrorCode::PermissionDenied
            ),
            Error::Unsupported { .. } | Error::Invalid(_) => true,
            Error::Transport(_) | Error::Decode(_) => false,
        }
    }

    pub fn is_lock_lost(&self) -> bool {
        self.code() == Some(&ErrorCode::LockLost)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Api {
                status,
                code,
                message,
                ..
            } => match (code.sentinel(), code) {
                (Some(sentinel), _) => write!(f, "{sentinel}: {message}"),
                (None, ErrorCode::Other(c)) if c.is_empty() => {
                    write!(f, "mqlite: request failed (HTTP {status})")
                }
                (None, code) => write!(f, "mqlite: {}: {message}", code.as_str()),
            },
            Error::Unsupported { route } => {
                write!(f, "mqlite: operation not supported by this broker: {route}")
            }
            Error::Transport(e) => write!(f, "mqlite: transport: {e}"),
            Error::Decode(e) => write!(f, "mqlite: unreadable answer: {e}"),
            Error::Invalid(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: &str) -> Error {
        Error::Api {
            status: 503,
            code: ErrorCode::parse(code),
            message: "m".into(),
            retry_after_ms: None,
        }
    }

    #[test]
    fn every_code_parses_back_to_itself() {
        for code in [
            "invalid_argument",
            "group_required",
            "unauthenticated",
            "permission_denied",
            "not_found",
            "unimplemented",
            "already_exists",
            "name_conflict",
            "key_conflict",
            "lock_lost",
            "queue_changed",
            "queue_not_empty",
            "message_too_large",
            "canceled",
            "internal",
            "outcome_unknown",
            "unavailable",
            "brand_new",
        ] {
            assert_eq!(ErrorCode::parse(code).as_str(), code);
        }
    }

    #[test]
    fn outcome_unknown_and_unavailable_are_distinct_and_transient() {
        assert_ne!(api("outcome_unknown").code(), api("unavailable").code());
        assert!(!api("outcome_unknown").is_permanent());
        assert!(!api("unavailable").is_permanent());
        assert!(api("unauthenticated").is_permanent());
        assert!(api("not_found").is_permanent());
        assert!(!api("lock_lost").is_permanent());
    }

    #[test]
    fn messages_carry_the_sdk_wording() {
        assert_eq!(
            api("lock_lost").to_string(),
            "mqlite: lock lost or already settled: m"
        );
        assert_eq!(api("internal").to_string(), "mqlite: internal: m");
        assert_eq!(api("").to_string(), "mqlite: request failed (HTTP 503)");
    }
}
