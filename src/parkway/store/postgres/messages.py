"""A PostgreSQL transaction's operations on correlated messages: the waits for them,
the buffered ones, the ids already seen, and a correlate's delivery in one
statement with its commit (deliver_message).
"""

from __future__ import annotations

from typing import Any

from parkway.ids import new_mark
from parkway.store.base import MessageDelivery, MessageRecord, SubscriptionRecord
from parkway.store.postgres.runs import RunOps
from parkway.store.postgres.statements import Q, lock_key, subject_lock


class MessageOps(RunOps):
    """Messages: their waits, their buffer and the ids already seen."""

    async def message_wait(self, name: str, key: str) -> SubscriptionRecord | None:
        if self._ro:
            row = await self._one(Q["message_wait"], (name, key))
        else:
            # Message-started runs live in domain "default" with subject = key:
            # the same lock as active_run's for them, so the two never deadlock.
            lock = subject_lock("default", key)
            row = await self._one(Q["message_wait_locked"], (name, key), lock=lock)
        return SubscriptionRecord(*row) if row else None

    async def take_message_wait(self, name: str, key: str, now: float) -> SubscriptionRecord | None:
        # One statement after the key's lock (see message_wait): the wait and its removal.
        lock = subject_lock("default", key)
        row = await self._one(Q["take_message_wait"], (name, key, now), lock=lock)
        return SubscriptionRecord(*row) if row else None

    async def deliver_message(
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
        # One statement after the locks (see message_id_seen and message_wait), and
        # the lease of the run it delivers to after it: all queued, so that with the
        # COMMIT they are one round trip; a lost reply is settled by the commit mark.
        delivery = MessageDelivery()
        token, unannounce = self._announce_maybe(now)
        params: dict[str, Any] = dict(
            mid=message_id, fresh=fresh_after, name=name, key=key, now=now, body=body,
            mark=new_mark(), token=token,
        )  # fmt: skip

        def found(result: str | None) -> None:
            delivery.known = True
            if result == "duplicate":
                delivery.outcome = "duplicate"
            elif result and result.startswith("delivered "):
                delivery.outcome, delivery.run_id = "delivered", result[len("delivered ") :]
                self._task_runs.add(delivery.run_id)
                if delivery.lease is not None:
                    delivery.lease.run_id = delivery.run_id
            if delivery.outcome != "delivered":
                unannounce()  # nothing added: nothing announced
                delivery.lease = None

        if message_id is not None:
            await self._write(Q["xact_lock"], (lock_key("message-id", message_id),))
        delivery.lease = await self._deliver(
            Q["deliver_message"], params, found, lock=subject_lock("default", key),
            owner=owner, now=now, wall_now=wall_now, lease_until=lease_until,
        )  # fmt: skip
        return delivery

    async def add_message(self, message: MessageRecord) -> int:
        m = message
        row = await self._one(
            Q["add_message"],
            (m.name, m.key, m.payload, m.message_id, m.status, m.reason, m.received_at,
             m.expires_at),
        )  # fmt: skip
        assert row is not None
        return int(row[0])

    async def oldest_message(self, name: str, key: str, now: float) -> MessageRecord | None:
        if self._ro:
            row = await self._one(Q["oldest_message"], (name, key, now))
        else:
            lock = subject_lock("default", key)
            row = await self._one(Q["oldest_message_locked"], (name, key, now), lock=lock)
        return MessageRecord(*row) if row else None

    async def get_message(self, message_id: int) -> MessageRecord | None:
        query = Q["get_message" if self._ro else "get_message_locked"]
        row = await self._one(query, (message_id,))
        return MessageRecord(*row) if row else None

    async def list_messages(self, status: str | None) -> list[MessageRecord]:
        if status is None:
            rows = await self._all(Q["list_messages"])
        else:
            rows = await self._all(Q["list_messages_by_status"], (status,))
        return [MessageRecord(*row) for row in rows]

    async def delete_message(self, message_id: int) -> None:
        await self._write(Q["delete_message"], (message_id,))

    async def update_message(
        self, message_id: int, status: str, reason: str | None, expires_at: float
    ) -> None:
        await self._write(Q["update_message"], (status, reason, expires_at, message_id))

    async def expire_messages(self, now: float, reason: str) -> list[MessageRecord]:
        rows = await self._all(Q["expire_messages"], (reason, now))
        return sorted((MessageRecord(*row) for row in rows), key=lambda m: m.id)

    async def message_id_seen(self, message_id: str) -> float | None:
        lock = None if self._ro else lock_key("message-id", message_id)
        row = await self._one(Q["message_id_seen"], (message_id,), lock=lock)
        return float(row[0]) if row else None

    async def remember_message_id(self, message_id: str, at: float) -> None:
        await self._write(Q["remember_message_id"], (message_id, at))

    async def prune_message_ids(self, before: float) -> None:
        await self._write(Q["prune_message_ids"], (before,))
