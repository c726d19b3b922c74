//! The consumer loop, with the reference SDK's `Receiver` semantics (mqlite-clients.md §4)
//! on threads: worker slots are reserved before a claim (so no lease ticks away in a local
//! queue), a lost Receive answer is retried once with the same attempt id (the broker
//! replays the batch), a heartbeat renews each lease at half of what remained, and a
//! handler's result settles its message: Complete on `Ok`, Abandon on `Err`.
//! Where this loop differs from the reference, docs/deviations.md "Clients" says so.

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::types::{Message, ReceiveRequest, SettleRequest, PEEK_LOCK};
use crate::{Client, Error, ErrorCode};

/// The pause after a Receive that failed twice.
pub const RETRY_PAUSE: Duration = Duration::from_millis(500);
/// The longest a settlement may take, retries included.
pub const SETTLE_BUDGET: Duration = Duration::from_secs(10);
/// Between two attempts of a settlement that failed transiently.
const SETTLE_RETRY_PAUSE: Duration = Duration::from_millis(250);
/// Renewal cadence when a message carries no usable deadline.
const RENEW_FALLBACK: Duration = Duration::from_secs(10);
/// Renewals are never closer together than this.
const RENEW_FLOOR: Duration = Duration::from_secs(1);

/// What a handler returns: `Err` abandons the message (redelivered at once).
pub type HandlerResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Tunables of [`Consumer`].
#[derive(Debug, Clone)]
pub struct ConsumerOptions {
    /// Messages processed in parallel (at least 1).
    pub concurrency: usize,
    /// Most messages claimed per Receive; never above `concurrency` (0 = `concurrency`).
    pub prefetch: usize,
    /// Renew each lease while its handler runs.
    pub auto_renew: bool,
    /// The long-poll wait of each Receive (the broker caps it at 20 s). Also the longest
    /// a stop waits for a Receive in flight.
    pub wait_time_ms: i64,
}

impl Default for ConsumerOptions {
    fn default() -> Self {
        ConsumerOptions {
            concurrency: 1,
            prefetch: 0,
            auto_renew: false,
            wait_time_ms: 20_000,
        }
    }
}

impl ConsumerOptions {
    fn slots(&self) -> usize {
        self.concurrency.max(1)
    }

