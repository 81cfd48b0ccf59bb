-- parkway schema, version 11: operator controls (pause, retention).

-- engine.pause: no claim leases a paused run; its inputs wait as tasks, and
-- engine.resume clears it. 0 or 1.
ALTER TABLE runs ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;

-- The retention sweep: runs that ended, oldest first (status, then updated_at:
-- the time they ended).
CREATE INDEX runs_by_end ON runs (status, updated_at);
