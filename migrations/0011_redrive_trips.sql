-- Redrive across databases, keyed by trip (docs/databases.md): each chunk a
-- source's database moves into its outbox is a trip with a random number of
-- its own (positive, drawn by the Worker: no state of the database, restored
-- or created anew, hands one out twice), and the target's database records
-- one arrival per (source database, trip) instead of a receipt per seq. A seq
-- can travel twice (a message whose target was missing goes back to the dead
-- letters with its seq and may be redriven again); a trip never does. So an
-- arrival can outlive its outbox rows: a delivery repeated late, by an
-- interrupted or concurrent Redrive, finds it and copies nothing, even after
-- the outbox is cleared or the target deleted.

-- Rows in transit before this migration form one chunk per source; their trip
-- is minus the chunk's lowest seq (negative: never drawn), which is how the
-- receipts carried over below are keyed (a chunk was delivered whole or not at
-- all).
ALTER TABLE redrive_outbox ADD COLUMN trip INTEGER NOT NULL DEFAULT 0;
UPDATE redrive_outbox SET trip = -(
  SELECT min(o.seq) FROM redrive_outbox o WHERE o.source = redrive_outbox.source);

-- Trips this database received from other databases' outboxes: `delivered`
-- 1 when it made the copies, 0 when the target queue was missing (the source
-- puts the messages back). `done_at` is set once the source has dropped the
-- trip from its outbox; an arrival done a day ago is dropped (a delivery
-- can only be repeated within minutes of its source reading the outbox).
CREATE TABLE redrive_arrivals (
  source_database TEXT NOT NULL,
  trip INTEGER NOT NULL,
  delivered INTEGER NOT NULL,
  arrived_at INTEGER NOT NULL,
  done_at INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (source_database, trip)
) STRICT, WITHOUT ROWID;
CREATE INDEX redrive_arrivals_done ON redrive_arrivals (done_at) WHERE done_at > 0;

-- A receipt of a chunk's lowest seq is its trip's arrival; those of its other
-- seqs are carried over too (which seq was lowest is the source's to know)
-- and are never read: a few bytes each, left behind.
INSERT INTO redrive_arrivals (source_database, trip, delivered, arrived_at)
  SELECT source_database, -seq, 1, received_at FROM redrive_receipts;
DROP TABLE redrive_receipts;
