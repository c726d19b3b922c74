//! Receive (docs/semantics.md#receive): claim in one statement, idempotent attempt
//! replay, receive-and-delete, and bounded long-polling.

use base64::Engine as _;
use serde::Deserialize;

use super::wait::{long_poll, Backoff, Claimed, LongPoll, Waiter};
use super::Event;
use super::{random_hex, require_name, unexpected, Engine, EngineError};
use const_format::str_replace;

use crate::store::hrana::Value;
use crate::store::Statement;
use crate::store::{Committed, Program, Row, RunError, RunStats, StepId, StoreError, Transport};

/// Hard caps of the wire contract.
const MAX_MESSAGES: i64 = 256;
const MAX_WAIT_MS: i64 = 20_000;
/// Long-poll back-off without wake hints: start fast so a wake-up early in
/// the wait is seen quickly, then stretch so a long wait fits the request
/// budget.
const FIRST_POLL_DELAY_MS: u64 = 50;
const MAX_POLL_DELAY_MS: u64 = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReceiveMode {
    #[default]
    PeekLock,
    ReceiveAndDelete,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReceiveRequest {
    pub queue: String,
    pub max_messages: i64,
    pub wait_time_ms: i64,
    pub mode: ReceiveMode,
    pub attempt_id: String,
}

/// A claimed message in the Receive output shape.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReceivedMessage {
    pub seq_number: i64,
    /// Standard padded base64.
    #[serde(skip)]
    pub body_base64: String,
    pub message_id: Option<String>,
    pub group_id: Option<String>,
    pub correlation_id: Option<String>,
    pub reply_to: Option<String>,
    pub subject: Option<String>,
    pub content_type: Option<String>,
    /// JSON object text, `None` when there are no properties.
    #[serde(skip)]
    pub properties: Option<String>,
    pub delivery_count: i64,
    pub enqueued_at_ms: i64,
    pub locked_until_ms: Option<i64>,
    pub lock_token: Option<String>,
}

/// strict_fifo head-of-line rule (docs/semantics.md#receive) for candidate `c`: any earlier
/// locked, deferred or scheduled row of the queue blocks it. One EXISTS per
/// state, so each probe is an index seek; the locked rows' index is ordered
/// by deadline, so that probe reads the queue's leases, of which a strict
/// queue holds at most one from Receive (any earlier lease blocks the
/// next claim) plus those ReceiveDeferred took. Blocking is monotone — if a
/// candidate is blocked, every later one is too — so the walk stops at the
/// first blocked candidate and an empty strict poll touches one row.
pub(super) const STRICT_BLOCKED: &str = "\
(EXISTS (SELECT 1 FROM messages b WHERE b.queue = ?1 AND b.state = 'locked' AND b.id < c.id)
  OR EXISTS (SELECT 1 FROM messages b WHERE b.queue = ?1 AND b.state = 'deferred' AND b.id < c.id)
  OR EXISTS (SELECT 1 FROM messages b WHERE b.queue = ?1 AND b.state = 'scheduled' AND b.id < c.id))";

/// standard/group_fifo rule for candidate `m`: an earlier locked, deferred
/// or scheduled row of the same group blocks it; ungrouped rows are never
/// blocked. Probes seek the (queue, group_id, state, id) index.
pub(super) const GROUP_BLOCKED: &str = "\
(m.group_id IS NOT NULL AND (
  EXISTS (SELECT 1 FROM messages b WHERE b.queue = ?1 AND b.group_id = m.group_id AND b.state = 'locked' AND b.id < m.id)
  OR EXISTS (SELECT 1 FROM messages b WHERE b.queue = ?1 AND b.group_id = m.group_id AND b.state = 'deferred' AND b.id < m.id)
  OR EXISTS (SELECT 1 FROM messages b WHERE b.queue = ?1 AND b.group_id = m.group_id AND b.state = 'scheduled' AND b.id < m.id)))";

