-- parkway schema, version 12: operator controls (pause, retention).

-- engine.pause: no claim leases a paused run; its inputs wait as tasks, and
-- engine.resume clears it.
ALTER TABLE parkway.runs ADD COLUMN paused BOOLEAN NOT NULL DEFAULT false;

-- The retention sweep: runs that ended, oldest first (status, then updated_at:
-- the time they ended).
CREATE INDEX runs_by_end ON parkway.runs (status, updated_at);
