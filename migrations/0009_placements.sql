-- Where each name lives when the broker spans several databases
-- (docs/databases.md). Only the catalog's copy (the first database listed in
-- MQLITE_DATABASES) is read; every database has the table, so any of them
-- can become a catalog and a single database records its names from the
-- start. A placement never changes: a name deleted and created again lands
-- where it was, so a cached placement is never stale.
-- `database` is the database's configured name; '' is the database that
-- holds this row (its own names: the backfill and the triggers below).
CREATE TABLE placements (
  name TEXT PRIMARY KEY,
  database TEXT NOT NULL
) STRICT, WITHOUT ROWID;

INSERT INTO placements (name, database) SELECT name, '' FROM queues;
INSERT OR IGNORE INTO placements (name, database)
  SELECT DISTINCT topic, '' FROM subscriptions;

-- Names created in this database record themselves (queues, subscription
-- backing queues, pgmq queues and topics). A name placed elsewhere already
-- keeps its row.
CREATE TRIGGER queues_placed AFTER INSERT ON queues
BEGIN
  INSERT OR IGNORE INTO placements (name, database) VALUES (new.name, '');
END;
CREATE TRIGGER topics_placed AFTER INSERT ON subscriptions
BEGIN
  INSERT OR IGNORE INTO placements (name, database) VALUES (new.topic, '');
END;