/// The claim: a recursive walk that reproduces the iterative batch rule of docs/semantics.md#receive
/// exactly — each step takes the lowest claimable seq after the previous
/// pick, from at most three index seeks (plus one per group already picked
/// in this call), so no step ever walks a blocked backlog:
/// * the next ungrouped active row (its own partial index);
/// * the next group whose head (`group_heads`: its lowest unfinished seq)
///   is active — a group behind an in-flight, deferred or scheduled message
///   is skipped with one lookup, since every later row of it is blocked;
/// * receive-and-delete only: the next unblocked active row of each group
///   already picked, since picked rows are gone and a group yields an
///   in-order run. In peek-lock a picked group is done for this call.
/// * strict_fifo: the first active row (the lower of the next ungrouped
///   and the next grouped one, each from its own index), unless blocked
///   (then nothing).
///
/// The walk stops at `?2` messages or once the body budget `?4` is crossed
/// (the crossing message is included). No row is picked while a live
/// receive attempt `?5` exists (it is replayed). Each picked row takes its
/// own CSPRNG token from the JSON array `?6`.
pub(super) const CLAIM_TEMPLATE: &str = "\
WITH RECURSIVE
mode(strict) AS (SELECT ordering_mode = 'strict_fifo' FROM queues WHERE name = ?1),
pick(n, id, bytes, groups) AS (
  SELECT 0, 0, 0, '[]' FROM mode
  WHERE NOT EXISTS (SELECT 1 FROM receive_attempts WHERE queue = ?1 AND attempt_id = ?5 AND expires_at > {now})
  UNION ALL
  SELECT p.n + 1, c.id, p.bytes + length(c.body),
    CASE WHEN c.group_id IS NULL OR EXISTS (SELECT 1 FROM json_each(p.groups) g WHERE g.value = c.group_id)
      THEN p.groups ELSE json_insert(p.groups, '$[#]', c.group_id) END
  FROM pick p, mode JOIN messages c ON c.id = CASE WHEN mode.strict THEN (SELECT min(next) FROM (
    SELECT (SELECT m.id FROM messages m INDEXED BY messages_ungrouped_active
            WHERE m.queue = ?1 AND m.state = 'active' AND m.group_id IS NULL AND m.id > p.id
              AND (m.expires_at = 0 OR m.expires_at > {now})
            ORDER BY m.id LIMIT 1) AS next
    UNION ALL
    SELECT (SELECT m.id FROM messages m INDEXED BY messages_by_state
            WHERE m.queue = ?1 AND m.state = 'active' AND m.group_id IS NOT NULL AND m.id > p.id
              AND (m.expires_at = 0 OR m.expires_at > {now})
            ORDER BY m.id LIMIT 1)))
  ELSE (SELECT min(next) FROM (
    SELECT (SELECT m.id FROM messages m INDEXED BY messages_ungrouped_active
            WHERE m.queue = ?1 AND m.state = 'active' AND m.group_id IS NULL AND m.id > p.id
              AND (m.expires_at = 0 OR m.expires_at > {now})
            ORDER BY m.id LIMIT 1) AS next
    UNION ALL
    SELECT (SELECT h.head_id FROM group_heads h INDEXED BY group_heads_by_head
            CROSS JOIN messages m ON m.id = h.head_id
            WHERE h.queue = ?1 AND h.head_id > p.id AND m.state = 'active'
              AND (m.expires_at = 0 OR m.expires_at > {now})
            ORDER BY h.head_id LIMIT 1)
    UNION ALL
    SELECT min((SELECT m.id FROM messages m
                WHERE m.queue = ?1 AND m.group_id = g.value AND m.state = 'active' AND m.id > p.id
                  AND (m.expires_at = 0 OR m.expires_at > {now}) AND NOT GROUP_BLOCKED
                ORDER BY m.id LIMIT 1))
    FROM json_each(p.groups) g WHERE ?3 = 1))
  END
  WHERE p.n < ?2 AND p.bytes < ?4
    AND NOT (mode.strict AND ((?3 <> 1 AND p.n >= 1) OR STRICT_BLOCKED))
),
picked AS MATERIALIZED (SELECT n - 1 AS n, id FROM pick WHERE n > 0)
LOCK_PICKED";

