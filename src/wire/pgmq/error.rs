//! The pgmq dialect's error table (docs/pgmq.md, "Errors"): application
//! errors are `{"error": CODE, "detail": TEXT}`; request validation
//! failures are 422 in FastAPI's shape (see [`super::validate`]). Nothing
//! else in the dialect picks a status.

use serde_json::{json, Value};

use crate::engine::EngineError;
use crate::store::StoreError;

/// Every application error code of the dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgmqCode {
    Unauthorized,
    InvalidRequest,
    InvalidQueueName,
    PollLimitExceeded,
    QueueNotFound,
    MessageNotFound,
    NotFound,
    MethodNotAllowed,
    PayloadTooLarge,
    DependencyUnavailable,
    OutcomeUnknown,
    SendFailed,
    InternalError,
}

impl PgmqCode {
    pub fn as_str(self) -> &'static str {
        match self {
            PgmqCode::Unauthorized => "unauthorized",
            PgmqCode::InvalidRequest => "invalid_request",
            PgmqCode::InvalidQueueName => "invalid_queue_name",
            PgmqCode::PollLimitExceeded => "poll_limit_exceeded",
            PgmqCode::QueueNotFound => "queue_not_found",
            PgmqCode::MessageNotFound => "message_not_found",
            PgmqCode::NotFound => "not_found",
            PgmqCode::MethodNotAllowed => "method_not_allowed",
            PgmqCode::PayloadTooLarge => "payload_too_large",
            PgmqCode::DependencyUnavailable => "dependency_unavailable",
            PgmqCode::OutcomeUnknown => "outcome_unknown",
            PgmqCode::SendFailed => "send_failed",
            PgmqCode::InternalError => "internal_error",
        }
    }

    pub fn status(self) -> u16 {
        match self {
            PgmqCode::InvalidRequest | PgmqCode::InvalidQueueName | PgmqCode::PollLimitExceeded => {
                400
            }
            PgmqCode::Unauthorized => 401,
            PgmqCode::QueueNotFound | PgmqCode::MessageNotFound | PgmqCode::NotFound => 404,
            PgmqCode::MethodNotAllowed => 405,
            PgmqCode::PayloadTooLarge => 413,
            PgmqCode::SendFailed | PgmqCode::InternalError => 500,
            PgmqCode::DependencyUnavailable | PgmqCode::OutcomeUnknown => 503,
        }
    }
}

/// An error answer of the dialect: an application error or a 422.
#[derive(Debug, Clone, PartialEq)]
pub enum PgmqError {
    App {
        code: PgmqCode,
        detail: String,
    },
    /// FastAPI's `{"detail": [...]}` items.
    Validation(Vec<Value>),
}

impl PgmqError {
    pub fn new(code: PgmqCode, detail: impl Into<String>) -> Self {
        PgmqError::App {
            code,
            detail: detail.into(),
        }
    }

    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(PgmqCode::InvalidRequest, detail)
    }

    pub fn unauthorized() -> Self {
        Self::new(PgmqCode::Unauthorized, "Invalid API key")
    }

    pub fn status(&self) -> u16 {
        match self {
            PgmqError::App { code, .. } => code.status(),
            PgmqError::Validation(_) => 422,
        }
    }

    /// The code for the request counters (`validation_error` for a 422).
    pub fn code_str(&self) -> &'static str {
        match self {
            PgmqError::App { code, .. } => code.as_str(),
            PgmqError::Validation(_) => "validation_error",
        }
    }

    pub fn body(&self) -> String {
        match self {
            PgmqError::App { code, detail } => {
                json!({"error": code.as_str(), "detail": detail}).to_string()
            }
            PgmqError::Validation(items) => json!({ "detail": items }).to_string(),
        }
    }

    /// A send's failure: a database that ran the request and failed is
    /// `send_failed` (the reference's code for a send without an id).
    pub fn from_send(e: EngineError) -> Self {
        match e {
            EngineError::Store(StoreError::Failed(m)) => Self::new(PgmqCode::SendFailed, m),
            other => other.into(),
        }
    }
}

impl From<EngineError> for PgmqError {
    fn from(e: EngineError) -> Self {
        match e {
            EngineError::InvalidArgument(m) => Self::invalid(m),
            EngineError::QueueNotFound => {
                Self::new(PgmqCode::QueueNotFound, "queue does not exist")
            }
            EngineError::NotFound => Self::new(PgmqCode::MessageNotFound, "message does not exist"),
            EngineError::CredentialRejected => Self::unauthorized(),
            EngineError::MessageTooLarge { size, cap } => Self::new(
                PgmqCode::PayloadTooLarge,
                format!("message is {size} bytes, over the {cap}-byte cap"),
            ),
            EngineError::Store(StoreError::OutcomeUnknown(m)) => Self::new(
                PgmqCode::OutcomeUnknown,
                format!(
                    "the database's answer was lost: the write may or may not have applied ({m})"
                ),
            ),
            EngineError::Store(
                e @ (StoreError::Unavailable(_)
                | StoreError::Refused(_)
                | StoreError::WritesPaused { .. }),
            ) => Self::new(PgmqCode::DependencyUnavailable, e.to_string()),
            other => Self::new(PgmqCode::InternalError, format!("{other:?}")),
        }
    }
}
