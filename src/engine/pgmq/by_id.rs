//! delete, archive and set_vt by id: no lease or token needed (§5.4); a
//! Connect-JSON holder of the message's lease loses it (`409 lock_lost`
//! on its next settle), because its token is gone with the row or cleared.
//! Dead letters are outside pgmq's queue: never found by id.

use super::{ids, message_columns, messages, PgmqMessage, VisibleAt, QUEUE_HEAD};
use crate::engine::{unexpected, Engine, EngineError};
use crate::store::{Program, Statement, Transport};

/// Deletes the live rows among the ids `?2` (a JSON array) of queue `?1`:
/// one primary-key seek per id (`NOT INDEXED` keeps the planner from
/// walking the queue's state index instead).
pub(in crate::engine) const DELETE: Statement = crate::statement!(
    "\
DELETE FROM messages NOT INDEXED WHERE queue = ?1 AND state <> 'dead_lettered'
  AND id IN (SELECT value FROM json_each(?2))
RETURNING id"
);

/// Copies the live rows among the ids `?2` into the archive (§5.7)...
pub(in crate::engine) const ARCHIVE_COPY: Statement = crate::statement!(concat!(
    "\
INSERT INTO archived_messages (queue, id, read_ct, enqueued_at, last_read_at, vt, body,
  headers, archived_at)
SELECT queue, ",
    message_columns!(""),
    ", {now} FROM messages NOT INDEXED WHERE queue = ?1 AND state <> 'dead_lettered'
  AND id IN (SELECT value FROM json_each(?2))"
));

/// Makes the message visible at `coalesce(?4, now + ?3)`: scheduled until
/// then, or active at once; any lease and its token are cleared.
pub(in crate::engine) const SET_VT: Statement = crate::statement!(concat!(
    "\
UPDATE messages SET
  state = CASE WHEN coalesce(?4, {now} + ?3) > {now} THEN 'scheduled' ELSE 'active' END,
  visible_at = max(coalesce(?4, {now} + ?3), 0),
  lock_token = NULL,
  locked_until = 0
WHERE queue = ?1 AND id = ?2 AND state <> 'dead_lettered'
RETURNING ",
    message_columns!("")
));

impl<T: Transport> Engine<T> {
    /// Deletes the ids that are in the queue; returns those deleted.
    pub async fn pgmq_delete(&self, queue: &str, ids_in: &[i64]) -> Result<Vec<i64>, EngineError> {
        self.by_ids(queue, ids_in, false).await
    }

    /// Archives the ids that are in the queue; returns those archived.
    pub async fn pgmq_archive(&self, queue: &str, ids_in: &[i64]) -> Result<Vec<i64>, EngineError> {
        self.by_ids(queue, ids_in, true).await
    }

    async fn by_ids(
        &self,
        queue: &str,
        ids_in: &[i64],
        archive: bool,
    ) -> Result<Vec<i64>, EngineError> {
        let list = serde_json::to_string(ids_in).unwrap_or_else(|_| "[]".into());
        let mut program = Program::write_on(queue);
        program.head(&QUEUE_HEAD, vec![queue.into()]);
        if archive {
            program.step(&ARCHIVE_COPY, vec![queue.into(), list.as_str().into()]);
        }
        let deleted = program.step(&DELETE, vec![queue.into(), list.as_str().into()]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        super::queue_found(&committed)?;
        let done = ids(&committed, deleted)?;
        // The counters' vocabulary is mqlite's (docs/semantics.md, "Observability"): a message
        // a pgmq consumer deleted or archived was completed.
        self.note(queue, crate::engine::Event::Completed, done.len() as u64);
        Ok(done)
    }

    /// set_vt: the message with its new visibility; `NotFound` when the id
    /// is not in the queue.
    pub async fn pgmq_set_vt(
        &self,
        queue: &str,
        id: i64,
        vt: VisibleAt,
    ) -> Result<PgmqMessage, EngineError> {
        let (relative, absolute) = vt.params()?;
        let mut program = Program::write_on(queue);
        program.head(&QUEUE_HEAD, vec![queue.into()]);
        let set = program.step(
            &SET_VT,
            vec![
                queue.into(),
                id.into(),
                relative.into(),
                absolute.map_or(crate::store::hrana::Value::Null, Into::into),
            ],
        );
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        super::queue_found(&committed)?;
        messages(&committed, set)?
            .into_iter()
            .next()
            .ok_or(EngineError::NotFound)
    }
}