/// The pick of a single message (`max_messages` 1, the common case): the
/// walk of [`CLAIM`] reduced to its first step, without recursion, so the
/// statement compiled on every such Receive is a fraction of the size.
/// `?1` queue, `?2` receive attempt id (no row is picked while a live one
/// exists).
/// * strict_fifo: the first active row, unless an earlier row blocks it;
/// * otherwise: the lower of the next ungrouped active row and the next
///   group whose head is active.
const ONE_CANDIDATE: &str = "(
  SELECT CASE WHEN q.ordering_mode = 'strict_fifo' THEN (
    SELECT c.id FROM (SELECT min(next) AS id FROM (
      SELECT (SELECT id FROM messages INDEXED BY messages_ungrouped_active
              WHERE queue = ?1 AND state = 'active' AND group_id IS NULL
                AND (expires_at = 0 OR expires_at > {now}) ORDER BY id LIMIT 1) AS next
      UNION ALL
      SELECT (SELECT id FROM messages INDEXED BY messages_by_state
              WHERE queue = ?1 AND state = 'active' AND group_id IS NOT NULL
                AND (expires_at = 0 OR expires_at > {now}) ORDER BY id LIMIT 1))) c
    WHERE NOT STRICT_BLOCKED)
  ELSE (SELECT min(next) FROM (
    SELECT (SELECT m.id FROM messages m INDEXED BY messages_ungrouped_active
            WHERE m.queue = ?1 AND m.state = 'active' AND m.group_id IS NULL
              AND (m.expires_at = 0 OR m.expires_at > {now})
            ORDER BY m.id LIMIT 1) AS next
    UNION ALL
    SELECT (SELECT h.head_id FROM group_heads h INDEXED BY group_heads_by_head
            CROSS JOIN messages m ON m.id = h.head_id
            WHERE h.queue = ?1 AND m.state = 'active'
              AND (m.expires_at = 0 OR m.expires_at > {now})
            ORDER BY h.head_id LIMIT 1)))
  END
  FROM queues q WHERE q.name = ?1
    AND NOT EXISTS (SELECT 1 FROM receive_attempts
      WHERE queue = ?1 AND attempt_id = ?2 AND expires_at > {now}))";

/// `$text` with its `ONE_CANDIDATE` placeholder replaced by the single
/// pick [`ONE_CANDIDATE`] and its head-of-line rule.
macro_rules! with_one_candidate {
    ($text:expr) => {
        str_replace!(
            str_replace!($text, "ONE_CANDIDATE", ONE_CANDIDATE),
            "STRICT_BLOCKED",
            STRICT_BLOCKED
        )
    };
}

/// A leased row as a claim returns it, `$t` naming the table (`""` or
/// `"messages."`): the body, every other field but the token packed in one
/// JSON array (one cell instead of eleven, most of them NULL: a Receive of
/// 64 answers 44 % fewer bytes, tests/statement_counts.rs), and the lock token on
/// its own, where the fold finds whose row it is. Read by [`received`].
macro_rules! leased_columns {
    ($t:literal) => {
        concat!(
            $t,
            "body, ",
            $crate::engine::receive::packed_fields!($t, "delivery_count"),
            ", ",
            $t,
            "locked_until), ",
            $t,
            "lock_token"
        )
    };
}
pub(super) use leased_columns;

/// A row taken by receive-and-delete as it is delivered (one more
/// delivery, no lease, no token): the body and the packed fields of
/// [`leased_columns`].
macro_rules! taken_columns {
    () => {
        concat!("body, ", packed_fields!("", "delivery_count + 1"), ")")
    };
}

/// The opening of the packed array (left open for a lease deadline):
/// seq, delivery count `$delivery`, enqueue time, then the metadata in
/// [`Packed`]'s order.
macro_rules! packed_fields {
    ($t:literal, $delivery:literal) => {
        concat!(
            "json_array(",
            $t,
            "id, ",
            $t,
            $delivery,
            ", ",
            $t,
            "enqueued_at, ",
            $t,
            "message_id, ",
            $t,
            "group_id, ",
            $t,
            "correlation_id, ",
            $t,
            "reply_to, ",
            $t,
            "subject, ",
            $t,
            "content_type, ",
            $t,
            "properties"
        )
    };
}
pub(super) use packed_fields;

/// Locks the single pick; `?3` is the JSON array holding its lock token.
pub(super) const CLAIM_ONE: Statement = crate::statement!(with_one_candidate!(concat!(
    "\
UPDATE messages SET
  state = 'locked',
  delivery_count = delivery_count + 1,
  lock_token = ?3 ->> 0,
  locked_until = {now} + (SELECT lock_duration_ms FROM queues WHERE name = ?1)
WHERE id = ONE_CANDIDATE
RETURNING ",
    leased_columns!("")
)));

/// Receive-and-delete of a single message without a receive attempt: the
/// same pick as [`CLAIM_ONE`], deleted at once (no lease, no token).
pub(super) const TAKE_ONE: Statement = crate::statement!(with_one_candidate!(concat!(
    "DELETE FROM messages WHERE id = ONE_CANDIDATE RETURNING ",
    taken_columns!()
)));

/// T5/T15: lock the `picked(n, id)` rows — each takes token `n` (0-based)
/// of the JSON array `TOKENS` and a lease from the queue's lock duration —
/// and return them in the Receive shape.
pub(super) const LOCK_PICKED: &str = concat!(
    "\
UPDATE messages SET
  state = 'locked',
  delivery_count = delivery_count + 1,
  lock_token = json_extract(TOKENS, '$[' || picked.n || ']'),
  locked_until = {now} + (SELECT lock_duration_ms FROM queues WHERE name = ?1)
FROM picked WHERE messages.id = picked.id
RETURNING ",
    leased_columns!("messages.")
);

