-- Statements of the SQLite store's schedules (parkway.store.sqlite.schedules).
-- Columns always in parkway.store.schedules.SCHEDULE_COLUMNS order.

-- name: get_schedule
SELECT id, workflow, cron, timezone, catch_up, input, paused, last_tick, next_at,
       last_run_id, created_at, updated_at
FROM schedules WHERE id = ?

-- name: put_schedule
INSERT OR REPLACE INTO schedules (id, workflow, cron, timezone, catch_up, input, paused,
                                  last_tick, next_at, last_run_id, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: delete_schedule
DELETE FROM schedules WHERE id = ?

-- name: list_schedules
SELECT id, workflow, cron, timezone, catch_up, input, paused, last_tick, next_at,
       last_run_id, created_at, updated_at
FROM schedules ORDER BY id

-- name: due_schedules
SELECT id, workflow, cron, timezone, catch_up, input, paused, last_tick, next_at,
       last_run_id, created_at, updated_at
FROM schedules WHERE next_at IS NOT NULL AND next_at <= ? AND paused = 0
ORDER BY next_at, id LIMIT ?

-- name: next_schedule_at
SELECT min(next_at) FROM schedules WHERE next_at IS NOT NULL AND paused = 0
