//! Stats (docs/http-api.md#rpcs): per-state row counts as the queue's housekeeping
//! would leave them, read without a write lock.

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

/// The rows of the queues in `SCOPE` that their next housekeeping would
/// change (an expired lease, a due schedule, a TTL that ran out), with the
/// state each had (`was`) and would get (`will`; `gone` for a TTL discard),
/// by the same rules as the housekeeping statements. Each side of the union
/// seeks its own partial index, so this reads the transitions that are
/// pending, never the backlog. It lets Stats and the Observe gauges report
/// what a request would see from a read transaction that takes no write
/// lock and changes nothing.
pub(super) const PENDING: &str = "pending AS MATERIALIZED (
  SELECT m.queue, m.id, m.enqueued_at, m.state AS was, CASE
    WHEN m.state = 'locked' AND m.locked_until <= {now}
      AND m.delivery_count >= q.max_delivery_count THEN 'dead_lettered'
    WHEN m.expires_at > 0 AND m.expires_at <= {now} THEN
      CASE WHEN q.dead_letter_on_expire = 1 THEN 'dead_lettered' ELSE 'gone' END
    ELSE 'active' END AS will
  FROM messages m JOIN queues q ON q.name = m.queue
  WHERE m.id IN (
    SELECT id FROM messages WHERE SCOPE AND state = 'locked' AND locked_until <= {now}
    UNION
    SELECT id FROM messages WHERE SCOPE AND state = 'scheduled' AND visible_at <= {now}
    UNION
    SELECT id FROM messages WHERE SCOPE AND expires_at > 0 AND state <> 'dead_lettered'
      AND expires_at <= {now}))";

/// The count of state `S` in queue row `q` once its pending transitions
/// are applied. The stored count is an index-only count
/// ([`stored_count`](super::queue_rows::stored_count)).
macro_rules! state_count {
    ($state:tt) => {
        concat!(
            super::queue_rows::stored_count!("q.name", $state),
            "
  - (SELECT count(*) FROM pending p WHERE p.queue = q.name AND p.was = '",
            $state,
            "')
  + (SELECT count(*) FROM pending p WHERE p.queue = q.name AND p.will = '",
            $state,
            "')"
        )
    };
}

/// The five state counts and the oldest active-or-locked age of queue row
/// `q` as its housekeeping would leave them, shared by Stats and the
/// Observe gauges. The oldest active or locked message is the lowest seq
/// that stays or becomes active or locked: seqs are assigned in enqueue
/// order, so no scan by enqueue time is needed (the locked rows' index is
/// ordered by deadline, so their lowest seq is found among the queue's
/// leases).
pub(super) const STATE_COLUMNS: &str = concat!(
    state_count!("active"),
    ",\n",
    state_count!("locked"),
    ",\n",
    state_count!("deferred"),
    ",\n",
    state_count!("scheduled"),
    ",\n",
    state_count!("dead_lettered"),
    ",
  coalesce({now} - min(
    coalesce((SELECT m.enqueued_at FROM messages m WHERE m.queue = q.name AND m.state = 'active'
      AND m.group_id IS NULL
      AND NOT EXISTS (SELECT 1 FROM pending p WHERE p.id = m.id) ORDER BY m.id LIMIT 1), {now}),
    coalesce((SELECT m.enqueued_at FROM messages m WHERE m.queue = q.name AND m.state = 'active'
      AND m.group_id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM pending p WHERE p.id = m.id) ORDER BY m.id LIMIT 1), {now}),
    coalesce((SELECT m.enqueued_at FROM messages m WHERE m.queue = q.name AND m.state = 'locked'
      AND NOT EXISTS (SELECT 1 FROM pending p WHERE p.id = m.id) ORDER BY m.id LIMIT 1), {now}),
    coalesce((SELECT p.enqueued_at FROM pending p WHERE p.queue = q.name AND p.will = 'active'
      ORDER BY p.id LIMIT 1), {now})), 0)"
);

/// Stats of queue `?1`: no row when it does not exist.
pub(super) const STATS: Statement = crate::statement!(const_format::concatcp!(
    "WITH ",
    const_format::str_replace!(PENDING, "SCOPE", "queue = ?1"),
    " SELECT ",
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
        let mut program = Program::read();
        let stats = program.step(&STATS, vec![queue.into()]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        let row = committed
            .first_row(stats)
            .ok_or(EngineError::QueueNotFound)?;
        Ok(read_stats(queue, &row, 0)?)
    }
}
