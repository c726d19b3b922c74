//! The error table (docs/http-api.md#errors): every error code, its HTTP status, and the
//! one mapping from engine errors. Nothing else in the crate picks a status.

use serde::Serialize;

use crate::engine::EngineError;
use crate::store::StoreError;

/// Every error code of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    OutcomeUnknown,
    /// [Worker extension] the database could not be reached (the request was
    /// never sent, or refused before it ran, after bounded retries) or is not
    /// accepting writes (then with `Retry-After`): nothing applied, safe to
    /// retry.
    /// Not `outcome_unknown` (docs/http-api.md#errors forbids it for a write that cannot have
    /// applied) and not `internal` (the caller should back off, not page).
    Unavailable,
}

impl ErrorCode {
    pub fn as_str(self) -> &'static str {
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
        }
    }

    pub fn status(self) -> u16 {
        match self {
            ErrorCode::InvalidArgument | ErrorCode::GroupRequired => 400,
            ErrorCode::Unauthenticated => 401,
            ErrorCode::PermissionDenied => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::Unimplemented => 405,
            ErrorCode::AlreadyExists
            | ErrorCode::NameConflict
            | ErrorCode::KeyConflict
            | ErrorCode::LockLost
            | ErrorCode::QueueChanged
            | ErrorCode::QueueNotEmpty => 409,
            ErrorCode::MessageTooLarge => 413,
            ErrorCode::Canceled => 499,
            ErrorCode::Internal => 500,
            ErrorCode::OutcomeUnknown | ErrorCode::Unavailable => 503,
        }
    }
}

/// An error answer: `{"code": …, "message": …}` with the code's status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
    /// When to try again, for answers that say "not now" (`Retry-After`).
    pub retry_after_ms: Option<i64>,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            retry_after_ms: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }

    pub fn unauthenticated() -> Self {
        Self::new(
            ErrorCode::Unauthenticated,
            "missing or invalid Bearer token",
        )
    }

    pub fn permission_denied() -> Self {
        Self::new(
            ErrorCode::PermissionDenied,
            "access key lacks the required permission",
        )
    }

    pub fn no_such_path(path: &str) -> Self {
        Self::new(ErrorCode::NotFound, format!("no such path: {path}"))
    }

    pub fn status(&self) -> u16 {
        self.code.status()
    }

    /// The JSON envelope.
    pub fn body(&self) -> String {
        #[derive(Serialize)]
        struct Envelope<'a> {
            code: &'a str,
            message: &'a str,
        }
        serde_json::to_string(&Envelope {
            code: self.code.as_str(),
            message: &self.message,
        })
        .unwrap_or_default()
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::InvalidArgument(m) => ApiError::invalid(m),
            EngineError::QueueNotFound => {
                ApiError::new(ErrorCode::NotFound, "mqlite: queue not found")
            }
            EngineError::NotFound => ApiError::new(ErrorCode::NotFound, "mqlite: not found"),
            EngineError::LockLost => {
                ApiError::new(ErrorCode::LockLost, "mqlite: lock lost or already settled")
            }
            EngineError::DedupConflict => ApiError::new(
                ErrorCode::AlreadyExists,
                "mqlite: dedup conflict (same id, different body)",
            ),
            EngineError::GroupRequired => ApiError::new(
                ErrorCode::GroupRequired,
                "mqlite: group id required for group_fifo queue",
            ),
            EngineError::NameConflict(m) => ApiError::new(ErrorCode::NameConflict, m),
            EngineError::MessageTooLarge { size, cap } => ApiError::new(
                ErrorCode::MessageTooLarge,
                format!("mqlite: message body exceeds max size: {size} > {cap} bytes"),
            ),
            EngineError::Entropy(m) => ApiError::new(
                ErrorCode::Internal,
                format!("random source unavailable: {m}"),
            ),
            EngineError::CredentialRejected => ApiError::unauthenticated(),
            EngineError::KeyConflict => ApiError::new(
                ErrorCode::KeyConflict,
                "mqlite: an access key with this id already exists",
            ),
            EngineError::QueueChanged => ApiError::new(
                ErrorCode::QueueChanged,
                "mqlite: the queue was recreated since that generation",
            ),
            EngineError::QueueNotEmpty => ApiError::new(
                ErrorCode::QueueNotEmpty,
                "mqlite: the queue still holds messages",
            ),
            EngineError::Store(e) => e.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        let code = match e {
            StoreError::OutcomeUnknown(_) => ErrorCode::OutcomeUnknown,
            // Never sent, or refused before it ran, after bounded retries:
            // nothing applied and trying again later may work.
            StoreError::Unavailable(_) => ErrorCode::Unavailable,
            StoreError::WritesPaused { retry_after_ms } => {
                return ApiError {
                    retry_after_ms: Some(retry_after_ms),
                    ..ApiError::new(ErrorCode::Unavailable, e.to_string())
                }
            }
            _ => ErrorCode::Internal,
        };
        ApiError::new(code, e.to_string())
    }
}
