-- Named statements of the SQLite store's flow control (see admission.py).

-- name: flow_slot
SELECT active, started, cap FROM flow_slots WHERE workflow = ? AND key = ?

-- name: put_flow_slot
INSERT INTO flow_slots (workflow, key, active, started, cap) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (workflow, key) DO UPDATE
SET active = excluded.active, started = excluded.started, cap = excluded.cap

-- name: flow_enter
INSERT INTO flow_runs (run_id, workflow, key, priority, queued) VALUES (?, ?, ?, ?, ?)

-- name: flow_entry
SELECT workflow, key, queued FROM flow_runs WHERE run_id = ?

-- name: flow_leave
DELETE FROM flow_runs WHERE run_id = ? RETURNING workflow, key, queued

-- name: flow_next
UPDATE flow_runs SET queued = 0
WHERE seq = (
    SELECT seq FROM flow_runs WHERE workflow = ? AND key = ? AND queued = 1
    ORDER BY priority DESC, seq LIMIT 1
)
RETURNING run_id

-- name: flow_oldest
SELECT run_id FROM flow_runs WHERE workflow = ? AND key = ? AND queued = 0
ORDER BY seq LIMIT 1

-- name: rate_mark
SELECT at FROM flow_rates WHERE workflow = ? AND key = ? AND slot = ?

-- name: put_rate_mark
INSERT INTO flow_rates (workflow, key, slot, at) VALUES (?, ?, ?, ?)
ON CONFLICT (workflow, key, slot) DO UPDATE SET at = excluded.at

-- name: defer_tasks
-- The tasks (a JSON array of ids) go to the run's start task's due time, if it
-- has one, else to the far time (the second parameter).
UPDATE tasks SET due_at = coalesce(
    (SELECT min(due_at) FROM tasks WHERE run_id = ? AND kind = 'start'), ?
)
WHERE id IN (SELECT value FROM json_each(?))

-- name: wake_deferred
UPDATE tasks SET due_at = ? WHERE run_id = ? AND due_at >= ?