/// The head of a claim: whether queue `?1` exists, the exact earlier
/// answer of a live receive attempt `?2` (none for ''), the database time
/// the claim ran at (a waiter parks on the wake hint "since" then), and
/// the next due time a waiter may park until (see [`WAITING_CLAIM_HEAD`]).
macro_rules! claim_head {
    ($next_due:expr) => {
        crate::statement!(crate::schema_checked!(concat!(
            "(SELECT 1 FROM queues WHERE name = ?1),
  (SELECT response FROM receive_attempts WHERE queue = ?1 AND attempt_id = ?2 AND expires_at > {now}),
  {now}, ",
            $next_due
        )))
    };
}

/// The head of a claim that will not park on wake hints: no next due time
/// (`i64::MAX`), so an empty poll reads only the queue and attempt rows.
pub(super) const CLAIM_HEAD: Statement = claim_head!("9223372036854775807");

/// The head of a waiting claim that may park on wake hints: also the
/// queue's next future schedule activation or lease deadline (none if
/// neither), which no request may be there to observe and notify, so the
/// waiter parks no longer than that (docs/semantics.md#long-polling). Each
/// is the head of a queue-leading partial index, as in the housekeeping gate.
pub(super) const WAITING_CLAIM_HEAD: Statement = claim_head!(
    "min(coalesce((SELECT visible_at FROM messages WHERE queue = ?1 AND state = 'scheduled'
      AND visible_at > {now} ORDER BY visible_at LIMIT 1), 9223372036854775807),
    coalesce((SELECT locked_until FROM messages WHERE queue = ?1 AND state = 'locked'
      AND locked_until > {now} ORDER BY locked_until LIMIT 1), 9223372036854775807))"
);

/// The head for a claim: [`WAITING_CLAIM_HEAD`] only when it may park.
pub(super) fn claim_head(may_park: bool) -> &'static Statement {
    if may_park {
        &WAITING_CLAIM_HEAD
    } else {
        &CLAIM_HEAD
    }
}

/// The database time and next due time a claim's head read.
pub(super) fn head_times(committed: &Committed, head: StepId) -> Result<(i64, i64), EngineError> {
    match committed.first_row(head) {
        Some(row) => Ok((row.int(3)?, row.int(4)?)),
        None => Ok((0, i64::MAX)),
    }
}

/// How long one waiting claim keeps queue `?1` marked as waited on: past
/// the longest wait (20 s) plus the longest park, so a waiter that
/// re-claims at least every `PARK_MAX_MS` is always covered.
const WAITERS_HOLD_MS: i64 = 30_000;
/// The mark is rewritten only when it would move by more than this, so
/// busy waiters cost at most one row written per queue every few seconds.
const WAITERS_REFRESH_MS: i64 = 5_000;

/// A waiting claim that claimed nothing (`changes()` of the statement right
/// before it: the claim, the attempt record after a peek-lock claim, which
/// writes one row exactly when the claim took any, or the delete of a
/// receive-and-delete's recorded picks) records that queue `?1` has a
/// waiter until `{now} + ?2`, unless it already has one until
/// `{now} + ?2 - ?3` (docs/semantics.md#long-polling).
pub(super) const MARK_WAITING: Statement = crate::statement!(
    "\
UPDATE queues SET waiters_until = {now} + ?2
WHERE name = ?1 AND changes() = 0 AND waiters_until < {now} + ?2 - ?3"
);

/// Appends [`MARK_WAITING`] right after a program's claim step.
pub(super) fn mark_waiting(program: &mut Program, queue: &str) {
    program.step(
        &MARK_WAITING,
        vec![
            queue.into(),
            WAITERS_HOLD_MS.into(),
            WAITERS_REFRESH_MS.into(),
        ],
    );
}

/// How far the clock may move between a claim and the attempt record right
/// after it (both statements of one pipeline, back to back under the write
/// lock: normally well under a millisecond) before the record refuses.
const RECORD_WINDOW_MS: i64 = 250;

