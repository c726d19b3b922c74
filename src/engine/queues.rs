//! CreateQueue (upsert with namespace guards) and ListQueues.

use super::{random_hex, require_name, unexpected, Engine, EngineError};
use crate::store::Statement;
use crate::store::{Program, RunError, Transport};

const DEFAULT_LOCK_DURATION_MS: i64 = 30_000;
const DEFAULT_MAX_DELIVERY_COUNT: i64 = 10;

/// A queue configuration as the client sent it (zero means "default").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueConfigInput {
    pub kind: String,
    pub lock_duration_ms: i64,
    pub max_delivery_count: i64,
    pub default_ttl_ms: i64,
    /// `None` (absent or null) means the default, dead-letter.
    pub dead_letter_on_expire: Option<bool>,
    pub dedup_window_ms: i64,
    pub ordering_mode: String,
    pub dlq_max_age_ms: i64,
    pub dlq_max_count: i64,
    pub dlq_max_bytes: i64,
}

/// One ListQueues entry, with effective (defaulted) values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSummary {
    pub name: String,
    pub kind: String,
    pub lock_duration_ms: i64,
    pub max_delivery_count: i64,
    pub default_ttl_ms: i64,
    pub dedup_window_ms: i64,
    pub generation: String,
}

/// A validated configuration with defaults applied.
struct QueueConfig {
    kind: &'static str,
    ordering_mode: &'static str,
    lock_duration_ms: i64,
    max_delivery_count: i64,
    default_ttl_ms: i64,
    dead_letter_on_expire: bool,
    dedup_window_ms: i64,
    dlq_max_age_ms: i64,
    dlq_max_count: i64,
    dlq_max_bytes: i64,
}

impl QueueConfigInput {
    /// Refuses a configuration CreateQueue would refuse, before the name
    /// is placed in a database (docs/databases.md: a name never created
    /// has no placement).
    pub fn check(&self) -> Result<(), EngineError> {
        self.validate().map(|_| ())
    }

    fn validate(&self) -> Result<QueueConfig, EngineError> {
        let kind = match self.kind.as_str() {
            "" | "queue" => "queue",
            "subscription" => "subscription",
            other => {
                return Err(EngineError::InvalidArgument(format!(
                    "unknown kind {other:?} (want \"queue\" or \"subscription\")"
                )))
            }
        };
        let ordering_mode = match self.ordering_mode.as_str() {
            "" | "standard" => "standard",
            "group_fifo" => "group_fifo",
            "strict_fifo" => "strict_fifo",
            other => {
                return Err(EngineError::InvalidArgument(format!(
                    "unknown ordering_mode {other:?} (want standard, group_fifo or strict_fifo)"
                )))
            }
        };
        // docs/deviations.md D4: negative values are refused and zero means the
        // default — except the DLQ retention bounds, where a negative value
        // is the queue's explicit opt-out (unbounded, case 179) and zero
        // inherits the broker's bound.
        for (field, value) in [
            ("lock_duration_ms", self.lock_duration_ms),
            ("max_delivery_count", self.max_delivery_count),
            ("default_ttl_ms", self.default_ttl_ms),
            ("dedup_window_ms", self.dedup_window_ms),
        ] {
            if value < 0 {
                return Err(EngineError::InvalidArgument(format!(
                    "{field} must be >= 0 (got {value})"
                )));
            }
        }
        for (field, value) in [
            ("lock_duration_ms", self.lock_duration_ms),
            ("default_ttl_ms", self.default_ttl_ms),
            ("dedup_window_ms", self.dedup_window_ms),
            ("dlq_max_age_ms", self.dlq_max_age_ms),
        ] {
            super::at_most(field, value, super::MAX_DURATION_MS)?;
        }
        let or_default = |v: i64, d: i64| if v == 0 { d } else { v };
        Ok(QueueConfig {
            kind,
            ordering_mode,
            lock_duration_ms: or_default(self.lock_duration_ms, DEFAULT_LOCK_DURATION_MS),
            max_delivery_count: or_default(self.max_delivery_count, DEFAULT_MAX_DELIVERY_COUNT),
            default_ttl_ms: self.default_ttl_ms,
            dead_letter_on_expire: self.dead_letter_on_expire.unwrap_or(true),
            dedup_window_ms: self.dedup_window_ms,
            dlq_max_age_ms: self.dlq_max_age_ms,
            dlq_max_count: self.dlq_max_count,
            dlq_max_bytes: self.dlq_max_bytes,
        })
    }
}

