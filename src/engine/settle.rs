//! Settlement (docs/semantics.md#settlement): Complete, Abandon, Reject, Defer and their
//! batch forms, plus Renew.
//!
//! Every settlement runs "receipt first", in one transaction:
//! 1. write the receipt `(queue, seq, token, operation, args)` only if the
//!    fence holds at this statement's `now` (locked, token, live lease, TTL);
//! 2. apply the effect only to rows whose receipt now exists — no second
//!    clock read, so the fence and the effect cannot disagree;
//! 3. answer from the receipt: a live exact receipt is success, whether
//!    this call wrote it or an earlier identical request did (replay).
//!
//! A token is cleared by every effect, so an old receipt can never let a
//! new effect through.

use super::maintenance::waiters;
use super::Event;
use super::{require_name, unexpected, Engine, EngineError, QUEUE_EXISTS};
use crate::store::Statement;
use crate::store::{Program, Transport};

/// How long an exact settle request can be replayed.
pub(super) const RECEIPT_LIFETIME_MS: i64 = 30 * 60 * 1000;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettleRequest {
    pub queue: String,
    pub seq_number: i64,
    pub lock_token: String,
}

/// One (seq, token) pair of a batch request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettleItem {
    pub seq_number: i64,
    pub lock_token: String,
}

/// A batch item's outcome; `locked_until_ms` only for renewed items.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchResult {
    pub seq_number: i64,
    pub ok: bool,
    pub locked_until_ms: Option<i64>,
}

/// The four settlement effects and their receipt identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settlement {
    Complete,
    /// Backoff in ms; negative is treated as 0 (docs/deviations.md D10).
    Abandon {
        delay_ms: i64,
    },
    /// Reason (empty → `AppRequested`) and description (empty → none).
    Reject {
        reason: String,
        description: String,
    },
    Defer,
}

impl Settlement {
    fn operation(&self) -> &'static str {
        match self {
            Settlement::Complete => "completed",
            Settlement::Abandon { .. } => "abandoned",
            Settlement::Reject { .. } => "dead_lettered",
            Settlement::Defer => "deferred",
        }
    }

    /// An injective encoding of the effect-bearing arguments.
    fn args(&self) -> String {
        match self {
            Settlement::Complete | Settlement::Defer => String::new(),
            Settlement::Abandon { delay_ms } => (*delay_ms).max(0).to_string(),
            Settlement::Reject {
                reason,
                description,
            } => serde_json::to_string(&[reject_reason(reason), description.as_str()])
                .unwrap_or_default(),
        }
    }

    /// The effect on rows whose receipt exists (`RECEIPTED`).
    fn effect(&self) -> &'static Statement {
        match self {
            Settlement::Complete => &COMPLETE,
            Settlement::Abandon { .. } => &ABANDON,
            Settlement::Reject { .. } => &REJECT,
            Settlement::Defer => &DEFER,
        }
    }
}

fn reject_reason(reason: &str) -> &str {
    if reason.is_empty() {
        "AppRequested"
    } else {
        reason
    }
}

/// Step 1: the receipt, written only under the fence (docs/deviations.md D2:
/// TTL fences like an expired lease; the deadline instant is expired).
/// `CROSS JOIN` pins the join order: rows are found by primary key, never
/// by walking the queue's live leases.
/// `?1` queue, `?2` JSON array of `[seq, token]` pairs, `?3` operation, `?4` args.
pub(super) const RECORD_RECEIPTS: Statement = crate::statement!(const_format::concatcp!(
    "\
INSERT OR REPLACE INTO settlement_receipts
  (queue, seq_number, lock_token, operation, args, created_at, expires_at)
SELECT m.queue, m.id, m.lock_token, ?3, ?4, {now}, {now} + ",
    RECEIPT_LIFETIME_MS,
    "
FROM json_each(?2) j CROSS JOIN messages m ON m.id = json_extract(j.value, '$[0]')
WHERE m.queue = ?1 AND m.state = 'locked' AND m.lock_token = json_extract(j.value, '$[1]')
  AND m.locked_until > {now} AND (m.expires_at = 0 OR m.expires_at > {now})
RETURNING seq_number, lock_token"
));

