"""``RunHandle``: a client's reference to one run."""

from __future__ import annotations

from typing import Any, Protocol

from parkway.models import RunInfo


class RunClient(Protocol):
    """What a handle asks of the engine it came from."""

    async def result(self, run_id: str, timeout: float | None = None) -> Any: ...
    async def get_run(self, run_id: str) -> RunInfo: ...
    async def signal(self, run_id: str, name: str, payload: Any = None) -> None: ...
    async def cancel(self, run_id: str) -> None: ...


class RunHandle:
    """A reference to a run by id; cheap to create, valid across processes.

    Attributes:
        id: The run's id.
    """

    def __init__(self, engine: RunClient, run_id: str) -> None:
        self._engine = engine
        self.id = run_id

    async def result(self, timeout: float | None = None) -> Any:
        """Wait for the run to finish and return its output.

        Args:
            timeout: Wall-clock seconds to wait at most (``None``: no limit).

        Raises:
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

    def __repr__(self) -> str:
        return f"RunHandle({self.id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunHandle) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)