/// The head of a statement that records a claim's exact answer (the shape
/// [`replayed`] reads back) in queue `?1` under attempt id `$attempt`: one
/// JSON object per row `m` of the `FROM` that follows, with `$delivery`,
/// `$until` and `$token` for the delivery count, lease and token the answer
/// shows. The statement ends by closing `ORDER BY m.id))` and a `WHERE` on
/// `claimed`.
macro_rules! record_answer {
    ($attempt:literal, $delivery:literal, $until:literal, $token:literal) => {
        concat!(
            "INSERT OR REPLACE INTO receive_attempts (queue, attempt_id, response, created_at, expires_at)
SELECT ?1, ",
            $attempt,
            ", response, {now},
  {now} + max(coalesce((SELECT lock_duration_ms FROM queues WHERE name = ?1), 0), 300000)
FROM (SELECT json_group_array(json(r)) AS response, count(*) AS claimed FROM (
  SELECT json_object('seq_number', m.id, 'body', hex(m.body), 'message_id', m.message_id,
    'group_id', m.group_id, 'correlation_id', m.correlation_id, 'reply_to', m.reply_to,
    'subject', m.subject, 'content_type', m.content_type, 'properties', json(m.properties),
    'delivery_count', ",
            $delivery,
            ", 'enqueued_at_ms', m.enqueued_at,
    'locked_until_ms', ",
            $until,
            ", 'lock_token', ",
            $token,
            ") AS r"
        )
    };
}

/// Records a peek-lock claim's exact answer under the attempt id, if it
/// claimed anything. Runs right after the claim, as a guard.
///
/// No index knows the claimed rows by token (migration 0007 dropped it, a
/// row written per claim). Every row one claim statement leases gets the
/// same deadline, the claim's `{now}` plus the queue's lock duration, so the
/// record finds them in `messages_lease_expiry` within `RECORD_WINDOW_MS` of
/// its own `{now}` plus that duration, and keeps those holding one of this
/// claim's tokens (fresh, so only this claim's rows hold them). Bound: it
/// reads the queue's leases whose deadline lies within 250 ms either side
/// of this one's (for this queue's lock duration: the leases taken or
/// renewed within 250 ms of this claim), never the queue's whole in-flight
/// set.
///
/// Exactness: `changes()` is still the claim's count of rows locked. If the
/// clock moved further than the window between the two statements, fewer
/// rows are found; the statement then fails (the guard idiom of
/// `crate::guard!`, as one expression so no short circuit can skip it), so
/// the transaction rolls back and nothing is claimed rather than a partial
/// answer recorded (pinned by `tests/receive_attempt_window.rs`).
pub(super) const RECORD_ATTEMPT: Statement = crate::statement!(const_format::concatcp!(
    record_answer!("?2", "m.delivery_count", "m.locked_until", "m.lock_token"),
    "
  FROM messages m INDEXED BY messages_lease_expiry
  WHERE m.queue = ?1 AND m.state = 'locked'
    AND m.locked_until BETWEEN {now} + (SELECT lock_duration_ms FROM queues WHERE name = ?1) - ",
    RECORD_WINDOW_MS,
    "
      AND {now} + (SELECT lock_duration_ms FROM queues WHERE name = ?1) + ",
    RECORD_WINDOW_MS,
    "
    AND m.lock_token IN (SELECT value FROM json_each(?3))
  ORDER BY m.id))
WHERE json(CASE WHEN claimed <> changes() THEN 'abort' WHEN claimed = 0 THEN '0' ELSE '1' END) = '1'"
));

/// The steps of one claim attempt.
struct ClaimSteps {
    head: StepId,
    claim: StepId,
    deleted: Option<StepId>,
}

impl<T: Transport> Engine<T> {
    /// Claims up to `max_messages`, long-polling for up to `wait_time_ms`.
    pub async fn receive(
        &self,
        request: &ReceiveRequest,
        waiter: &impl Waiter,
    ) -> Result<(Vec<ReceivedMessage>, LongPoll), EngineError> {
        require_name(&request.queue)?;
        let max = request.max_messages.clamp(1, MAX_MESSAGES);
        let wait = request.wait_time_ms.clamp(0, MAX_WAIT_MS) as u64;
        let cap = self
            .limits
            .poll_max_requests
            .clamp(1, super::MAX_POLL_REQUESTS);
        let backoff = Backoff {
            first: FIRST_POLL_DELAY_MS,
            max: MAX_POLL_DELAY_MS,
        };
        long_poll(
            waiter,
            &request.queue,
            wait,
            cap,
            backoff,
            |limit, mark| async move {
                let mut stats = RunStats::limited_to(limit);
                let claimed = self.claim_once(request, max, mark, &mut stats).await;
                (claimed, stats)
            },
        )
        .await
    }

    /// One claim attempt: housekeeping, replay lookup, claim — one round trip.
    async fn claim_once(
        &self,
        request: &ReceiveRequest,
        max: i64,
        mark: bool,
        stats: &mut RunStats,
    ) -> Result<Claimed<ReceivedMessage>, EngineError> {
        let queue = request.queue.as_str();
        let delete = request.mode == ReceiveMode::ReceiveAndDelete;
        // Receive-and-delete never locks: no tokens to draw.
        let tokens = if delete {
            String::new()
        } else {
            claim_tokens(max as usize)?
        };

        let attempt = request.attempt_id.as_str();
        let mut program = Program::write_on(queue);
        let head = program.head(claim_head(mark), vec![queue.into(), attempt.into()]);
        let housekeeping = self.housekeeping(&mut program, queue);
        // Receive-and-delete deletes its picks: directly without an attempt;
        // with one, the picks' answer is recorded first and exactly the
        // recorded rows go right after. A single message is picked without
        // the walk's recursion.
        let take = delete && attempt.is_empty();
        let walk = |picked_group_goes_on: i64| -> Vec<Value> {
            vec![
                queue.into(),
                max.into(),
                picked_group_goes_on.into(),
                self.limits.response_budget_bytes.into(),
                attempt.into(),
            ]
        };
        let claim = match (delete, max == 1) {
            (true, true) => program.step(
                if take { &TAKE_ONE } else { &RECORD_TAKE_ONE },
                vec![queue.into(), attempt.into()],
            ),
            (true, false) => program.step(if take { &TAKE } else { &RECORD_TAKE }, walk(1)),
            (false, true) => program.step(
                &CLAIM_ONE,
                vec![queue.into(), attempt.into(), tokens.as_str().into()],
            ),
            (false, false) => {
                let mut args = walk(0);
                args.push(tokens.as_str().into());
                program.step(&CLAIM, args)
            }
        };
        // Right after the claim (or the record): each reads its `changes()`.
        let record = (!delete && !attempt.is_empty()).then(|| {
            program.guard(
                &RECORD_ATTEMPT,
                vec![queue.into(), attempt.into(), tokens.as_str().into()],
            )
        });
        let deleted = if take {
            Some(claim)
        } else {
            delete.then(|| program.step(&DELETE_RECORDED, vec![queue.into(), attempt.into()]))
        };
        // Last: it reads whether the statement before it took anything.
        if mark {
            mark_waiting(&mut program, queue);
        }
        let committed = match self.run_within(&mut program, stats).await {
            Ok(committed) => committed,
            Err((RunError::Rejected(step), _)) if Some(step) == record => {
                return Err(EngineError::Store(StoreError::Unavailable(
                    "the claim could not be recorded under its receive attempt id exactly \
                     (the database clock jumped); nothing was claimed, retry"
                        .into(),
                )))
            }
            Err((e, _)) => return Err(unexpected(e)),
        };
        self.note_housekeeping(&committed, &housekeeping);
        let replayed = committed
            .first_row(head)
            .is_some_and(|row| row.opt_text(2).is_ok_and(|r| r.is_some()));
        let messages = read_claim(
            &committed,
            ClaimSteps {
                head,
                claim,
                deleted,
            },
        )?;
        if !replayed {
            self.note_claimed(queue, &messages, delete);
        }
        let (now_ms, next_due_ms) = head_times(&committed, head)?;
        Ok(Claimed {
            messages,
            now_ms,
            next_due_ms,
        })
    }

    /// Counts a fresh claim's deliveries (docs/semantics.md#observability); replays count nothing.
    pub(super) fn note_claimed(&self, queue: &str, messages: &[ReceivedMessage], deleted: bool) {
        let n = messages.len() as u64;
        let again = messages.iter().filter(|m| m.delivery_count > 1).count() as u64;
        self.note(queue, Event::Delivered, n);
        self.note(queue, Event::Redelivered, again);
        if deleted {
            self.note(queue, Event::ReceiveDeleted, n);
        }
    }
}

/// The walk of [`CLAIM_TEMPLATE`] with its head-of-line rules, ending in
/// `$tail`, which acts on the walk's `picked(n, id)` rows (lock them, or
/// delete them). Shared by both dialects' claims.
macro_rules! claim_walk {
    ($tail:expr) => {
        const_format::str_replace!(
            const_format::str_replace!(
                const_format::str_replace!(
                    $crate::engine::receive::CLAIM_TEMPLATE,
                    "LOCK_PICKED",
                    $tail
                ),
                "GROUP_BLOCKED",
                $crate::engine::receive::GROUP_BLOCKED
            ),
            "STRICT_BLOCKED",
            $crate::engine::receive::STRICT_BLOCKED
        )
    };
}
pub(super) use claim_walk;

/// The claim statement with its head-of-line rules and locking tail.
pub(super) const CLAIM: Statement =
    crate::statement!(claim_walk!(str_replace!(LOCK_PICKED, "TOKENS", "?6")));

/// Receive-and-delete of several messages without a receive attempt: the
/// walk of [`CLAIM`] whose picks are deleted at once, like [`TAKE_ONE`]'s
/// (no lease, no token, nothing to find again). `RETURNING` order is the
/// delete's, so the answer is sorted by seq in Rust.
pub(super) const TAKE: Statement = crate::statement!(claim_walk!(str_replace!(
    TAKE_PICKED,
    "COLUMNS",
    taken_columns!()
)));

/// The tail of a claim that deletes its `picked(n, id)` rows instead of
/// locking them, returning `COLUMNS` (as they were before the delete).
pub(super) const TAKE_PICKED: &str =
    "DELETE FROM messages WHERE id IN (SELECT id FROM picked) RETURNING COLUMNS";

/// The answer of a receive-and-delete under attempt id `$attempt`, as
/// recorded and as replayed: each picked row as it will be delivered (one
/// more delivery, no token, no lease), in seq order.
macro_rules! record_picked {
    ($attempt:literal) => {
        concat!(
            record_answer!($attempt, "m.delivery_count + 1", "NULL", "NULL"),
            "
  FROM picked CROSS JOIN messages m ON m.id = picked.id
  ORDER BY m.id))
WHERE claimed > 0"
        )
    };
}

