"""What the ``ctx`` a workflow gets asks of the replay machine, and what its parts share."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from parkway.events import Event
from parkway.models import Retry


class SideValues(Protocol):
    """What ``ctx.now()``, ``ctx.uuid()`` and ``ctx.random()`` need from the executor."""

    def side(self, name: str, produce: Callable[[], Any]) -> Any:
        """The journaled value at the next position, produced on first execution."""
        ...

    def clock_now(self) -> float:
        """Engine time."""
        ...

    def patched(self, change_id: str, *, deprecated: bool = False) -> bool:
        """Whether the code after patch ``change_id`` runs (see ``ctx.patched``)."""
        ...

    def set_value(self, key: str, data: bytes) -> None:
        """Journal and set the run's value ``key`` (see ``ctx.set_value``)."""
        ...

    def write_stream(self, key: str, data: bytes) -> None:
        """Journal and append an item to the run's stream ``key``."""
        ...

    def close_stream(self, key: str) -> None:
        """Journal the close of the run's stream ``key``."""
        ...

    def on_update(
        self, name: str, handler: Callable[..., Any], validate: Callable[[Any], Any] | None
    ) -> None:
        """Register the run's handler of updates ``name`` (see ``ctx.on_update``)."""
        ...

    def open_callback(self, timeout: float | None) -> dict[str, Any]:
        """Journal a new callback (see ``ctx.callback``): its token, signal, deadline."""
        ...

    def open_task(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Journal a new human task (see ``ctx.human_task``): its id, signal, deadline."""
        ...

    def register_compensation(
        self, step: str, fn: Callable[..., Any], arg: Any, retry: Retry | None
    ) -> None:
        """Step ``step`` succeeded with ``arg``: ``fn(arg)`` is its undo from now on."""
        ...

    async def run_compensations(self) -> tuple[list[Any], list[str]]:
        """Run the compensations not run yet, newest first: their results, and the
        names of the steps whose compensation failed."""
        ...

    @property
    def reached(self) -> int:
        """The journal's operations the code has reached so far (this generation)."""
        ...

    @property
    def history_threshold(self) -> int:
        """The length past which the run had better continue as new."""
        ...


class ContextBase:
    """What every part of the ``ctx`` holds: the run it is the context of, and the
    machine's side of it (:class:`SideValues`)."""

    run_id: str
    workflow: str
    version: str
    domain: str
    subject: str | None
    trigger: Event | None
    _sides: SideValues
    _public_url: str | None