    fn claim_size(&self) -> usize {
        match self.prefetch {
            0 => self.slots(),
            n => n.min(self.slots()),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Stops a running [`Consumer`]: no new claims; what is held is handled and settled.
#[derive(Clone, Default)]
pub struct Stop(Arc<(Mutex<bool>, Condvar)>);

impl Stop {
    pub fn new() -> Stop {
        Stop::default()
    }

    pub fn stop(&self) {
        *lock(&self.0 .0) = true;
        self.0 .1.notify_all();
    }

    pub fn is_stopped(&self) -> bool {
        *lock(&self.0 .0)
    }

    /// Sleeps for `d` or until stopped; true when stopped.
    pub fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut stopped = lock(&self.0 .0);
        while !*stopped {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            stopped = self
                .0
                 .1
                .wait_timeout(stopped, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        *stopped
    }
}

/// Worker slots: a slot is held from before the claim until its message is settled.
struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Slots {
    /// Waits for one free slot, then takes more without waiting, up to `most`. 0 when
    /// stopped first.
    fn reserve(&self, most: usize, stop: &Stop) -> usize {
        let mut free = lock(&self.free);
        while *free == 0 {
            if stop.is_stopped() {
                return 0;
            }
            free = self
                .freed
                .wait_timeout(free, Duration::from_millis(100))
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        let taken = most.min(*free);
        *free -= taken;
        taken
    }

    fn release(&self, n: usize) {
        *lock(&self.free) += n;
        self.freed.notify_all();
    }
}

/// A worker's slot, given back when the worker ends. A handler that panics also stops
/// the run, so the panic reaches the caller of [`Consumer::run`] once the other workers
/// have settled, instead of leaving the loop waiting for a slot that never frees.
struct Held<'a> {
    slots: &'a Slots,
    stop: &'a Stop,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.stop.stop();
        }
        self.slots.release(1);
    }
}

/// Consumes one queue with a handler until stopped or a permanent error.
pub struct Consumer {
    client: Client,
    settler: Client,
    queue: String,
    options: ConsumerOptions,
}

impl Consumer {
    pub fn new(client: &Client, queue: &str, options: ConsumerOptions) -> Consumer {
        Consumer {
            client: client.clone(),
            settler: client.clone().with_call_timeout(Duration::from_secs(5)),
            queue: queue.to_owned(),
            options,
        }
    }

    /// Runs until `stop` fires or a permanent error (which fires it too) (unauthenticated, permission denied, an
    /// unknown queue or route): `Ok` after a clean stop, else that error. Every other
    /// failure goes to `on_error` (called serially) and the loop goes on. Returns only
    /// once every message it claimed was handled and settled.
    pub fn run<H, E>(&self, stop: &Stop, handler: H, on_error: E) -> Result<(), Error>
    where
        H: Fn(&Message) -> HandlerResult + Sync,
        E: Fn(&Error) + Send,
    {
        let slots = Slots {
            free: Mutex::new(self.options.slots()),
            freed: Condvar::new(),
        };
        let run = Run {
            stop: stop.clone(),
            fatal: Mutex::new(None),
            report: Mutex::new(on_error),
        };
        std::thread::scope(|scope| {
            while !run.stopping() {
                let n = slots.reserve(self.options.claim_size(), &run.stop);
                if n == 0 {
                    break;
                }
                match self.claim(n, &run) {
                    Ok(messages) => {
                        slots.release(n - messages.len().min(n));
                        for message in messages {
                            let (run, slots, handler) = (&run, &slots, &handler);
                            scope.spawn(move || {
                                let _held = Held {
                                    slots,
                                    stop: &run.stop,
                                };
                                self.work(&message, run, handler);
                            });
                        }
                    }
                    Err(e) => {
                        slots.release(n);
                        if e.is_permanent() {
                            run.fail(e);
                            break;
                        }
                        if run.stopping() {
                            break;
                        }
                        run.report(&e);
                        run.stop.sleep(RETRY_PAUSE);
                    }
                }
            }
        });
        let fatal = lock(&run.fatal).take();
        fatal.map_or(Ok(()), Err)
    }

    /// One Receive of up to `n`, retried once with the same attempt id when it failed
    /// transiently: the broker replays a batch whose answer was lost.
    fn claim(&self, n: usize, run: &Run<impl Fn(&Error) + Send>) -> Result<Vec<Message>, Error> {
        let request = ReceiveRequest {
            queue: self.queue.clone(),
            max_messages: n as i64,
            wait_time_ms: self.options.wait_time_ms,
            receive_mode: PEEK_LOCK,
            receive_attempt_id: attempt_id()?,
        };
        let messages = match self.client.receive(&request) {
            Err(e) if !is_permanent_for_receive(&e) && !run.stopping() => {
                run.report(&e);
                self.client.receive(&request)
            }
            answer => answer,
        }
        .map_err(|e| match e {
            // An empty or malformed queue name never gets better (deviations.md, Clients).
            Error::Api {
                code: ErrorCode::InvalidArgument,
                message,
                ..
            } => Error::Invalid(format!("Receive refused: {message}")),
            e => e,
        })?
        .messages;
        Ok(messages)
    }

    /// Handles one message (renewing its lease meanwhile) and settles it. A message
    /// claimed after a stop was asked for is abandoned unhandled, at once.
    fn work(
        &self,
        message: &Message,
        run: &Run<impl Fn(&Error) + Send>,
        handler: &(impl Fn(&Message) -> HandlerResult + Sync),
    ) {
        let settle = SettleRequest::new(&self.queue, message.seq_number, &message.lock_token);
        if run.stopping() {
            return self.settle(&settle, false, run);
        }
        let heartbeat = Stop::new();
        let handled = std::thread::scope(|scope| {
            if self.options.auto_renew {
                let (heartbeat, settle) = (&heartbeat, &settle);
                scope.spawn(move || self.renew_until(message, settle, heartbeat, run));
            }
            let handled = handler(message);
            heartbeat.stop();
            handled
        });
        self.settle(&settle, handled.is_ok(), run);
    }

    /// Renews every half of the lease that remained at the start, until `heartbeat`
    /// stops or a renewal fails (that failure is reported; fatal if permanent).
    fn renew_until(
        &self,
        message: &Message,
        settle: &SettleRequest,
        heartbeat: &Stop,
        run: &Run<impl Fn(&Error) + Send>,
    ) {
        let interval = renew_interval(message.locked_until_ms, now_ms());
        while !heartbeat.sleep(interval) && !run.stopping() {
            if let Err(e) = self.settler.renew(settle) {
                if !heartbeat.is_stopped() {
                    run.settle_failed(e);
                }
                return;
            }
        }
    }

    /// Complete (or Abandon) within [`SETTLE_BUDGET`], retrying transient failures: a
    /// settlement is replayed by the broker, so a retry after an unknown outcome is safe.
    fn settle(&self, request: &SettleRequest, complete: bool, run: &Run<impl Fn(&Error) + Send>) {
        let deadline = Instant::now() + SETTLE_BUDGET;
        loop {
            let result = if complete {
                self.settler.complete(request)
            } else {
                self.settler.abandon(request)
            };
            match result {
                Ok(()) => return,
                Err(e) if e.is_permanent() || e.is_lock_lost() || Instant::now() > deadline => {
                    return run.settle_failed(e)
                }
                Err(e) => {
                    run.report(&e);
                    std::thread::sleep(SETTLE_RETRY_PAUSE);
                }
            }
        }
    }
}

/// Receive errors that end the loop: the general ones, and `invalid_argument` (the
/// queue name itself is refused).
fn is_permanent_for_receive(e: &Error) -> bool {
    e.is_permanent() || e.code() == Some(&ErrorCode::InvalidArgument)
}

/// The shared state of one [`Consumer::run`].
struct Run<E> {
    /// The caller's stop; a fatal error fires it too.
    stop: Stop,
    fatal: Mutex<Option<Error>>,
    report: Mutex<E>,
}

impl<E: Fn(&Error) + Send> Run<E> {
    fn stopping(&self) -> bool {
        self.stop.is_stopped()
    }

    fn report(&self, e: &Error) {
        (lock(&self.report))(e);
    }

    /// Records the first fatal error and stops the loop.
    fn fail(&self, e: Error) {
        self.report(&e);
        lock(&self.fatal).get_or_insert(e);
        self.stop.stop();
    }

    /// A settlement or renewal failure: reported; fatal if permanent (lock lost is the
    /// expected outcome of a lease that ran out, never fatal).
    fn settle_failed(&self, e: Error) {
        if e.is_permanent() {
            self.fail(e);
        } else {
            self.report(&e);
        }
    }
}

/// Half of the lease left at `now_ms`, at least [`RENEW_FLOOR`]; [`RENEW_FALLBACK`]
/// without a deadline.
pub fn renew_interval(locked_until_ms: i64, now_ms: i64) -> Duration {
    if locked_until_ms <= 0 || locked_until_ms <= now_ms {
        return if locked_until_ms <= 0 {
            RENEW_FALLBACK
        } else {
            RENEW_FLOOR
        };
    }
    Duration::from_millis(((locked_until_ms - now_ms) / 2) as u64).max(RENEW_FLOOR)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A fresh receive attempt id: 16 random bytes as 32 lowercase hex.
pub fn attempt_id() -> Result<String, Error> {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| Error::Invalid(format!("random source unavailable: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefetch_is_never_above_concurrency() {
        let options = |concurrency, prefetch| ConsumerOptions {
            concurrency,
            prefetch,
            ..ConsumerOptions::default()
        };
        assert_eq!(options(4, 0).claim_size(), 4);
        assert_eq!(options(4, 9).claim_size(), 4);
        assert_eq!(options(4, 2).claim_size(), 2);
        assert_eq!(options(0, 0).claim_size(), 1);
    }

    #[test]
    fn renewal_is_at_half_the_remaining_lease() {
        assert_eq!(renew_interval(31_000, 1_000), Duration::from_secs(15));
        assert_eq!(renew_interval(1_500, 1_000), RENEW_FLOOR);
        assert_eq!(renew_interval(500, 1_000), RENEW_FLOOR);
        assert_eq!(renew_interval(0, 1_000), RENEW_FALLBACK);
    }

    #[test]
    fn attempt_ids_are_32_hex_and_fresh() {
        let (a, b) = (attempt_id().unwrap(), attempt_id().unwrap());
        assert_eq!(a.len(), 32);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }

    #[test]
    fn slots_reserve_what_is_free_up_to_the_claim() {
        let slots = Slots {
            free: Mutex::new(3),
            freed: Condvar::new(),
        };
        let stop = Stop::new();
        assert_eq!(slots.reserve(2, &stop), 2);
        assert_eq!(slots.reserve(2, &stop), 1);
        stop.stop();
        assert_eq!(slots.reserve(2, &stop), 0);
        slots.release(3);
        assert_eq!(slots.reserve(5, &stop), 3);
    }
}
