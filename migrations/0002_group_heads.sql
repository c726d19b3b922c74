-- Group heads: for every group with unfinished rows, the lowest seq among
-- its active, locked, deferred and scheduled rows. A grouped row can only be
-- claimed if it is its group's head and active, so the peek-lock claim walks
-- heads (one per group) instead of every blocked row: an empty poll behind
-- in-flight groups reads one head per blocked group, not the whole backlog.
-- Triggers keep it exact in the same transaction as every change.

CREATE TABLE group_heads (
  queue TEXT NOT NULL,
  group_id TEXT NOT NULL,
  head_id INTEGER NOT NULL,
  PRIMARY KEY (queue, group_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX group_heads_by_head ON group_heads (queue, head_id);

-- Ungrouped claim candidates without walking grouped rows.
CREATE INDEX messages_ungrouped_active ON messages (queue, id)
  WHERE state = 'active' AND group_id IS NULL;

INSERT INTO group_heads (queue, group_id, head_id)
SELECT queue, group_id, min(id) FROM messages
WHERE group_id IS NOT NULL AND state <> 'dead_lettered'
GROUP BY queue, group_id;

CREATE TRIGGER group_head_on_insert AFTER INSERT ON messages
WHEN NEW.group_id IS NOT NULL AND NEW.state <> 'dead_lettered'
BEGIN
  INSERT INTO group_heads (queue, group_id, head_id) VALUES (NEW.queue, NEW.group_id, NEW.id)
  ON CONFLICT (queue, group_id) DO UPDATE SET head_id = min(head_id, excluded.head_id);
END;

-- A row left the unfinished set (deleted or dead-lettered) or came back
-- (redriven in place): recompute the group's head from four index seeks.
CREATE TRIGGER group_head_on_delete AFTER DELETE ON messages
WHEN OLD.group_id IS NOT NULL
BEGIN
  DELETE FROM group_heads WHERE queue = OLD.queue AND group_id = OLD.group_id;
  INSERT INTO group_heads (queue, group_id, head_id)
  SELECT OLD.queue, OLD.group_id, head FROM (SELECT min(
      coalesce((SELECT min(id) FROM messages WHERE queue = OLD.queue AND group_id = OLD.group_id AND state = 'active'), 9223372036854775807),
      coalesce((SELECT min(id) FROM messages WHERE queue = OLD.queue AND group_id = OLD.group_id AND state = 'locked'), 9223372036854775807),
      coalesce((SELECT min(id) FROM messages WHERE queue = OLD.queue AND group_id = OLD.group_id AND state = 'deferred'), 9223372036854775807),
      coalesce((SELECT min(id) FROM messages WHERE queue = OLD.queue AND group_id = OLD.group_id AND state = 'scheduled'), 9223372036854775807)) AS head)
  WHERE head < 9223372036854775807;
END;

CREATE TRIGGER group_head_on_state AFTER UPDATE OF state ON messages
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
