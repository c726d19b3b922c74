//! Shared test fixtures: the engine over an in-process libSQL server (the
//! same Hrana JSON path the Worker uses), a manual clock, and a round-trip
//! counter.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use mqlite_edge::engine::{Clock, Engine, Limits, Waiter};
use mqlite_edge::store::{HttpReply, Transport, TransportError};
use mqlite_libsql::Database;

/// 2025-06-15T15:06:40Z, an arbitrary fixed start for manual clocks.
pub const T0: i64 = 1_750_000_000_000;

/// A database file in a fresh temporary directory, removed on drop.
pub struct TempDb {
    pub db: Arc<Database>,
    dir: PathBuf,
}

impl TempDb {
    pub fn new() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "mqlite-edge-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let db = Database::open(dir.join("test.db"), None).expect("open test database");
        TempDb { db: Arc::new(db), dir }
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Transport that hands the pipeline body to the in-process server.
#[derive(Clone)]
pub struct InProcess {
    pub db: Arc<Database>,
}

impl Transport for InProcess {
    async fn send_pipeline(&self, body: String) -> Result<HttpReply, TransportError> {
        let db = self.db.clone();
        let reply = tokio::task::spawn_blocking(move || db.pipeline(None, body.as_bytes()))
            .await
            .map_err(|e| TransportError::AnswerLost(e.to_string()))?;
        Ok(HttpReply {
            status: reply.status,
            body: reply.body.into_bytes(),
        })
    }

    async fn pause(&self, millis: u32) {
        tokio::time::sleep(std::time::Duration::from_millis(millis.into())).await;
    }
}

/// Engine + database + manual clock.
pub struct Harness {
    pub engine: Engine<InProcess>,
    pub clock: Clock,
    pub temp: TempDb,
}

impl Harness {
    pub fn new() -> Self {
        Self::with_limits(Limits::default())
    }

    pub fn with_limits(limits: Limits) -> Self {
        let temp = TempDb::new();
        let clock = Clock::manual(T0);
        let engine = Engine::new(InProcess { db: temp.db.clone() }, clock.clone(), limits);
        Harness { engine, clock, temp }
    }

    /// Same database, database clock (real time).
    pub fn real_time() -> Self {
        let temp = TempDb::new();
        let clock = Clock::Database;
        let engine = Engine::new(InProcess { db: temp.db.clone() }, clock.clone(), Limits::default());
        Harness { engine, clock, temp }
    }

    pub fn now(&self) -> i64 {
        self.clock.manual_now().expect("manual clock")
    }

    pub fn advance(&self, ms: i64) {
        self.clock.advance(ms);
    }

    /// Pipeline requests the database has served so far.
    pub fn round_trips(&self) -> u64 {
        self.temp.db.pipeline_requests()
    }
}

/// Real-time waiter for long polls.
pub struct RealWaiter(pub Instant);

impl RealWaiter {
    pub fn start() -> Self {
        RealWaiter(Instant::now())
    }
}

impl Waiter for RealWaiter {
    fn elapsed_ms(&self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }

    async fn sleep(&self, millis: u64) {
        tokio::time::sleep(std::time::Duration::from_millis(millis)).await;
    }
}

/// A waiter that never waits (for wait_time_ms = 0 paths).
pub struct NoWait;

impl Waiter for NoWait {
    fn elapsed_ms(&self) -> u64 {
        u64::MAX / 2
    }

    async fn sleep(&self, _millis: u64) {}
}
