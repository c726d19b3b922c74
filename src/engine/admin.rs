//! DeleteQueue (docs/semantics.md#administration), and the counts Status and Observe read.

use super::queue_rows::queue_ids;
use super::stats::{read_stats, PENDING, STATE_COLUMNS};
use super::{require_name, unexpected, Engine, EngineError, QUEUE_MISSING};
use crate::store::Statement;
use crate::store::{Program, RunError, Transport};

const IS_SUBSCRIPTION: Statement =
    crate::guard!("EXISTS (SELECT 1 FROM queues WHERE name = ?1 AND kind = 'subscription')");
const GENERATION_DIFFERS: Statement =
    crate::guard!("EXISTS (SELECT 1 FROM queues WHERE name = ?1 AND generation <> ?2)");
/// Any row in any state: at most one index seek per state.
pub(super) const HOLDS_MESSAGES: Statement =
    crate::guard!(concat!("EXISTS (", queue_ids!("?1"), ")"));

/// The queue row and its auxiliary records; seqs are never reset.
const DELETE_QUEUE: [Statement; 4] = [
    crate::statement!("DELETE FROM dedup WHERE queue = ?1"),
    crate::statement!("DELETE FROM settlement_receipts WHERE queue = ?1"),
    crate::statement!("DELETE FROM receive_attempts WHERE queue = ?1"),
    crate::statement!("DELETE FROM queues WHERE name = ?1"),
];

/// Entity counts for Status.
const ENTITY_COUNTS: Statement = crate::statement!(
    "SELECT \
  (SELECT count(*) FROM queues WHERE kind = 'queue'), \
  (SELECT count(*) FROM subscriptions)"
);

/// Every queue's kind, Stats' columns, and its row count in any state (the
/// rows in none of the five states are reported as `unexpected`).
pub(super) const GAUGES: Statement = crate::statement!(const_format::concatcp!(
    "WITH ",
    const_format::str_replace!(PENDING, "SCOPE", "queue IN (SELECT name FROM queues)"),
    " SELECT q.name, q.kind, ",
    STATE_COLUMNS,
    ", (SELECT count(*) FROM (",
    queue_ids!("q.name"),
    "))
      - (SELECT count(*) FROM pending p WHERE p.queue = q.name AND p.will = 'gone')
    FROM queues q ORDER BY q.name"
));

/// One queue's message counts by state, read in one grouped query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueGauge {
    pub queue: String,
    /// `queue` or `subscription`.
    pub kind: String,
    pub active: i64,
    pub locked: i64,
    pub deferred: i64,
    pub scheduled: i64,
    pub dead_lettered: i64,
    /// Rows in any other state: reported, not silently dropped.
    pub unexpected: i64,
    /// Age of the oldest active or locked message from its original
    /// enqueue; 0 when there is none.
    pub oldest_message_age_ms: i64,
}

/// Numbers of entities.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntityCounts {
    /// Plain queues.
    pub queues: i64,
    pub subscriptions: i64,
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
        let missing = program.guard(&QUEUE_MISSING, vec![name.into()]);
        let subscription = program.guard(&IS_SUBSCRIPTION, vec![name.into()]);
        let changed = program.guard(&GENERATION_DIFFERS, vec![name.into(), generation.into()]);
        // Rows whose TTL ran out must not keep the queue non-empty.
        let housekeeping = self.housekeeping(&mut program, name);
        let not_empty = program.guard(&HOLDS_MESSAGES, vec![name.into()]);
        // Dead letters on their way to another database are still its own.
        let in_transit = program.guard(&super::dlq_across::IN_TRANSIT_FROM, vec![name.into()]);
        for statement in &DELETE_QUEUE {
            program.step(statement, vec![name.into()]);
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
            Err(RunError::Rejected(step)) if step == not_empty || step == in_transit => {
                Err(EngineError::QueueNotEmpty)
            }
            Err(e) => Err(unexpected(e)),
        }
    }

    /// Entity counts (one read).
    pub async fn entity_counts(&self) -> Result<EntityCounts, EngineError> {
        let mut program = Program::read();
        let counts = program.step(&ENTITY_COUNTS, vec![]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        let row = committed.first_row(counts).ok_or_else(|| {
            EngineError::Store(crate::store::StoreError::Failed("no counts".into()))
        })?;
        Ok(EntityCounts {
            queues: row.int(0)?,
            subscriptions: row.int(1)?,
        })
    }

    /// Every queue's gauges as its housekeeping would leave them, so they
    /// agree with Stats. One read transaction: monitoring never takes the
    /// write lock.
    pub async fn gauges(&self) -> Result<Vec<QueueGauge>, EngineError> {
        let mut program = Program::read();
        let gauges = program.step(&GAUGES, vec![]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        let mut queues = Vec::new();
        for row in committed.rows(gauges) {
            let stats = read_stats(row.text(0)?, &row, 2)?;
            queues.push(QueueGauge {
                kind: row.text(1)?.to_owned(),
                unexpected: row.int(8)? - stats.total,
                active: stats.active,
                locked: stats.locked,
                deferred: stats.deferred,
                scheduled: stats.scheduled,
                dead_lettered: stats.dead_lettered,
                oldest_message_age_ms: stats.oldest_message_age_ms,
                queue: stats.queue,
            });
        }
        Ok(queues)
    }
}
