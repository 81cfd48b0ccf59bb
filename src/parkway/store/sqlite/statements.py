"""Every statement the SQLite store sends, from ``queries.sql`` and its migrations.

A module of its own so that the SQL is in one place and fixed: each named
statement is used as written; the few whose text the call decides (an
``UPDATE`` of runs names the columns it changes, a listing the filters it was
given) are completed by the builders below, one text per shape (cached), so
that sqlite3's statement cache keeps one prepared statement for each.
"""

from __future__ import annotations

import functools

from parkway.store.sqltext import load_migrations, load_queries

# The named statements of queries.sql.
Q = load_queries(__package__, "queries.sql")
MIGRATIONS = load_migrations(__package__, "migrations")

# start_run's insert: an id taken already is left as it is, in the same statement.
INSERT_NEW_RUN = Q["insert_run"].rstrip() + "\nON CONFLICT (id) DO NOTHING"

# A runs row's columns in RunRecord's order, as get_run reads them; the claim and the
# leases return the rows they lease with them (their reads of the runs start there).
RUN_COLUMNS = Q["get_run"].split("SELECT", 1)[1].split("FROM runs", 1)[0].strip()
CLAIM = f"{Q['claim'].rstrip()}\nRETURNING {RUN_COLUMNS}"
CLAIM_SERVED = f"{Q['claim_served'].rstrip()}\nRETURNING {RUN_COLUMNS}"
LEASE = {
    name: f"{Q[name].rstrip()}\nRETURNING {RUN_COLUMNS}"
    for name in ("lease_run", "lease_pending_run")
}

# find_subscriptions by kind (the kind a literal: see the queries).
FIND_SUBSCRIPTIONS = {
    "event": Q["find_event_subscriptions"],
    "message": Q["find_message_subscriptions"],
    "cancel": Q["find_cancel_subscriptions"],
}


@functools.lru_cache(maxsize=256)
def update_run(columns: tuple[str, ...], *, owned: bool, release: bool) -> str:
    """``UPDATE runs`` of these columns. Parameters: the columns' values, the run's id,
    then (``owned``) the lease's owner. The columns come from ``RUN_MUTABLE``
    (checked by the caller), never from the caller's data."""
    sets = [f"{column} = ?" for column in columns]
    where = "id = ?"
    if owned:
        if release:
            sets += ["lease_owner = NULL", "lease_until = NULL"]
        where += " AND lease_owner = ?"
    return f"UPDATE runs SET {', '.join(sets)} WHERE {where}"


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
    ``hide_internal``, by a workflow name not in the ``parkway.`` namespace too;
    then by each condition named in ``extra`` (fragments of queries.sql, their
    parameters next, in order); then ``tail`` (its ``ORDER BY`` and ``LIMIT``)."""
    conditions = [f"{column} = ?" for column in columns]
    if hide_internal:
        conditions.append("workflow NOT LIKE 'parkway.%'")
    conditions += [Q[fragment] for fragment in extra]
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    return f"{Q[name]}{where} {tail}"
