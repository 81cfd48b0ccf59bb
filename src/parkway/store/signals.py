"""A transaction's signals: each run's mailbox (``tx.signals``)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Protocol

from parkway.store.records import (
    Sent,
    SignalRecord,
)


class Signals(Protocol):
    """Signals inside one transaction."""

    async def add(self, run_id: str, name: str, payload: bytes | None, at: float) -> None: ...

    async def send(
        self,
        run_id: str,
        name: str,
        payload: bytes | None,
        at: float,
        *,
        task_payload: bytes | None = None,
    ) -> Sent:
        """Buffer a signal for the run, with its task due at ``at`` (carrying
        ``task_payload``: the sender's trace context), unless the run is missing or
        has ended; what it found: the run's status (``None``: no such run), maybe
        known only once the transaction has committed."""
        ...

    async def list(self, run_id: str) -> builtins.list[SignalRecord]: ...

    async def delete(self, ids: Sequence[int]) -> None: ...
