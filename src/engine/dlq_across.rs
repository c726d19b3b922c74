//! Redrive into a queue of another database (docs/databases.md#redrive-across-databases).
//!
//! One transaction cannot span two databases, so the move is a relay that
//! never loses or copies a message whatever fails between its steps:
//!
//! 1. the source's database moves a chunk of dead letters into its outbox
//!    (`redrive_outbox`, migration 0010) and reads what is in transit;
//! 2. the target's database inserts a copy of each, once: it keeps a
//!    receipt per (source database, seq) and skips a seq it has a receipt
//!    for, so a repeated step 2 copies nothing twice;
//! 3. the source's database drops the delivered rows from its outbox;
//! 4. the target's database drops their receipts, which nothing can repeat
//!    any more (a failure here only leaves a few bytes behind).
//!
//! A message is always in exactly one of the source's dead letters, the
//! outbox and the target. A Redrive that fails after step 1 answers its
//! error; the next Redrive of the source delivers what it left in transit
//! first. A target that does not exist (never created, or deleted while
//! its messages travelled) gets nothing: the messages go back to the
//! source's dead letters as they were (seq included) and the Redrive
//! answers 404.

use const_format::concatcp;

use super::dlq::{RedriveRequest, CHUNK_PAUSE_MS, REDRIVE_BUDGET_MS, WAITERS_OF};
use super::{unexpected, Engine, EngineError, Event, Waiter, QUEUE_MISSING};
use crate::store::hrana::Value;
use crate::store::{Program, RunError, Statement, Transport};

/// The most messages one chunk carries (they pass through the Worker).
const CHUNK_ROWS: i64 = 128;
/// Database requests one call may make before it answers the count moved
/// so far (Workers allow 50 subrequests per request on the Free plan).
const MAX_REQUESTS: u32 = 40;
/// Requests one chunk makes: the move, the delivery, then the outbox and
/// the receipts cleared (or the messages put back).
const REQUESTS_PER_CHUNK: u32 = 4;

/// One database a Redrive across databases may reach: its configured name
/// (recorded in outbox rows and receipts: databases are never renamed) and
/// its engine.
pub struct Site<'a, T> {
    pub name: &'a str,
    pub engine: &'a Engine<T>,
}

/// The columns a copy carries (T19), in the order the outbox gives them
/// and [`DELIVER`] binds them from `?4`.
const CARRIED: &str =
    "message_id, correlation_id, reply_to, group_id, content_type, subject, properties, body";
const CARRIED_COUNT: usize = 8;

/// Step 1: the oldest dead letters of `?1` (enqueued before `now - ?2` when
/// `?2 > 0`), at most `?3` of them and, past the first, at most `?4` body
/// bytes, into the outbox bound for database `?5`, queue `?6`; nothing
/// while the outbox holds messages of `?1` already (they go first). The
/// chunk is cut by id before the sizes are summed, so a chunk reads at
/// most `?3` rows whatever the queue holds.
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
INSERT INTO redrive_outbox (seq, source, target_database, target, visible_at, delivery_count,
  enqueued_at, expires_at, ",
    CARRIED,
    ", dead_letter_reason, dead_letter_description)
SELECT id, queue, ?5, ?6, visible_at, delivery_count, enqueued_at, expires_at, ",
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

/// Step 1: whether dead letters of `?1` the request selects remain.
pub(super) const MORE_DEAD_LETTERS: Statement = crate::statement!(
    "\
SELECT EXISTS (SELECT 1 FROM messages
  WHERE queue = ?1 AND state = 'dead_lettered' AND (?2 = 0 OR enqueued_at < {now} - ?2))"
);

/// Step 1: everything of `?1` in transit, oldest first.
pub(super) const IN_TRANSIT: Statement = crate::statement!(concatcp!(
    "SELECT seq, target_database, target, ",
    CARRIED,
    " FROM redrive_outbox WHERE source = ?1 ORDER BY seq"
));

