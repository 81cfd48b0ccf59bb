-- The fleet's statements (see parkway.store.fleet): workers, operator entries,
-- event links.

-- name: beat_worker
-- A worker's row, or its renewal (started_at stays the first's).
INSERT INTO workers (id, host, pid, started_at, last_seen, alive_until, workflows)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen,
    alive_until = excluded.alive_until, workflows = excluded.workflows

-- name: list_workers
SELECT id, host, pid, started_at, last_seen, alive_until, workflows FROM workers
WHERE alive_until > ? ORDER BY started_at, id

-- name: prune_workers
DELETE FROM workers WHERE alive_until < ?

-- name: unserved_runs
-- The due runs (tasks_by_due) that are not paused and whose key no live worker
-- serves (?1: the served keys, a JSON array).
SELECT DISTINCT r.id FROM tasks AS t JOIN runs AS r ON r.id = t.run_id
WHERE t.due_at <= ?2 AND r.paused = 0
  AND (r.workflow || char(31) || r.version) NOT IN (SELECT value FROM json_each(?1))
ORDER BY r.id LIMIT ?3

-- name: add_operator_entry
INSERT INTO operator_entries (run_id, action, by, at) VALUES (?, ?, ?, ?)

-- name: operator_entries
SELECT run_id, action, by, at FROM operator_entries WHERE run_id = ? ORDER BY id

-- name: delete_run_operator_entries
DELETE FROM operator_entries WHERE run_id = ?

-- name: link_event
INSERT INTO event_links (event_id, how, run_id, at) VALUES (?, ?, ?, ?)

-- name: delete_event_links
DELETE FROM event_links WHERE event_id = ?

-- name: prune_event_links
DELETE FROM event_links WHERE at < ?

-- name: list_events
-- Newest first (events_by_time), of that name and subject when given.
SELECT id, name, domain, subject, payload, published_at FROM events
WHERE (:name IS NULL OR name = :name) AND (:subject IS NULL OR subject = :subject)
  AND (:since IS NULL OR published_at >= :since)
ORDER BY published_at DESC, seq DESC LIMIT :limit

-- name: event_links
SELECT event_id, how, run_id FROM event_links
WHERE event_id IN (SELECT value FROM json_each(?)) ORDER BY id
