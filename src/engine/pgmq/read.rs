//! read, read-poll and pop: mqlite's claim (ordering rules, group heads,
//! housekeeping first) with pgmq's lease and shape.

use const_format::str_replace;

use super::{message_columns, messages, PgmqMessage};
use crate::engine::receive::{
    claim_head, claim_tokens, claim_walk, head_times, mark_waiting, TAKE_PICKED,
};
use crate::engine::wait::{long_poll, Backoff, Claimed};
use crate::engine::{unexpected, Engine, EngineError, Event, Waiter};
use crate::store::{Program, RunStats, Statement, Transport};

/// pgmq's default visibility timeout when a read gives none (or 0).
pub const DEFAULT_VT_SECONDS: i64 = 30;
/// The shortest pause between polls, whatever `poll_interval_ms` asks
/// (Receive's first pause): a tighter loop would only spend the budget.
const MIN_POLL_INTERVAL_MS: u64 = 50;

/// A read: `qty` messages leased for `vt_seconds` (§5.4); pop deletes them
/// in the same transaction (§5.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgmqRead {
    pub queue: String,
    pub qty: i64,
    pub vt_seconds: i64,
    pub pop: bool,
    /// A read's `conditional`: only messages whose body contains this JSON
    /// object (jsonb's `@>`) are claimed. `None` (or `{}`): every message.
    pub conditional: Option<String>,
    /// read-poll: how long to wait for a message, and the poll interval.
    pub max_poll_ms: u64,
    pub poll_interval_ms: u64,
}

/// The claim's picked rows leased for `?7` ms, each with token `n` of
/// `?6`, `last_read_at` set (pop takes its picks with [`TAKE`] instead).
const LEASE_PICKED: &str = concat!(
    "\
UPDATE messages SET
  state = 'locked',
  delivery_count = delivery_count + 1,
  lock_token = json_extract(?6, '$[' || picked.n || ']'),
  locked_until = {now} + ?7,
  last_read_at = {now}
FROM picked WHERE messages.id = picked.id
RETURNING ",
    message_columns!("messages.")
);

/// The claim of [`crate::engine::receive`] with pgmq's lease tail.
pub(in crate::engine) const CLAIM: Statement = crate::statement!(claim_walk!(LEASE_PICKED));

/// The candidate test of every step of the walk; [`CLAIM_CONTAINING`]
/// adds the containment of `?8` to it.
const CANDIDATE_LIVE: &str = "(m.expires_at = 0 OR m.expires_at > {now})";

/// A conditional read: [`CLAIM`] whose every candidate (the next ungrouped
/// row, the next group head, the next row of a picked group) must also
/// contain the condition `?8`, so the walk passes over the rows that do
/// not, and a group whose head does not match is not claimed from. One
/// statement, the same round trip.
pub(in crate::engine) const CLAIM_CONTAINING: Statement = crate::statement!(str_replace!(
    claim_walk!(LEASE_PICKED),
    CANDIDATE_LIVE,
    const_format::concatcp!(
        CANDIDATE_LIVE,
        " AND ",
        super::contains::BODY_CONTAINS_CONDITION
    )
));

/// pop: the claim's picks are deleted at once, never leased (no token to
/// find them by), returned as they were (a pop is not a read: `read_ct` and
/// `last_read_at` unchanged, pgmq's). `?1`..`?5` as in [`CLAIM`], `?3` = 1.
pub(in crate::engine) const TAKE: Statement = crate::statement!(claim_walk!(str_replace!(
    TAKE_PICKED,
    "COLUMNS",
    message_columns!("")
)));

impl<T: Transport> Engine<T> {
    /// read / read-poll / pop. Polls (read-poll) until a message is
    /// visible or `max_poll_ms` passed, within Receive's request budget and
    /// on its wake hints (docs/semantics.md#long-polling).
    pub async fn pgmq_read(
        &self,
        request: &PgmqRead,
        waiter: &impl Waiter,
    ) -> Result<Vec<PgmqMessage>, EngineError> {
        let vt = if request.vt_seconds == 0 {
            DEFAULT_VT_SECONDS
        } else {
            request.vt_seconds
        };
        if !(0..=crate::engine::MAX_DURATION_MS / 1000).contains(&vt) {
            return Err(EngineError::InvalidArgument(format!(
                "vt must be between 0 and {} seconds (got {vt})",
                crate::engine::MAX_DURATION_MS / 1000
            )));
        }
        let cap = self
            .limits
            .poll_max_requests
            .clamp(1, crate::engine::MAX_POLL_REQUESTS);
        let interval = request.poll_interval_ms.max(MIN_POLL_INTERVAL_MS);
        let backoff = Backoff {
            first: interval,
            max: interval,
        };
        let (claimed, _) = long_poll(
            waiter,
            &request.queue,
            request.max_poll_ms,
            cap,
            backoff,
            |limit, mark| async move {
                let mut stats = RunStats::limited_to(limit);
                let claimed = self
                    .pgmq_claim_once(request, vt * 1000, mark, &mut stats)
                    .await;
                (claimed, stats)
            },
        )
        .await?;
        Ok(claimed)
    }

    /// One claim: head, housekeeping, claim (and pop's delete).
    async fn pgmq_claim_once(
        &self,
        request: &PgmqRead,
        lease_ms: i64,
        mark: bool,
        stats: &mut RunStats,
    ) -> Result<Claimed<PgmqMessage>, EngineError> {
        let queue = request.queue.as_str();
        let mut program = Program::write_on(queue);
        let head = program.head(claim_head(mark), vec![queue.into(), "".into()]);
        let housekeeping = self.housekeeping(&mut program, queue);
        let mut args = vec![
            queue.into(),
            request.qty.into(),
            i64::from(request.pop).into(),
            self.limits.response_budget_bytes.into(),
            "".into(),
        ];
        let claim = if request.pop {
            program.step(&TAKE, args)
        } else {
            let tokens = claim_tokens(request.qty.max(0) as usize)?;
            args.extend([tokens.into(), lease_ms.into()]);
            match &request.conditional {
                Some(condition) => {
                    args.push(condition.as_str().into());
                    program.step(&CLAIM_CONTAINING, args)
                }
                None => program.step(&CLAIM, args),
            }
        };
        if mark {
            mark_waiting(&mut program, queue);
        }
        let committed = self
            .run_within(&mut program, stats)
            .await
            .map_err(|(e, _)| unexpected(e))?;
        self.note_housekeeping(&committed, &housekeeping);
        super::queue_found(&committed)?;
        let claimed = messages(&committed, claim)?;
        let n = claimed.len() as u64;
        if request.pop {
            self.note(queue, Event::Delivered, n);
            self.note(queue, Event::ReceiveDeleted, n);
        } else {
            let again = claimed.iter().filter(|m| m.read_ct > 1).count() as u64;
            self.note(queue, Event::Delivered, n);
            self.note(queue, Event::Redelivered, again);
        }
        let (now_ms, next_due_ms) = head_times(&committed, head)?;
        Ok(Claimed {
            messages: claimed,
            now_ms,
            next_due_ms,
        })
    }
}
