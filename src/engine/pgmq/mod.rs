//! The pgmq dialect's operations (docs/pgmq.md): the same queues, rows and
//! housekeeping as mqlite's, read and written with pgmq's model — ids,
//! `read_ct`, visibility timeouts, delete and archive by id without a
//! lease. Each operation is one program (one round trip); read-poll
//! repeats the read within Receive's long-poll budget.

pub(super) mod by_id;
mod contains;
pub(super) mod delete_fold;
pub(super) mod queues;
pub(super) mod read;
pub(super) mod send;

pub use queues::{check_name, PgmqMetrics, PgmqQueue, MAX_NAME_CHARS};
pub use read::PgmqRead;
pub use send::{PgmqOutgoing, PgmqSend};

use base64::Engine as _;

use super::EngineError;
use crate::store::{Committed, Row, StepId};

/// A visibility instant as pgmq takes it: seconds from now (the database's
/// now; negative allowed where pgmq allows it), or an absolute instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VisibleAt {
    AfterSeconds(i64),
    AtMs(i64),
}

impl VisibleAt {
    /// The pair of parameters `(?relative_ms, ?absolute_ms)` the statements
    /// take: exactly one of them decides (`coalesce(abs, now + rel)`).
    fn params(self) -> Result<(i64, Option<i64>), EngineError> {
        match self {
            VisibleAt::AfterSeconds(s) => {
                let ms = s
                    .checked_mul(1000)
                    .filter(|ms| ms.unsigned_abs() <= super::MAX_DURATION_MS.unsigned_abs());
                ms.map(|ms| (ms, None)).ok_or_else(|| {
                    EngineError::InvalidArgument(format!(
                        "{s} seconds is out of range (at most {} s)",
                        super::MAX_DURATION_MS / 1000
                    ))
                })
            }
            VisibleAt::AtMs(ms) if (0..=super::MAX_INSTANT_MS).contains(&ms) => Ok((0, Some(ms))),
            VisibleAt::AtMs(ms) => Err(EngineError::InvalidArgument(format!(
                "instant {ms} ms is out of range"
            ))),
        }
    }
}

/// One message in pgmq's shape. `vt` is the lease deadline of a leased
/// message, else the instant it became or becomes visible (§5.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgmqMessage {
    pub msg_id: i64,
    pub read_ct: i64,
    pub enqueued_at_ms: i64,
    pub last_read_at_ms: Option<i64>,
    pub vt_ms: i64,
    pub body: Vec<u8>,
    /// JSON object text, as sent.
    pub headers: Option<String>,
}

/// The columns every statement returning messages ends with, in
/// [`PgmqMessage`] order.
macro_rules! message_columns {
    ($t:literal) => {
        concat!(
            $t,
            "id, ",
            $t,
            "delivery_count, ",
            $t,
            "enqueued_at, ",
            $t,
            "last_read_at, ",
            "CASE WHEN ",
            $t,
            "state = 'locked' THEN ",
            $t,
            "locked_until ELSE ",
            $t,
            "visible_at END, ",
            $t,
            "body, ",
            $t,
            "headers"
        )
    };
}
pub(crate) use message_columns;

fn message(row: &Row) -> Result<PgmqMessage, EngineError> {
    let last_read = row.int(3)?;
    let body = base64::engine::general_purpose::STANDARD
        .decode(row.blob_base64(5)?)
        .map_err(|e| {
            EngineError::Store(crate::store::StoreError::Failed(format!(
                "unreadable body: {e}"
            )))
        })?;
    Ok(PgmqMessage {
        msg_id: row.int(0)?,
        read_ct: row.int(1)?,
        enqueued_at_ms: row.int(2)?,
        last_read_at_ms: (last_read > 0).then_some(last_read),
        vt_ms: row.int(4)?,
        body,
        headers: row.opt_text(6)?.map(str::to_owned),
    })
}

/// The messages a step returned, in id order.
fn messages(committed: &Committed, step: StepId) -> Result<Vec<PgmqMessage>, EngineError> {
    let mut out: Vec<PgmqMessage> = committed
        .rows(step)
        .map(|row| message(&row))
        .collect::<Result<_, _>>()?;
    out.sort_by_key(|m| m.msg_id);
    Ok(out)
}

/// The ids a step returned, ascending.
fn ids(committed: &Committed, step: StepId) -> Result<Vec<i64>, EngineError> {
    let mut out: Vec<i64> = committed
        .rows(step)
        .map(|row| row.int(0))
        .collect::<Result<_, _>>()?;
    out.sort_unstable();
    Ok(out)
}

/// Whether the program's head found queue `?1` (its column 1 is 1).
fn queue_found(committed: &Committed) -> Result<(), EngineError> {
    match committed.first_row(StepId::HEAD) {
        Some(row) if row.int(1)? == 1 => Ok(()),
        _ => Err(EngineError::QueueNotFound),
    }
}

/// The head of a program addressing one queue: the schema check and
/// whether queue `?1` exists, in one statement.
const QUEUE_HEAD: crate::store::Statement = crate::statement!(crate::schema_checked!(
    "(SELECT count(*) FROM queues WHERE name = ?1)"
));
