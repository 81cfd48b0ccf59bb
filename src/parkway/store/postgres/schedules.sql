-- Statements of the PostgreSQL store's schedules (parkway.store.postgres.schedules).
-- Columns always in parkway.store.schedules.SCHEDULE_COLUMNS order.

-- name: get_schedule
SELECT id, workflow, cron, timezone, catch_up, input, paused, last_tick, next_at,
       last_run_id, created_at, updated_at
FROM parkway.schedules WHERE id = %s

-- name: get_schedule_locked
SELECT id, workflow, cron, timezone, catch_up, input, paused, last_tick, next_at,
       last_run_id, created_at, updated_at
FROM parkway.schedules WHERE id = %s FOR UPDATE

-- name: put_schedule
INSERT INTO parkway.schedules (id, workflow, cron, timezone, catch_up, input, paused,
                               last_tick, next_at, last_run_id, created_at, updated_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (id) DO UPDATE SET
    workflow = EXCLUDED.workflow, cron = EXCLUDED.cron, timezone = EXCLUDED.timezone,
    catch_up = EXCLUDED.catch_up, input = EXCLUDED.input, paused = EXCLUDED.paused,
    last_tick = EXCLUDED.last_tick, next_at = EXCLUDED.next_at,
    last_run_id = EXCLUDED.last_run_id, created_at = EXCLUDED.created_at,
    updated_at = EXCLUDED.updated_at

-- name: delete_schedule
DELETE FROM parkway.schedules WHERE id = %s RETURNING id

-- name: list_schedules
SELECT id, workflow, cron, timezone, catch_up, input, paused, last_tick, next_at,
       last_run_id, created_at, updated_at
FROM parkway.schedules ORDER BY id

-- The due ones, each locked until the firing transaction ends; one another worker
-- is firing is skipped (it is that worker's), not waited for.
-- name: due_schedules
SELECT id, workflow, cron, timezone, catch_up, input, paused, last_tick, next_at,
       last_run_id, created_at, updated_at
FROM parkway.schedules WHERE next_at IS NOT NULL AND next_at <= %s AND NOT paused
ORDER BY next_at, id LIMIT %s
FOR UPDATE SKIP LOCKED

-- name: next_schedule_at
SELECT min(next_at) FROM parkway.schedules WHERE next_at IS NOT NULL AND NOT paused
