"""A transaction's subscriptions (``tx.subscriptions``): parked runs' waits for
events and messages."""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Protocol

from parkway.store.records import (
    SubscriptionRecord,
)


@dataclass(frozen=True, slots=True)
class WaitKey:
    """The index key ``Subscriptions.find`` looks waits up by."""

    domain: str
    name: str
    shape: str
    digest: str
    subject: str | None
    kind: str


class Subscriptions(Protocol):
    """Subscriptions inside one transaction."""

    async def add(self, sub: SubscriptionRecord) -> None: ...

    async def shapes(self, domain: str, name: str) -> list[str]: ...

    async def find(self, key: WaitKey) -> builtins.list[SubscriptionRecord]:
        """Waits indexed under exactly this key, on ``subject`` or on ``"*"``."""
        ...

    async def list(
        self, *, run_id: str | None = None, name: str | None = None
    ) -> list[SubscriptionRecord]: ...

    async def delete(self, run_id: str, pos: int) -> None: ...

    async def delete_run(self, run_id: str) -> None: ...

    async def sweep(self, now: float) -> int:
        """Delete subscriptions past their TTL (and shapes no wait uses); return how many."""
        ...
