//! The periodic sweep (docs/semantics.md#maintenance, run by the Workers cron): the lazy
//! housekeeping for every queue at once, so idle queues converge, plus the
//! janitors and DLQ retention that no request drives. Correctness never
//! depends on it having run: every request does its own housekeeping and
//! every lookup checks its own window.

use super::{unexpected, Effect, Engine, EngineError, MaintenanceOutcome, Task};
use crate::store::Statement;
use crate::store::{Program, Transport};

/// Broker-wide DLQ retention defaults (`MQLITE_DLQ_*`); 0 = no bound.
/// A queue's own positive `dlq_max_*` value wins over these, a negative
/// one opts the queue out (unbounded), zero inherits (docs/deviations.md D4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    pub max_age_ms: i64,
    pub max_count: i64,
    pub max_bytes: i64,
}

impl Default for Retention {
    /// The reference broker's defaults: 14 days, 1,000,000 per queue, bytes off.
    fn default() -> Self {
        Retention {
            max_age_ms: 14 * 24 * 3_600_000,
            max_count: 1_000_000,
            max_bytes: 0,
        }
    }
}

impl Retention {
    /// `MQLITE_DLQ_RETENTION=off`.
    pub fn off() -> Self {
        Retention {
            max_age_ms: 0,
            max_count: 0,
            max_bytes: 0,
        }
    }
}

/// Rows one dimension of retention deletes per pass at most (the reference:
/// 100 batches of 1000).
const RETENTION_LIMIT: i64 = 100_000;

/// Dedup entries older than the widest window of any queue.
const DEDUP_JANITOR: Statement = crate::statement!(
    "\
DELETE FROM dedup WHERE seen_at <= {now} - (SELECT coalesce(max(dedup_window_ms), 0) FROM queues)"
);

const RECEIPT_JANITOR: Statement =
    crate::statement!("DELETE FROM settlement_receipts WHERE expires_at <= {now}");
const ATTEMPT_JANITOR: Statement =
    crate::statement!("DELETE FROM receive_attempts WHERE expires_at <= {now}");

/// Dead letters enqueued longer ago than the queue's age bound (docs/semantics.md#dead-letters: age
/// counts from the original enqueue).
const RETAIN_BY_AGE: Statement = crate::statement!(
    "\
DELETE FROM messages WHERE id IN (
  SELECT m.id FROM messages m JOIN queues q ON q.name = m.queue
  WHERE m.state = 'dead_lettered'
    AND (CASE WHEN q.dlq_max_age_ms > 0 THEN q.dlq_max_age_ms WHEN q.dlq_max_age_ms < 0 THEN 0 ELSE ?1 END) > 0
    AND m.enqueued_at < {now} - (CASE WHEN q.dlq_max_age_ms > 0 THEN q.dlq_max_age_ms WHEN q.dlq_max_age_ms < 0 THEN 0 ELSE ?1 END)
  ORDER BY m.id LIMIT ?2)"
);

/// Keep the newest `count` dead letters of each queue.
const RETAIN_BY_COUNT: Statement = crate::statement!(
    "\
DELETE FROM messages WHERE id IN (
  SELECT id FROM (
    SELECT m.id, row_number() OVER (PARTITION BY m.queue ORDER BY m.id DESC) AS rank,
      CASE WHEN q.dlq_max_count > 0 THEN q.dlq_max_count WHEN q.dlq_max_count < 0 THEN 0 ELSE ?1 END AS cap
    FROM messages m JOIN queues q ON q.name = m.queue WHERE m.state = 'dead_lettered')
  WHERE cap > 0 AND rank > cap LIMIT ?2)"
);

/// Walking newest to oldest, keep dead letters while their cumulative body
/// size stays within the bound; the first that crosses goes, with all older.
const RETAIN_BY_BYTES: Statement = crate::statement!("\
DELETE FROM messages WHERE id IN (
  SELECT id FROM (
    SELECT m.id,
      sum(length(m.body)) OVER (PARTITION BY m.queue ORDER BY m.id DESC ROWS UNBOUNDED PRECEDING) AS kept,
      CASE WHEN q.dlq_max_bytes > 0 THEN q.dlq_max_bytes WHEN q.dlq_max_bytes < 0 THEN 0 ELSE ?1 END AS cap
    FROM messages m JOIN queues q ON q.name = m.queue WHERE m.state = 'dead_lettered')
  WHERE cap > 0 AND kept > cap LIMIT ?2)");

/// A queue's effective retention bound for one dimension: its own positive
/// value, none for a negative one (its opt-out), else the broker's `?N`.
macro_rules! bound {
    ($column:literal, $broker:literal) => {
        concat!(
            "(CASE WHEN q.",
            $column,
            " > 0 THEN q.",
            $column,
            " WHEN q.",
            $column,
            " < 0 THEN 0 ELSE ",
            $broker,
            " END)"
        )
    };
}

