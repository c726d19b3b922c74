//! Long-polling (docs/semantics.md#long-polling), shared by Receive and pgmq's
//! read-poll: claim at once; while nothing comes and time remains, either
//! park on the queue's wake hint (when the platform offers one) or sleep on
//! a growing re-poll interval; claim once more at the deadline. Each claim
//! is one database round trip; the hint only decides *when* to claim, so a
//! lost, late or duplicated hint costs at most one park, never a message.

use std::future::Future;

use super::EngineError;
use crate::store::{RunStats, StoreError};

/// The longest park on a wake hint: a waiter re-checks the database at
/// least this often, whatever happens to the hints. 20 s / 5 s keeps an
/// empty 20 s wait at 5 claims and 4 parks (9 subrequests).
pub const PARK_MAX_MS: u64 = 5_000;

/// How a park on a wake hint ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parked {
    /// The queue was notified (possibly before the park began: the hint's
    /// mark was at or after `since_ms`).
    Woken,
    /// Nothing came within the time given.
    TimedOut,
    /// The hint could not be used (unreachable or failing): this request
    /// falls back to plain re-polling.
    Failed,
}

/// Waiting between claims, on the platform's timer, and (optionally) on
/// the platform's wake hints. Elapsed time here only bounds the wait; it
/// never decides message state.
pub trait Waiter {
    /// Milliseconds since the request started waiting.
    fn elapsed_ms(&self) -> u64;
    fn sleep(&self, millis: u64) -> impl Future<Output = ()>;

    /// Whether this request can park on wake hints: then a waiting claim
    /// records in the database that the queue has a waiter, so the
    /// requests that make messages claimable there report it.
    fn hints(&self) -> bool {
        false
    }

    /// Parks until `queue` is notified of a change committed at or after
    /// database time `since_ms`, or `millis` pass. Only called when
    /// [`Waiter::hints`] is true; each call is one subrequest.
    fn park(&self, queue: &str, since_ms: i64, millis: u64) -> impl Future<Output = Parked> {
        let _ = (queue, since_ms, millis);
        std::future::ready(Parked::Failed)
    }
}

/// What a long poll spent, for tests and metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LongPoll {
    pub attempts: u32,
    /// Database requests made (attempts plus their retries), at most the
    /// clamped `poll_max_requests`.
    pub fetches: u32,
    /// Parks on a wake hint (each one subrequest); `fetches + parks` stays
    /// within the same budget.
    pub parks: u32,
}

/// How long after a due time the re-claim comes, so its housekeeping finds
/// the schedule or lease due (the Worker's timer and the database clock are
/// different clocks).
const DUE_SLACK_MS: u64 = 10;

/// One claim's answer: what it claimed, the database time it ran at, and
/// the queue's next schedule activation or lease deadline (`i64::MAX`: none).
pub(super) struct Claimed<M> {
    pub messages: Vec<M>,
    pub now_ms: i64,
    pub next_due_ms: i64,
}

/// The re-poll interval without hints: from `first`, growing by 8/5 up to
/// `max`.
pub(super) struct Backoff {
    pub first: u64,
    pub max: u64,
}

/// Runs `claim(limit, mark)` until it claims something or `wait_ms` passed,
/// within `cap` subrequests. `limit` is the database requests the attempt
/// may make; `mark` asks it to record the queue's waiter (hints only).
pub(super) async fn long_poll<M, W: Waiter, F>(
    waiter: &W,
    queue: &str,
    wait_ms: u64,
    cap: u32,
    backoff: Backoff,
    mut claim: impl FnMut(u32, bool) -> F,
) -> Result<(Vec<M>, LongPoll), EngineError>
where
    F: Future<Output = (Result<Claimed<M>, EngineError>, RunStats)>,
{
    let mut poll = LongPoll::default();
    let mut delay = backoff.first;
    let mut hints = wait_ms > 0 && waiter.hints();
    loop {
        // Every fetch counts, a claim's retries and migrations included.
        let spent = poll.fetches + poll.parks;
        let (claimed, stats) = claim(cap.saturating_sub(spent), hints).await;
        poll.fetches += stats.fetches;
        let claimed = match claimed {
            // The budget ran out inside a later attempt that provably
            // applied nothing: the poll found nothing, as before.
            Err(EngineError::Store(StoreError::Unavailable(_)))
                if poll.attempts > 0 && poll.fetches + poll.parks >= cap =>
            {
                return Ok((Vec::new(), poll))
            }
            other => other?,
        };
        poll.attempts += 1;
        let elapsed = waiter.elapsed_ms();
        if !claimed.messages.is_empty() || elapsed >= wait_ms {
            return Ok((claimed.messages, poll));
        }
        let mut remaining = wait_ms - elapsed;
        let mut requests_left = u64::from(cap.saturating_sub(poll.fetches + poll.parks));
        if requests_left == 0 {
            return Ok((claimed.messages, poll));
        }
        // A park and the claim after it: spread the parks evenly, none
        // longer than PARK_MAX_MS, so the last claim falls on the deadline.
        if hints && requests_left >= 2 {
            // Nobody may be there to observe (and notify) a schedule or
            // lease coming due: the waiter re-claims then itself.
            let due = claimed.next_due_ms.saturating_sub(claimed.now_ms).max(0) as u64;
            let park = remaining
                .div_ceil(remaining.div_ceil(PARK_MAX_MS))
                .min(due.saturating_add(DUE_SLACK_MS));
            poll.parks += 1;
            match waiter.park(queue, claimed.now_ms, park).await {
                Parked::Woken | Parked::TimedOut => continue,
                // Plain re-polling for the rest of this request, from
                // wherever the failed park left the clock and the budget.
                Parked::Failed => hints = false,
            }
            let elapsed = waiter.elapsed_ms();
            if elapsed >= wait_ms {
                continue;
            }
            remaining = wait_ms - elapsed;
            requests_left = u64::from(cap.saturating_sub(poll.fetches + poll.parks));
            if requests_left == 0 {
                return Ok((claimed.messages, poll));
            }
        }
        waiter.sleep(pause(remaining, requests_left, delay)).await;
        delay = (delay * 8 / 5).min(backoff.max);
    }
}

/// The pause before the next claim without hints: keep the last request
/// for the final attempt at the deadline, and never poll faster than the
/// budget allows.
fn pause(remaining: u64, requests_left: u64, delay: u64) -> u64 {
    if requests_left == 1 {
        remaining
    } else {
        delay.max(remaining / requests_left).min(remaining)
    }
}
