-- parkway schema, version 10: schedules.

-- One row per schedule: its definition, whether it is paused, and where its
-- firing stands (last_tick: the last tick handled, fired or skipped, at first the
-- time it was registered; next_at: the tick due next, NULL while paused). The
-- worker that fires a tick locks the row (FOR UPDATE SKIP LOCKED), starts the
-- tick's run and moves these on in one transaction.
CREATE TABLE parkway.schedules (
    id          TEXT PRIMARY KEY,
    workflow    TEXT NOT NULL,
    cron        TEXT NOT NULL,
    timezone    TEXT NOT NULL,
    catch_up    TEXT NOT NULL,
    input       BYTEA NOT NULL,
    paused      BOOLEAN NOT NULL DEFAULT FALSE,
    last_tick   DOUBLE PRECISION NOT NULL,
    next_at     DOUBLE PRECISION,
    last_run_id TEXT,
    created_at  DOUBLE PRECISION NOT NULL,
    updated_at  DOUBLE PRECISION NOT NULL
);

-- The due ones, the earliest first (paused ones have no next_at).
CREATE INDEX schedules_due ON parkway.schedules (next_at) WHERE next_at IS NOT NULL;
