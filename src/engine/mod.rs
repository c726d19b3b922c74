//! Queue semantics as SQL. Every RPC is one [`Program`] run as one database
//! round trip; time is decided by the [`Clock`] inside the SQL; the engine
//! performs no I/O of its own beyond the store it is given.

mod admin;
mod clock;
mod deferred;
mod dlq;
mod dlq_across;
mod effects;
mod keys;
mod maintenance;
mod peek;
pub mod pgmq;
mod placement;
#[cfg(test)]
mod plans;
mod queue_rows;
mod queues;
mod receive;
mod receive_fold;
mod send;
mod send_fold;
mod settle;
mod settle_fold;
mod stats;
mod sweep;
mod topics;
mod wait;

pub use admin::{EntityCounts, QueueGauge};
pub use clock::{set_wall_clock, Clock};
pub use dlq::RedriveRequest;
pub use dlq_across::{redrive_across, Site};
pub(crate) use effects::vocabulary;
pub use effects::{
    Effect, Effects, Event, FilterStage, MaintenanceOutcome, StorageCall, StorageOp,
    StorageOutcome, Task,
};
pub use keys::{
    is_managed_format, AccessKey, CreatedKey, KeyCheck, KeyCopy, KeyPage, KeySort, KeyState,
    NewKey, Permissions,
};
pub use peek::{PeekRequest, PeekedMessage};
pub use queues::{QueueConfigInput, QueueSummary};
pub use receive::{ReceiveMode, ReceiveRequest, ReceivedMessage};
pub use send::{OutgoingMessage, SendRequest};
pub use settle::{BatchResult, SettleItem, SettleRequest, Settlement};
pub use stats::QueueStats;
pub use sweep::Retention;
pub use topics::{compile_filter, FilterTest, SubscriptionSummary, TopicCache};
pub use wait::{LongPoll, Parked, Waiter, PARK_MAX_MS};

/// The kinds of write that fold when they meet in a batch
/// (docs/engine.md#folding), for whoever builds a coalescer.
pub static FOLDS: crate::store::group::Folds = &[
    &send_fold::SendFold,
    &settle_fold::CompleteFold,
    &receive_fold::ReceiveFold,
    &pgmq::delete_fold::PgmqDeleteFold,
];

use std::sync::Arc;

use crate::store::{
    Committed, Program, RunError, RunStats, Statement, Store, StoreError, Transport,
};

/// Every way an RPC can fail, in domain terms. The wire layer owns the
/// mapping to status codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineError {
    InvalidArgument(String),
    QueueNotFound,
    /// Cancel found nothing to cancel.
    NotFound,
    LockLost,
    DedupConflict,
    GroupRequired,
    NameConflict(String),
    /// The database refused the request's managed key (unknown, revoked,
    /// expired or lacking the permission): nothing ran.
    CredentialRejected,
    KeyConflict,
    QueueChanged,
    QueueNotEmpty,
    MessageTooLarge {
        size: usize,
        cap: usize,
    },
    /// The CSPRNG failed: never fall back to a weak token.
    Entropy(String),
    Store(StoreError),
}

impl From<StoreError> for EngineError {
    fn from(e: StoreError) -> Self {
        EngineError::Store(e)
    }
}

impl From<crate::store::RowError> for EngineError {
    fn from(e: crate::store::RowError) -> Self {
        EngineError::Store(e.into())
    }
}

/// Caps and defaults that a deployment may tune.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest accepted message body (`MQLITE_MAX_MESSAGE_BYTES`).
    pub max_message_bytes: usize,
    /// Cumulative body bytes one Receive/Peek returns before stopping early
    /// (always at least one message). Lower than the reference's 32 MiB:
    /// base64 inflates bodies 4/3 inside a 128 MB isolate.
    pub response_budget_bytes: i64,
    /// Database requests one long-polling Receive may spend, retries and
    /// migrations included (Workers allow 50 subrequests per request);
    /// clamped to 1..=[`MAX_POLL_REQUESTS`].
    pub poll_max_requests: u32,
}

/// The most database requests one Receive may make: under the platform's 50
/// subrequests per request with room for the credential lookup and a retry.
pub const MAX_POLL_REQUESTS: u32 = 45;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: 1_048_576,
            response_budget_bytes: 8 * 1_048_576,
            poll_max_requests: 40,
        }
    }
}

