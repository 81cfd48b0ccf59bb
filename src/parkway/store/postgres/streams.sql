-- Named statements of the PostgreSQL store's run streams (see streams.py).

-- name: append_stream
-- The head moves on (its row locked to commit), the items go in after it, and
-- the readers listening in other processes are told at commit; nothing at all
-- when the stream is closed.
WITH head AS (
    INSERT INTO parkway.stream_heads AS h (run_id, key, next_offset)
    VALUES (%(run)s, %(key)s, %(n)s)
    ON CONFLICT (run_id, key) DO UPDATE SET next_offset = h.next_offset + %(n)s
    WHERE NOT h.closed
    RETURNING h.next_offset - %(n)s AS first
), items AS (
    INSERT INTO parkway.stream_items (run_id, key, "offset", value, attempt, written_at)
    SELECT %(run)s, %(key)s, head.first + i.ord - 1, i.value, i.attempt, %(at)s
    FROM head, unnest(%(values)s::bytea[], %(attempts)s::int[]) WITH ORDINALITY AS i(value, attempt, ord)
)
SELECT first, pg_notify('parkway_streams', %(note)s) FROM head

-- name: close_stream
WITH head AS (
    INSERT INTO parkway.stream_heads AS h (run_id, key, closed) VALUES (%s, %s, true)
    ON CONFLICT (run_id, key) DO UPDATE SET closed = true
    RETURNING 1
)
SELECT pg_notify('parkway_streams', %s) FROM head

-- name: read_stream
-- The items from an offset on and whether the stream is closed, in one round
-- trip: a row per item (or one with no item), each with the head's flag; no row
-- at all when the stream was never written.
SELECT h.closed, i."offset", i.value, i.attempt, i.written_at
FROM parkway.stream_heads AS h
LEFT JOIN LATERAL (
    SELECT "offset", value, attempt, written_at FROM parkway.stream_items
    WHERE run_id = h.run_id AND key = h.key AND "offset" >= %s ORDER BY "offset" LIMIT %s
) AS i ON true
WHERE h.run_id = %s AND h.key = %s
