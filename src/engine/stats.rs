//! Stats (wire §6.10): per-state row counts after the queue's housekeeping.

use super::{require_name, unexpected, Engine, EngineError};
use crate::store::{Program, Transport};

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

/// Counts are index-only scans of (queue, state, id). The oldest active or
/// locked message is the lowest seq of each state: seqs are assigned in
/// enqueue order, so no scan by enqueue time is needed.
pub(super) const STATS: &str = "\
SELECT
  (SELECT count(*) FROM messages WHERE queue = ?1 AND state = 'active'),
  (SELECT count(*) FROM messages WHERE queue = ?1 AND state = 'locked'),
  (SELECT count(*) FROM messages WHERE queue = ?1 AND state = 'deferred'),
  (SELECT count(*) FROM messages WHERE queue = ?1 AND state = 'scheduled'),
  (SELECT count(*) FROM messages WHERE queue = ?1 AND state = 'dead_lettered'),
  coalesce({now} - min(
    coalesce((SELECT enqueued_at FROM messages WHERE queue = ?1 AND state = 'active' ORDER BY id LIMIT 1), {now}),
    coalesce((SELECT enqueued_at FROM messages WHERE queue = ?1 AND state = 'locked' ORDER BY id LIMIT 1), {now})), 0)
FROM queues WHERE name = ?1";

impl<T: Transport> Engine<T> {
    pub async fn stats(&self, queue: &str) -> Result<QueueStats, EngineError> {
        require_name(queue)?;
        let mut program = Program::write();
        let housekeeping = self.housekeeping(&mut program, queue);
        let stats = program.step(self.sql(STATS), vec![queue.into()]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        self.note_housekeeping(&committed, &housekeeping);
        let row = committed
            .first_row(stats)
            .ok_or(EngineError::QueueNotFound)?;
        let counts = [
            row.int(0)?,
            row.int(1)?,
            row.int(2)?,
            row.int(3)?,
            row.int(4)?,
        ];
        Ok(QueueStats {
            queue: queue.to_owned(),
            active: counts[0],
            locked: counts[1],
            deferred: counts[2],
            scheduled: counts[3],
            dead_lettered: counts[4],
            total: counts.iter().sum(),
            oldest_message_age_ms: row.int(5)?.max(0),
        })
    }
}