/// Receive-and-delete with an attempt id, first half: the claim walk's
/// picks (`?1` queue, `?2` max, `?3` = 1: a picked group goes on, `?4` body
/// budget, `?5` attempt id) are not locked but recorded, exactly as they
/// will be answered. A live attempt `?5` stops the walk before any pick, so
/// a replay records (and replaces) nothing. The rows go in
/// [`DELETE_RECORDED`], right after.
pub(super) const RECORD_TAKE: Statement = crate::statement!(claim_walk!(record_picked!("?5")));

/// [`RECORD_TAKE`] of a single message (`max_messages` 1): the pick of
/// [`TAKE_ONE`] as `picked(n, id)`, without the walk's recursion, so the
/// statement compiled is a fraction of the size (as [`CLAIM_ONE`] is to
/// [`CLAIM`]). `?1` queue, `?2` attempt id (a live one picks nothing).
pub(super) const RECORD_TAKE_ONE: Statement = crate::statement!(with_one_candidate!(concat!(
    "WITH picked(n, id) AS MATERIALIZED (
  SELECT 0, id FROM (SELECT ONE_CANDIDATE AS id) WHERE id IS NOT NULL)
",
    record_picked!("?2")
)));

/// Receive-and-delete with an attempt id, second half: deletes exactly the
/// rows [`RECORD_TAKE`] recorded under `?2` in queue `?1` (by primary key,
/// still active), only when that record was written by the statement right
/// before (`changes()`): a replay's earlier record, whose rows may be
/// active again (the same id used first for a peek-lock claim whose lease
/// then ran out), deletes nothing.
pub(super) const DELETE_RECORDED: Statement = crate::statement!(concat!(
    "\
DELETE FROM messages
WHERE changes() = 1
  AND id IN (SELECT r.value ->> '$.seq_number' FROM receive_attempts a, json_each(a.response) r
    WHERE a.queue = ?1 AND a.attempt_id = ?2)
  AND +state = 'active'
RETURNING ",
    taken_columns!()
));

