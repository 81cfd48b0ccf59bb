"""Every statement the PostgreSQL store sends, built once from ``queries.sql``.

A module of its own so that the SQL is in one place and fixed: wire.py prepares
each statement once per connection, keyed by its text, so a statement's text
must not vary with the call. The variants of one statement (a claim of whatever
is due and a lease of one run; a publish's delivery with 0 to 8 shapes to look
under) are joined here from the named fragments of ``queries.sql``, at import,
into constants and a fixed table; nothing edits a statement's text afterwards.

Two kinds of statement have a text that the call decides, and are made by the
builders at the end, one text per shape (cached): an ``UPDATE`` of runs names
the columns it changes (any of ``RUN_MUTABLE``, in the caller's order), and a
worker's lease-fenced update carries the writes fused into it (see
``Transport._fuse``). The advisory lock keys the statements take are made here
too.
"""

from __future__ import annotations

import functools
import hashlib

from parkway.store.postgres.wire import BinaryRows
from parkway.store.sqltext import load_queries

# The named statements and fragments of queries.sql.
Q = load_queries(__package__, "queries.sql")

BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED"


def _lines(*parts: str) -> str:
    # A newline between fragments: each may end in a comment.
    return "\n".join(parts)


# A claim of whatever is due (claim_settings goes before it, in its pipeline). Both
# claims bring the runs' journals as arrays, read in binary (see wire.BinaryRows).
CLAIM_DUE = BinaryRows(
    _lines(
        Q["claim_due"],
        Q["claimed_columns"],
        Q["claim_takeovers"],
        Q["claimed_from"],
        Q["claimed_loads"],
    )
)


def _served(claim: str) -> str:
    """claim_due with claim_served's filter among its conditions (before its order)."""
    order = "    ORDER BY t.due_at, t.id\n    LIMIT %(limit)s"
    if claim.count(order) != 1:  # (claim_due changed: put the filter where it belongs)
        raise AssertionError("claim_served: claim_due's ORDER BY not found once")
    return claim.replace(order, f"{Q['claim_served'].rstrip()}\n{order}")


# The same, of the runs whose workflow and version the worker serves.
CLAIM_SERVED = BinaryRows(
    _lines(
        _served(Q["claim_due"]),
        Q["claimed_columns"],
        Q["claim_takeovers"],
        Q["claimed_from"],
        Q["claimed_loads"],
    )
)
# A lease of one run in the sender's transaction: of the run named (``run``), or
# with ``run`` None of the run the delivery statement just before it delivered to.
LEASE_RUN = BinaryRows(
    _lines(Q["lease_run"], Q["claimed_columns"], Q["lease_from"], Q["claimed_loads"])
)

# The most shapes events.deliver takes waits under in one statement (more: the usual path).
DELIVER_EVENT_SHAPES = 8


def _deliver_event(shapes: int) -> str:
    """events.deliver with a removal of the matching waits under each of ``shapes``
    shapes (see the fragments in queries.sql)."""
    lookups = [Q["deliver_event_lookup"].format(n=i) for i in range(shapes)]
    union = " UNION ALL ".join(f"SELECT * FROM taken_{i}" for i in range(shapes))
    taken = f", taken AS (\n{union or Q['deliver_event_nothing_taken']}\n)"
    return _lines(Q["deliver_event"], *lookups, taken, Q["deliver_event_end"])


# events.deliver by the number of shapes it looks under.
DELIVER_EVENT: tuple[str, ...] = tuple(_deliver_event(n) for n in range(DELIVER_EVENT_SHAPES + 1))

# Writes that may ride in a run's lease-fenced update (see Transport._fuse), and
# the table each writes. Only the journal's are inserts, into a table no other
# part touches: no part is meant to see rows another part writes.
FUSABLE = {
    "put_journal": "journal",
    "put_journal_entry": "journal",
    "delete_tasks": "tasks",
    "delete_task": "tasks",
    "delete_all_tasks": "tasks",
    "delete_signals": "mailbox",
    "delete_run_subscriptions": "subscriptions",
    "delete_subscription": "subscriptions",
    "delete_wait_tasks_at": "tasks",
    "delete_wait_tasks_at_keep": "tasks",
    "streams_ended": "stream_heads",
}


@functools.lru_cache(maxsize=256)
def update_run(columns: tuple[str, ...], *, owned: bool, release: bool) -> str:
    """``UPDATE runs`` of these columns: one text per shape, so it is prepared once.

    Parameters: the columns' values, the run's id, then (``owned``) the lease's
    owner. The columns come from ``RUN_MUTABLE`` (checked by the caller), never
    from input.
    """
    sets = [f'"{column}" = %s' for column in columns]
    where = "id = %s"
    if owned:
        if release:
            sets.append("lease_owner = NULL, lease_until = NULL")
        where = "id = %s AND lease_owner = %s"
    return f"UPDATE parkway.runs SET {', '.join(sets)} WHERE {where}"


@functools.lru_cache(maxsize=256)
def fenced_update(columns: tuple[str, ...], *, release: bool, parts: tuple[str, ...] = ()) -> str:
    """A lease-fenced ``UPDATE runs`` that fails its transaction when the lease is gone,
    with the writes ``parts`` (names in FUSABLE) in the same statement, in order.

    Parameters: the columns' values, the commit token, the run's id and the
    lease's owner, then each part's own.
    """
    update = update_run((*columns, "commit_token"), owned=True, release=release)
    # A newline before each closing parenthesis: a query may end in a comment.
    joined = "".join(f", {part} AS ({Q[part]}\n)" for part in parts)
    return (
        f"WITH changed AS ({update} RETURNING 1){joined} "
        "SELECT parkway.lease_held(count(*)) FROM changed"
    )


def lock_key(kind: str, *parts: str) -> int:
    """A 64-bit advisory lock key for ``kind`` and ``parts`` (length-prefixed: unambiguous)."""
    text = "".join(f"{len(p)}:{p}" for p in (kind, *parts))
    return int.from_bytes(
        hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True
    )


def subject_lock(domain: str, subject: str | None) -> int:
    """The key of a subject's lock (message keys: domain "default", subject = key)."""
    return lock_key("subject", domain, "" if subject is None else f"={subject}")


@functools.lru_cache(maxsize=128)
def listing(
    name: str,
    columns: tuple[str, ...],
    tail: str,
    *,
    hide_internal: bool = False,
    extra: tuple[str, ...] = (),
) -> str:
    """``Q[name]`` (a ``SELECT`` with no ``WHERE``) filtered by the equality of each of
    ``columns`` (the caller's fixed names) to a parameter, in order; with
    ``hide_internal``, and by a workflow name not like the next parameter; then by
    each condition named in ``extra`` (fragments of queries.sql, their parameters
    next, in order); then ``tail`` (its ``ORDER BY`` and ``LIMIT``)."""
    conditions = [f'"{column}" = %s' for column in columns]
    if hide_internal:
        conditions.append("workflow NOT LIKE %s")
    conditions += [Q[fragment] for fragment in extra]
    where = f"\nWHERE {' AND '.join(conditions)}" if conditions else ""
    return f"{Q[name]}{where}\n{tail}"
