-- The pgmq HTTP dialect (docs/pgmq.md). Both dialects share one queue
-- namespace and one `messages` table; this migration adds what pgmq's
-- model has and mqlite's lacks, without a new index on `messages`.
--
-- `headers`: the pgmq message's JSON object, kept beside the body and
-- returned verbatim (never merged into mqlite's string properties).
-- `last_read_at`: when a pgmq read last leased the row (epoch ms).
ALTER TABLE messages ADD COLUMN headers TEXT;
ALTER TABLE messages ADD COLUMN last_read_at INTEGER;

-- Metrics' `total_messages` is every message ever sent to the queue
-- (pgmq reports its sequence's value). `messages.id` is shared by every
-- queue, so each queue counts its own inserts. The statement after each
-- insert adds what that insert added (`COUNT_SENT`, docs/engine.md): one
-- write per queue and request, where a trigger would write once per
-- message. Queues that exist now start from the rows they hold.
ALTER TABLE queues ADD COLUMN sent_total INTEGER NOT NULL DEFAULT 0;
UPDATE queues SET sent_total = (SELECT count(*) FROM messages WHERE queue = queues.name);

-- Archived messages: a terminal state. An archived message leaves
-- `messages` (so no claim, housekeeping, Stats or Peek ever sees it again)
-- into this table, keyed by its queue and seq; it is dropped with its
-- queue and removed by the cron sweep after the broker's dead-letter age
-- bound.
CREATE TABLE archived_messages (
  queue TEXT NOT NULL,
  id INTEGER NOT NULL,
  read_ct INTEGER NOT NULL,
  enqueued_at INTEGER NOT NULL,
  last_read_at INTEGER,
  vt INTEGER NOT NULL,
  archived_at INTEGER NOT NULL,
  body BLOB NOT NULL,
  headers TEXT,
  PRIMARY KEY (queue, id)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER archive_dropped_with_queue AFTER DELETE ON queues
BEGIN
  DELETE FROM archived_messages WHERE queue = OLD.name;
END;
