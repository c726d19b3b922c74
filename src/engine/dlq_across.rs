//! Redrive into a queue of another database (docs/databases.md#redrive-across-databases).
//!
//! One transaction cannot span two databases, so the move is a relay that
//! never loses or copies a message whatever fails between its steps, and
//! whichever Redrives of one source overlap:
//!
//! 1. the source's database moves a chunk of dead letters into its outbox
//!    (`redrive_outbox`) as a trip with a random number of its own
//!    (migration 0011: no database state, restored or recreated, can hand
//!    one out twice) and reads what is in transit, with its clock;
//! 2. the target's database records the trip's arrival, once per (source
//!    database, trip), and makes the copies in the same transaction only if
//!    this request recorded it: a repeated step 2 copies nothing twice;
//! 3. the source's database drops the trip from its outbox;
//! 4. the target's database marks the arrival done; arrivals done a day
//!    ago are dropped (a failure here only leaves a few bytes behind).
//!
//! A message is always in exactly one of the source's dead letters, the
//! outbox and the target. A Redrive that fails after step 1 answers its
//! error; the next Redrive of the source delivers what it left in transit
//! first. A target that does not exist (never created, or deleted while
//! its messages travelled) gets nothing: its database records the trip as
//! refused, so no later delivery of it copies anything, and the messages go
//! back to the source's dead letters as they were (seq included) and the
//! Redrive answers 404. Arrivals outlive the outbox rows, so a delivery
//! repeated after the trip was cleared (an overlapping Redrive's) finds its
//! arrival; a step 2 may only run until [`DELIVERY_WINDOW_MS`] after the
//! read that carried it, so an arrival kept [`ARRIVALS_KEPT_MS`] past its
//! trip's end outlives every delivery of it. A seq that goes back travels
//! again on a new trip, never mistaken for the old one. A trip bound for a
//! database this isolate does not list stays in transit (an isolate that
//! lists it may be delivering it): the Redrive answers 503.

use const_format::concatcp;

use super::dlq::{RedriveRequest, CHUNK_PAUSE_MS, REDRIVE_BUDGET_MS, WAITERS_OF};
use super::{fill_random, unexpected, Engine, EngineError, Event, Waiter, QUEUE_MISSING};
use crate::store::hrana::Value;
use crate::store::{Program, RunError, Statement, StoreError, Transport};

/// The most messages one chunk carries (they pass through the Worker).
const CHUNK_ROWS: i64 = 128;
/// Database requests one call may make before it answers the count moved
/// so far (Workers allow 50 subrequests per request on the Free plan).
const MAX_REQUESTS: u32 = 40;
/// Requests one chunk makes: the move, the delivery, the outbox cleared
/// (or the messages put back), then the arrival done.
const REQUESTS_PER_CHUNK: u32 = 4;
/// How long after the source read a trip its delivery may still run: a
/// later one (a request held up somewhere) copies nothing and fails.
const DELIVERY_WINDOW_MS: i64 = 15 * 60 * 1000;
/// How long an arrival is kept once its trip has left the outbox: far past
/// [`DELIVERY_WINDOW_MS`], unless the source's clock runs nearly a day
/// ahead of the target's.
const ARRIVALS_KEPT_MS: i64 = 24 * 60 * 60 * 1000;

/// One database a Redrive across databases may reach: its configured name
/// (recorded in outbox rows and arrivals: databases are never renamed) and
/// its engine.
pub struct Site<'a, T> {
    pub name: &'a str,
    pub engine: &'a Engine<T>,
}

/// The columns a copy carries (T19), in the order the outbox gives them
/// and [`DELIVER`] binds them from `?2`.
const CARRIED: &str =
    "message_id, correlation_id, reply_to, group_id, content_type, subject, properties, body";
const CARRIED_COUNT: usize = 8;
/// Columns [`IN_TRANSIT`] gives before [`CARRIED`]'s.
const TRANSIT_HEAD: usize = 4;

