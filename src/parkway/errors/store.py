"""Errors of the store: it failed, was full, busy or unreachable, or a
transaction lost a conflict or its lease."""

from __future__ import annotations

from parkway.errors.base import ParkwayError


class StoreError(ParkwayError):
    """The store failed or could not be reached (no connection, a timeout, a lost
    commit): nothing the caller sent was wrong, and the operation may be retried
    (the message says whether it took effect).

    The subclasses name the cause: :class:`StoreFullError` (no room left),
    :class:`StoreBusyError` (locked by another writer), :class:`StoreConnectionError`
    (no connection, or it was lost), :class:`StoreConflictError` (rolled back for
    another transaction); a plain ``StoreError`` is any other failure of the store.

    Attributes:
        took_effect: Whether the operation was saved: ``False``, nothing of it was
            (retry it as it is); ``None``, unknown (the reply to its commit was lost:
            look before doing it again); ``True``, it was, though what followed failed.
        outcome_unknown: ``took_effect is None``: the commit may or may not have
            happened (its reply was lost and the server could not be asked).
        conflict: The server rolled the transaction back because it conflicted with
            another one (a deadlock, a serialization failure): nothing was saved,
            and the same operation may simply be done again.
        retry_after: Seconds worth waiting before trying again (HTTP sends it as
            ``Retry-After`` with its 503).
    """

    retry_after: float = 5.0

    def __init__(
        self,
        message: str,
        *,
        outcome_unknown: bool = False,
        conflict: bool = False,
        took_effect: bool | None = False,
    ) -> None:
        super().__init__(message)
        # (outcome_unknown predates took_effect: either says "unknown")
        self.took_effect: bool | None = None if outcome_unknown else took_effect
        self.outcome_unknown = self.took_effect is None
        self.conflict = conflict


class StoreFullError(StoreError):
    """The store has no room left (the disk or volume is full, or the database
    server's is): the operation was not saved. Free space; parkway goes on by
    itself once there is some (see "Store errors" in the operating guide)."""

    retry_after = 30.0


class StoreBusyError(StoreError):
    """The database stayed locked by other writers (SQLite's ``database is locked``
    past its busy timeout, a PostgreSQL lock or connection limit): the operation was
    not saved; retry it shortly."""

    retry_after = 1.0


class StoreConnectionError(StoreError):
    """No connection to the store could be made, or the one in use was lost (the
    server restarting or unreachable). ``took_effect`` says whether a commit cut off
    with it happened: ``False``, nothing was saved; ``None``, unknown."""

    retry_after = 5.0


class StoreConflictError(StoreError):
    """The transaction was rolled back because it conflicted with another one (a
    deadlock, a serialization failure): nothing was saved; do it again."""

    retry_after = 1.0

    def __init__(
        self,
        message: str,
        *,
        outcome_unknown: bool = False,
        conflict: bool = True,
        took_effect: bool | None = False,
    ) -> None:
        super().__init__(
            message, outcome_unknown=outcome_unknown, conflict=conflict, took_effect=took_effect
        )


class LeaseLostError(ParkwayError):
    """This worker's lease on the run expired and another worker took it over (internal)."""


class StoreFailedError(StoreError):
    """The store failed while a run was being advanced. A failure of the store itself
    (a lost connection, a locked database) is retried later; one that is the run's
    own (the store refuses what its step returned or raised, every time) fails the
    run with this error, after a few tries."""
