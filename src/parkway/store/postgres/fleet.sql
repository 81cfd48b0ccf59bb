-- The fleet's statements (see parkway.store.fleet): workers, operator entries,
-- event links.

-- name: beat_worker
-- A worker's row, or its renewal (started_at stays the first's).
INSERT INTO parkway.workers (id, host, pid, started_at, last_seen, alive_until, workflows)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen,
    alive_until = excluded.alive_until, workflows = excluded.workflows

-- name: list_workers
SELECT id, host, pid, started_at, last_seen, alive_until, workflows FROM parkway.workers
WHERE alive_until > %s ORDER BY started_at, id

-- name: prune_workers
DELETE FROM parkway.workers WHERE alive_until < %s

-- name: unserved_runs
-- The due runs (tasks_by_due) that are not paused and whose key no live worker
-- serves.
SELECT DISTINCT r.id FROM parkway.tasks AS t JOIN parkway.runs AS r ON r.id = t.run_id
WHERE t.due_at <= %(now)s AND NOT r.paused
  AND NOT (r.workflow || chr(31) || r.version = ANY(%(keys)s::text[]))
ORDER BY r.id LIMIT %(limit)s

-- name: add_operator_entry
INSERT INTO parkway.operator_entries (run_id, action, by, at) VALUES (%s, %s, %s, %s)

-- name: operator_entries
SELECT run_id, action, by, at FROM parkway.operator_entries WHERE run_id = %s ORDER BY id

-- name: link_event
INSERT INTO parkway.event_links (event_id, how, run_id, at)
SELECT %(id)s, %(how)s, unnest(%(runs)s::text[]), %(at)s

-- name: delete_event_links
DELETE FROM parkway.event_links WHERE event_id = %s

-- name: prune_event_links
DELETE FROM parkway.event_links WHERE at < %s

-- name: list_events
-- Newest first (events_by_time), of that name and subject when given.
SELECT id, name, domain, subject, payload, published_at FROM parkway.events
WHERE (%(name)s::text IS NULL OR name = %(name)s::text)
  AND (%(subject)s::text IS NULL OR subject = %(subject)s::text)
  AND (%(since)s::float8 IS NULL OR published_at >= %(since)s::float8)
ORDER BY published_at DESC, seq DESC LIMIT %(limit)s

-- name: event_links
SELECT event_id, how, run_id FROM parkway.event_links
WHERE event_id = ANY(%s::text[]) ORDER BY id
