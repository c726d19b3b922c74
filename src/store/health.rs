//! Write health: a circuit breaker over the database's write path, shared by
//! every request of one isolate.
//!
//! A database can stop committing while it still answers reads (sqld's
//! connection-manager deadlock, docs/sqld-concurrency.md). Without a breaker
//! every write then waits the full database timeout and answers
//! `outcome_unknown`, and each abandoned request may cost the server a thread.
//! After [`Policy::threshold`] consecutive writes whose answer was lost, the
//! breaker opens: writes fail at once, unsent, for a back-off that doubles on
//! every failed probe (capped). When it expires exactly one write goes through
//! as a probe; its success closes the breaker. Reads are never gated, so a
//! stalled writer never hides data.
//!
//! The state sits behind a `Mutex` that is never held across an `.await`
//! (wasm is single-threaded, native tests are not).

use std::sync::{Arc, Mutex, MutexGuard};

/// When to open and how long to stay open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Consecutive write attempts without progress that open the breaker.
    pub threshold: u32,
    /// First back-off; each failed probe doubles it.
    pub base_backoff_ms: i64,
    /// Longest back-off.
    pub max_backoff_ms: i64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            threshold: 3,
            base_backoff_ms: 1_000,
            max_backoff_ms: 30_000,
        }
    }
}

/// Milliseconds on some monotonic-enough clock (the Worker's `Date.now()`,
/// or a manual clock in tests).
pub type Now = Arc<dyn Fn() -> i64 + Send + Sync>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Writes flow; `failures` consecutive lost answers so far.
    Closed { failures: u32 },
    /// Writes are refused until `until_ms`; then one probe may go.
    Open { until_ms: i64, backoff_ms: i64 },
    /// The probe is in flight; everything else is refused.
    Probing { backoff_ms: i64 },
}

/// What the isolate knows about the database's write path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteState {
    Accepting,
    /// Writes are refused (until a probe succeeds).
    Paused,
}

/// Permission to send one write; tell the breaker how it went with
/// [`WritePermit::succeeded`] or [`WritePermit::no_progress`]. A permit
/// dropped without a verdict (the request was cancelled) frees the probe slot.
pub struct WritePermit<'a> {
    health: &'a WriteHealth,
    probe: bool,
    settled: bool,
}

impl WritePermit<'_> {
    /// The database answered the write (whatever the answer): it is taking
    /// write requests again.
    pub fn succeeded(mut self) {
        self.settled = true;
        *self.health.lock() = State::Closed { failures: 0 };
    }

    /// The write made no progress: its answer was lost (timeout, reset,
    /// gateway) or the database was too busy to take it (429).
    pub fn no_progress(mut self) {
        self.settled = true;
        self.health.record_lost(self.probe);
    }
}

impl Drop for WritePermit<'_> {
    fn drop(&mut self) {
        if self.probe && !self.settled {
            let mut guard = self.health.lock();
            if let State::Probing { backoff_ms } = *guard {
                *guard = State::Open {
                    until_ms: i64::MIN,
                    backoff_ms,
                };
            }
        }
    }
}

/// The isolate-wide breaker (see the module documentation).
pub struct WriteHealth {
    state: Mutex<State>,
    policy: Policy,
    now: Now,
}

impl WriteHealth {
    pub fn new(policy: Policy, now: Now) -> Self {
        WriteHealth {
            state: Mutex::new(State::Closed { failures: 0 }),
            policy,
            now,
        }
    }

    /// A closed breaker with this one's policy and clock, for another
    /// database (each database's writes stall on their own).
    pub fn fresh(&self) -> WriteHealth {
        WriteHealth::new(self.policy, self.now.clone())
    }

