"""Which failures of a run's commit are the store's own trouble (retried later, as
ever) and which are a refusal of what the commit holds (tried a few times, then
the run fails): told apart on the real drivers' exceptions, as the stores raise
them (PostgreSQL's wrapped in a ``StoreError`` raised from the driver's)."""

from __future__ import annotations

import sqlite3

import pytest

from parkway.errors import (
    LeaseLostError,
    StoreBusyError,
    StoreConflictError,
    StoreConnectionError,
    StoreError,
    StoreFullError,
)
from parkway.worker.refusals import transient as _transient

psycopg = pytest.importorskip("psycopg")


def raised_from(cause: BaseException, wrap: bool) -> BaseException:
    """``cause`` as a store raises it: bare (SQLite), or a StoreError from it."""
    if not wrap:
        return cause
    try:
        try:
            raise cause
        except BaseException as exc:
            raise StoreError(f"PostgreSQL: {exc} (rolled back)") from exc
    except StoreError as wrapped:
        return wrapped


@pytest.mark.parametrize(
    ("error", "wrap"),
    [
        (sqlite3.OperationalError("database is locked"), False),
        (sqlite3.OperationalError("database or disk is full"), False),
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (psycopg.errors.QueryCanceled("canceling statement due to statement timeout"), True),
        (psycopg.errors.SerializationFailure("could not serialize access"), True),
        (psycopg.InterfaceError("the connection is closed"), True),
        (ConnectionResetError("reset by peer"), False),
        (StoreError("deadlock", conflict=True), False),
        (StoreError("the reply was lost", outcome_unknown=True), False),
        (LeaseLostError("another worker has it"), False),
        (StoreFullError("the disk is full"), False),
        (StoreBusyError("the database stayed locked"), False),
        (StoreConnectionError("the connection was lost"), False),
        (StoreConflictError("a deadlock"), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_the_store_s_own_trouble_is_retried_later(error: BaseException, wrap: bool) -> None:
    assert _transient(raised_from(error, wrap))


@pytest.mark.parametrize(
    ("error", "wrap"),
    [
        (OverflowError("Python int too large to convert to SQLite INTEGER"), False),
        (sqlite3.IntegrityError("refused"), False),
        (UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"), False),
        (psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes"), True),
        (psycopg.errors.CheckViolation("violates check constraint"), True),
        (psycopg.errors.RaiseException("refused by a trigger"), True),
        (ValueError("no such value"), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_a_refusal_of_what_a_commit_holds_is_not_transient(
    error: BaseException, wrap: bool
) -> None:
    assert not _transient(raised_from(error, wrap))
