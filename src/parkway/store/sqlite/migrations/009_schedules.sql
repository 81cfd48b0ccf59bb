-- parkway schema, version 9: schedules.

-- One row per schedule: its definition, whether it is paused, and where its
-- firing stands (last_tick: the last tick handled, fired or skipped, at first the
-- time it was registered; next_at: the tick due next, NULL while paused). The
-- worker that fires a tick starts its run and moves these on in one transaction.
CREATE TABLE schedules (
    id TEXT PRIMARY KEY,
    workflow TEXT NOT NULL,
    cron TEXT NOT NULL,
    timezone TEXT NOT NULL,
    catch_up TEXT NOT NULL,
    input BLOB NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    last_tick REAL NOT NULL,
    next_at REAL,
    last_run_id TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);

-- The due ones, the earliest first (paused ones have no next_at).
CREATE INDEX schedules_due ON schedules (next_at) WHERE next_at IS NOT NULL;
