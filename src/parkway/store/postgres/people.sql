-- Statements of the PostgreSQL store's callbacks and human tasks (parkway.store.postgres.people).
-- Columns always in parkway.store.people.CALLBACK_COLUMNS / TASK_COLUMNS order.

-- name: add_callback
INSERT INTO parkway.callbacks (token_hash, run_id, signal, created_at, status, outcome,
                               completed_at)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (token_hash) DO NOTHING

-- name: get_callback
SELECT token_hash, run_id, signal, created_at, status, outcome, completed_at
FROM parkway.callbacks WHERE token_hash = %s

-- Locked: two completions of one callback are decided one after the other.
-- name: get_callback_locked
SELECT token_hash, run_id, signal, created_at, status, outcome, completed_at
FROM parkway.callbacks WHERE token_hash = %s FOR UPDATE

-- Only while its run is live: queued, it is sent with the completion's signal, which
-- the COMMIT carries and which finds the run's status only then (an ended run's
-- callback stays as it was, and the caller is told).
-- name: finish_callback
UPDATE parkway.callbacks SET status = %s, outcome = %s, completed_at = %s
WHERE token_hash = %s
  AND EXISTS (SELECT 1 FROM parkway.runs r WHERE r.id = callbacks.run_id
              AND r.status NOT IN ('completed', 'failed', 'cancelled'))

-- name: add_human_task
INSERT INTO parkway.human_tasks (id, run_id, workflow, name, title, form_schema, form_model,
                                 data, assignees, signal, status, created_at, due_at,
                                 completed_by, completed_at, result)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (id) DO NOTHING

-- name: get_human_task
SELECT id, run_id, workflow, name, title, form_schema, form_model, data, assignees::text,
       signal, status, created_at, due_at, completed_by, completed_at, result
FROM parkway.human_tasks WHERE id = %s

-- name: get_human_task_locked
SELECT id, run_id, workflow, name, title, form_schema, form_model, data, assignees::text,
       signal, status, created_at, due_at, completed_by, completed_at, result
FROM parkway.human_tasks WHERE id = %s FOR UPDATE

-- With an assignee: the tasks it may complete, those assigned to it and those
-- assigned to nobody in particular.
-- name: list_human_tasks
SELECT id, run_id, workflow, name, title, form_schema, form_model, data, assignees::text,
       signal, status, created_at, due_at, completed_by, completed_at, result
FROM parkway.human_tasks
WHERE (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(workflow)s::text IS NULL OR workflow = %(workflow)s::text)
  AND (%(assignee)s::text IS NULL OR assignees = '[]'::jsonb
       OR assignees @> jsonb_build_array(%(assignee)s::text))
ORDER BY created_at, id LIMIT %(limit)s

-- name: finish_human_task
UPDATE parkway.human_tasks SET status = %s, completed_at = %s, completed_by = %s, result = %s
WHERE id = %s AND status = 'open' RETURNING id

-- name: close_human_tasks
UPDATE parkway.human_tasks SET status = 'cancelled', completed_at = %s
WHERE run_id = %s AND status = 'open'
