-- Statements of the SQLite store's callbacks and human tasks (parkway.store.sqlite.people).
-- Columns always in parkway.store.people.CALLBACK_COLUMNS / TASK_COLUMNS order.

-- name: add_callback
INSERT OR IGNORE INTO callbacks (token_hash, run_id, signal, created_at, status, outcome,
                                 completed_at)
VALUES (?, ?, ?, ?, ?, ?, ?)

-- name: get_callback
SELECT token_hash, run_id, signal, created_at, status, outcome, completed_at
FROM callbacks WHERE token_hash = ?

-- name: finish_callback
UPDATE callbacks SET status = ?, outcome = ?, completed_at = ? WHERE token_hash = ?

-- name: add_human_task
INSERT OR IGNORE INTO human_tasks (id, run_id, workflow, name, title, form_schema, form_model,
                                   data, assignees, signal, status, created_at, due_at,
                                   completed_by, completed_at, result)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: get_human_task
SELECT id, run_id, workflow, name, title, form_schema, form_model, data, assignees, signal,
       status, created_at, due_at, completed_by, completed_at, result
FROM human_tasks WHERE id = ?

-- With an assignee: the tasks it may complete, those assigned to it and those
-- assigned to nobody in particular.
-- name: list_human_tasks
SELECT id, run_id, workflow, name, title, form_schema, form_model, data, assignees, signal,
       status, created_at, due_at, completed_by, completed_at, result
FROM human_tasks
WHERE (:status IS NULL OR status = :status)
  AND (:workflow IS NULL OR workflow = :workflow)
  AND (:assignee IS NULL OR assignees = '[]'
       OR EXISTS (SELECT 1 FROM json_each(human_tasks.assignees) WHERE value = :assignee))
ORDER BY created_at, id LIMIT :limit

-- name: finish_human_task
UPDATE human_tasks SET status = ?, completed_at = ?, completed_by = ?, result = ?
WHERE id = ? AND status = 'open'

-- name: close_human_tasks
UPDATE human_tasks SET status = 'cancelled', completed_at = ?
WHERE run_id = ? AND status = 'open'

-- name: delete_run_callbacks
DELETE FROM callbacks WHERE run_id = ?

-- name: delete_run_human_tasks
DELETE FROM human_tasks WHERE run_id = ?
