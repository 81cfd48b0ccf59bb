"""What a PostgreSQL failure means, told to the user: the errors parkway raises for
them, with the fix; and the two judgements every retry makes (is the connection
gone? put it back in a known state).

Apart from the store because opening, migrating, every round trip and every
commit raise these, and each error names the settings (user, database) and the
likely fix in the same words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from parkway.errors import (
    LeaseLostError,
    ParkwayError,
    StoreBusyError,
    StoreConflictError,
    StoreConnectionError,
    StoreError,
    StoreFullError,
)
from parkway.store.postgres.wire import Conn

# What parkway.lease_held raises (migration 002).
LEASE_LOST = "PKL01"


def first_line(exc: BaseException) -> str:
    """``exc``'s message on one line (at most 500 characters)."""
    text = str(exc).strip() or type(exc).__name__
    return " ".join(line.strip() for line in text.splitlines() if line.strip())[:500]


def connect_error(
    params: Mapping[str, Any], display: str, exc: psycopg.OperationalError
) -> StoreError:
    """The error for a failed connection, saying what to fix."""
    detail = str(exc).strip()
    lower = detail.lower()
    db = params.get("dbname") or "(default)"
    user = params.get("user") or "(default)"
    if "database" in lower and "does not exist" in lower:
        return StoreError(
            f"PostgreSQL database {db!r} does not exist ({display}); create it "
            f'(createdb {db}, or CREATE DATABASE "{db}") or fix the database name in the url'
        )
    if "role" in lower and "does not exist" in lower:
        return StoreError(
            f"PostgreSQL role {user!r} does not exist ({display}); create it "
            "(CREATE ROLE ... LOGIN) or fix the user name in the url"
        )
    if "password" in lower or "authentication" in lower:
        return StoreError(
            f"PostgreSQL refused the credentials of {user!r} ({display}): "
            f"{first_line(exc)}; check the user and password in the url or ~/.pgpass"
        )
    return StoreConnectionError(
        f"cannot connect to PostgreSQL {display}: {first_line(exc)}; check the host "
        "and port in the url and that the server is running and accepts TCP connections"
    )


def privilege_error(
    params: Mapping[str, Any], exc: psycopg.Error | None, what: str = ""
) -> StoreError:
    """The error for a role that may not create the schema (``exc``) or lacks ``what``."""
    user = params.get("user") or "the connecting role"
    db = params.get("dbname") or "the database"
    if exc is not None:
        return StoreError(
            f"PostgreSQL role {user!r} may not create parkway's schema in database "
            f'{db!r} ({first_line(exc)}); GRANT CREATE ON DATABASE "{db}" TO "{user}", '
            "or open parkway once as a role that may (e.g. the database owner), then "
            f"GRANT USAGE ON SCHEMA parkway and SELECT, INSERT, UPDATE, DELETE ON ALL "
            f'TABLES IN SCHEMA parkway TO "{user}"'
        )
    return StoreError(
        f"PostgreSQL role {user!r} lacks {what} in database {db!r}; as the schema's "
        f'owner run: GRANT USAGE ON SCHEMA parkway TO "{user}"; GRANT SELECT, INSERT, '
        f'UPDATE, DELETE ON ALL TABLES IN SCHEMA parkway TO "{user}"'
    )


def failed(
    params: Mapping[str, Any], display: str, exc: BaseException, *, committing: bool = False
) -> ParkwayError:
    """The error for a failed statement or transaction (``committing``: its COMMIT)."""
    detail = first_line(exc)
    if isinstance(exc, psycopg.Error) and exc.sqlstate == LEASE_LOST:
        # A queued lease-fenced update failed (whenever it was sent): rolled back.
        return LeaseLostError(detail)
    if isinstance(exc, psycopg.errors.QueryCanceled):
        hint = "a statement ran past statement_timeout; raise it: ?statement_timeout=60s"
    elif isinstance(exc, psycopg.errors.InsufficientPrivilege):
        user = params.get("user") or "the connecting role"
        hint = f"grant {user!r} SELECT, INSERT, UPDATE, DELETE on the tables of schema parkway"
    elif isinstance(exc, psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure):
        hint = "another transaction got in the way; retry"
    elif isinstance(exc, psycopg.OperationalError):
        hint = "the server may be restarting or unreachable; retry"
    else:
        hint = "nothing of the transaction was saved"
    # Only a COMMIT cut off with its connection leaves the outcome unknown
    # (when even the server could not tell us afterwards).
    unknown = (
        committing
        and isinstance(exc, psycopg.OperationalError)
        and (exc.sqlstate is None or exc.sqlstate.startswith(("08", "57P")))
    )
    outcome = "the commit may or may not have happened" if unknown else "rolled back"
    conflict = not unknown and isinstance(
        exc, psycopg.errors.DeadlockDetected | psycopg.errors.SerializationFailure
    )
    message = f"PostgreSQL {display}: {detail} ({outcome}; {hint})"
    took_effect = None if unknown else False
    state = exc.sqlstate if isinstance(exc, psycopg.Error) else None
    if conflict:
        return StoreConflictError(message, conflict=True)
    if state in _FULL:
        return StoreFullError(
            f"PostgreSQL {display}: {detail} ({outcome}; the server's disk is full: free "
            "space there)",
            took_effect=took_effect,
        )
    if state in _BUSY:
        return StoreBusyError(message, took_effect=took_effect)
    if isinstance(exc, psycopg.OperationalError) and (
        state is None or state.startswith("08") or state.startswith("57P")
    ):
        return StoreConnectionError(message, took_effect=took_effect)
    return StoreError(message, took_effect=took_effect)


# SQLSTATEs of a server out of room (disk_full, out_of_memory, ...: class 53, but
# too_many_connections) and of locks or connections to wait for.
_FULL = {"53100", "53200", "53400"}
_BUSY = {"53300", "55P03", "55006"}


def connection_lost(exc: psycopg.OperationalError, conn: Conn) -> bool:
    """Whether ``exc`` means the connection is gone (rather than a statement failed)."""
    if conn.broken or conn.closed:
        return True
    state = exc.sqlstate
    # None: a client-side failure (lost socket, a pipeline cut short); class 08:
    # connection exceptions; 57P0x: the server shut the session down.
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


async def rollback(conn: Conn) -> None:
    """End whatever transaction ``conn`` has open, or close it."""
    # On failure the connection is in an unknown state (broken, or interrupted
    # mid-query): close it, and the pool replaces it.
    try:
        if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            await conn.execute("ROLLBACK")
    except Exception:
        await conn.close()
    except BaseException:
        await conn.close()
        raise
