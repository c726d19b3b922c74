//! Observability (docs/http-api.md#rpcs, #metrics; docs/semantics.md#observability): counters for requests,
//! authentication, storage calls, message effects, filters and maintenance,
//! the `AdminService/Observe` answer, and its Prometheus rendering.
//!
//! On a Worker every counter is isolate-local: it starts at zero when the
//! isolate starts (`started_at_ms`) and is lost when the runtime evicts the
//! isolate. Concurrent isolates each count their own share, and a cron event
//! may run in an isolate that serves no scrape. Consumers must therefore use
//! `rate`/`increase` (which handle resets) and never read a counter as a
//! deployment-wide total. Queue gauges are different: they come from the
//! database at sampling time and are exact, or absent when it cannot be read.

mod counters;
mod group_commit;
mod histogram;
pub mod prometheus;
mod snapshot;
#[cfg(test)]
mod tests;
mod vocab;

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Read by the engine; the observation reports it as it is.
pub use crate::engine::QueueGauge;
use counters::Counters;
pub use histogram::BOUNDS_SECONDS;
pub use vocab::{
    classify, AuthOutcome, Event, FilterStage, MaintenanceOutcome, StorageOp, StorageOutcome, Task,
    REQUEST_CODES, STORAGE_ERROR_CODES,
};

use crate::engine::Effect;
use crate::wire::observe::ObserveResponse;

/// The isolate's counters. Meant to live in a `static` (`OnceLock`): one per
/// isolate, shared by every request it serves.
///
/// A `std::sync::Mutex` serialises updates: uncontended on wasm32 (one
/// thread), and correct in multi-threaded native tests. Every method is
/// synchronous, so the lock is never held across an `await` (where another
/// request of the same isolate could try to take it). No method panics, and
/// a lock poisoned by a panic elsewhere is recovered rather than propagated,
/// because on wasm a panic would take the whole instance down.
#[derive(Debug)]
pub struct Registry {
    started_at_ms: i64,
    counters: Mutex<Counters>,
}

/// What one database read gathered for an observation.
#[derive(Debug, Clone, PartialEq)]
pub struct Collection {
    /// Every queue row (plain queues and subscription backing queues), or a
    /// failure category from [`STORAGE_ERROR_CODES`] (see [`classify`]);
    /// anything else is reported as `other`, never as free text.
    pub result: Result<Vec<QueueGauge>, String>,
    /// Elapsed time of the collection.
    pub duration_seconds: f64,
    /// The schema version this build runs against.
    pub schema_version: String,
    /// Round trip of the `SELECT 1` read probe; `None` when it failed.
    pub ping_seconds: Option<f64>,
    /// With several databases (docs/databases.md): each one by name, and
    /// its failure category when it did not answer; empty with one.
    pub databases: Vec<(String, Option<String>)>,
}

impl Registry {
    /// `routes`: every registered RPC route path (e.g.
    /// `/mqlite.v1.QueueService/Send`); only these ever get series.
    /// `started_at_ms`: when this isolate started counting.
    pub fn new(routes: &[&str], started_at_ms: i64) -> Self {
        Registry {
            started_at_ms,
            counters: Mutex::new(Counters::new(routes)),
        }
    }

    /// One finished RPC: `code` is `ok` or a wire error code; `seconds` is
    /// the whole request, authentication included. It feeds both the
    /// request counters and the handler-latency histogram (the Worker times
    /// one span per request). An unknown route or code is ignored.
    pub fn record_request(&self, route: &str, code: &str, seconds: f64) {
        self.lock().record_request(route, code, seconds);
    }

    /// The one final authentication/authorization outcome of a protected
    /// request (a permission rejection replaces success).
    pub fn record_auth(&self, outcome: AuthOutcome) {
        self.lock().record_auth(outcome);
    }

    /// One logical storage call (a whole pipeline), after it finished.
    /// `error_code` matters only for [`StorageOutcome::Error`]: a category
    /// from [`STORAGE_ERROR_CODES`], anything else filed as `other`.
    /// `retries`: safe retries made inside this call.
    pub fn record_storage(
        &self,
        operation: StorageOp,
        outcome: StorageOutcome,
        error_code: &str,
        seconds: f64,
        retries: u32,
    ) {
        self.lock()
            .record_storage(operation, outcome, error_code, seconds, retries);
    }

    /// `n` confirmed effects on `queue` (docs/semantics.md#observability): call only after the
    /// commit is acknowledged, never for a replay.
    pub fn record_event(&self, queue: &str, event: Event, n: u64) {
        self.lock().record_event(queue, event, n);
    }

    /// A routing filter failed while a published message was fanned out
    /// (not a Subscribe/TestFilter validation error, not a mismatch).
    pub fn record_filter_failure(&self, stage: FilterStage) {
        self.lock().record_filter_failure(stage);
    }

    /// One finished maintenance pass; `now_ms` becomes the task's last
    /// success time when `outcome` is a success.
    pub fn record_maintenance(
        &self,
        task: Task,
        outcome: MaintenanceOutcome,
        seconds: f64,
        now_ms: i64,
    ) {
        self.lock()
            .record_maintenance(task, outcome, seconds, now_ms);
    }

    /// Records what the engine reported for one request (or one cron
    /// pass), in the order it happened, under one lock.
    pub fn record_effects(&self, effects: Vec<Effect>) {
        let mut counters = self.lock();
        for effect in effects {
            match effect {
                Effect::Message {
                    queue,
                    event,
                    count,
                } => counters.record_event(&queue, event, count),
                Effect::Storage(call) => {
                    counters.record_storage(
                        call.operation,
                        call.outcome,
                        call.error.as_ref().map_or("", classify),
                        call.seconds,
                        call.retries,
                    );
                    if let Some(carried) = call.carried {
                        counters.group_commit.record(carried);
                    }
                }
                Effect::FilterFailure(stage) => counters.record_filter_failure(stage),
                Effect::Maintenance {
                    task,
                    outcome,
                    seconds,
                    finished_at_ms,
                } => counters.record_maintenance(task, outcome, seconds, finished_at_ms),
                // A wake hint is the HTTP layer's to send, not a counter.
                Effect::Claimable { .. } => {}
            }
        }
    }

    /// Builds the Observe answer from the counters plus one database
    /// collection, sampled at `now_ms`. `access` is `manage`, `monitor` or
    /// `anonymous`. A successful collection becomes the last success time.
    pub fn observe(&self, access: &str, collection: &Collection, now_ms: i64) -> ObserveResponse {
        self.lock()
            .observe(self.started_at_ms, access, collection, now_ms)
    }

    fn lock(&self) -> MutexGuard<'_, Counters> {
        self.counters.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