    /// A permit to send a write, or how long writes stay refused.
    pub fn admit(&self) -> Result<WritePermit<'_>, i64> {
        let now = (self.now)();
        let mut guard = self.lock();
        let probe = match *guard {
            State::Closed { .. } => false,
            State::Open {
                until_ms,
                backoff_ms,
            } if now >= until_ms => {
                *guard = State::Probing { backoff_ms };
                true
            }
            State::Open { until_ms, .. } => return Err(until_ms - now),
            State::Probing { .. } => return Err(0),
        };
        Ok(WritePermit {
            health: self,
            probe,
            settled: false,
        })
    }

    /// Whether writes are being accepted right now (Status, readiness).
    pub fn state(&self) -> WriteState {
        match *self.lock() {
            State::Closed { .. } => WriteState::Accepting,
            State::Open { .. } | State::Probing { .. } => WriteState::Paused,
        }
    }

    fn record_lost(&self, probe: bool) {
        let now = (self.now)();
        let policy = self.policy;
        let mut guard = self.lock();
        *guard = match *guard {
            State::Closed { failures } if failures + 1 >= policy.threshold => State::Open {
                until_ms: now.saturating_add(policy.base_backoff_ms),
                backoff_ms: policy.base_backoff_ms,
            },
            State::Closed { failures } => State::Closed {
                failures: failures + 1,
            },
            State::Probing { backoff_ms } if probe => {
                let backoff_ms = backoff_ms.saturating_mul(2).min(policy.max_backoff_ms);
                State::Open {
                    until_ms: now.saturating_add(backoff_ms),
                    backoff_ms,
                }
            }
            // A write sent before the breaker opened: already counted.
            open => open,
        };
    }

    /// The state is plain data, so a panic elsewhere cannot leave it
    /// half-written: a poisoned lock is still safe to use.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicI64, Ordering};

    fn manual() -> (WriteHealth, Arc<AtomicI64>) {
        let now = Arc::new(AtomicI64::new(0));
        let read = now.clone();
        let health = WriteHealth::new(
            Policy::default(),
            Arc::new(move || read.load(Ordering::SeqCst)),
        );
        (health, now)
    }

    fn lose(health: &WriteHealth) {
        if let Ok(permit) = health.admit() {
            permit.no_progress();
        }
    }

    fn succeed(health: &WriteHealth) {
        if let Ok(permit) = health.admit() {
            permit.succeeded();
        }
    }

    #[test]
    fn opens_after_threshold_and_doubles_on_failed_probes() {
        let (health, now) = manual();
        lose(&health);
        lose(&health);
        assert_eq!(health.state(), WriteState::Accepting);
        lose(&health);
        assert_eq!(health.admit().err(), Some(1_000));
        now.store(1_000, Ordering::SeqCst);
        let probe = health.admit();
        assert!(probe.is_ok());
        assert_eq!(health.admit().err(), Some(0), "one probe at a time");
        if let Ok(probe) = probe {
            probe.no_progress();
        }
        assert_eq!(health.admit().err(), Some(2_000));
        for _ in 0..10 {
            now.fetch_add(60_000, Ordering::SeqCst);
            lose(&health);
        }
        assert_eq!(health.admit().err(), Some(30_000), "capped");
    }

    #[test]
    fn success_resets_and_probe_success_closes() {
        let (health, now) = manual();
        lose(&health);
        lose(&health);
        succeed(&health);
        lose(&health);
        lose(&health);
        assert_eq!(health.state(), WriteState::Accepting, "count restarted");
        lose(&health);
        now.store(1_000, Ordering::SeqCst);
        succeed(&health);
        assert_eq!(health.state(), WriteState::Accepting);
    }

    #[test]
    fn a_dropped_probe_frees_the_slot() {
        let (health, now) = manual();
        for _ in 0..3 {
            lose(&health);
        }
        now.store(1_000, Ordering::SeqCst);
        drop(health.admit());
        assert!(health.admit().is_ok(), "the next request probes instead");
    }

    /// Opens the breaker (three lost answers) and lets its first back-off
    /// pass: the next write is the probe.
    fn opened_and_due(health: &WriteHealth, now: &AtomicI64) {
        for _ in 0..3 {
            lose(health);
        }
        now.store(1_000, Ordering::SeqCst);
    }

    #[test]
    fn a_write_in_flight_lost_during_the_probe_does_not_double_the_backoff() {
        let (health, now) = manual();
        lose(&health);
        lose(&health);
        let in_flight = health.admit().ok();
        lose(&health);
        now.store(1_000, Ordering::SeqCst);
        let probe = health.admit().ok();
        assert!(probe.is_some());
        if let Some(write) = in_flight {
            write.no_progress();
        }
        assert_eq!(health.admit().err(), Some(0), "the probe is still out");
        if let Some(probe) = probe {
            probe.no_progress();
        }
        assert_eq!(health.admit().err(), Some(2_000), "doubled once");
    }

    #[test]
    fn a_write_in_flight_dropped_during_the_probe_keeps_the_slot() {
        let (health, now) = manual();
        lose(&health);
        lose(&health);
        let in_flight = health.admit().ok();
        lose(&health);
        now.store(1_000, Ordering::SeqCst);
        let probe = health.admit();
        assert!(probe.is_ok());
        drop(in_flight);
        assert_eq!(health.admit().err(), Some(0), "one probe at a time");
    }

    #[test]
    fn a_cancelled_probe_lets_the_next_write_probe_at_once() {
        let (health, now) = manual();
        opened_and_due(&health, &now);
        drop(health.admit());
        let probe = health.admit();
        assert!(probe.is_ok(), "the next request probes at once");
        assert_eq!(health.admit().err(), Some(0), "and is the only probe");
        if let Ok(probe) = probe {
            probe.no_progress();
        }
        assert_eq!(
            health.admit().err(),
            Some(2_000),
            "the cancelled probe did not double the back-off"
        );
    }
}
