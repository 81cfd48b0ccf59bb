-- parkway schema, version 12: operator controls (pause, retention).

-- engine.pause: no claim leases a paused run; its inputs wait as tasks, and
-- engine.resume clears it.
ALTER TABLE parkway.runs ADD COLUMN paused BOOLEAN NOT NULL DEFAULT false;

-- The retention sweep: runs that ended, oldest first (updated_at: the time they
-- ended). Partial: a parked or running run (most of them, and a million parked
-- is a workload) has no entry, so parking costs no bytes more.
CREATE INDEX runs_by_end ON parkway.runs (updated_at, id)
    WHERE status IN ('completed', 'failed', 'cancelled');
