//! The counters behind the registry's lock: plain data and the arithmetic of
//! recording. Every fixed dimension is allocated up front (zero-initialised),
//! so the first failure after a scrape shows up as an increase from a
//! sampled zero instead of as a brand-new series that `rate()` cannot see.

use std::collections::{BTreeMap, BTreeSet};

use super::group_commit::GroupCommit;
use super::histogram::{sanitize_seconds, Histogram};
use super::vocab::{
    storage_error_code, AuthOutcome, Event, FilterStage, MaintenanceOutcome, StorageOp,
    StorageOutcome, Task, REQUEST_CODES, STORAGE_ERROR_CODES,
};

/// Request counters of one registered route.
#[derive(Debug)]
pub(super) struct RouteCounters {
    pub(super) path: String,
    /// Indexed like `REQUEST_CODES`.
    pub(super) codes: [RequestCell; REQUEST_CODES.len()],
    /// Handler latency of every request to the route, whatever its code.
    pub(super) latency: Histogram,
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct RequestCell {
    pub(super) count: u64,
    pub(super) seconds: f64,
}

/// One fixed (operation, outcome, error_code) storage dimension.
#[derive(Debug)]
pub(super) struct StorageCell {
    pub(super) operation: StorageOp,
    pub(super) outcome: StorageOutcome,
    pub(super) error_code: &'static str,
    pub(super) duration: Histogram,
    pub(super) retries: u64,
}

#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TaskCell {
    pub(super) runs: u64,
    pub(super) interrupted: u64,
    pub(super) failures: u64,
    /// 0 until the first successful pass in this isolate.
    pub(super) last_success_at_ms: i64,
    pub(super) duration: Histogram,
}

#[derive(Debug)]
pub(super) struct Counters {
    /// Registered routes, sorted by path (the order Observe lists them in).
    pub(super) routes: Vec<RouteCounters>,
    /// Indexed like `AuthOutcome::ALL`.
    pub(super) auth: [u64; 7],
    /// The fixed storage dimensions, sorted by operation, outcome, code.
    pub(super) storage: Vec<StorageCell>,
    /// Confirmed message effects per queue, indexed like `Event::ALL`.
    pub(super) events: BTreeMap<String, [u64; 20]>,
    /// Queues seen by any successful collection in this isolate, so their
    /// zero event series stay present while a later collection fails.
    pub(super) collected: BTreeSet<String>,
    /// Indexed like `FilterStage::ALL`.
    pub(super) filters: [u64; 2],
    /// Indexed like `Task::ALL`.
    pub(super) maintenance: [TaskCell; 7],
    /// 0 until the first successful collection in this isolate.
    pub(super) last_collection_success_ms: i64,
    pub(super) group_commit: GroupCommit,
}

impl Counters {
    pub(super) fn new(routes: &[&str]) -> Self {
        let mut paths: Vec<&str> = routes.to_vec();
        paths.sort_unstable();
        paths.dedup();
        Counters {
            routes: paths
                .into_iter()
                .map(|path| RouteCounters {
                    path: path.to_string(),
                    codes: [RequestCell::default(); REQUEST_CODES.len()],
                    latency: Histogram::default(),
                })
                .collect(),
            auth: [0; 7],
            storage: storage_dimensions(),
            events: BTreeMap::new(),
            collected: BTreeSet::new(),
            filters: [0; 2],
            maintenance: [TaskCell::default(); 7],
            last_collection_success_ms: 0,
            group_commit: GroupCommit::default(),
        }
    }

    /// Unregistered routes and unknown codes are dropped: labels come only
    /// from the route catalogue and the fixed code list, so a client probing
    /// invented paths cannot grow the output.
    pub(super) fn record_request(&mut self, route: &str, code: &str, seconds: f64) {
        let Some(counters) = self.routes.iter_mut().find(|r| r.path == route) else {
            return;
        };
        let Some(index) = REQUEST_CODES.iter().position(|c| *c == code) else {
            return;
        };
        let seconds = sanitize_seconds(seconds);
        let cell = &mut counters.codes[index];
        cell.count = cell.count.saturating_add(1);
        cell.seconds += seconds;
        counters.latency.observe(seconds);
    }

    pub(super) fn record_auth(&mut self, outcome: AuthOutcome) {
        bump(&mut self.auth[outcome as usize], 1);
    }

    pub(super) fn record_storage(
        &mut self,
        operation: StorageOp,
        outcome: StorageOutcome,
        error_code: &str,
        seconds: f64,
        retries: u32,
    ) {
        let code = storage_error_code(outcome, error_code);
        let cell = self
            .storage
            .iter_mut()
            .find(|c| c.operation == operation && c.outcome == outcome && c.error_code == code);
        if let Some(cell) = cell {
            cell.duration.observe(seconds);
            cell.retries = cell.retries.saturating_add(u64::from(retries));
        }
    }

    /// `n == 0` records nothing, so an effect-free statement does not make a
    /// queue known.
    pub(super) fn record_event(&mut self, queue: &str, event: Event, n: u64) {
        if n == 0 {
            return;
        }
        let row = match self.events.get_mut(queue) {
            Some(row) => row,
            None => self.events.entry(queue.to_string()).or_insert([0; 20]),
        };
        bump(&mut row[event as usize], n);
    }

    pub(super) fn record_filter_failure(&mut self, stage: FilterStage) {
        bump(&mut self.filters[stage as usize], 1);
    }

    pub(super) fn record_maintenance(
        &mut self,
        task: Task,
        outcome: MaintenanceOutcome,
        seconds: f64,
        now_ms: i64,
    ) {
        let cell = &mut self.maintenance[task as usize];
        bump(&mut cell.runs, 1);
        match outcome {
            MaintenanceOutcome::Success => cell.last_success_at_ms = now_ms,
            MaintenanceOutcome::Error => bump(&mut cell.failures, 1),
            MaintenanceOutcome::Interrupted => bump(&mut cell.interrupted, 1),
        }
        cell.duration.observe(seconds);
    }
}

fn bump(counter: &mut u64, n: u64) {
    *counter = counter.saturating_add(n);
}

/// The 33 fixed dimensions (per operation: ok, rejected/application,
/// outcome_unknown, and error × 8 categories), sorted as Observe lists them.
fn storage_dimensions() -> Vec<StorageCell> {
    let mut cells = Vec::with_capacity(StorageOp::ALL.len() * 11);
    for &operation in StorageOp::ALL {
        let fixed = [
            (StorageOutcome::Ok, ""),
            (StorageOutcome::Rejected, "application"),
            (StorageOutcome::OutcomeUnknown, "outcome_unknown"),
        ];
        let errors = STORAGE_ERROR_CODES
            .iter()
            .map(|code| (StorageOutcome::Error, *code));
        for (outcome, error_code) in fixed.into_iter().chain(errors) {
            cells.push(StorageCell {
                operation,
                outcome,
                error_code,
                duration: Histogram::default(),
                retries: 0,
            });
        }
    }
    cells.sort_by(|a, b| {
        (a.operation.as_str(), a.outcome.as_str(), a.error_code).cmp(&(
            b.operation.as_str(),
            b.outcome.as_str(),
            b.error_code,
        ))
    });
    cells
}
