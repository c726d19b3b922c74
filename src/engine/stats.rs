//! Stats (wire §6.10): per-state row counts after the queue's housekeeping.

use super::{require_name, unexpected, Engine, EngineError};
use crate::store::Statement;
use crate::store::{Program, Row, RowError, Transport};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueStats {
    pub queue: String,
    pub active: i64,
    pub locked: i64,
    pub deferred: i64,
    pub scheduled: i64,
    pub dead_lettered: i64,
    pub total: i64,
    pub oldest_message_age_ms: i64,
}

/// The five state counts and the oldest active-or-locked age of queue row
/// `q`, shared by Stats and the Observe gauges. Counts are index-only scans
/// of (queue, state, id). The oldest active or locked message is the lowest
/// seq of each state: seqs are assigned in enqueue order, so no scan by
/// enqueue time is needed.
pub(super) const STATE_COLUMNS: &str = "
  (SELECT count(*) FROM messages WHERE queue = q.name AND state = 'active'),
  (SELECT count(*) FROM messages WHERE queue = q.name AND state = 'locked'),
  (SELECT count(*) FROM messages WHERE queue = q.name AND state = 'deferred'),
  (SELECT count(*) FROM messages WHERE queue = q.name AND state = 'scheduled'),
  (SELECT count(*) FROM messages WHERE queue = q.name AND state = 'dead_lettered'),
  coalesce({now} - min(
    coalesce((SELECT enqueued_at FROM messages WHERE queue = q.name AND state = 'active' ORDER BY id LIMIT 1), {now}),
    coalesce((SELECT enqueued_at FROM messages WHERE queue = q.name AND state = 'locked' ORDER BY id LIMIT 1), {now})), 0)";

/// Stats of queue `?1`: no row when it does not exist.
pub(super) const STATS: Statement = crate::statement!(const_format::concatcp!(
    "SELECT ",
    STATE_COLUMNS,
    " FROM queues q WHERE q.name = ?1"
));

/// Reads [`STATE_COLUMNS`] starting at column `at`.
pub(super) fn read_stats(queue: &str, row: &Row, at: usize) -> Result<QueueStats, RowError> {
    let mut counts = [0; 5];
    for (i, count) in counts.iter_mut().enumerate() {
        *count = row.int(at + i)?;
    }
    Ok(QueueStats {
        queue: queue.to_owned(),
        active: counts[0],
        locked: counts[1],
        deferred: counts[2],
        scheduled: counts[3],
        dead_lettered: counts[4],
        total: counts.iter().sum(),
        oldest_message_age_ms: row.int(at + 5)?.max(0),
    })
}

impl<T: Transport> Engine<T> {
    pub async fn stats(&self, queue: &str) -> Result<QueueStats, EngineError> {
        require_name(queue)?;
        let mut program = Program::write();
        let housekeeping = self.housekeeping(&mut program, queue);
        let stats = program.step(&STATS, vec![queue.into()]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        self.note_housekeeping(&committed, &housekeeping);
        let row = committed
            .first_row(stats)
            .ok_or(EngineError::QueueNotFound)?;
        Ok(read_stats(queue, &row, 0)?)
    }
}
