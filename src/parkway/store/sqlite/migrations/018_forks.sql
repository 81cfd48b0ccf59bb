-- parkway schema, version 18: where a forked run came from.

-- engine.fork: the run it was forked from and how many of that run's journal
-- entries it started with (both NULL: not a fork). Written once, after the
-- fork's row is inserted; read only with the row (RunInfo.forked_from).
ALTER TABLE runs ADD COLUMN forked_from TEXT;
ALTER TABLE runs ADD COLUMN forked_at INTEGER;
