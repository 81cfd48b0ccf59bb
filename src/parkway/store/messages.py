"""A transaction's messages (``tx.messages``): buffered and dead-lettered messages,
the waits they go to, and the message ids seen."""

from __future__ import annotations

import builtins
from typing import Protocol

from parkway.store.records import (
    MessageDelivery,
    MessageRecord,
    SubscriptionRecord,
)


class Messages(Protocol):
    """Messages inside one transaction."""

    async def wait(self, name: str, key: str) -> SubscriptionRecord | None:
        """The one live wait for message ``(name, key)``, if any."""
        ...

    async def take_wait(self, name: str, key: str, now: float) -> SubscriptionRecord | None:
        """Remove and return the wait for message ``(name, key)``, unless there is none
        or its deadline has passed at ``now`` (then it stays: its timeout wins)."""
        ...

    async def add(self, message: MessageRecord) -> int:
        """Buffer a message (its ``id`` is ignored); return the new id."""
        ...

    async def oldest(self, name: str, key: str, now: float) -> MessageRecord | None: ...

    async def get(self, message_id: int) -> MessageRecord | None: ...

    async def list(self, status: str | None) -> builtins.list[MessageRecord]: ...

    async def delete(self, message_id: int) -> None: ...

    async def update(
        self, message_id: int, status: str, reason: str | None, expires_at: float
    ) -> None: ...

    async def expire(self, now: float, reason: str) -> builtins.list[MessageRecord]:
        """Turn buffered messages past their TTL into dead letters; return them."""
        ...

    async def id_seen(self, message_id: str) -> float | None: ...

    async def remember_id(self, message_id: str, at: float) -> None: ...

    async def prune_ids(self, before: float) -> None: ...


class FusedMessages(Messages, Protocol):
    """The messages of a store with the ``"fused"`` capability
    (see :class:`parkway.store.base.FusedTx`)."""

    async def deliver(
        self,
        name: str,
        key: str,
        body: bytes,
        now: float,
        *,
        message_id: str | None,
        fresh_after: float,
        owner: str | None = None,
        wall_now: float = 0.0,
        lease_until: float = 0.0,
    ) -> MessageDelivery:
        """A message straight to the run waiting for it, if one does.

        Unless ``message_id`` was seen at or after ``fresh_after`` (then:
        ``"duplicate"``, nothing written), take the wait as
        ``tx.messages.take_wait`` would, give its run a :data:`MESSAGE_TASK`
        task carrying ``body`` due at ``now``, and remember ``message_id`` as
        seen at ``now``. With ``owner``, also lease the run to it as
        ``tx.runs.lease`` would. With no wait, nothing is written: the caller
        goes on to start a run or buffer the message, in a transaction of its
        own. What it did may be known only once the transaction has committed,
        so that a store can send all of it with the ``COMMIT``.
        """
        ...
