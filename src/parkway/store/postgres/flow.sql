-- Named statements of the PostgreSQL store's flow control (see flow.py).

-- name: flow_slot_row
INSERT INTO parkway.flow_slots (workflow, key) VALUES (%s, %s) ON CONFLICT DO NOTHING

-- name: flow_slot
SELECT active, started, cap FROM parkway.flow_slots WHERE workflow = %s AND key = %s
FOR UPDATE

-- name: flow_slot_read
SELECT active, started, cap FROM parkway.flow_slots WHERE workflow = %s AND key = %s

-- name: put_flow_slot
INSERT INTO parkway.flow_slots (active, started, cap, workflow, key) VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (workflow, key) DO UPDATE
SET active = excluded.active, started = excluded.started, cap = excluded.cap

-- name: flow_enter
INSERT INTO parkway.flow_runs (run_id, workflow, key, priority, queued)
VALUES (%s, %s, %s, %s, %s)

-- name: flow_entry
SELECT workflow, key, queued FROM parkway.flow_runs WHERE run_id = %s

-- name: flow_leave
DELETE FROM parkway.flow_runs WHERE run_id = %s RETURNING workflow, key, queued

-- name: flow_next
UPDATE parkway.flow_runs SET queued = false
WHERE run_id = (
    SELECT run_id FROM parkway.flow_runs WHERE workflow = %s AND key = %s AND queued
    ORDER BY priority DESC, seq LIMIT 1
)
RETURNING run_id

-- name: flow_oldest
SELECT run_id FROM parkway.flow_runs WHERE workflow = %s AND key = %s AND NOT queued
ORDER BY seq LIMIT 1

-- name: rate_mark
SELECT at FROM parkway.flow_rates WHERE workflow = %s AND key = %s AND slot = %s

-- name: put_rate_mark
INSERT INTO parkway.flow_rates (workflow, key, slot, at) VALUES (%s, %s, %s, %s)
ON CONFLICT (workflow, key, slot) DO UPDATE SET at = excluded.at

-- name: defer_tasks
-- The tasks go to the run's start task's due time, if it has one, else to the
-- far time (the second parameter).
UPDATE parkway.tasks SET due_at = coalesce(
    (SELECT min(due_at) FROM parkway.tasks WHERE run_id = %s AND kind = 'start'), %s
)
WHERE id = ANY(%s::bigint[])

-- name: wake_deferred
UPDATE parkway.tasks SET due_at = %s WHERE run_id = %s AND due_at >= %s
