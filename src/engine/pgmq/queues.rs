//! Queue resources: create (PUT), list, drop, purge and metrics.

use super::{queue_found, QUEUE_HEAD};
use crate::engine::queue_rows::{live_ids, queue_ids};
use crate::engine::{random_hex, require_name, unexpected, Engine, EngineError};
use crate::store::{Program, Row, RunError, Statement, Transport};

/// pgmq's queue-name limit (its tables are named after the queue).
pub const MAX_NAME_CHARS: usize = 47;

/// Guard: the name is a topic; pgmq routes never address one (§5.1).
const IS_TOPIC: Statement = crate::guard!("EXISTS (SELECT 1 FROM subscriptions WHERE topic = ?1)");

/// A standard queue with default configuration, unless the name exists
/// (either kind): PUT never changes an existing queue (§5.1).
const CREATE: Statement = crate::statement!(
    "\
INSERT INTO queues (name, kind, generation, created_at, updated_at)
VALUES (?1, 'queue', ?2, {now}, {now})
ON CONFLICT (name) DO NOTHING"
);

/// Every queue with its creation time, oldest first.
const LIST: Statement =
    crate::statement!("SELECT name, created_at FROM queues ORDER BY created_at, name");

/// Guard: `?1` is a subscription's backing queue (dropped with Connect-JSON
/// only, like DeleteQueue).
const IS_SUBSCRIPTION: Statement =
    crate::guard!("EXISTS (SELECT 1 FROM queues WHERE name = ?1 AND kind = 'subscription')");

/// Drop: every message and auxiliary record of the queue, then the queue
/// row, whose trigger drops the archive (migration 0005). The last
/// statement returns a row exactly when the queue existed.
pub(in crate::engine) const DROP: [Statement; 6] = [
    crate::statement!(concat!(
        "DELETE FROM messages WHERE id IN (",
        queue_ids!("?1"),
        ")"
    )),
    crate::statement!("DELETE FROM dedup WHERE queue = ?1"),
    crate::statement!("DELETE FROM settlement_receipts WHERE queue = ?1"),
    crate::statement!("DELETE FROM receive_attempts WHERE queue = ?1"),
    // Dead letters on their way to another database go with the queue: a
    // trip that already arrived stays delivered; one not yet delivered
    // arrives only if a Redrive under way had read it, uncounted
    // (docs/databases.md#redrive-across-databases).
    crate::statement!("DELETE FROM redrive_outbox WHERE source = ?1"),
    crate::statement!("DELETE FROM queues WHERE name = ?1 RETURNING 1"),
];

/// Purge: every message of the queue, whatever its state (§1).
pub(in crate::engine) const PURGE: Statement = crate::statement!(concat!(
    "DELETE FROM messages WHERE id IN (",
    queue_ids!("?1"),
    ")"
));
/// Rows the statement before deleted, triggers' rows not included.
const CHANGES: Statement = crate::statement!("SELECT changes()");

