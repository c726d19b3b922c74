//! DeleteQueue (semantics §14.3), and the counts Status and Observe read.

use super::stats::QueueStats;
use super::{require_name, unexpected, Engine, EngineError, QUEUE_MISSING};
use crate::store::{Program, RunError, Transport};

const IS_SUBSCRIPTION: &str =
    "EXISTS (SELECT 1 FROM queues WHERE name = ?1 AND kind = 'subscription')";
const GENERATION_DIFFERS: &str =
    "EXISTS (SELECT 1 FROM queues WHERE name = ?1 AND generation <> ?2)";
/// Any row in any state: one index seek.
const HOLDS_MESSAGES: &str = "EXISTS (SELECT 1 FROM messages WHERE queue = ?1)";

/// The queue row and its auxiliary records; seqs are never reset.
const DELETE_QUEUE: [&str; 4] = [
    "DELETE FROM dedup WHERE queue = ?1",
    "DELETE FROM settlement_receipts WHERE queue = ?1",
    "DELETE FROM receive_attempts WHERE queue = ?1",
    "DELETE FROM queues WHERE name = ?1",
];

/// Entity counts for Status and Observe.
const ENTITY_COUNTS: &str = "SELECT \
  (SELECT count(*) FROM queues WHERE kind = 'queue'), \
  (SELECT count(*) FROM queues WHERE kind = 'subscription'), \
  (SELECT count(*) FROM subscriptions)";

/// Per-queue gauges: the five states, rows in any other state, and the
/// oldest active or locked message's age, as Stats computes them.
const QUEUE_GAUGES: &str = "\
SELECT q.name, q.kind, s.active, s.locked, s.deferred, s.scheduled, s.dead_lettered,
  s.total - s.active - s.locked - s.deferred - s.scheduled - s.dead_lettered,
  coalesce({now} - min(
    coalesce((SELECT enqueued_at FROM messages WHERE queue = q.name AND state = 'active' ORDER BY id LIMIT 1), {now}),
    coalesce((SELECT enqueued_at FROM messages WHERE queue = q.name AND state = 'locked' ORDER BY id LIMIT 1), {now})), 0)
FROM queues q, (SELECT
  (SELECT count(*) FROM messages WHERE queue = q2.name AND state = 'active') AS active,
  (SELECT count(*) FROM messages WHERE queue = q2.name AND state = 'locked') AS locked,
  (SELECT count(*) FROM messages WHERE queue = q2.name AND state = 'deferred') AS deferred,
  (SELECT count(*) FROM messages WHERE queue = q2.name AND state = 'scheduled') AS scheduled,
  (SELECT count(*) FROM messages WHERE queue = q2.name AND state = 'dead_lettered') AS dead_lettered,
  (SELECT count(*) FROM messages WHERE queue = q2.name) AS total,
  q2.name AS name
  FROM queues q2) s
WHERE s.name = q.name
ORDER BY q.name";

/// Numbers of entities.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntityCounts {
    pub queues: i64,
    pub backing_queues: i64,
    pub subscriptions: i64,
}

/// One queue's gauges: Stats' counts plus `unexpected` rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueGauges {
    pub kind: String,
    pub stats: QueueStats,
    pub unexpected: i64,
}

impl<T: Transport> Engine<T> {
    /// Deletes an empty plain queue if it is still the incarnation the
    /// caller saw (`generation`).
    pub async fn delete_queue(&self, name: &str, generation: &str) -> Result<(), EngineError> {
        require_name(name)?;
        if generation.is_empty() {
            return Err(EngineError::InvalidArgument(
                "generation is required (take it from ListQueues)".into(),
            ));
        }
        let mut program = Program::write();
        let missing = program.guard(QUEUE_MISSING, vec![name.into()]);
        let subscription = program.guard(IS_SUBSCRIPTION, vec![name.into()]);
        let changed = program.guard(GENERATION_DIFFERS, vec![name.into(), generation.into()]);
        // Rows whose TTL ran out must not keep the queue non-empty.
        let housekeeping = self.housekeeping(&mut program, name);
        let not_empty = program.guard(HOLDS_MESSAGES, vec![name.into()]);
        for sql in DELETE_QUEUE {
            program.step(sql, vec![name.into()]);
        }
        match self.run(&mut program).await {
            Ok(committed) => {
                self.note_housekeeping(&committed, &housekeeping);
                Ok(())
            }
            Err(RunError::Rejected(step)) if step == missing => Err(EngineError::QueueNotFound),
            Err(RunError::Rejected(step)) if step == subscription => {
                Err(EngineError::InvalidArgument(format!(
                    "mqlite: {name:?} is a subscription's backing queue; DeleteQueue never removes subscriptions"
                )))
            }
            Err(RunError::Rejected(step)) if step == changed => Err(EngineError::QueueChanged),
            Err(RunError::Rejected(step)) if step == not_empty => Err(EngineError::QueueNotEmpty),
            Err(e) => Err(unexpected(e)),
        }
    }

    /// Entity counts (one read).
    pub async fn entity_counts(&self) -> Result<EntityCounts, EngineError> {
        let mut program = Program::read();
        let counts = program.step(ENTITY_COUNTS, vec![]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        let row = committed.first_row(counts).ok_or_else(|| {
            EngineError::Store(crate::store::StoreError::Failed("no counts".into()))
        })?;
        Ok(EntityCounts {
            queues: row.int(0)?,
            backing_queues: row.int(1)?,
            subscriptions: row.int(2)?,
        })
    }

    /// Every queue's gauges after every queue's housekeeping, so they agree
    /// with Stats; plus the entity counts. One transaction.
    pub async fn gauges(&self) -> Result<(Vec<QueueGauges>, EntityCounts), EngineError> {
        let mut program = Program::write();
        self.housekeeping_all(&mut program);
        let gauges = program.step(self.sql(QUEUE_GAUGES), vec![]);
        let counts = program.step(ENTITY_COUNTS, vec![]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        let mut queues = Vec::new();
        for row in committed.rows(gauges) {
            let counts = [
                row.int(2)?,
                row.int(3)?,
                row.int(4)?,
                row.int(5)?,
                row.int(6)?,
            ];
            let unexpected = row.int(7)?;
            queues.push(QueueGauges {
                kind: row.text(1)?.to_owned(),
                stats: QueueStats {
                    queue: row.text(0)?.to_owned(),
                    active: counts[0],
                    locked: counts[1],
                    deferred: counts[2],
                    scheduled: counts[3],
                    dead_lettered: counts[4],
                    total: counts.iter().sum::<i64>() + unexpected,
                    oldest_message_age_ms: row.int(8)?.max(0),
                },
                unexpected,
            });
        }
        let row = committed.first_row(counts).ok_or_else(|| {
            EngineError::Store(crate::store::StoreError::Failed("no counts".into()))
        })?;
        Ok((
            queues,
            EntityCounts {
                queues: row.int(0)?,
                backing_queues: row.int(1)?,
                subscriptions: row.int(2)?,
            },
        ))
    }
}
