//! Peek (docs/http-api.md#rpcs): a read-only look at a queue's rows after its
//! housekeeping; never locks, never shows a token.

use super::{unexpected, Engine, EngineError};
use crate::store::Statement;
use crate::store::{Program, Row, Transport};

const DEFAULT_MAX: i64 = 32;
const MAX: i64 = 1000;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeekRequest {
    pub queue: String,
    pub from_seq: i64,
    /// "" = every state; an unknown state simply matches nothing [quirk].
    pub state: String,
    pub max: i64,
}

/// A message in the Peek output shape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeekedMessage {
    pub seq_number: i64,
    pub state: String,
    pub body_base64: String,
    pub message_id: Option<String>,
    pub group_id: Option<String>,
    pub correlation_id: Option<String>,
    pub reply_to: Option<String>,
    pub subject: Option<String>,
    pub content_type: Option<String>,
    pub properties: Option<String>,
    pub delivery_count: i64,
    pub enqueued_at_ms: i64,
    pub visible_at_ms: i64,
    pub expires_at_ms: i64,
    pub locked_until_ms: i64,
    pub dead_letter_reason: Option<String>,
    pub dead_letter_description: Option<String>,
}

/// Rows in seq order from `?2`, at most `?3`, stopping after the row that
/// crosses the body budget `?4` (at least one row always). `IDS` picks the
/// seqs from the (queue, state, id) index without touching a body.
const PEEK_TEMPLATE: &str = "\
SELECT id, state, body, message_id, group_id, correlation_id, reply_to, subject, content_type,
  properties, delivery_count, enqueued_at, visible_at, expires_at, locked_until,
  dead_letter_reason, dead_letter_description
FROM (SELECT *, sum(length(body)) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) - length(body) AS before
      FROM messages WHERE id IN (IDS))
WHERE before < ?4 ORDER BY id";

/// The next `?3` seqs from `?2` of one state's index (docs/engine.md,
/// "Where a queue's rows are found"; `$rows` narrows active rows to one of
/// their two indexes), when the filter `?5` is '' (every state) or names
/// that state. The filter is a constant term: an arm it rules out reads
/// nothing.
macro_rules! state_ids {
    ($state:literal, $rows:literal) => {
        concat!(
            "SELECT id FROM (SELECT id FROM messages WHERE queue = ?1 AND state = '",
            $state,
            "'",
            $rows,
            " AND id >= ?2 AND (?5 = '' OR ?5 = '",
            $state,
            "') ORDER BY id LIMIT ?3)"
        )
    };
}

/// Peek over one state `?5`, or every state for '' (an unknown state
/// matches nothing): the next `?3` seqs of each index arm, merged. No index
/// on the queue alone is kept for this (each index is a billed write on
/// every send), so six seeks of at most `?3` entries each serve it; locked
/// rows come from the lease index, ordered by deadline, so their arm sorts
/// the queue's leases.
pub(super) const PEEK: Statement = crate::statement!(const_format::str_replace!(
    PEEK_TEMPLATE,
    "IDS",
    concat!(
        "SELECT id FROM (",
        state_ids!("active", " AND group_id IS NULL"),
        " UNION ALL ",
        state_ids!("active", " AND group_id IS NOT NULL"),
        " UNION ALL ",
        state_ids!("locked", ""),
        " UNION ALL ",
        state_ids!("deferred", ""),
        " UNION ALL ",
        state_ids!("scheduled", ""),
        " UNION ALL ",
        state_ids!("dead_lettered", ""),
        ") ORDER BY id LIMIT ?3"
    )
));

impl<T: Transport> Engine<T> {
    pub async fn peek(&self, request: &PeekRequest) -> Result<Vec<PeekedMessage>, EngineError> {
        let max = if request.max <= 0 {
            DEFAULT_MAX
        } else {
            request.max.min(MAX)
        };
        let mut program = Program::write_on(&request.queue);
        let housekeeping = self.housekeeping(&mut program, &request.queue);
        let args = vec![
            request.queue.as_str().into(),
            request.from_seq.into(),
            max.into(),
            self.limits.response_budget_bytes.into(),
            request.state.as_str().into(),
        ];
        let rows = program.step(&PEEK, args);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        self.note_housekeeping(&committed, &housekeeping);
        committed.rows(rows).map(|row| peeked(&row)).collect()
    }
}

fn peeked(row: &Row) -> Result<PeekedMessage, EngineError> {
    let owned = |s: Option<&str>| s.map(str::to_owned);
    Ok(PeekedMessage {
        seq_number: row.int(0)?,
        state: row.text(1)?.to_owned(),
        body_base64: row.blob_base64(2)?,
        message_id: owned(row.opt_text(3)?),
        group_id: owned(row.opt_text(4)?),
        correlation_id: owned(row.opt_text(5)?),
        reply_to: owned(row.opt_text(6)?),
        subject: owned(row.opt_text(7)?),
        content_type: owned(row.opt_text(8)?),
        properties: owned(row.opt_text(9)?),
        delivery_count: row.int(10)?,
        enqueued_at_ms: row.int(11)?,
        visible_at_ms: row.int(12)?,
        expires_at_ms: row.int(13)?,
        locked_until_ms: row.int(14)?,
        dead_letter_reason: owned(row.opt_text(15)?),
        dead_letter_description: owned(row.opt_text(16)?),
    })
}
