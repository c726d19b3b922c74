//! The fixed label vocabularies of docs/http-api.md#rpcs, #metrics. Every dimension the
//! registry counts is one of these enums, so no caller input can create a new
//! series: only queue names (configured entities) and registered routes grow
//! the output.

use crate::store::StoreError;

use crate::engine::vocabulary;
/// The vocabularies of what the engine reports are the engine's own: the
/// counters are indexed by them, the engine never sees the counters.
pub use crate::engine::{Event, FilterStage, MaintenanceOutcome, StorageOp, StorageOutcome, Task};

vocabulary! {
    /// The final authentication/authorization outcome of one protected request.
    AuthOutcome {
        Success => "success",
        Missing => "missing",
        Invalid => "invalid",
        Expired => "expired",
        Revoked => "revoked",
        PermissionDenied => "permission_denied",
        BackendError => "backend_error",
    }
}

/// Whole-request result codes of `http.requests`: `ok` plus every error code
/// of docs/http-api.md#errors (v0.3.3 adds `queue_changed` and `queue_not_empty`), and the
/// Worker's `unavailable` (writes refused while the database is stalled).
pub const REQUEST_CODES: [&str; 18] = [
    "ok",
    "unauthenticated",
    "permission_denied",
    "key_conflict",
    "not_found",
    "already_exists",
    "name_conflict",
    "group_required",
    "invalid_argument",
    "message_too_large",
    "outcome_unknown",
    "canceled",
    "internal",
    "lock_lost",
    "unimplemented",
    "queue_changed",
    "queue_not_empty",
    "unavailable",
];

/// Error categories of an `error` storage outcome. Only these leave the
/// registry, so no database error text ever becomes a label.
pub const STORAGE_ERROR_CODES: [&str; 8] = [
    "canceled",
    "closed",
    "busy",
    "connection",
    "full",
    "corrupt",
    "io",
    "other",
];

/// The error code a storage outcome is filed under. `Ok`, `Rejected` and
/// `OutcomeUnknown` each have exactly one code; an `error` keeps a known
/// category and folds anything else into `other`, so a count is never lost
/// and the label set stays the fixed 33 combinations.
pub(super) fn storage_error_code(outcome: StorageOutcome, code: &str) -> &'static str {
    match outcome {
        StorageOutcome::Ok => "",
        StorageOutcome::Rejected => "application",
        StorageOutcome::OutcomeUnknown => "outcome_unknown",
        StorageOutcome::Error => known_error_code(code),
    }
}

/// A failed collection's `error_code`: any storage category (including
/// `application` and `outcome_unknown`), anything else `other`. Never empty,
/// because an unavailable collection must say why.
pub(super) fn collection_error_code(code: &str) -> &'static str {
    match code {
        "application" => "application",
        "outcome_unknown" => "outcome_unknown",
        _ => known_error_code(code),
    }
}

fn known_error_code(code: &str) -> &'static str {
    STORAGE_ERROR_CODES
        .iter()
        .copied()
        .find(|known| *known == code)
        .unwrap_or("other")
}

/// Classifies a store failure for `record_storage` and `Collection::result`.
/// The Worker reaches libSQL over HTTP, so "could not reach it" is
/// `connection`; a database-reported error is recognised by the SQLite
/// result-code names the server puts in its message.
pub fn classify(error: &StoreError) -> &'static str {
    match error {
        StoreError::Unavailable(_) | StoreError::Refused(_) | StoreError::WritesPaused { .. } => {
            "connection"
        }
        StoreError::OutcomeUnknown(_) => "outcome_unknown",
        StoreError::Failed(message) => {
            let upper = message.to_ascii_uppercase();
            [
                ("SQLITE_BUSY", "busy"),
                ("SQLITE_LOCKED", "busy"),
                ("SQLITE_FULL", "full"),
                ("SQLITE_CORRUPT", "corrupt"),
                ("SQLITE_NOTADB", "corrupt"),
                ("SQLITE_IOERR", "io"),
            ]
            .iter()
            .find(|(name, _)| upper.contains(name))
            .map_or("other", |(_, code)| code)
        }
        StoreError::SchemaTooNew { .. } => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ErrorCode;

    #[test]
    fn every_wire_error_code_is_a_request_code() {
        use ErrorCode::*;
        let all = [
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
            Unavailable,
        ];
        for code in all {
            assert!(REQUEST_CODES.contains(&code.as_str()), "{code:?}");
        }
        assert_eq!(REQUEST_CODES.len(), all.len() + 1);
    }

    #[test]
    fn vocabularies_have_the_contract_sizes() {
        assert_eq!(Event::ALL.len(), 20);
        assert_eq!(Task::ALL.len(), 7);
        assert_eq!(AuthOutcome::ALL.len(), 7);
        for (i, event) in Event::ALL.iter().enumerate() {
            assert_eq!(*event as usize, i);
        }
    }

    #[test]
    fn storage_codes_stay_bounded() {
        assert_eq!(storage_error_code(StorageOutcome::Ok, "busy"), "");
        assert_eq!(storage_error_code(StorageOutcome::Error, "busy"), "busy");
        assert_eq!(storage_error_code(StorageOutcome::Error, "boom"), "other");
        assert_eq!(
            storage_error_code(StorageOutcome::Rejected, ""),
            "application"
        );
        assert_eq!(collection_error_code(""), "other");
        assert_eq!(collection_error_code("connection"), "connection");
    }

    #[test]
    fn store_errors_classify_without_their_text() {
        assert_eq!(classify(&StoreError::Unavailable("x".into())), "connection");
        assert_eq!(
            classify(&StoreError::Failed(
                "SQLITE_BUSY: database is locked".into()
            )),
            "busy"
        );
        assert_eq!(
            classify(&StoreError::Failed("no such table".into())),
            "other"
        );
        assert_eq!(
            classify(&StoreError::OutcomeUnknown("lost".into())),
            "outcome_unknown"
        );
    }
}
