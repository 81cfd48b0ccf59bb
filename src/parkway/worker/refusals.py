"""A commit of an advance that the store refuses: tried again, or the store's trouble.

A commit can fail for the store's own trouble (a lost connection, a busy or
full database, a conflict), which the worker leaves to a later retry of the
run, or for what it holds (an integer beyond 64 bits, a NUL character), which
fails the same way every time. :func:`commit_retrying` tells them apart
(:func:`transient`) and tries a refused commit again a few times before it
gives up (:class:`Refused`), so the run's advance can fail it for what it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Iterator
from typing import Any, Protocol

from parkway.core.committer import Job
from parkway.errors import (
    LeaseLostError,
    NonDeterminismError,
    StoreBusyError,
    StoreConflictError,
    StoreConnectionError,
    StoreError,
    StoreFailedError,
    StoreFullError,
)
from parkway.models import exception_text
from parkway.store.base import RunRecord

log = logging.getLogger("parkway.worker")

# A commit the store refuses for what it holds (not for the store's own trouble) is
# tried this many times, COMMIT_PAUSE apart (then twice that...), before its run fails.
COMMIT_TRIES = 3
COMMIT_PAUSE = 0.2
# What of a refused commit's error the run's failure quotes.
CAUSE_CHARS = 500


class Commit(Protocol):
    """The worker's commit of a run's job; ``order``: the job's place in a batch."""

    def __call__(self, run_id: str, job: Job, *, order: str = "") -> Awaitable[Any]: ...


async def commit_retrying(commit: Commit, run: RunRecord, job: Job, *, order: str = "") -> None:
    """Commit ``job`` for ``run``; tried again, a few times, while the store refuses
    it for what it holds (:func:`transient`: not the store's own trouble, which is
    raised at once, and the run retried later as ever).

    What the advance decided stays in hand meanwhile: a step whose result the store
    refuses is not run again to find out. Past the tries, :class:`Refused`.
    """
    tries = 0
    while True:
        try:
            await commit(run.id, job, order=order)
            return
        except (LeaseLostError, NonDeterminismError):
            raise
        except Exception as exc:
            tries += 1
            if transient(exc):
                raise
            if tries >= COMMIT_TRIES:
                raise Refused(tries, exc) from exc
            log.warning(
                "run %s: the store refused its commit (%s: %s); trying again",
                run.id,
                type(exc).__name__,
                exception_text(exc)[:CAUSE_CHARS],
            )
            await asyncio.sleep(COMMIT_PAUSE * 2 ** (tries - 1))


class Refused(Exception):
    """The store refused a run's commit ``tries`` times, for what it holds (``cause``)."""

    def __init__(self, tries: int, cause: Exception) -> None:
        super().__init__(f"commit refused {tries} times: {type(cause).__name__}")
        self.tries, self.cause = tries, cause


# The DB-API's name for a failure of the database's operation, not of what was sent
# (a lost connection, a locked or full database, a cancelled statement: sqlite3 and
# psycopg both), and its interface's (a closed connection).
_OPERATIONAL = frozenset({"OperationalError", "InterfaceError"})
# The store's own trouble, as the stores name it.
_STORE_TROUBLE = (StoreFullError, StoreBusyError, StoreConnectionError, StoreConflictError)


def transient(exc: BaseException) -> bool:
    """Whether a commit's failure is the store's own trouble, to be retried later,
    rather than a refusal of what the commit holds (an integer beyond 64 bits, a NUL
    character in text: the same every time).

    Parkway's stores raise :class:`StoreError` from the driver's error: the chain
    is searched for a conflict, an unknown outcome, an I/O error or the DB-API's
    ``OperationalError``. Anything else (``OverflowError``, a ``DataError``, an
    ``IntegrityError``...) is a refusal.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, _STORE_TROUBLE):
            return True
        if isinstance(current, StoreError) and (current.conflict or current.outcome_unknown):
            return True
        if isinstance(current, OSError | TimeoutError | LeaseLostError):
            return True
        if any(cls.__name__ in _OPERATIONAL for cls in type(current).__mro__):
            return True
        current = current.__cause__ or current.__context__
    return False


@contextlib.contextmanager
def store_errors(run: RunRecord) -> Iterator[None]:
    """The store's failures as :class:`StoreFailedError` (the worker retries the run)."""
    try:
        yield
    except (LeaseLostError, NonDeterminismError, Refused):
        raise
    except Exception as exc:
        raise StoreFailedError(f"store failed while advancing run {run.id!r}: {exc}") from exc