/// Archived messages (pgmq dialect, docs/pgmq.md) archived longer ago than
/// the queue's dead-letter age bound (`?1` the broker's).
const RETAIN_ARCHIVE: Statement = crate::statement!(concat!(
    "DELETE FROM archived_messages WHERE (queue, id) IN (
  SELECT a.queue, a.id FROM queues q JOIN archived_messages a ON a.queue = q.name
  WHERE ",
    bound!("dlq_max_age_ms", "?1"),
    " > 0 AND a.archived_at < {now} - ",
    bound!("dlq_max_age_ms", "?1"),
    " LIMIT ?2)"
));

/// Whether a pass has anything to do, read first so that an idle deployment
/// costs one read and takes no write lock: a pending transition in any
/// queue, an expired dedup entry, receipt or receive attempt, or dead
/// letters past a bound (`?1` age, `?2` count, `?3` bytes, the broker's).
/// Each term is an index seek, except the count bound (an index-only count
/// of a queue's dead letters) and the bytes bound (a sum over a queue's dead
/// letters, only where one is set).
const SWEEP_DUE: Statement = crate::statement!(concat!(
    "SELECT EXISTS (SELECT 1 FROM queues q WHERE
    EXISTS (SELECT 1 FROM messages WHERE queue = q.name AND state = 'locked' AND locked_until <= {now})
    OR EXISTS (SELECT 1 FROM messages WHERE queue = q.name AND state = 'scheduled' AND visible_at <= {now})
    OR EXISTS (SELECT 1 FROM messages WHERE queue = q.name AND expires_at > 0
      AND state <> 'dead_lettered' AND expires_at <= {now})
    OR (",
    bound!("dlq_max_age_ms", "?1"),
    " > 0 AND (SELECT enqueued_at FROM messages WHERE queue = q.name AND state = 'dead_lettered'
      ORDER BY id LIMIT 1) < {now} - ",
    bound!("dlq_max_age_ms", "?1"),
    ")
    OR (",
    bound!("dlq_max_count", "?2"),
    " > 0 AND (SELECT count(*) FROM messages WHERE queue = q.name
      AND state = 'dead_lettered') > ",
    bound!("dlq_max_count", "?2"),
    ")
    OR (",
    bound!("dlq_max_bytes", "?3"),
    " > 0 AND (SELECT sum(length(body)) FROM messages WHERE queue = q.name
      AND state = 'dead_lettered') > ",
    bound!("dlq_max_bytes", "?3"),
    ")
    OR (",
    bound!("dlq_max_age_ms", "?1"),
    " > 0 AND (SELECT min(archived_at) FROM archived_messages WHERE queue = q.name) < {now} - ",
    bound!("dlq_max_age_ms", "?1"),
    "))
  OR EXISTS (SELECT 1 FROM dedup
    WHERE seen_at <= {now} - (SELECT coalesce(max(dedup_window_ms), 0) FROM queues))
  OR EXISTS (SELECT 1 FROM settlement_receipts WHERE expires_at <= {now})
  OR EXISTS (SELECT 1 FROM receive_attempts WHERE expires_at <= {now})"
));

impl<T: Transport> Engine<T> {
    /// One maintenance pass over every queue: a read that finds out whether
    /// anything is due, then, only if so, one write transaction.
    pub async fn sweep(&self, retention: &Retention) -> Result<(), EngineError> {
        let started = self.clock.wall_ms();
        let result = self.sweep_if_due(retention).await;
        let outcome = match result {
            Ok(_) => MaintenanceOutcome::Success,
            Err(_) => MaintenanceOutcome::Error,
        };
        let now = self.clock.wall_ms();
        let seconds = (now - started).max(0) as f64 / 1000.0;
        for task in Task::ALL.iter().filter(|t| t.enabled()) {
            self.report(|| Effect::Maintenance {
                task: *task,
                outcome,
                seconds,
                finished_at_ms: now,
            });
        }
        result
    }

    async fn sweep_if_due(&self, retention: &Retention) -> Result<(), EngineError> {
        let mut probe = Program::read();
        let due = probe.step(
            &SWEEP_DUE,
            vec![
                retention.max_age_ms.into(),
                retention.max_count.into(),
                retention.max_bytes.into(),
            ],
        );
        let committed = self.run(&mut probe).await.map_err(unexpected)?;
        if committed.first_row(due).map_or(Ok(0), |row| row.int(0))? == 0 {
            return Ok(());
        }
        let mut program = Program::write();
        self.housekeeping_all(&mut program);
        for statement in [&DEDUP_JANITOR, &RECEIPT_JANITOR, &ATTEMPT_JANITOR] {
            program.step(statement, vec![]);
        }
        for (statement, bound) in [
            (&RETAIN_BY_AGE, retention.max_age_ms),
            (&RETAIN_BY_COUNT, retention.max_count),
            (&RETAIN_BY_BYTES, retention.max_bytes),
        ] {
            program.step(statement, vec![bound.into(), RETENTION_LIMIT.into()]);
        }
        program.step(
            &RETAIN_ARCHIVE,
            vec![retention.max_age_ms.into(), RETENTION_LIMIT.into()],
        );
        self.run(&mut program).await.map_err(unexpected)?;
        Ok(())
    }
}
