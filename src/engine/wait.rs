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
        if hints && can_park(remaining, requests_left) {
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

/// Whether `requests_left` pay for a park and the claim after it and still
/// leave a claim at least every `PARK_MAX_MS` to the deadline, the last on
/// it. A wake (often for a message another consumer takes first) ends a park
/// early and spends its claim; a waiter short of that re-polls as without
/// hints, what is left spread over the wait, so it is never deaf longer than
/// a park and never answers before the deadline
/// (docs/semantics.md#long-polling).
fn can_park(remaining: u64, requests_left: u64) -> bool {
    requests_left >= 2 + remaining.div_ceil(PARK_MAX_MS)
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

#[cfg(test)]
mod tests {
    //! The schedule of a long poll, on a manual clock and a scripted claim:
    //! its claims, sleeps and parks, and what it spends of its budget.

    use std::cell::{Cell, RefCell};

    use super::*;

    /// A waiter on a manual clock that records what it is asked to do; its
    /// parks end as `parks_end` says, in turn, taking the whole time given;
    /// then woken `woken_after` into each (when set), or timed out.
    #[derive(Default)]
    struct Script {
        now: Cell<u64>,
        hints: bool,
        parks_end: RefCell<Vec<Parked>>,
        woken_after: Option<u64>,
        sleeps: RefCell<Vec<u64>>,
        parks: RefCell<Vec<u64>>,
    }

    impl Waiter for Script {
        fn elapsed_ms(&self) -> u64 {
            self.now.get()
        }
        async fn sleep(&self, millis: u64) {
            self.sleeps.borrow_mut().push(millis);
            self.now.set(self.now.get() + millis);
        }
        fn hints(&self) -> bool {
            self.hints
        }
        async fn park(&self, _queue: &str, _since_ms: i64, millis: u64) -> Parked {
            self.parks.borrow_mut().push(millis);
            let mut ends = self.parks_end.borrow_mut();
            let (took, end) = match self.woken_after {
                _ if !ends.is_empty() => (millis, ends.remove(0)),
                Some(after) if after < millis => (after, Parked::Woken),
                _ => (millis, Parked::TimedOut),
            };
            self.now.set(self.now.get() + took);
            end
        }
    }

    impl Script {
        /// A waiter whose queue has wake hints.
        fn with_hints() -> Self {
            Script {
                hints: true,
                ..Script::default()
            }
        }
    }

    /// What each claim was given: its request limit and whether it marked.
    type Claims = RefCell<Vec<(u32, bool)>>;

    /// One scripted claim's answer.
    type Answer = std::future::Ready<(Result<Claimed<()>, EngineError>, RunStats)>;

    /// A claim that finds nothing, one fetch each, nothing coming due; at
    /// `fail_at` (claims counted from 0) it reports the budget spent
    /// (`Unavailable`, with `fetches` fetches).
    fn empty_claim<'a>(
        claims: &'a Claims,
        fail_at: Option<(usize, u32)>,
    ) -> impl FnMut(u32, bool) -> Answer + 'a {
        move |limit, mark| {
            let n = claims.borrow().len();
            claims.borrow_mut().push((limit, mark));
            let mut stats = RunStats {
                fetches: 1,
                ..RunStats::default()
            };
            let answer = match fail_at {
                Some((at, fetches)) if at == n => {
                    stats.fetches = fetches;
                    Err(EngineError::Store(StoreError::Unavailable("spent".into())))
                }
                _ => Ok(Claimed {
                    messages: Vec::new(),
                    now_ms: 0,
                    next_due_ms: i64::MAX,
                }),
            };
            std::future::ready((answer, stats))
        }
    }

    const BACKOFF: Backoff = Backoff {
        first: 100,
        max: 1_000,
    };

    async fn poll(
        waiter: &Script,
        wait_ms: u64,
        cap: u32,
        claims: &Claims,
        fail_at: Option<(usize, u32)>,
    ) -> Result<LongPoll, EngineError> {
        let claim = empty_claim(claims, fail_at);
        long_poll(waiter, "q", wait_ms, cap, BACKOFF, claim)
            .await
            .map(|(_, spent)| spent)
    }

    /// Without hints the pauses grow by 8/5 from the first up to the
    /// longest, the last one cut so the final claim falls on the deadline.
    #[test]
    fn re_polls_back_off_by_eight_fifths_and_end_on_the_deadline() {
        let waiter = Script::default();
        let claims = Claims::default();
        let spent = pollster::block_on(poll(&waiter, 10_000, 1_000, &claims, None)).expect("poll");
        let mut expected = vec![100, 160, 256, 409, 654];
        expected.extend([1_000; 8]);
        expected.push(421);
        assert_eq!(*waiter.sleeps.borrow(), expected);
        assert_eq!(waiter.now.get(), 10_000);
        assert_eq!(spent.attempts, 15);
        assert_eq!(spent.fetches, 15);
        // Each claim may spend what is left of the budget, and no claim
        // marks a waiter without hints.
        let limits: Vec<u32> = claims.borrow().iter().map(|c| c.0).collect();
        assert_eq!(limits, (986..=1_000).rev().collect::<Vec<_>>());
        assert!(claims.borrow().iter().all(|c| !c.1));
    }

    /// A small budget spreads the claims over the wait, keeping the last
    /// one for the deadline.
    #[test]
    fn a_small_budget_spreads_its_claims_and_keeps_one_for_the_deadline() {
        let waiter = Script::default();
        let claims = Claims::default();
        let spent = pollster::block_on(poll(&waiter, 10_000, 3, &claims, None)).expect("poll");
        assert_eq!(*waiter.sleeps.borrow(), [5_000, 5_000]);
        assert_eq!((spent.attempts, spent.fetches), (3, 3));
        let limits: Vec<u32> = claims.borrow().iter().map(|c| c.0).collect();
        assert_eq!(limits, [3, 2, 1]);
        // 4 requests over 9 s: three pauses of 3 s.
        let waiter = Script::default();
        pollster::block_on(poll(&waiter, 9_000, 4, &Claims::default(), None)).expect("poll");
        assert_eq!(*waiter.sleeps.borrow(), [3_000, 3_000, 3_000]);
    }

    /// A wait of 0 claims once and marks nothing, hints or not.
    #[test]
    fn a_zero_wait_claims_once_without_marking() {
        let waiter = Script::with_hints();
        let claims = Claims::default();
        let spent = pollster::block_on(poll(&waiter, 0, 10, &claims, None)).expect("poll");
        assert_eq!(*claims.borrow(), [(10, false)]);
        assert_eq!((spent.attempts, spent.parks), (1, 0));
    }

    /// With hints every claim marks and parks count against the budget; a
    /// park that fails turns the rest of the wait into plain re-polling,
    /// from where it left the clock and the budget.
    #[test]
    fn a_failed_park_falls_back_to_re_polling_from_where_it_left() {
        let waiter = Script {
            parks_end: RefCell::new(vec![Parked::TimedOut, Parked::Failed]),
            ..Script::with_hints()
        };
        let claims = Claims::default();
        let spent = pollster::block_on(poll(&waiter, 20_000, 10, &claims, None)).expect("poll");
        // Parks of 5 s (20 s in four), the second failing at 10 s; then 10
        // requests less 2 claims and 2 parks leave 6: the 10 s left in six
        // pauses, the last claim on the deadline.
        assert_eq!(*waiter.parks.borrow(), [5_000, 5_000]);
        assert_eq!(
            *waiter.sleeps.borrow(),
            [1_666, 1_666, 1_667, 1_667, 1_667, 1_667]
        );
        assert_eq!(waiter.now.get(), 20_000);
        let claims = claims.borrow();
        assert_eq!(
            *claims,
            [
                (10, true),
                (8, true),
                (6, false),
                (5, false),
                (4, false),
                (3, false),
                (2, false),
                (1, false)
            ],
            "the limits left, and marking only while hints work"
        );
        assert_eq!((spent.attempts, spent.fetches, spent.parks), (8, 8, 2));
        // The first park failing at 5 s: 10 requests less a claim and a
        // park leave 8, the 15 s left in pauses of 15/8 s.
        let waiter = Script {
            parks_end: RefCell::new(vec![Parked::Failed]),
            ..Script::with_hints()
        };
        pollster::block_on(poll(&waiter, 20_000, 10, &Claims::default(), None)).expect("poll");
        assert_eq!(*waiter.parks.borrow(), [5_000]);
        assert_eq!(*waiter.sleeps.borrow(), [1_875; 8]);
    }

    /// A budget too small to park and still claim every 5 s to the deadline
    /// re-polls as without hints: it never answers before the deadline (5
    /// requests once parked twice for 5 s and answered at 10 s of a 20 s
    /// wait).
    #[test]
    fn a_small_budget_with_hints_keeps_its_last_claim_for_the_deadline() {
        let waiter = Script::with_hints();
        let claims = Claims::default();
        let spent = pollster::block_on(poll(&waiter, 20_000, 5, &claims, None)).expect("poll");
        assert_eq!(waiter.now.get(), 20_000, "the last claim on the deadline");
        assert_eq!(*waiter.sleeps.borrow(), [5_000; 4]);
        assert_eq!((spent.attempts, spent.fetches, spent.parks), (5, 5, 0));
        // An empty 20 s wait with the default budget: 5 claims, 4 parks.
        let waiter = Script::with_hints();
        let spent =
            pollster::block_on(poll(&waiter, 20_000, 40, &Claims::default(), None)).expect("poll");
        assert_eq!(*waiter.parks.borrow(), [5_000; 4]);
        assert_eq!((spent.attempts, spent.parks), (5, 4));
    }

    /// Wakes whose claims find nothing (another consumer took the message)
    /// spend the budget two requests at a time; short of what parking to
    /// the deadline needs, the waiter spreads what is left over the wait.
    /// It once spent it all on wakes, then slept 18 s to the deadline, or,
    /// its first claim retried once, answered empty at 1.9 s.
    #[test]
    fn wakes_that_find_nothing_neither_deafen_a_waiter_nor_end_its_wait_early() {
        for first_claim_fetches in [1, 2] {
            let waiter = Script {
                woken_after: Some(100),
                ..Script::with_hints()
            };
            let claims = Claims::default();
            let claim = |_limit: u32, _mark: bool| {
                let n = claims.borrow().len();
                claims.borrow_mut().push((0, false));
                let stats = RunStats {
                    fetches: if n == 0 { first_claim_fetches } else { 1 },
                    ..RunStats::default()
                };
                let nothing = Claimed::<()> {
                    messages: Vec::new(),
                    now_ms: 0,
                    next_due_ms: i64::MAX,
                };
                std::future::ready((Ok(nothing), stats))
            };
            let (_, spent) =
                pollster::block_on(long_poll(&waiter, "q", 20_000, 40, BACKOFF, claim))
                    .expect("poll");
            assert_eq!(waiter.now.get(), 20_000, "the last claim on the deadline");
            assert!(spent.fetches + spent.parks <= 40, "{spent:?}");
            let sleeps = waiter.sleeps.borrow();
            assert!(
                sleeps.iter().all(|&s| s <= PARK_MAX_MS),
                "never deaf longer than a park: {sleeps:?}"
            );
        }
        // Two requests left, 5 s to go: a park woken early and its claim
        // would spend both before the deadline. Three: the park, its claim,
        // and one for the deadline.
        for (cap, parks) in [(3, vec![]), (4, vec![5_000])] {
            let waiter = Script {
                woken_after: Some(100),
                ..Script::with_hints()
            };
            pollster::block_on(poll(&waiter, 5_000, cap, &Claims::default(), None)).expect("poll");
            assert_eq!(waiter.now.get(), 5_000, "the last claim on the deadline");
            assert_eq!(*waiter.parks.borrow(), parks, "a budget of {cap}");
        }
    }

    /// A failed park at the deadline makes the final claim at once.
    #[test]
    fn a_park_failing_at_the_deadline_claims_once_more_at_once() {
        let waiter = Script {
            parks_end: RefCell::new(vec![Parked::Failed]),
            ..Script::with_hints()
        };
        let claims = Claims::default();
        pollster::block_on(poll(&waiter, 5_000, 10, &claims, None)).expect("poll");
        assert_eq!(*waiter.parks.borrow(), [5_000]);
        assert!(waiter.sleeps.borrow().is_empty());
        assert_eq!(claims.borrow().len(), 2);
    }

    /// The budget running out inside a later claim (nothing applied) is an
    /// empty answer; in the first claim it is the error.
    #[test]
    fn a_budget_spent_inside_a_later_claim_is_an_empty_answer() {
        let waiter = Script::default();
        let claims = Claims::default();
        // The second claim is cut after 2 fetches: 3 of a budget of 3.
        let spent = pollster::block_on(poll(&waiter, 10_000, 3, &claims, Some((1, 2))));
        assert_eq!(spent.map(|s| (s.attempts, s.fetches)), Ok((1, 3)));
        // Cut with budget to spare: the error stands.
        let claims = Claims::default();
        let spent = pollster::block_on(poll(&Script::default(), 10_000, 5, &claims, Some((1, 2))));
        assert!(matches!(
            spent,
            Err(EngineError::Store(StoreError::Unavailable(_)))
        ));
        let claims = Claims::default();
        let spent = pollster::block_on(poll(&Script::default(), 10_000, 1, &claims, Some((0, 1))));
        assert!(matches!(
            spent,
            Err(EngineError::Store(StoreError::Unavailable(_)))
        ));
    }

    /// Parks count toward the budget a later claim spends: a claim, a
    /// park, then a claim cut after its two fetches is 4 of a budget of 4.
    #[test]
    fn a_budget_spent_after_a_park_counts_the_park() {
        let waiter = Script::with_hints();
        let claims = Claims::default();
        let spent = pollster::block_on(poll(&waiter, 5_000, 4, &claims, Some((1, 2))));
        assert_eq!(
            spent.map(|s| (s.attempts, s.fetches, s.parks)),
            Ok((1, 3, 1))
        );
    }
}