/// Step 1: the oldest dead letters of `?1` (enqueued before `now - ?2` when
/// `?2 > 0`), at most `?3` of them and, past the first, at most `?4` body
/// bytes, into the outbox bound for database `?5`, queue `?6`, as trip
/// `?7`; nothing while the outbox holds messages of `?1` already (they go
/// first). The chunk is cut by id before the sizes are summed, so a chunk
/// reads at most `?3` rows whatever the queue holds.
pub(super) const INTO_OUTBOX: Statement = crate::statement!(concatcp!(
    "\
WITH chunk AS (
  SELECT id, length(body) AS size FROM messages
  WHERE queue = ?1 AND state = 'dead_lettered' AND (?2 = 0 OR enqueued_at < {now} - ?2)
  ORDER BY id LIMIT ?3),
fitting AS (
  SELECT id FROM (SELECT id, row_number() OVER (ORDER BY id) AS n,
    sum(size) OVER (ORDER BY id) AS running FROM chunk)
  WHERE n = 1 OR running <= ?4)
INSERT INTO redrive_outbox (seq, trip, source, target_database, target, visible_at,
  delivery_count, enqueued_at, expires_at, ",
    CARRIED,
    ", dead_letter_reason, dead_letter_description)
SELECT id, ?7, queue, ?5, ?6, visible_at, delivery_count,
  enqueued_at, expires_at, ",
    CARRIED,
    ", dead_letter_reason, dead_letter_description
FROM messages WHERE id IN (SELECT id FROM fitting)
  AND NOT EXISTS (SELECT 1 FROM redrive_outbox WHERE source = ?1)
ORDER BY id"
));

/// Step 1: the rows just moved leave the queue (a seq is never in both).
pub(super) const OUT_OF_QUEUE: Statement = crate::statement!(
    "DELETE FROM messages WHERE id IN (SELECT seq FROM redrive_outbox WHERE source = ?1)"
);

/// Step 1: whether dead letters of `?1` the request selects remain, and
/// the database time (which bounds when the trip may be delivered).
pub(super) const MORE_DEAD_LETTERS: Statement = crate::statement!(
    "\
SELECT EXISTS (SELECT 1 FROM messages
  WHERE queue = ?1 AND state = 'dead_lettered' AND (?2 = 0 OR enqueued_at < {now} - ?2)), {now}"
);

/// Step 1: everything of `?1` in transit (one trip), oldest first.
pub(super) const IN_TRANSIT: Statement = crate::statement!(concatcp!(
    "SELECT seq, trip, target_database, target, ",
    CARRIED,
    " FROM redrive_outbox WHERE source = ?1 ORDER BY seq"
));

/// Step 2: trip `?2` of database `?1` arrives, unless it arrived before or
/// its delivery window closed at `?4`: delivered when queue `?3` exists,
/// refused otherwise.
pub(super) const ARRIVE: Statement = crate::statement!(
    "\
INSERT INTO redrive_arrivals (source_database, trip, delivered, arrived_at)
SELECT ?1, ?2, EXISTS (SELECT 1 FROM queues WHERE name = ?3), {now} WHERE {now} <= ?4
ON CONFLICT (source_database, trip) DO NOTHING"
);

/// Step 2: skips the copies unless [`ARRIVE`], run just before, recorded a
/// delivery into `?1` (a repeated delivery records nothing).
pub(super) const NEW_DELIVERY: Statement =
    crate::guard!("changes() = 0 OR NOT EXISTS (SELECT 1 FROM queues WHERE name = ?1)");

/// Step 2: `?1` gains the trip's `?2` sends.
pub(super) const COUNT_DELIVERED: Statement =
    crate::statement!("UPDATE queues SET sent_total = sent_total + ?2 WHERE name = ?1");