/// Step 2: `?1` gains as many sends as the seqs of `?3` (JSON array) that
/// database `?2` has not delivered before; run before the copies.
pub(super) const COUNT_DELIVERED: Statement = crate::statement!(
    "\
UPDATE queues SET sent_total = sent_total + (
  SELECT count(*) FROM json_each(?3) j
  WHERE NOT EXISTS (SELECT 1 FROM redrive_receipts r
    WHERE r.source_database = ?2 AND r.seq = j.value))
WHERE name = ?1"
);

/// Step 2: a fresh active copy in `?1` (new seq, enqueued now, no TTL, no
/// schedule; no dedup, filter or group check [quirk]) of seq `?3` of
/// database `?2`, unless that seq was delivered before.
pub(super) const DELIVER: Statement = crate::statement!(concatcp!(
    "\
INSERT INTO messages (queue, state, visible_at, enqueued_at, expires_at, delivery_count, ",
    CARRIED,
    ")
SELECT ?1, 'active', 0, {now}, 0, 0, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11
WHERE NOT EXISTS (SELECT 1 FROM redrive_receipts WHERE source_database = ?2 AND seq = ?3)"
));

/// Step 2: the receipts of the seqs `?2` (JSON array) of database `?1`.
pub(super) const RECEIVED: Statement = crate::statement!(
    "\
INSERT INTO redrive_receipts (source_database, seq, received_at)
SELECT ?1, value, {now} FROM json_each(?2) WHERE true
ON CONFLICT (source_database, seq) DO NOTHING"
);

/// Step 3: the delivered seqs `?1` (JSON array) leave the outbox.
pub(super) const DELIVERED: Statement =
    crate::statement!("DELETE FROM redrive_outbox WHERE seq IN (SELECT value FROM json_each(?1))");

/// Step 4: receipts that nothing can repeat any more.
pub(super) const RECEIPTS_DONE: Statement = crate::statement!(
    "\
DELETE FROM redrive_receipts
WHERE source_database = ?1 AND seq IN (SELECT value FROM json_each(?2))"
);

/// Messages bound for a target that is gone go back to the source's dead
/// letters exactly as they were, seq included (`?1`: JSON array of seqs).
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
FROM redrive_outbox WHERE seq IN (SELECT value FROM json_each(?1)) ORDER BY seq"
));

/// Guard for DeleteQueue: `?1` still has messages in transit.
pub(super) const IN_TRANSIT_FROM: Statement =
    crate::guard!("EXISTS (SELECT 1 FROM redrive_outbox WHERE source = ?1)");

/// One message in transit, as the outbox holds it.
struct Transit {
    seq: i64,
    /// [`CARRIED`]'s values, the body as a blob.
    carried: Vec<Value>,
}

/// What one chunk's step 1 found: everything of the source in transit,
/// this chunk included. A chunk is moved only while the outbox holds none
/// of its queue, so all of it is bound for one destination.
struct Outbox {
    target_database: String,
    target: String,
    transit: Vec<Transit>,
    /// Whether dead letters the request selects remain in the queue.
    more: bool,
}

/// What delivering the messages in transit came to.
enum Delivery {
    Delivered,
    /// The target is gone (or its database no longer listed): the messages
    /// go back to the source's dead letters.
    PutBack,
}