/// One queue's metrics, pgmq's `metrics()` (docs/pgmq.md): the queue
/// holds its unfinished rows (dead letters and archived messages are out
/// of it); visible = what a read could take now, projecting due schedules
/// and expired leases with deliveries left as housekeeping would.
macro_rules! metrics_select {
    ($filter:literal) => {
        concat!(
            "SELECT q.name, q.sent_total, {now},
  (SELECT count(*) FROM (",
            live_ids!("q.name"),
            ")),
  (SELECT count(*) FROM messages m WHERE m.queue = q.name AND m.state = 'active'
     AND m.group_id IS NULL AND (m.expires_at = 0 OR m.expires_at > {now}))
  + (SELECT count(*) FROM messages m WHERE m.queue = q.name AND m.state = 'active'
     AND m.group_id IS NOT NULL AND (m.expires_at = 0 OR m.expires_at > {now}))
  + (SELECT count(*) FROM messages m WHERE m.queue = q.name AND m.state = 'locked'
     AND m.locked_until <= {now} AND m.delivery_count < q.max_delivery_count
     AND (m.expires_at = 0 OR m.expires_at > {now}))
  + (SELECT count(*) FROM messages m WHERE m.queue = q.name AND m.state = 'scheduled'
     AND m.visible_at <= {now} AND (m.expires_at = 0 OR m.expires_at > {now})),
  (SELECT min(enqueued_at) FROM messages WHERE id IN (",
            live_ids!("q.name"),
            ")),
  (SELECT max(enqueued_at) FROM messages WHERE id IN (",
            live_ids!("q.name"),
            "))
FROM queues q ",
            $filter
        )
    };
}

pub(in crate::engine) const METRICS_ONE: Statement =
    crate::statement!(metrics_select!("WHERE q.name = ?1"));
pub(in crate::engine) const METRICS_ALL: Statement =
    crate::statement!(metrics_select!("ORDER BY q.name"));

/// A queue as pgmq lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgmqQueue {
    pub name: String,
    pub created_at_ms: i64,
}

/// pgmq's metrics of one queue; ages in milliseconds (the wire rounds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgmqMetrics {
    pub queue_name: String,
    pub total_messages: i64,
    pub scrape_time_ms: i64,
    pub queue_length: i64,
    pub queue_visible_length: i64,
    pub oldest_age_ms: Option<i64>,
    pub newest_age_ms: Option<i64>,
}

fn metrics(row: &Row) -> Result<PgmqMetrics, EngineError> {
    let now = row.int(2)?;
    let age = |i: usize| -> Result<Option<i64>, EngineError> {
        let enqueued = row.int(i)?;
        Ok((row.int(3)? > 0).then_some((now - enqueued).max(0)))
    };
    Ok(PgmqMetrics {
        queue_name: row.text(0)?.to_owned(),
        total_messages: row.int(1)?,
        scrape_time_ms: now,
        queue_length: row.int(3)?,
        queue_visible_length: row.int(4)?,
        oldest_age_ms: age(5)?,
        newest_age_ms: age(6)?,
    })
}

/// The name rule of pgmq's routes: non-empty, at most 47 characters.
pub fn check_name(name: &str) -> Result<(), EngineError> {
    require_name(name)?;
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(EngineError::InvalidArgument(format!(
            "queue name is too long, maximum length is {MAX_NAME_CHARS} characters"
        )));
    }
    Ok(())
}

impl<T: Transport> Engine<T> {
    /// PUT: creates a standard queue with default configuration if absent.
    pub async fn pgmq_create(&self, name: &str) -> Result<(), EngineError> {
        check_name(name)?;
        let generation = random_hex(16)?;
        let mut program = Program::write();
        let topic = program.guard(&IS_TOPIC, vec![name.into()]);
        program.step(&CREATE, vec![name.into(), generation.into()]);
        match self.run(&mut program).await {
            Ok(_) => Ok(()),
            Err(RunError::Rejected(step)) if step == topic => Err(EngineError::QueueNotFound),
            Err(e) => Err(unexpected(e)),
        }
    }

    /// Every queue of both kinds, oldest first.
    pub async fn pgmq_list(&self) -> Result<Vec<PgmqQueue>, EngineError> {
        let mut program = Program::read();
        let list = program.step(&LIST, vec![]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        committed
            .rows(list)
            .map(|row| {
                Ok(PgmqQueue {
                    name: row.text(0)?.to_owned(),
                    created_at_ms: row.int(1)?,
                })
            })
            .collect()
    }

    /// DELETE: drops the queue with every message, archived ones included.
    pub async fn pgmq_drop(&self, name: &str) -> Result<(), EngineError> {
        let mut program = Program::write();
        let subscription = program.guard(&IS_SUBSCRIPTION, vec![name.into()]);
        let mut last = None;
        for statement in &DROP {
            last = Some(program.step(statement, vec![name.into()]));
        }
        match self.run(&mut program).await {
            Ok(committed) => match last.and_then(|step| committed.first_row(step)) {
                Some(_) => Ok(()),
                None => Err(EngineError::QueueNotFound),
            },
            Err(RunError::Rejected(step)) if step == subscription => {
                Err(EngineError::InvalidArgument(format!(
                    "{name:?} is a subscription's backing queue: remove it through Connect-JSON"
                )))
            }
            Err(e) => Err(unexpected(e)),
        }
    }

    /// Purge: deletes every message of the queue; returns how many.
    pub async fn pgmq_purge(&self, name: &str) -> Result<i64, EngineError> {
        let mut program = Program::write();
        program.head(&QUEUE_HEAD, vec![name.into()]);
        program.step(&PURGE, vec![name.into()]);
        let changes = program.step(&CHANGES, vec![]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        queue_found(&committed)?;
        let purged = committed.first_row(changes).map_or(Ok(0), |r| r.int(0))?;
        self.note(name, crate::engine::Event::Purged, purged as u64);
        Ok(purged)
    }

    /// One queue's metrics (a read: nothing is written).
    pub async fn pgmq_metrics(&self, name: &str) -> Result<PgmqMetrics, EngineError> {
        let mut program = Program::read();
        let step = program.step(&METRICS_ONE, vec![name.into()]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        let row = committed
            .first_row(step)
            .ok_or(EngineError::QueueNotFound)?;
        metrics(&row)
    }

    /// Every queue's metrics, by name.
    pub async fn pgmq_metrics_all(&self) -> Result<Vec<PgmqMetrics>, EngineError> {
        let mut program = Program::read();
        let step = program.step(&METRICS_ALL, vec![]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        committed.rows(step).map(|row| metrics(&row)).collect()
    }
}

/// Readiness: one read that reaches the database.
const PING: Statement = crate::statement!("SELECT 1");

impl<T: Transport> Engine<T> {
    /// `/v1/ready`: one round trip; any failure means not ready.
    pub async fn pgmq_ping(&self) -> Result<(), EngineError> {
        let mut program = Program::read();
        program.step(&PING, vec![]);
        self.run(&mut program).await.map_err(unexpected)?;
        Ok(())
    }
}