/// `n` lock tokens (128 random bits, 32 lowercase hex each) as a JSON
/// array, from one CSPRNG draw.
pub(super) fn claim_tokens(n: usize) -> Result<String, EngineError> {
    let entropy = random_hex(16 * n)?;
    let tokens: Vec<&str> = (0..entropy.len())
        .step_by(32)
        .filter_map(|i| entropy.get(i..i + 32))
        .collect();
    Ok(serde_json::to_string(&tokens).unwrap_or_default())
}

fn read_claim(
    committed: &Committed,
    steps: ClaimSteps,
) -> Result<Vec<ReceivedMessage>, EngineError> {
    let Some(head) = committed.first_row(steps.head) else {
        return Err(EngineError::QueueNotFound);
    };
    if head.int(1)? == 0 {
        return Err(EngineError::QueueNotFound);
    }
    if let Some(response) = head.opt_text(2)? {
        return replayed(response);
    }
    let source = steps.deleted.unwrap_or(steps.claim);
    let mut messages = read_received(committed, source, steps.deleted.is_none())?;
    messages.sort_by_key(|m| m.seq_number);
    Ok(messages)
}

/// Claimed rows in the Receive shape; `with_lease` adds token and deadline.
pub(super) fn read_received(
    committed: &Committed,
    step: StepId,
    with_lease: bool,
) -> Result<Vec<ReceivedMessage>, EngineError> {
    committed
        .rows(step)
        .map(|row| received(&row, with_lease))
        .collect()
}