/// The name is a live topic (it has subscription rows).
const IS_TOPIC: Statement = crate::guard!("EXISTS (SELECT 1 FROM subscriptions WHERE topic = ?1)");
/// The name exists as a queue of the other kind.
const IS_OTHER_KIND: Statement =
    crate::guard!("EXISTS (SELECT 1 FROM queues WHERE name = ?1 AND kind <> ?2)");

/// Insert, or overwrite every config column of the same-kind queue; the
/// generation and creation time of an existing queue are kept.
const UPSERT_QUEUE: Statement = crate::statement!(
    "\
INSERT INTO queues (name, kind, lock_duration_ms, max_delivery_count, default_ttl_ms,
  dead_letter_on_expire, dedup_window_ms, ordering_mode, dlq_max_age_ms, dlq_max_count,
  dlq_max_bytes, generation, created_at, updated_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, {now}, {now})
ON CONFLICT (name) DO UPDATE SET
  lock_duration_ms = excluded.lock_duration_ms,
  max_delivery_count = excluded.max_delivery_count,
  default_ttl_ms = excluded.default_ttl_ms,
  dead_letter_on_expire = excluded.dead_letter_on_expire,
  dedup_window_ms = excluded.dedup_window_ms,
  ordering_mode = excluded.ordering_mode,
  dlq_max_age_ms = excluded.dlq_max_age_ms,
  dlq_max_count = excluded.dlq_max_count,
  dlq_max_bytes = excluded.dlq_max_bytes,
  updated_at = excluded.updated_at"
);

/// Every queue of both kinds in byte order of name.
const LIST_QUEUES: Statement = crate::statement!(
    "\
SELECT name, kind, lock_duration_ms, max_delivery_count, default_ttl_ms, dedup_window_ms, generation
FROM queues ORDER BY name"
);

impl<T: Transport> Engine<T> {
    /// Creates a queue or reconfigures one of the same kind (docs/semantics.md#administration).
    pub async fn create_queue(
        &self,
        name: &str,
        input: &QueueConfigInput,
    ) -> Result<(), EngineError> {
        require_name(name)?;
        let config = input.validate()?;
        let generation = random_hex(16)?;
        let mut program = Program::write();
        let topic = program.guard(&IS_TOPIC, vec![name.into()]);
        let other_kind = program.guard(&IS_OTHER_KIND, vec![name.into(), config.kind.into()]);
        program.step(
            &UPSERT_QUEUE,
            vec![
                name.into(),
                config.kind.into(),
                config.lock_duration_ms.into(),
                config.max_delivery_count.into(),
                config.default_ttl_ms.into(),
                i64::from(config.dead_letter_on_expire).into(),
                config.dedup_window_ms.into(),
                config.ordering_mode.into(),
                config.dlq_max_age_ms.into(),
                config.dlq_max_count.into(),
                config.dlq_max_bytes.into(),
                generation.into(),
            ],
        );
        match self.run(&mut program).await {
            Ok(_) => Ok(()),
            Err(RunError::Rejected(step)) if step == topic => Err(EngineError::NameConflict(
                format!("mqlite: name {name:?} is a topic"),
            )),
            Err(RunError::Rejected(step)) if step == other_kind => Err(EngineError::NameConflict(
                format!("mqlite: queue {name:?} exists with a different kind"),
            )),
            Err(e) => Err(unexpected(e)),
        }
    }

    /// All queues, both kinds, ordered by name.
    pub async fn list_queues(&self) -> Result<Vec<QueueSummary>, EngineError> {
        let mut program = Program::read();
        let list = program.step(&LIST_QUEUES, vec![]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        committed
            .rows(list)
            .map(|row| {
                Ok(QueueSummary {
                    name: row.text(0)?.to_owned(),
                    kind: row.text(1)?.to_owned(),
                    lock_duration_ms: row.int(2)?,
                    max_delivery_count: row.int(3)?,
                    default_ttl_ms: row.int(4)?,
                    dedup_window_ms: row.int(5)?,
                    generation: row.text(6)?.to_owned(),
                })
            })
            .collect()
    }
}
