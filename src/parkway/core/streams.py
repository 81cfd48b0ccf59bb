"""A run's streams: items appended under a key, read in order, followed live.

Two writers, two guarantees. The workflow's body (``ctx.write_stream``) is
journaled: its items are appended in the commit that journals them
(:func:`apply`, from the worker's commit), so exactly once. A step
(``step_context().write_stream``) appends in a transaction of its own
(:func:`append`) as it goes, so its items are visible at once, and a retried
attempt writes again: at least once, each item carrying its attempt. Either
way the store numbers the items of a stream in commit order (see
:mod:`parkway.store.streams`).

Readers follow without polling: a commit of this process wakes them as it
returns (``Runtime.streams``), another process's through the store's
notifications. A stream ends when the workflow closes it or the run ends; the
run's end wakes its readers too (this process's by ``Results``, others' by
``tx.streams.end_run``, for the streams written so far: a reader elsewhere of a
key never written learns it by its net). A reader also reads again after
:data:`NET` seconds without news, the safety net for a notification lost on
the way (a full socket buffer), never the way it learns.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from parkway import _json, limits
from parkway.core.runtime import Runtime
from parkway.errors import InvalidArgumentError, RunNotFoundError
from parkway.models import StreamItem, _dt
from parkway.store.base import ENDED, Tx
from parkway.store.records import StreamRecord

# The most items one read returns (read_stream's limit at most; a follower's page).
MAX_LIMIT = 1000
# How long a follower waits for news before it reads again all the same (seconds).
NET = 1.0


def check_key(key: Any) -> str:
    """Validate a stream key at the edge."""
    return limits.name(key, "stream key", field="key")


def check_offset(offset: Any) -> int:
    """Validate an offset at the edge: an int, 0 or more."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidArgumentError(
            f"offset must be a whole number, 0 or more, got {offset!r}", field="offset"
        )
    return offset


def check_limit(limit: Any) -> int:
    """Validate a read's limit at the edge: 1 to :data:`MAX_LIMIT`."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgumentError(
            f"limit must be a whole number from 1 to {MAX_LIMIT}, got {limit!r}", field="limit"
        )
    return limit


async def apply(tx: Tx, run_id: str, ops: Sequence[tuple[str, bytes | None]], now: float) -> None:
    """The workflow body's writes and closes, in the order it made them (``None``:
    a close), within the commit that journals them.

    Consecutive items of one key go in one append. An append refused (the stream
    closed) is dropped rather than failing the commit: the machine refuses the
    body's writes after its own close before they get here.
    """
    batch: list[tuple[bytes, int | None]] = []
    key_of_batch: str | None = None
    for key, data in [*ops, ("", None)]:
        if batch and (key != key_of_batch or data is None):
            assert key_of_batch is not None
            await tx.streams.append(run_id, key_of_batch, batch, now)
            batch = []
        if data is None:
            if key:
                await tx.streams.close(run_id, key)
        else:
            key_of_batch = key
            batch.append((data, None))


async def append(
    rt: Runtime, run_id: str, writes: Sequence[tuple[str, bytes]], attempt: int
) -> None:
    """Append a step's items (``(key, data)`` in order) in one transaction, and wake
    this process's readers of the run once it commits.

    Raises:
        InvalidArgumentError: A stream written to is closed (nothing is written).
    """
    now = rt.now()
    async with rt.store.transaction() as tx:
        start = 0
        while start < len(writes):
            key = writes[start][0]
            end = start
            while end < len(writes) and writes[end][0] == key:
                end += 1
            items = [(data, attempt) for _, data in writes[start:end]]
            if await tx.streams.append(run_id, key, items, now) is None:
                raise closed_error(run_id, key)
            start = end
    rt.streams.notify(run_id)


def closed_error(run_id: str, key: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"stream {key!r} of run {run_id!r} is closed: nothing more can be written to it",
        field="key",
    )


async def read(
    rt: Runtime, run_id: str, key: str, offset: int, limit: int
) -> tuple[list[StreamItem], bool]:
    """Up to ``limit`` items from ``offset`` on, and whether the stream has ended
    (closed, or its run ended: a retried run's streams go on) with no item past them.

    Raises:
        RunNotFoundError: No run has that id.
    """
    async with rt.store.transaction(readonly=True) as tx:
        records, closed = await tx.streams.read(run_id, key, offset, limit)
        if not records and not closed:
            run = await tx.runs.get(run_id)
            if run is None:
                raise RunNotFoundError(run_id)
            if run.status in ENDED:
                # The items its end committed with are read after seeing the end
                # (a read-only transaction may see each statement's latest commit).
                records, _ = await tx.streams.read(run_id, key, offset, limit)
                closed = True
    return [item_of(r) for r in records], closed and len(records) < limit


def item_of(record: StreamRecord) -> StreamItem:
    return StreamItem(
        record.offset, _json.loads(record.value), record.attempt, _dt(record.written_at)
    )


async def follow(rt: Runtime, run_id: str, key: str, offset: int) -> AsyncIterator[StreamItem]:
    """The stream's items from ``offset`` on, as they are committed, until it ends.

    Raises:
        RunNotFoundError: No run has that id.
    """
    rt.streams.watch(rt.store)
    changed = rt.streams.register(run_id)
    try:
        while True:
            # Cleared before the read: a commit after it sets it again, and is read.
            changed.clear()
            items, ended = await read(rt, run_id, key, offset, MAX_LIMIT)
            for item in items:
                yield item
            offset += len(items)
            if ended:
                return
            if items:
                continue
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), NET)
    finally:
        rt.streams.unregister(run_id, changed)