/// The array [`packed_fields`] packs, read by position; a lease deadline
/// closes it only for [`leased_columns`].
#[derive(Deserialize)]
struct Packed {
    seq_number: i64,
    delivery_count: i64,
    enqueued_at_ms: i64,
    message_id: Option<String>,
    group_id: Option<String>,
    correlation_id: Option<String>,
    reply_to: Option<String>,
    subject: Option<String>,
    content_type: Option<String>,
    properties: Option<String>,
    #[serde(default)]
    locked_until_ms: Option<i64>,
}

/// A row of [`leased_columns`] (`with_lease`) or [`taken_columns`].
fn received(row: &Row, with_lease: bool) -> Result<ReceivedMessage, EngineError> {
    let packed: Packed = serde_json::from_str(row.text(1)?).map_err(|e| {
        EngineError::Store(StoreError::Failed(format!("unreadable claimed row: {e}")))
    })?;
    let (locked_until_ms, lock_token) = if with_lease {
        let Some(until) = packed.locked_until_ms else {
            return Err(EngineError::Store(StoreError::Failed(
                "a claimed row has no lease deadline".into(),
            )));
        };
        (Some(until), row.opt_text(2)?.map(str::to_owned))
    } else {
        (None, None)
    };
    Ok(ReceivedMessage {
        seq_number: packed.seq_number,
        body_base64: row.blob_base64(0)?,
        message_id: packed.message_id,
        group_id: packed.group_id,
        correlation_id: packed.correlation_id,
        reply_to: packed.reply_to,
        subject: packed.subject,
        content_type: packed.content_type,
        properties: packed.properties,
        delivery_count: packed.delivery_count,
        enqueued_at_ms: packed.enqueued_at_ms,
        locked_until_ms,
        lock_token,
    })
}

/// One message of a recorded attempt (body as hex, properties as an object).
#[derive(Deserialize)]
struct Recorded {
    #[serde(flatten)]
    message: ReceivedMessage,
    body: String,
    properties: Option<serde_json::Value>,
}

fn replayed(response: &str) -> Result<Vec<ReceivedMessage>, EngineError> {
    let recorded: Vec<Recorded> = serde_json::from_str(response).map_err(|e| {
        EngineError::Store(crate::store::StoreError::Failed(format!(
            "unreadable receive attempt record: {e}"
        )))
    })?;
    let mut messages = Vec::with_capacity(recorded.len());
    for r in recorded {
        let bytes = unhex(&r.body).ok_or_else(|| {
            EngineError::Store(crate::store::StoreError::Failed(
                "receive attempt record has a malformed body".into(),
            ))
        })?;
        let mut message = r.message;
        message.body_base64 = base64::engine::general_purpose::STANDARD.encode(bytes);
        message.properties = r.properties.map(|p| p.to_string());
        messages.push(message);
    }
    messages.sort_by_key(|m| m.seq_number);
    Ok(messages)
}

/// The bytes of SQLite's `hex()` text (uppercase; lowercase accepted), in
/// one pass over byte pairs: a replayed answer can hold megabytes of body.
fn unhex(text: &str) -> Option<Vec<u8>> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'A'..=b'F' => Some(c - b'A' + 10),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    let pairs = text.as_bytes().chunks_exact(2);
    if !pairs.remainder().is_empty() {
        return None;
    }
    pairs
        .map(|pair| match pair {
            [high, low] => Some(nibble(*high)? << 4 | nibble(*low)?),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::unhex;

    #[test]
    fn unhex_reads_sqlite_hex_and_refuses_anything_else() {
        assert_eq!(unhex(""), Some(vec![]));
        assert_eq!(unhex("00FF7a"), Some(vec![0, 255, 122]));
        let all: Vec<u8> = (0..=255).collect();
        let text: String = all.iter().map(|b| format!("{b:02X}")).collect();
        assert_eq!(unhex(&text), Some(all));
        for bad in ["0", "0G", "+1", "é0", "123"] {
            assert_eq!(unhex(bad), None, "{bad}");
        }
    }
}
