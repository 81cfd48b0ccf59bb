"""``RunHandle``: a client's reference to one run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol

from parkway.durations import Duration
from parkway.models import RunInfo, StreamItem


class RunClient(Protocol):
    """What a handle asks of the engine it came from."""

    async def result(self, run_id: str, timeout: Duration | None = None) -> Any: ...
    async def get_run(self, run_id: str) -> RunInfo: ...
    async def signal(self, run_id: str, name: str, payload: Any = None) -> None: ...
    async def cancel(self, run_id: str) -> None: ...
    async def pause(self, run_id: str) -> RunInfo: ...
    async def resume(self, run_id: str) -> RunInfo: ...
    async def retry(self, run_id: str) -> RunInfo: ...
    async def update(
        self,
        run_id: str,
        name: str,
        payload: Any = None,
        *,
        id: str | None = None,
        timeout: Duration = 30,
    ) -> Any: ...
    async def value(self, run_id: str, key: str, *, timeout: Duration = 0) -> Any: ...
    async def read_stream(
        self, run_id: str, key: str, *, offset: int = 0, limit: int = 100
    ) -> list[StreamItem]: ...
    def stream(self, run_id: str, key: str, *, offset: int = 0) -> AsyncIterator[StreamItem]: ...


class RunHandle:
    """A reference to a run by id; cheap to create, valid across processes.

    Attributes:
        id: The run's id.
    """

    def __init__(self, engine: RunClient, run_id: str) -> None:
        self._engine = engine
        self.id = run_id

    async def result(self, timeout: Duration | None = None) -> Any:
        """Wait for the run to finish and return its output.

        Args:
            timeout: Wall-clock time to wait at most (``None``: no limit): seconds,
                a ``timedelta`` or a string such as ``"10s"``, at most 100 years.

        Raises:
            InvalidDurationError: ``timeout`` is not such a duration (``nan``,
                negative, longer than 100 years, not a number).
            WorkflowFailedError: The run failed (``.type`` and ``.error_message`` say how).
            RunCancelledError: The run was cancelled.
            NonDeterminismError: The run is held: its code no longer replays its journal.
            ResultTimeoutError: ``timeout`` passed first (a ``TimeoutError``).
        """
        return await self._engine.result(self.id, timeout)

    async def info(self) -> RunInfo:
        """The run's current :class:`RunInfo`."""
        return await self._engine.get_run(self.id)

    async def signal(self, name: str, payload: Any = None) -> None:
        """Send the signal ``name`` to this run (buffered until the run waits for it)."""
        await self._engine.signal(self.id, name, payload)

    async def cancel(self) -> None:
        """Cancel this run (and its active children)."""
        await self._engine.cancel(self.id)

    async def pause(self) -> RunInfo:
        """Pause the run (see ``Engine.pause``)."""
        return await self._engine.pause(self.id)

    async def resume(self) -> RunInfo:
        """Resume the paused run (see ``Engine.resume``)."""
        return await self._engine.resume(self.id)

    async def retry(self) -> RunInfo:
        """Retry the failed run from its last committed step, or the held run where it was
        (see ``Engine.retry``)."""
        return await self._engine.retry(self.id)

    async def update(
        self, name: str, payload: Any = None, *, id: str | None = None, timeout: Duration = 30
    ) -> Any:
        """Send this run a synchronous update; its handler's answer (see ``Engine.update``)."""
        return await self._engine.update(self.id, name, payload, id=id, timeout=timeout)

    async def value(self, key: str, *, timeout: Duration = 0) -> Any:
        """This run's latest value ``key``, or ``None`` if it has not set it within
        ``timeout`` wall-clock seconds (0: do not wait)."""
        return await self._engine.value(self.id, key, timeout=timeout)

    def stream(self, key: str, *, offset: int = 0) -> AsyncIterator[StreamItem]:
        """Follow the run's stream ``key``: ``async for item in handle.stream(key)``
        yields its :class:`~parkway.StreamItem` in order from ``offset`` on, as they
        are committed (woken by the commit, not by polling), and stops when the
        stream is closed or the run ends.

        Raises:
            RunNotFoundError: No run has that id (on the first iteration).
            InvalidArgumentError: ``key`` or ``offset`` is malformed.
        """
        return self._engine.stream(self.id, key, offset=offset)

    async def read_stream(self, key: str, *, offset: int = 0, limit: int = 100) -> list[StreamItem]:
        """The stream's items from ``offset`` on, at most ``limit`` (1 to 1000), as
        committed now: no waiting. An empty list past the end.

        Raises:
            RunNotFoundError: No run has that id.
            InvalidArgumentError: ``key``, ``offset`` or ``limit`` is malformed.
        """
        return await self._engine.read_stream(self.id, key, offset=offset, limit=limit)

    def __repr__(self) -> str:
        return f"RunHandle({self.id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunHandle) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)