/// The queue engine over one database.
pub struct Engine<T> {
    store: Store<T>,
    clock: Clock,
    limits: Limits,
    topics: Arc<TopicCache>,
    /// The caller's managed key, checked inside every program this engine
    /// runs (no extra round trip); `None` for configured credentials.
    credential: Option<Arc<KeyCheck>>,
    /// Where storage calls, message effects, filter failures and
    /// maintenance runs are reported; `None` reports nothing (an engine
    /// nobody drains must not accumulate).
    effects: Option<Arc<Effects>>,
}

impl<T: Transport> Engine<T> {
    pub fn new(transport: T, clock: Clock, limits: Limits) -> Self {
        Engine {
            store: Store::new(transport),
            clock,
            limits,
            topics: Arc::default(),
            credential: None,
            effects: None,
        }
    }

    /// Shares an isolate-wide cache of compiled topic filters.
    pub fn with_topics(mut self, topics: Arc<TopicCache>) -> Self {
        self.topics = topics;
        self
    }

    /// Gates this engine's writes on the isolate-wide breaker `health`.
    pub fn with_write_health(mut self, health: Arc<crate::store::WriteHealth>) -> Self {
        self.store = self.store.with_write_health(health);
        self
    }

    /// Appends what this engine does to `effects`, for its owner to drain
    /// (the HTTP layer, once per request, into the isolate's counters).
    pub fn with_effects(mut self, effects: Arc<Effects>) -> Self {
        self.effects = Some(effects);
        self
    }

    /// Makes every program of this engine verify `key` first.
    pub fn with_credential(mut self, key: Arc<KeyCheck>) -> Self {
        self.credential = Some(key);
        self
    }

    /// An engine over the same database and settings for one request made
    /// with a managed key; it reports to the same journal.
    pub fn for_key(&self, key: Arc<KeyCheck>) -> Engine<T> {
        let engine = Engine {
            store: self.store.sharing(),
            clock: self.clock.clone(),
            limits: self.limits.clone(),
            topics: self.topics.clone(),
            credential: None,
            effects: None,
        }
        .with_credential(key);
        let engine = match self.store.write_health() {
            Some(health) => engine.with_write_health(health.clone()),
            None => engine,
        };
        match &self.effects {
            Some(effects) => engine.with_effects(effects.clone()),
            None => engine,
        }
    }