/// Rows of this request whose receipt was just written (their token is
/// still set, so only this call's receipt can match). The unary `+` keeps
/// the planner on the primary key instead of walking the queue's leases.
macro_rules! receipted {
    () => {
        "id IN (SELECT json_extract(value, '$[0]') FROM json_each(?2)) AND +queue = ?1 AND +state = 'locked'
  AND EXISTS (SELECT 1 FROM settlement_receipts r WHERE r.queue = ?1 AND r.seq_number = messages.id
    AND r.lock_token = messages.lock_token AND r.operation = ?3 AND r.args = ?4)"
    };
}

/// T7: completion deletes the row.
pub(super) const COMPLETE: Statement = crate::statement!(concat!(
    "DELETE FROM messages WHERE ",
    receipted!(),
    " RETURNING id, state"
));

/// T8–T10: back to active (no delay), parked as scheduled (delay > 0), or
/// dead-lettered once the delivery count is used up (delay ignored). Each
/// row also says whether the queue has waiters to wake (`waiters!`).
pub(super) const ABANDON: Statement = crate::statement!(concat!("\
UPDATE messages SET
  state = CASE
    WHEN delivery_count >= (SELECT max_delivery_count FROM queues WHERE name = ?1) THEN 'dead_lettered'
    WHEN ?5 > 0 THEN 'scheduled' ELSE 'active' END,
  dead_letter_reason = CASE
    WHEN delivery_count >= (SELECT max_delivery_count FROM queues WHERE name = ?1)
    THEN 'MaxDeliveryCountExceeded' ELSE dead_letter_reason END,
  visible_at = CASE
    WHEN delivery_count >= (SELECT max_delivery_count FROM queues WHERE name = ?1) THEN visible_at
    ELSE (SELECT created_at FROM settlement_receipts r WHERE r.queue = ?1 AND r.seq_number = messages.id
          AND r.lock_token = messages.lock_token AND r.operation = ?3 AND r.args = ?4) + ?5 END,
  lock_token = NULL,
  locked_until = 0
WHERE ", receipted!(), " RETURNING id, state, ", waiters!()));

/// T11: dead-letter with the client's reason, regardless of the count.
pub(super) const REJECT: Statement = crate::statement!(concat!(
    "\
UPDATE messages SET state = 'dead_lettered', dead_letter_reason = ?5,
  dead_letter_description = nullif(?6, ''), lock_token = NULL, locked_until = 0
WHERE ",
    receipted!(),
    " RETURNING id, state"
));

/// T12: parked until ReceiveDeferred.
pub(super) const DEFER: Statement = crate::statement!(concat!(
    "UPDATE messages SET state = 'deferred', lock_token = NULL, locked_until = 0 WHERE ",
    receipted!(),
    " RETURNING id, state"
));

/// Step 3: the request pairs that hold a live receipt of exactly this
/// request. Receipts are keyed by the exact (seq, token) pair, so a pair
/// only has one if that very pair passed the fence — now or in an earlier
/// identical request — and a correct pair can never vouch for a wrong one
/// sharing its token (docs/semantics.md#settlement).
/// Read first, as the program's head (one row, whatever the count): a
/// pair vouched for by an earlier identical request is a replay; the pairs
/// this request passes the fence for come back from [`RECORD_RECEIPTS`].
pub(super) const LIVE_RECEIPTS: Statement = crate::statement!(crate::schema_checked!(
    "(SELECT json_group_array(json_array(r.seq_number, r.lock_token)) FROM settlement_receipts r
WHERE r.queue = ?1 AND r.operation = ?3 AND r.args = ?4 AND r.expires_at > {now}
  AND EXISTS (SELECT 1 FROM json_each(?2) j WHERE json_extract(j.value, '$[0]') = r.seq_number
    AND json_extract(j.value, '$[1]') = r.lock_token)
  AND r.seq_number IN (SELECT json_extract(value, '$[0]') FROM json_each(?2)))"
));

/// T13: extend live, fenced leases to `now + lock_duration`, never shorter.
/// Returns the committed deadlines.
pub(super) const RENEW: Statement = crate::statement!("\
UPDATE messages SET locked_until = max(locked_until, {now} + (SELECT lock_duration_ms FROM queues WHERE name = ?1))
WHERE id IN (SELECT json_extract(value, '$[0]') FROM json_each(?2)) AND +queue = ?1 AND +state = 'locked'
  AND +locked_until > {now} AND (expires_at = 0 OR expires_at > {now})
  AND EXISTS (SELECT 1 FROM json_each(?2) j WHERE json_extract(j.value, '$[0]') = messages.id
    AND json_extract(j.value, '$[1]') = messages.lock_token)
RETURNING id, lock_token, locked_until");

/// The clock after the renewal statement finished.
pub(super) const NOW_AFTER: Statement = crate::statement!("SELECT {now}");

/// More items than this in one RenewBatch is a 400.
const MAX_RENEW_BATCH: usize = 512;

fn pairs_json<'a>(items: impl Iterator<Item = (i64, &'a str)>) -> String {
    let pairs: Vec<(i64, &str)> = items.filter(|(_, token)| !token.is_empty()).collect();
    serde_json::to_string(&pairs).unwrap_or_default()
}