/// Step 2: a fresh active copy in `?1` (new seq, enqueued now, no TTL, no
/// schedule; no dedup, filter or group check [quirk]).
pub(super) const DELIVER: Statement = crate::statement!(concatcp!(
    "\
INSERT INTO messages (queue, state, visible_at, enqueued_at, expires_at, delivery_count, ",
    CARRIED,
    ")
VALUES (?1, 'active', 0, {now}, 0, 0, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
));

/// Step 2: what became of trip `?2` of database `?1`, this request's
/// arrival or an earlier one (no row: its delivery window had closed).
pub(super) const ARRIVAL: Statement = crate::statement!(
    "SELECT delivered FROM redrive_arrivals WHERE source_database = ?1 AND trip = ?2"
);

/// Step 3: trip `?2` of `?1` leaves the outbox (delivered, or put back).
pub(super) const TRIP_CLEARED: Statement =
    crate::statement!("DELETE FROM redrive_outbox WHERE source = ?1 AND trip = ?2");

/// Step 4: trip `?2` of database `?1` has left its outbox.
pub(super) const ARRIVAL_DONE: Statement = crate::statement!(
    "\
UPDATE redrive_arrivals SET done_at = {now}
WHERE source_database = ?1 AND trip = ?2 AND done_at = 0"
);

/// Step 4: arrivals done more than `?1` ms ago, which no delivery can
/// repeat any more.
pub(super) const ARRIVALS_EXPIRED: Statement =
    crate::statement!("DELETE FROM redrive_arrivals WHERE done_at > 0 AND done_at < {now} - ?1");

/// Trip `?2` of `?1`, refused by its target's database, goes back to the
/// source's dead letters exactly as it was, seqs included.
pub(super) const PUT_BACK: Statement = crate::statement!(concatcp!(
    "\
INSERT INTO messages (id, queue, state, visible_at, locked_until, lock_token, delivery_count,
  enqueued_at, expires_at, ",
    CARRIED,
    ", dead_letter_reason, dead_letter_description)
SELECT seq, source, 'dead_lettered', visible_at, 0, NULL, delivery_count, enqueued_at,
  expires_at, ",
    CARRIED,
    ", dead_letter_reason, dead_letter_description
FROM redrive_outbox WHERE source = ?1 AND trip = ?2 ORDER BY seq"
));

/// Guard for DeleteQueue: `?1` still has messages in transit.
pub(super) const IN_TRANSIT_FROM: Statement =
    crate::guard!("EXISTS (SELECT 1 FROM redrive_outbox WHERE source = ?1)");

/// What one chunk's step 1 found: everything of the source in transit,
/// this chunk included. A chunk is moved only while the outbox holds none
/// of its queue, so all of it is one trip, bound for one destination.
struct Outbox {
    trip: i64,
    target_database: String,
    target: String,
    /// [`CARRIED`]'s values of each message, the body as a blob.
    transit: Vec<Vec<Value>>,
    /// Whether dead letters the request selects remain in the queue.
    more: bool,
    /// The source's database time when it read the outbox.
    read_at: i64,
}

/// What the target's database did with a trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arrival {
    /// Copied into the target (by this request or an earlier one).
    Delivered,
    /// The target was missing: the messages go back to the source.
    /// `now`: this request found it missing (an earlier one may have, and
    /// the queue been created since).
    Refused { now: bool },
}

/// A fresh trip number: random, so that no state of the source's database
/// (restored to an earlier point, or created anew under its name) can hand
/// out one its target's database holds an arrival of; positive, as trips
/// carried over by migration 0011 are negative.
fn new_trip() -> Result<i64, EngineError> {
    let mut bytes = [0u8; 8];
    fill_random(&mut bytes)?;
    Ok((i64::from_le_bytes(bytes) & i64::MAX).max(1))
}

