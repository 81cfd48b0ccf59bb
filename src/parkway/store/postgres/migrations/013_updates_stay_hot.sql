-- parkway schema, version 13: a run's updates stay HOT again.

-- runs_by_end (version 12) indexed updated_at, which every commit of a running
-- run sets: an UPDATE that changes an indexed column is never HOT, so each step's
-- commit wrote a new entry into every index of parkway.runs (where 001's
-- fillfactor was meant to keep those updates on their page). ended_at is
-- updated_at once the run has ended, NULL while it runs or is parked: computed
-- by the server on every write, so no statement can forget it, and unchanged
-- (NULL) by the commits of a running run, which stay HOT. (Measured: 1,000
-- 3-step workflows, 3,000 updates of runs, none HOT before, 2,000 after; the WAL
-- a workflow writes 4,040 -> 3,340 bytes.)
ALTER TABLE parkway.runs ADD COLUMN ended_at DOUBLE PRECISION GENERATED ALWAYS AS (
    CASE WHEN status IN ('completed', 'failed', 'cancelled') THEN updated_at END
) STORED;

DROP INDEX parkway.runs_by_end;
CREATE INDEX runs_by_end ON parkway.runs (ended_at, id) WHERE ended_at IS NOT NULL;