impl<T: Transport> Engine<T> {
    /// Complete (T7).
    pub async fn complete(&self, request: &SettleRequest) -> Result<(), EngineError> {
        self.settle(request, &Settlement::Complete).await
    }

    /// Any single settlement: `{"ok":true}` on a new effect or an exact
    /// replay, otherwise `lock_lost`. Queue existence is not checked.
    pub async fn settle(
        &self,
        request: &SettleRequest,
        how: &Settlement,
    ) -> Result<(), EngineError> {
        if let Settlement::Abandon { delay_ms } = how {
            super::at_most("delay_ms", *delay_ms, super::MAX_DURATION_MS)?;
        }
        if request.lock_token.is_empty() {
            return Err(EngineError::LockLost);
        }
        let item = SettleItem {
            seq_number: request.seq_number,
            lock_token: request.lock_token.clone(),
        };
        let results = self
            .settle_items(&request.queue, std::slice::from_ref(&item), how)
            .await?;
        if results.first().is_some_and(|r| r.ok) {
            Ok(())
        } else {
            Err(EngineError::LockLost)
        }
    }

    /// CompleteBatch (docs/semantics.md#settlement): per-item results, positional; never fails the
    /// whole batch for an item; an unknown queue gives all `ok:false`.
    pub async fn complete_batch(
        &self,
        queue: &str,
        items: &[SettleItem],
    ) -> Result<Vec<BatchResult>, EngineError> {
        if items.iter().all(|i| i.lock_token.is_empty()) {
            return Ok(items.iter().map(|i| failed(i.seq_number)).collect());
        }
        self.settle_items(queue, items, &Settlement::Complete).await
    }

    async fn settle_items(
        &self,
        queue: &str,
        items: &[SettleItem],
        how: &Settlement,
    ) -> Result<Vec<BatchResult>, EngineError> {
        let pairs = pairs_json(items.iter().map(|i| (i.seq_number, i.lock_token.as_str())));
        let operation = how.operation();
        let args = how.args();
        let key = || {
            vec![
                queue.into(),
                pairs.as_str().into(),
                operation.into(),
                args.as_str().into(),
            ]
        };
        // Only an Abandon can make its messages claimable again.
        let wakes = matches!(how, Settlement::Abandon { .. });
        let mut program = Program::write_on(queue).waking(wakes);
        let live = program.head(&LIVE_RECEIPTS, key());
        let recorded = program.step(&RECORD_RECEIPTS, key());
        let mut effect_args = key();
        match how {
            Settlement::Abandon { delay_ms } => effect_args.push((*delay_ms).max(0).into()),
            Settlement::Reject {
                reason,
                description,
            } => {
                effect_args.push(reject_reason(reason).into());
                effect_args.push(description.as_str().into());
            }
            Settlement::Complete | Settlement::Defer => {}
        }
        let effect = program.step(how.effect(), effect_args);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        // Rows this call changed (replays change none): the message events of
        // docs/semantics.md#observability.
        let mut changed = 0;
        let mut dead_lettered = 0;
        let mut waiters = None;
        for row in committed.rows(effect) {
            changed += 1;
            dead_lettered += u64::from(row.text(1)? == "dead_lettered");
            // Only Abandon returns the waiter columns.
            if row.text(1)? == "active" && row.int(2).is_ok_and(|w| w == 1) {
                waiters = row.int(3).ok();
            }
        }
        if let Some(at_ms) = waiters {
            self.note_claimable(queue, at_ms);
        }
        let event = match how {
            Settlement::Complete => Event::Completed,
            Settlement::Abandon { .. } => Event::Abandoned,
            Settlement::Reject { .. } => Event::Rejected,
            Settlement::Defer => Event::Deferred,
        };
        self.note(queue, event, changed);
        self.note(queue, Event::DeadLettered, dead_lettered);
        let mut vouched: Vec<(i64, String)> = Vec::new();
        if let Some(row) = committed.first_row(live) {
            let earlier: Vec<(i64, String)> =
                serde_json::from_str(row.opt_text(1)?.unwrap_or("[]")).map_err(|e| {
                    EngineError::Store(crate::store::StoreError::Failed(format!(
                        "unreadable receipts: {e}"
                    )))
                })?;
            vouched.extend(earlier);
        }
        for row in committed.rows(recorded) {
            vouched.push((row.int(0)?, row.text(1)?.to_owned()));
        }
        Ok(items
            .iter()
            .map(|i| BatchResult {
                seq_number: i.seq_number,
                ok: !i.lock_token.is_empty()
                    && vouched
                        .iter()
                        .any(|(s, t)| *s == i.seq_number && *t == i.lock_token),
                locked_until_ms: None,
            })
            .collect())
    }

