-- parkway schema, version 11: operator controls (pause, retention).

-- engine.pause: no claim leases a paused run; its inputs wait as tasks, and
-- engine.resume clears it. 0 or 1.
ALTER TABLE runs ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;

-- The retention sweep: runs that ended, oldest first (updated_at: the time they
-- ended). Partial: a parked or running run (most of them, and a million parked
-- is a workload) has no entry, so parking costs no bytes more.
CREATE INDEX runs_by_end ON runs (updated_at)
    WHERE status IN ('completed', 'failed', 'cancelled');
