-- Subscription revisions: every Subscribe stamps its row with a number
-- larger than any before it, so (count, max revision) of a topic changes on
-- every change to that topic. A publish carries the fingerprint of the
-- subscriptions its filters were evaluated against and a guard aborts it if
-- the topic changed meanwhile: fan-out stays one round trip while an
-- isolate's cached view is current, and is never applied with a stale one.
ALTER TABLE subscriptions ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
CREATE INDEX subscriptions_revision ON subscriptions (revision);
