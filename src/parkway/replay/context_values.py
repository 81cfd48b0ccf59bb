"""The ``ctx``'s run values, streams, updates, patches and history."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from parkway import _json, limits
from parkway.errors import InvalidArgumentError, shown
from parkway.replay.context_base import ContextBase
from parkway.replay.updates import check_handler
from parkway.schedules import tick_of


class RunValues(ContextBase):
    """What a run shows its callers (values, streams, update answers), how its code
    changes in place (patches), and how long its journal is."""

    @property
    def scheduled_at(self) -> datetime | None:
        """The tick of the schedule that started this run (an aware UTC ``datetime``),
        or ``None`` for a run no schedule started. Read from the run's id
        (``sched:<schedule id>:<tick>``), so the same on every replay."""
        return tick_of(self.run_id)

    @property
    def history_length(self) -> int:
        """How many journal entries this run's generation has at this point of its
        code: the same on every replay, so code may branch on it."""
        return self._sides.reached

    @property
    def continue_as_new_suggested(self) -> bool:
        """Whether the journal has grown past the engine's ``history_threshold``
        (10,000 entries by default): a long-lived run (an entity receiving an input
        a day, a counter) should then ``ctx.continue_as_new(state)`` at its next
        quiet point, so that a replay (after a restart, on another worker) stays
        cheap. Deterministic, like :attr:`history_length`."""
        return self._sides.reached >= self._sides.history_threshold

    def set_value(self, key: str, value: Any) -> None:
        """Publish a JSON ``value`` under ``key`` for callers (a payment link, a
        progress figure): ``await handle.value(key)`` reads it, ``RunInfo.values``
        holds them all. It is visible once the transaction that journals it
        commits; a later set replaces it.

        Raises:
            InvalidArgumentError: ``key`` is not a valid name.
            SerializationError: ``value`` is not JSON-serialisable (nothing is set).
        """
        key = limits.name(key, "value key", field="key")
        data = _json.dumps(value, f"value {shown(key)}")
        self._sides.set_value(key, data)

    async def write_stream(self, key: str, value: Any) -> None:
        """Append a JSON ``value`` to the run's stream ``key`` (a model's answer as it
        comes, a long job's progress), for readers of ``handle.stream(key)`` or
        ``GET /runs/{id}/streams/{key}``.

        Journaled: the item is appended in the transaction that journals it, so
        exactly once, even if the worker dies and the run is replayed; readers see
        it once that transaction commits (at the run's next wait or step, or its
        end). Its ``attempt`` is ``None``. To make items visible at once from a
        long call, write them from a step: ``parkway.step_context().write_stream``.

        Raises:
            InvalidArgumentError: ``key`` is not a valid name, or the stream was
                closed.
            SerializationError: ``value`` is not JSON-serialisable (nothing is written).
        """
        limits.name(key, "stream key", field="key")
        data = _json.dumps(value, f"stream {key!r} item")
        self._sides.write_stream(key, data)

    async def close_stream(self, key: str) -> None:
        """End the run's stream ``key``: its readers stop after its last item, and
        nothing more can be written to it. Closing a closed stream does nothing; a
        run that ends closes all of its streams.

        Raises:
            InvalidArgumentError: ``key`` is not a valid name.
        """
        limits.name(key, "stream key", field="key")
        self._sides.close_stream(key)

    def on_update(
        self,
        name: str,
        handler: Callable[..., Any],
        *,
        validate: Callable[[Any], Any] | None = None,
    ) -> None:
        """Handle synchronous updates called ``name`` (``engine.update(run_id, name,
        payload)``) with ``handler(payload)``, sync or async (it may await ctx
        operations); its return value is the caller's answer.

        Register it in the workflow's own code, before the wait where updates
        should be taken: updates are handled whenever the run is parked (at any
        wait) or reaches its next wait. ``validate(payload)`` runs first, against
        the run's state at that moment; if it raises, the caller gets
        ``UpdateRejectedError`` with its message and nothing is journaled.

        Raises:
            InvalidArgumentError: ``name`` is not a name, or ``handler`` (or
                ``validate``) is not callable.
        """
        name = check_handler(name, handler, validate)
        self._sides.on_update(name, handler, validate)

    def patched(self, change_id: str) -> bool:
        """Whether this run takes the new branch of a change made to deployed code.

        ``True`` when the run executes this point for the first time (the choice
        is journaled, so it stays ``True`` on replay); ``False`` when it replays a
        journal that was written past this point without the marker (a run that
        was already past the change when it was deployed). It lets deployed code
        change in place, without a new ``version=``::

            if ctx.patched("fraud-check"):
                await ctx.step(check_fraud, order)
            await ctx.step(charge, order)

        Remove the old branch once no run that predates the change is left, and
        keep ``ctx.deprecate_patch("fraud-check")`` at that point until then.

        Raises:
            InvalidArgumentError: ``change_id`` is not a non-empty string.
        """
        _check_change_id(change_id)
        return self._sides.patched(change_id)

    def deprecate_patch(self, change_id: str) -> None:
        """Mark where patch ``change_id`` was, once only its new branch is left: runs
        that journaled the marker there still replay (it is consumed), new runs
        journal nothing."""
        _check_change_id(change_id)
        self._sides.patched(change_id, deprecated=True)


def _check_change_id(change_id: Any) -> None:
    if not isinstance(change_id, str) or not change_id.strip():
        raise InvalidArgumentError(
            f"a patch's change id must be a non-empty string, got {shown(change_id)}",
            field="change_id",
        )
