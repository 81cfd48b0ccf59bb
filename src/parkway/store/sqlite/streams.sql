-- Named statements of the SQLite store's run streams (see streams.py).

-- name: take_offsets
-- Moves the head on by the items appended; nothing when the stream is closed.
INSERT INTO stream_heads (run_id, key, next_offset) VALUES (?1, ?2, ?3)
ON CONFLICT (run_id, key) DO UPDATE SET next_offset = next_offset + ?3 WHERE closed = 0
RETURNING next_offset - ?3

-- name: put_item
INSERT INTO stream_items (run_id, key, "offset", value, attempt, written_at)
VALUES (?, ?, ?, ?, ?, ?)

-- name: close_stream
INSERT INTO stream_heads (run_id, key, closed) VALUES (?, ?, 1)
ON CONFLICT (run_id, key) DO UPDATE SET closed = 1

-- name: has_streams
SELECT 1 FROM stream_heads WHERE run_id = ? LIMIT 1

-- name: read_items
SELECT "offset", value, attempt, written_at FROM stream_items
WHERE run_id = ? AND key = ? AND "offset" >= ? ORDER BY "offset" LIMIT ?

-- name: stream_closed
SELECT closed FROM stream_heads WHERE run_id = ? AND key = ?

-- name: delete_run_heads
DELETE FROM stream_heads WHERE run_id = ?

-- name: delete_run_items
DELETE FROM stream_items WHERE run_id = ?
