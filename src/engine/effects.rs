//! What the engine did for one request, as plain data: message effects per
//! queue, storage calls (with their retries), filter failures and
//! maintenance runs. The engine only appends to an [`Effects`] journal; the
//! HTTP layer (and the cron entry point) drains it into the isolate's
//! counters (the `observe` module). So the engine depends on no observability
//! code, and what it reports is the data of the call that produced it.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::store::{Carried, StoreError};

/// Declares a closed vocabulary: the enum, `ALL` in contract order, and the
/// contract spelling. Counters are arrays indexed by `value as usize`, which
/// is the position in `ALL` because the variants carry default discriminants.
macro_rules! vocabulary {
    ($(#[$doc:meta])* $name:ident { $($variant:ident => $text:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name { $($variant,)+ }

        impl $name {
            /// Every value, in the order the contract lists them.
            pub const ALL: &'static [$name] = &[$($name::$variant,)+];

            /// The contract's spelling (Observe, Prometheus labels).
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text,)+ }
            }
        }
    };
}
pub(crate) use vocabulary;

vocabulary! {
    /// What kind of storage call was made: one logical engine call (a whole
    /// Hrana pipeline), not each SQL statement inside it.
    StorageOp {
        Read => "read",
        Write => "write",
        Transaction => "transaction",
    }
}

vocabulary! {
    /// How a storage call ended. `Rejected` means a guard in the program
    /// rolled it back on purpose (a domain answer), not a database fault.
    StorageOutcome {
        Ok => "ok",
        Error => "error",
        Rejected => "rejected",
        OutcomeUnknown => "outcome_unknown",
    }
}

vocabulary! {
    /// The 20 message effects of docs/semantics.md#observability, in contract order.
    Event {
        Enqueued => "enqueued",
        Scheduled => "scheduled",
        Deduplicated => "deduplicated",
        DedupConflict => "dedup_conflict",
        Delivered => "delivered",
        Redelivered => "redelivered",
        Completed => "completed",
        ReceiveDeleted => "receive_deleted",
        Abandoned => "abandoned",
        Deferred => "deferred",
        Rejected => "rejected",
        DeadLettered => "dead_lettered",
        TtlDiscarded => "ttl_discarded",
        RetentionDeleted => "retention_deleted",
        Purged => "purged",
        Canceled => "canceled",
        Redriven => "redriven",
        LockExpired => "lock_expired",
        Recovered => "recovered",
        Activated => "activated",
    }
}

vocabulary! {
    /// Where routing a published message through a subscription filter failed.
    FilterStage {
        Compile => "compile",
        Evaluate => "evaluate",
    }
}

vocabulary! {
    /// Maintenance tasks (docs/semantics.md#maintenance), in contract order.
    Task {
        Locks => "locks",
        Scheduled => "scheduled",
        Ttl => "ttl",
        Dedup => "dedup",
        Receipts => "receipts",
        Retention => "retention",
        Reclaim => "reclaim",
    }
}

vocabulary! {
    /// How one maintenance pass ended.
    MaintenanceOutcome {
        Success => "success",
        Error => "error",
        Interrupted => "interrupted",
    }
}

impl Task {
    /// Whether this deployment runs the task automatically. The Worker's cron
    /// trigger (wrangler.toml) runs the sweep, which covers every task except
    /// `reclaim`: reclaiming file space is a local-SQLite concern and remote
    /// libSQL has no local file to shrink (the reference disables it for
    /// remote backends too).
    pub fn enabled(self) -> bool {
        self != Task::Reclaim
    }
}

/// One finished storage call (a whole pipeline, retries included).
#[derive(Debug, Clone, PartialEq)]
pub struct StorageCall {
    pub operation: StorageOp,
    pub outcome: StorageOutcome,
    /// The failure, for the observing side to classify; `None` unless
    /// `outcome` is `Error` or `OutcomeUnknown`.
    pub error: Option<StoreError>,
    /// Elapsed time of the whole call, back-off included.
    pub seconds: f64,
    /// Attempts repeated because the one before provably did not apply.
    pub retries: u32,
    /// How a write that may be grouped was carried, last attempt
    /// (docs/engine.md#group-commit); `None` for the rest.
    pub carried: Option<Carried>,
}

/// One entry of the journal.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// `count` confirmed effects on `queue`: appended only once the commit
    /// is acknowledged, never for a replay.
    Message {
        queue: String,
        event: Event,
        count: u64,
    },
    Storage(StorageCall),
    /// A routing filter failed while a published message was fanned out.
    FilterFailure(FilterStage),
    /// A committed change made messages claimable on `queue` while the
    /// database recorded someone waiting on it (`queues.waiters_until`),
    /// at database time `at_ms`: the wake hint the HTTP layer may send
    /// (docs/semantics.md#long-polling). Never appended for a queue nobody
    /// waits on, so such a send costs no notification.
    Claimable {
        queue: String,
        at_ms: i64,
    },
    /// One finished pass of `task`, which ended at `finished_at_ms`.
    Maintenance {
        task: Task,
        outcome: MaintenanceOutcome,
        seconds: f64,
        finished_at_ms: i64,
    },
}

/// The journal of what one request (or one cron pass) did. Shared through
/// an `Arc` by the engines that serve the request (`Engine::for_key`) and
/// the caller that drains it.
///
/// Every method is synchronous, so the lock is never held across an
/// `await`; a lock poisoned by a panic elsewhere is recovered rather than
/// propagated, because on wasm a panic takes the whole instance down.
#[derive(Debug, Default)]
pub struct Effects {
    entries: Mutex<Vec<Effect>>,
}

impl Effects {
    /// Appends one entry.
    pub(crate) fn push(&self, effect: Effect) {
        self.lock().push(effect);
    }

    /// Everything appended since the last call, oldest first; the journal
    /// is left empty.
    pub fn take(&self) -> Vec<Effect> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Effect>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn take_drains_in_order() {
        let effects = Effects::default();
        effects.push(Effect::FilterFailure(FilterStage::Evaluate));
        effects.push(Effect::Message {
            queue: "q".into(),
            event: Event::Enqueued,
            count: 2,
        });
        let taken = effects.take();
        assert_eq!(taken.len(), 2);
        assert_eq!(taken[0], Effect::FilterFailure(FilterStage::Evaluate));
        assert!(effects.take().is_empty());
    }

    /// The engine reports; it never reaches into the observability, HTTP or
    /// wire layers (which sit above it). Scans every engine source file,
    /// including ones added later.
    #[test]
    fn the_engine_imports_no_layer_above_it() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine");
        let mut scanned = 0;
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{dir:?}: {e}")) {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            if path.extension().is_some_and(|x| x == "rs") {
                let source = std::fs::read_to_string(&path).unwrap_or_default();
                for layer in ["observe", "http", "wire"] {
                    let import = format!("crate::{layer}");
                    assert!(!source.contains(&import), "{path:?} uses {import}");
                }
                scanned += 1;
            }
        }
        assert!(scanned > 10, "scanned only {scanned} files in {dir:?}");
    }
}
