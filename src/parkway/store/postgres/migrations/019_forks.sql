-- parkway schema, version 19: where a forked run came from.

-- engine.fork: the run it was forked from and how many of that run's journal
-- entries it started with (both NULL: not a fork). Written once, after the
-- fork's row is inserted; read only with the row (RunInfo.forked_from). NULL
-- columns at the end of a row take no bytes but the null bitmap's.
ALTER TABLE parkway.runs ADD COLUMN forked_from TEXT;
ALTER TABLE parkway.runs ADD COLUMN forked_at INTEGER;