    pub fn store(&self) -> &Store<T> {
        &self.store
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Runs a program, preceded by the credential check when there is one.
    async fn run(&self, program: &mut Program<'_>) -> Result<Committed, RunError> {
        self.run_keeping(program).await.map_err(|(e, _)| e)
    }

    /// [`Engine::run`], keeping the rows read before a fired guard.
    async fn run_keeping(
        &self,
        program: &mut Program<'_>,
    ) -> Result<Committed, (RunError, Option<Committed>)> {
        self.run_within(program, &mut RunStats::default()).await
    }

    /// [`Engine::run_keeping`] within `stats.fetch_limit` database
    /// requests; `stats` learns the requests made.
    async fn run_within(
        &self,
        program: &mut Program<'_>,
        stats: &mut RunStats,
    ) -> Result<Committed, (RunError, Option<Committed>)> {
        if let Some(key) = &self.credential {
            key.attach(program);
        }
        let result = self.run_counted(program, stats).await;
        if let Some(key) = &self.credential {
            if !matches!(
                result,
                Err((RunError::PreludeRejected | RunError::Store(_), _))
            ) {
                key.mark_verified();
            }
        }
        result
    }

    /// Runs a program as it is, without the credential check (the key
    /// lookup itself), and reports the storage call.
    async fn run_uncredentialed(
        &self,
        program: &mut Program<'_>,
    ) -> Result<Committed, (RunError, Option<Committed>)> {
        self.run_counted(program, &mut RunStats::default()).await
    }

    /// Runs a program as it is and reports the storage call.
    async fn run_counted(
        &self,
        program: &mut Program<'_>,
        stats: &mut RunStats,
    ) -> Result<Committed, (RunError, Option<Committed>)> {
        program.set_now(self.clock.manual_now());
        let started = self.clock.wall_ms();
        let result = self.store.run_keeping(program, stats).await;
        self.note_storage(program, &result, started, *stats);
        result
    }

    /// Appends to the journal, if this engine has one.
    fn report(&self, effect: impl FnOnce() -> Effect) {
        if let Some(effects) = &self.effects {
            effects.push(effect());
        }
    }

    /// The publish time a topic filter sees (`enqueued_at`).
    fn publish_time_ms(&self) -> i64 {
        self.clock.wall_ms()
    }

    /// A filter failed while routing a publish: fail closed, and count it.
    fn note_filter_failure(&self) {
        self.report(|| Effect::FilterFailure(FilterStage::Evaluate));
    }

    /// Counts a committed effect on `queue` (never a replay). Zero effects
    /// are not journaled: they would count nothing, and must not make a
    /// queue known to the counters.
    fn note(&self, queue: &str, event: Event, n: u64) {
        if n > 0 {
            self.report(|| Effect::Message {
                queue: queue.to_owned(),
                event,
                count: n,
            });
        }
    }

    /// Reports a committed change that made messages claimable on a queue
    /// someone waits on, at database time `at_ms` (docs/semantics.md#long-polling).
    fn note_claimable(&self, queue: &str, at_ms: i64) {
        self.report(|| Effect::Claimable {
            queue: queue.to_owned(),
            at_ms,
        });
    }

    /// Reports one finished storage call, with the retries the store made
    /// inside it.
    fn note_storage(
        &self,
        program: &Program,
        result: &Result<Committed, (RunError, Option<Committed>)>,
        started_ms: i64,
        stats: RunStats,
    ) {
        let Some(effects) = &self.effects else {
            return;
        };
        let operation = if program.is_write() {
            StorageOp::Write
        } else {
            StorageOp::Read
        };
        let (outcome, error) = match result {
            Ok(_) => (StorageOutcome::Ok, None),
            Err((RunError::Rejected(_) | RunError::PreludeRejected, _)) => {
                (StorageOutcome::Rejected, None)
            }
            Err((RunError::Store(e @ StoreError::OutcomeUnknown(_)), _)) => {
                (StorageOutcome::OutcomeUnknown, Some(e.clone()))
            }
            Err((RunError::Store(e), _)) => (StorageOutcome::Error, Some(e.clone())),
        };
        let seconds = (self.clock.wall_ms() - started_ms).max(0) as f64 / 1000.0;
        effects.push(Effect::Storage(StorageCall {
            operation,
            outcome,
            error,
            seconds,
            retries: stats.retries,
            carried: stats.carried,
        }));
    }
}

/// Maps a run failure whose guards the caller did not expect.
fn unexpected(e: RunError) -> EngineError {
    match e {
        RunError::Store(e) => EngineError::Store(e),
        RunError::PreludeRejected => EngineError::CredentialRejected,
        RunError::Rejected(step) => EngineError::Store(StoreError::Failed(format!(
            "unexpected guard at step {}",
            step.0
        ))),
    }
}

/// `n` random bytes from the platform CSPRNG as lowercase hex.
pub fn random_hex(n: usize) -> Result<String, EngineError> {
    let mut bytes = vec![0u8; n];
    fill_random(&mut bytes)?;
    Ok(hex(&bytes))
}

/// Fills `bytes` from the platform CSPRNG.
fn fill_random(bytes: &mut [u8]) -> Result<(), EngineError> {
    getrandom::getrandom(bytes).map_err(|e| EngineError::Entropy(e.to_string()))
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[(b >> 4) as usize] as char);
        out.push(DIGITS[(b & 15) as usize] as char);
    }
    out
}

/// A row exactly when queue `?1` exists.
const QUEUE_EXISTS: Statement = crate::statement!("SELECT 1 FROM queues WHERE name = ?1");

/// Guard: queue `?1` does not exist.
const QUEUE_MISSING: Statement = crate::guard!("NOT EXISTS (SELECT 1 FROM queues WHERE name = ?1)");

/// The longest duration any request may carry (lock, TTL, dedup window,
/// DLQ age, backoff, age filters): 10 years. With instants bounded by
/// [`MAX_INSTANT_MS`], `instant + duration` can never overflow SQLite's
/// 64-bit integers (which would turn it into a REAL a STRICT column refuses).
pub const MAX_DURATION_MS: i64 = 10 * 366 * 24 * 3_600_000;

/// The latest instant a request may name (schedule time, key expiry): the
/// end of year 9999.
pub const MAX_INSTANT_MS: i64 = 253_402_300_799_999;

/// `value` of `field` is at most `max`, or a 400.
fn at_most(field: &str, value: i64, max: i64) -> Result<(), EngineError> {
    if value > max {
        Err(EngineError::InvalidArgument(format!(
            "{field} must be at most {max} (got {value})"
        )))
    } else {
        Ok(())
    }
}

/// Rejects an empty queue name before any lookup (docs/deviations.md D1).
fn require_name(name: &str) -> Result<(), EngineError> {
    if name.is_empty() {
        Err(EngineError::InvalidArgument(
            "queue name is required".into(),
        ))
    } else {
        Ok(())
    }
}