/// Moves the dead letters of `request.queue`, which lives in `sites[source]`,
/// into `request.target` in `sites[target]`; [`Engine::redrive`]'s answer
/// and pacing, across two databases (module docs). Messages an interrupted
/// call left in transit are delivered first, and counted.
pub async fn redrive_across<T: Transport>(
    sites: &[Site<'_, T>],
    source: usize,
    target: usize,
    request: &RedriveRequest,
    waiter: &impl Waiter,
) -> Result<i64, EngineError> {
    request.validate()?;
    let (Some(here), Some(there)) = (sites.get(source), sites.get(target)) else {
        return Err(EngineError::Store(StoreError::Failed(
            "redrive between databases not configured".into(),
        )));
    };
    let queue = request.queue.as_str();
    let mut requests = 0;
    let mut moved = 0i64;
    loop {
        let chunk = request.next_chunk(moved).min(CHUNK_ROWS);
        let outbox = here
            .engine
            .move_to_outbox(request, there.name, chunk)
            .await?;
        requests += 1;
        if outbox.transit.is_empty() {
            if moved == 0 {
                // Nothing to carry: the target is still checked (404).
                there.engine.require_queue(&request.target).await?;
            }
            return Ok(moved);
        }
        let Some(destination) = sites.iter().find(|s| s.name == outbox.target_database) else {
            // Putting it back could undo a delivery an isolate that lists
            // the database is making: the trip waits for one.
            return Err(EngineError::Store(StoreError::Unavailable(format!(
                "dead letters of {queue:?} are in transit to database {:?}, which \
                 MQLITE_DATABASES does not list",
                outbox.target_database
            ))));
        };
        let arrival = destination.engine.deliver(here.name, &outbox).await?;
        let mut more = outbox.more;
        match arrival {
            Arrival::Delivered => {
                // Counted by the rows cleared: a trip an overlapping
                // Redrive cleared first is its count, not this one's.
                let cleared = here.engine.clear_trip(queue, outbox.trip, false).await?;
                moved += cleared as i64;
                here.engine.note(queue, Event::Redriven, cleared);
            }
            Arrival::Refused { .. } => {
                here.engine.clear_trip(queue, outbox.trip, true).await?;
                // Messages put back are dead letters of the source again.
                more = true;
            }
        }
        // Best effort: an arrival never marked done is only kept.
        let _ = destination
            .engine
            .arrival_done(here.name, outbox.trip)
            .await;
        requests += 3;
        if arrival == (Arrival::Refused { now: true })
            && outbox.target_database == there.name
            && outbox.target == request.target
        {
            return Err(EngineError::QueueNotFound);
        }
        let done = !more || (request.max > 0 && moved >= request.max);
        if done || requests + REQUESTS_PER_CHUNK > MAX_REQUESTS {
            return Ok(moved);
        }
        if request.rate_per_sec > 0 {
            if waiter.elapsed_ms() + CHUNK_PAUSE_MS > REDRIVE_BUDGET_MS {
                return Ok(moved);
            }
            waiter.sleep(CHUNK_PAUSE_MS).await;
        }
    }
}

impl<T: Transport> Engine<T> {
    /// `QueueNotFound` unless `queue` exists here (one read).
    async fn require_queue(&self, queue: &str) -> Result<(), EngineError> {
        let mut program = Program::read();
        let missing = program.guard(&QUEUE_MISSING, vec![queue.into()]);
        match self.run(&mut program).await {
            Ok(_) => Ok(()),
            Err(RunError::Rejected(step)) if step == missing => Err(EngineError::QueueNotFound),
            Err(e) => Err(unexpected(e)),
        }
    }

    /// Step 1 in the source's database.
    async fn move_to_outbox(
        &self,
        request: &RedriveRequest,
        target_database: &str,
        chunk: i64,
    ) -> Result<Outbox, EngineError> {
        let queue = request.queue.as_str();
        let mut program = Program::write();
        let missing = program.guard(&QUEUE_MISSING, vec![queue.into()]);
        let housekeeping = self.housekeeping(&mut program, queue);
        program.step(
            &INTO_OUTBOX,
            vec![
                queue.into(),
                request.older_than_ms.into(),
                chunk.into(),
                self.limits.response_budget_bytes.into(),
                target_database.into(),
                request.target.as_str().into(),
                new_trip()?.into(),
            ],
        );
        program.step(&OUT_OF_QUEUE, vec![queue.into()]);
        let more = program.step(
            &MORE_DEAD_LETTERS,
            vec![queue.into(), request.older_than_ms.into()],
        );
        let in_transit = program.step(&IN_TRANSIT, vec![queue.into()]);
        let committed = match self.run(&mut program).await {
            Ok(committed) => committed,
            Err(RunError::Rejected(step)) if step == missing => {
                return Err(EngineError::QueueNotFound)
            }
            Err(e) => return Err(unexpected(e)),
        };
        self.note_housekeeping(&committed, &housekeeping);
        let mut outbox = Outbox {
            trip: 0,
            target_database: String::new(),
            target: String::new(),
            transit: Vec::new(),
            more: false,
            read_at: 0,
        };
        for values in committed.raw_rows(in_transit) {
            let row = crate::store::Row::new(values);
            let mut carried: Vec<Value> = values.iter().skip(TRANSIT_HEAD).cloned().collect();
            if carried.len() != CARRIED_COUNT {
                return Err(EngineError::Store(StoreError::Failed(
                    "outbox row of an unexpected shape".into(),
                )));
            }
            // Servers may omit base64 padding; the copy is sent padded.
            carried[CARRIED_COUNT - 1] = Value::Blob {
                base64: row.blob_base64(TRANSIT_HEAD + CARRIED_COUNT - 1)?,
            };
            if outbox.transit.is_empty() {
                outbox.trip = row.int(1)?;
                outbox.target_database = row.text(2)?.to_owned();
                outbox.target = row.text(3)?.to_owned();
            }
            outbox.transit.push(carried);
        }
        if let Some(row) = committed.first_row(more) {
            outbox.more = row.int(0)? == 1;
            outbox.read_at = row.int(1)?;
        }
        Ok(outbox)
    }

    /// Step 2 in the target's database, in one transaction.
    async fn deliver(
        &self,
        source_database: &str,
        outbox: &Outbox,
    ) -> Result<Arrival, EngineError> {
        let queue = outbox.target.as_str();
        let deadline = outbox.read_at.saturating_add(DELIVERY_WINDOW_MS);
        let mut program = Program::write();
        let arrive = program.step(
            &ARRIVE,
            vec![
                source_database.into(),
                outbox.trip.into(),
                queue.into(),
                deadline.into(),
            ],
        );
        let gate = program.gate(&NEW_DELIVERY, vec![queue.into()]);
        let n = outbox.transit.len() as i64;
        program.gated(gate, &COUNT_DELIVERED, vec![queue.into(), n.into()]);
        let copies: Vec<_> = outbox
            .transit
            .iter()
            .map(|carried| {
                let mut args = vec![queue.into()];
                args.extend(carried.iter().cloned());
                program.gated(gate, &DELIVER, args)
            })
            .collect();
        let waiters = program.step(&WAITERS_OF, vec![queue.into()]);
        let arrival = program.step(&ARRIVAL, vec![source_database.into(), outbox.trip.into()]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        let new: u64 = copies.iter().map(|&c| committed.affected(c)).sum();
        if new > 0 {
            self.note(queue, Event::Enqueued, new);
            if let Some(row) = committed.first_row(waiters) {
                if row.int(0)? == 1 {
                    self.note_claimable(queue, row.int(1)?);
                }
            }
        }
        match committed.first_row(arrival) {
            Some(row) if row.int(0)? == 1 => Ok(Arrival::Delivered),
            Some(_) => Ok(Arrival::Refused {
                now: committed.affected(arrive) == 1,
            }),
            None => Err(EngineError::Store(StoreError::Unavailable(format!(
                "the delivery of a Redrive across databases reached the target's database \
                 more than {} minutes after its source read it (or the two databases' clocks \
                 disagree by that much); nothing was copied: repeat the Redrive",
                DELIVERY_WINDOW_MS / 60_000
            )))),
        }
    }

    /// Step 3 in the source's database: trip `trip` of `queue` leaves the
    /// outbox, back into the queue's dead letters when `put_back`. The
    /// number of messages it cleared.
    async fn clear_trip(&self, queue: &str, trip: i64, put_back: bool) -> Result<u64, EngineError> {
        let mut program = Program::write();
        if put_back {
            program.step(&PUT_BACK, vec![queue.into(), trip.into()]);
        }
        let cleared = program.step(&TRIP_CLEARED, vec![queue.into(), trip.into()]);
        let committed = self.run(&mut program).await.map_err(unexpected)?;
        Ok(committed.affected(cleared))
    }

    /// Step 4 in the target's database.
    async fn arrival_done(&self, source_database: &str, trip: i64) -> Result<(), EngineError> {
        let mut program = Program::write();
        program.step(&ARRIVAL_DONE, vec![source_database.into(), trip.into()]);
        program.step(&ARRIVALS_EXPIRED, vec![ARRIVALS_KEPT_MS.into()]);
        self.run(&mut program).await.map_err(unexpected)?;
        Ok(())
    }
}