fn seq_list(transit: &[Transit]) -> String {
    let seqs: Vec<String> = transit.iter().map(|t| t.seq.to_string()).collect();
    format!("[{}]", seqs.join(","))
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
        return Err(EngineError::Store(crate::store::StoreError::Failed(
            "redrive between databases not configured".into(),
        )));
    };
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
        let n = outbox.transit.len() as u64;
        let destination = sites.iter().find(|s| s.name == outbox.target_database);
        let delivery = match destination {
            Some(site) => {
                site.engine
                    .deliver(here.name, &outbox.target, &outbox.transit)
                    .await?
            }
            None => Delivery::PutBack,
        };
        // Messages put back are dead letters of the source again.
        let mut more = outbox.more;
        match (delivery, destination) {
            (Delivery::Delivered, Some(site)) => {
                here.engine.delivered(&outbox.transit).await?;
                // Best effort: a receipt left behind is never read again.
                let _ = site.engine.receipts_done(here.name, &outbox.transit).await;
                requests += 3;
                moved += n as i64;
                here.engine.note(&request.queue, Event::Redriven, n);
            }
            _ => {
                here.engine.put_back(&outbox.transit).await?;
                requests += 2;
                if outbox.target_database == there.name && outbox.target == request.target {
                    return Err(EngineError::QueueNotFound);
                }
                more = true;
            }
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
        let (mut target_database, mut target) = (String::new(), String::new());
        let mut transit = Vec::new();
        for values in committed.raw_rows(in_transit) {
            let row = crate::store::Row::new(values);
            let mut carried: Vec<Value> = values.iter().skip(3).cloned().collect();
            if carried.len() != CARRIED_COUNT {
                return Err(EngineError::Store(crate::store::StoreError::Failed(
                    "outbox row of an unexpected shape".into(),
                )));
            }
            // Servers may omit base64 padding; the copy is sent padded.
            carried[CARRIED_COUNT - 1] = Value::Blob {
                base64: row.blob_base64(3 + CARRIED_COUNT - 1)?,
            };
            if transit.is_empty() {
                target_database = row.text(1)?.to_owned();
                target = row.text(2)?.to_owned();
            }
            transit.push(Transit {
                seq: row.int(0)?,
                carried,
            });
        }
        let more = match committed.first_row(more) {
            Some(row) => row.int(0)? == 1,
            None => false,
        };
        Ok(Outbox {
            target_database,
            target,
            transit,
            more,
        })
    }

    /// Step 2 in the target's database, in one transaction.
    async fn deliver(
        &self,
        source_database: &str,
        queue: &str,
        transit: &[Transit],
    ) -> Result<Delivery, EngineError> {
        let seqs = seq_list(transit);
        let mut program = Program::write();
        let missing = program.guard(&QUEUE_MISSING, vec![queue.into()]);
        program.step(
            &COUNT_DELIVERED,
            vec![queue.into(), source_database.into(), seqs.as_str().into()],
        );
        let mut copies = Vec::with_capacity(transit.len());
        for t in transit {
            let mut args = vec![queue.into(), source_database.into(), t.seq.into()];
            args.extend(t.carried.iter().cloned());
            copies.push(program.step(&DELIVER, args));
        }
        program.step(&RECEIVED, vec![source_database.into(), seqs.into()]);
        let waiters = program.step(&WAITERS_OF, vec![queue.into()]);
        match self.run(&mut program).await {
            Ok(committed) => {
                // A seq delivered before (its receipt kept) made no copy.
                let new: u64 = copies.iter().map(|&c| committed.affected(c)).sum();
                if new > 0 {
                    self.note(queue, Event::Enqueued, new);
                    if let Some(row) = committed.first_row(waiters) {
                        if row.int(0)? == 1 {
                            self.note_claimable(queue, row.int(1)?);
                        }
                    }
                }
                Ok(Delivery::Delivered)
            }
            Err(RunError::Rejected(step)) if step == missing => Ok(Delivery::PutBack),
            Err(e) => Err(unexpected(e)),
        }
    }

    /// Step 3 in the source's database.
    async fn delivered(&self, transit: &[Transit]) -> Result<(), EngineError> {
        let mut program = Program::write();
        program.step(&DELIVERED, vec![seq_list(transit).into()]);
        self.run(&mut program).await.map_err(unexpected)?;
        Ok(())
    }

    /// Step 4 in the target's database.
    async fn receipts_done(
        &self,
        source_database: &str,
        transit: &[Transit],
    ) -> Result<(), EngineError> {
        let mut program = Program::write();
        program.step(
            &RECEIPTS_DONE,
            vec![source_database.into(), seq_list(transit).into()],
        );
        self.run(&mut program).await.map_err(unexpected)?;
        Ok(())
    }

    /// Messages whose target is gone, back into the source's dead letters.
    async fn put_back(&self, transit: &[Transit]) -> Result<(), EngineError> {
        let seqs = seq_list(transit);
        let mut program = Program::write();
        program.step(&PUT_BACK, vec![seqs.as_str().into()]);
        program.step(&DELIVERED, vec![seqs.into()]);
        self.run(&mut program).await.map_err(unexpected)?;
        Ok(())
    }
}