    /// Renew (T13): queue must exist (checked before the token, docs/deviations.md
    /// D11); the new deadline is not reported.
    pub async fn renew(&self, request: &SettleRequest) -> Result<(), EngineError> {
        require_name(&request.queue)?;
        let item = SettleItem {
            seq_number: request.seq_number,
            lock_token: request.lock_token.clone(),
        };
        let results = self
            .renew_items(&request.queue, std::slice::from_ref(&item))
            .await?;
        if results.first().is_some_and(|r| r.ok) {
            Ok(())
        } else {
            Err(EngineError::LockLost)
        }
    }

    /// RenewBatch (docs/semantics.md#settlement): one statement renews every matching pair; an item
    /// is ok only if its committed deadline is still ahead of the clock read
    /// after the statement.
    pub async fn renew_batch(
        &self,
        queue: &str,
        items: &[SettleItem],
    ) -> Result<Vec<BatchResult>, EngineError> {
        if items.len() > MAX_RENEW_BATCH {
            return Err(EngineError::InvalidArgument(format!(
                "at most {MAX_RENEW_BATCH} items per RenewBatch (got {})",
                items.len()
            )));
        }
        if items.iter().all(|i| i.lock_token.is_empty()) {
            return Ok(items.iter().map(|i| failed(i.seq_number)).collect());
        }
        require_name(queue)?;
        self.renew_items(queue, items).await
    }

    async fn renew_items(
        &self,
        queue: &str,
        items: &[SettleItem],
    ) -> Result<Vec<BatchResult>, EngineError> {
        let pairs = pairs_json(items.iter().map(|i| (i.seq_number, i.lock_token.as_str())));
        let mut program = Program::write_on(queue);
        let exists = program.step(&QUEUE_EXISTS, vec![queue.into()]);
        let renewed = program.step(&RENEW, vec![queue.into(), pairs.as_str().into()]);
        let now_after = program.step(&NOW_AFTER, vec![]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        if committed.first_row(exists).is_none() {
            return Err(EngineError::QueueNotFound);
        }
        let now = match committed.first_row(now_after) {
            Some(row) => row.int(0)?,
            None => i64::MAX,
        };
        let mut deadlines = Vec::new();
        for row in committed.rows(renewed) {
            deadlines.push((row.int(0)?, row.text(1)?.to_owned(), row.int(2)?));
        }
        Ok(items
            .iter()
            .map(|i| {
                let deadline = deadlines
                    .iter()
                    .find(|(s, t, _)| *s == i.seq_number && *t == i.lock_token)
                    .map(|(_, _, d)| *d)
                    .filter(|d| *d > now);
                BatchResult {
                    seq_number: i.seq_number,
                    ok: deadline.is_some(),
                    locked_until_ms: deadline,
                }
            })
            .collect())
    }
}

fn failed(seq_number: i64) -> BatchResult {
    BatchResult {
        seq_number,
        ok: false,
        locked_until_ms: None,
    }
}
