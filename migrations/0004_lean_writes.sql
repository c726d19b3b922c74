-- Housekeeping in two statements. The due-rows UPDATE activates due
-- schedules and handles TTL expiry in one pass; a TTL-expired row of a
-- discarding queue (dead_letter_on_expire = 0) is marked with the reason
-- 'TTLDiscarded', which this trigger turns into the delete the contract
-- requires, inside the same statement. The mark never outlives it.
CREATE TRIGGER ttl_discard AFTER UPDATE OF dead_letter_reason ON messages
WHEN NEW.dead_letter_reason = 'TTLDiscarded'
BEGIN
  DELETE FROM messages WHERE id = NEW.id;
END;

-- Dedup in the insert itself (docs/semantics.md#dedup). A Send inserts only the
-- copies that may be new (the first copy of each key in the request, and
-- only if no entry of its queue is still in its window) and stamps each
-- row of a queue with a window with its dedup key and request hash; this
-- trigger records the entry with the row's own seq in the same statement,
-- so a Send is one INSERT whatever its size and no seq is ever predicted.
ALTER TABLE messages ADD COLUMN dedup_key TEXT;
ALTER TABLE messages ADD COLUMN request_hash TEXT;
CREATE TRIGGER dedup_on_insert AFTER INSERT ON messages
WHEN NEW.dedup_key IS NOT NULL
BEGIN
  INSERT INTO dedup (queue, dedup_key, request_hash, seq_number, seen_at)
  VALUES (NEW.queue, NEW.dedup_key, NEW.request_hash, NEW.id, NEW.enqueued_at)
  ON CONFLICT (queue, dedup_key) DO UPDATE SET
    request_hash = excluded.request_hash,
    seq_number = excluded.seq_number,
    seen_at = excluded.seen_at;
END;

-- Group heads change on a dead-letter transition, and every statement that
-- moves a row into or out of the dead letters also writes its
-- dead_letter_reason (reap and TTL expiry, Abandon past the delivery
-- count, Reject, Redrive). Firing on that column instead of `state` keeps
-- the trigger out of the statements that only move rows between live
-- states (the claim, the reap of a lease, Defer), which SQLite then
-- compiles without it on every request.
DROP TRIGGER group_head_on_state;
CREATE TRIGGER group_head_on_state AFTER UPDATE OF dead_letter_reason ON messages
WHEN NEW.group_id IS NOT NULL AND ((OLD.state = 'dead_lettered') <> (NEW.state = 'dead_lettered'))
BEGIN
  DELETE FROM group_heads WHERE queue = NEW.queue AND group_id = NEW.group_id;
  INSERT INTO group_heads (queue, group_id, head_id)
  SELECT NEW.queue, NEW.group_id, head FROM (SELECT min(
      coalesce((SELECT min(id) FROM messages WHERE queue = NEW.queue AND group_id = NEW.group_id AND state = 'active'), 9223372036854775807),
      coalesce((SELECT min(id) FROM messages WHERE queue = NEW.queue AND group_id = NEW.group_id AND state = 'locked'), 9223372036854775807),
      coalesce((SELECT min(id) FROM messages WHERE queue = NEW.queue AND group_id = NEW.group_id AND state = 'deferred'), 9223372036854775807),
      coalesce((SELECT min(id) FROM messages WHERE queue = NEW.queue AND group_id = NEW.group_id AND state = 'scheduled'), 9223372036854775807)) AS head)
  WHERE head < 9223372036854775807;
END;

-- Every index on a hot table is a billed write per row. Peek without a
-- state filter now merges five seeks of (queue, state, id), and the cron
-- sweep's receipt janitor scans the receipts it keeps for 30 minutes, once
-- a minute, instead of every settlement writing an index entry.
DROP INDEX messages_by_queue;
DROP INDEX settlement_receipts_expiry;
