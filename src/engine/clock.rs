//! The clock every time decision is made with.
//!
//! In production `now` is read inside each SQL statement from the database
//! (`unixepoch('subsec')`), so every isolate and colo agrees and a drifting
//! Worker clock can never extend a lease. Tests swap in a manual clock whose
//! value is bound to the clock parameter of the very same constant
//! statements (see `store::statement`), so time-based cases run instantly
//! and deterministically.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};

/// The Worker's `Date.now()`, installed by the shell: `std`'s clock does not
/// exist on `wasm32-unknown-unknown`.
static WALL_CLOCK: OnceLock<fn() -> i64> = OnceLock::new();

/// Installs the platform's wall clock (once per isolate).
pub fn set_wall_clock(read: fn() -> i64) {
    let _ = WALL_CLOCK.set(read);
}

#[cfg(not(target_arch = "wasm32"))]
fn system_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(target_arch = "wasm32")]
fn system_ms() -> i64 {
    0
}

#[derive(Debug, Clone, Default)]
pub enum Clock {
    /// The database decides (production).
    #[default]
    Database,
    /// A settable clock for tests and benchmarks.
    Manual(Arc<AtomicI64>),
}

impl Clock {
    /// A manual clock starting at `start_ms`.
    pub fn manual(start_ms: i64) -> Self {
        Clock::Manual(Arc::new(AtomicI64::new(start_ms)))
    }

    /// Moves a manual clock forward (or back) by `delta_ms`; no-op otherwise.
    pub fn advance(&self, delta_ms: i64) {
        if let Clock::Manual(now) = self {
            now.fetch_add(delta_ms, Ordering::SeqCst);
        }
    }

    /// The current value of a manual clock; `None` for the database clock.
    pub fn manual_now(&self) -> Option<i64> {
        match self {
            Clock::Manual(now) => Some(now.load(Ordering::SeqCst)),
            Clock::Database => None,
        }
    }

    /// The time of the platform (or the manual clock), for inputs that
    /// decide nothing about a message's state, such as the publish time a
    /// filter sees. Every state decision still reads `now` inside SQL.
    pub fn wall_ms(&self) -> i64 {
        match self {
            Clock::Manual(now) => now.load(Ordering::SeqCst),
            Clock::Database => WALL_CLOCK.get().map_or_else(system_ms, |read| read()),
        }
    }
}
