"""The engine's client calls on the fleet: the live workers, the runs no
worker serves, and the events published lately with what each started and resumed."""

from __future__ import annotations

from datetime import datetime

from parkway import limits
from parkway.client.base import State, instant
from parkway.core import fleet
from parkway.errors import InvalidArgumentError
from parkway.models import EventInfo, WorkerInfo

# The most events one call lists.
MAX_EVENTS = 1000


async def workers(state: State) -> list[WorkerInfo]:
    """The worker processes seen within three lease periods (a worker renews its
    row a few times a lease; one that died drops out), the longest running first.

    Each says what it serves (``workflows``: ``{name: [versions]}``): a worker
    claims only runs of those workflows and versions, so old workers can
    finish old runs while new ones take the new.
    """
    state.require_open()
    return await fleet.workers(state.rt)


async def unserved_runs(state: State) -> list[str]:
    """The runs (ids, sorted; at most 10,000) that are due but whose workflow and
    version no live worker serves: nothing advances them until a worker that
    serves them starts. (The metric ``parkway_runs_unserved`` counts them.)"""
    state.require_open()
    return await fleet.unserved(state.rt)


async def events(
    state: State,
    *,
    name: str | None = None,
    subject: str | None = None,
    since: datetime | str | None = None,
    limit: int = 100,
) -> list[EventInfo]:
    """The events published lately (those kept for de-duplication, within
    ``event_retention``), newest first, each with the runs it started and the
    parked runs it resumed.

    Args:
        name: Only events of this name.
        subject: Only events about this subject.
        since: Only events published at or after this time (a datetime, or an
            ISO 8601 string; one without a time zone is UTC).
        limit: At most this many (1 to 1000).

    Raises:
        InvalidArgumentError: A bad ``since`` or ``limit``.
        InvalidInputError: A malformed ``name`` or ``subject``.
    """
    state.require_open()
    if name is not None:
        limits.name(name, "event name", field="name")
    if subject is not None:
        limits.subject(subject, "subject")
    at = instant(since, "since")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_EVENTS:
        raise InvalidArgumentError(
            f"limit must be a whole number from 1 to {MAX_EVENTS}, got {limit!r}",
            field="limit",
        )
    return await fleet.events(state.rt, name=name, subject=subject, since=at, limit=limit)
