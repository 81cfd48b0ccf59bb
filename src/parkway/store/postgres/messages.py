"""A PostgreSQL transaction's correlated messages (``tx.messages``): the waits for
them, the buffered ones, the ids already seen, and a correlate's delivery in one
statement with its commit (``deliver``).
"""

from __future__ import annotations

import builtins
from typing import Any

from parkway.ids import new_mark
from parkway.store.postgres.runs import deliver_leased
from parkway.store.postgres.statements import Q, lock_key, subject_lock
from parkway.store.postgres.transport import Part
from parkway.store.records import MessageDelivery, MessageRecord, SubscriptionRecord


class PostgresMessages(Part):
    """Messages: their waits, their buffer and the ids already seen."""

    async def wait(self, name: str, key: str) -> SubscriptionRecord | None:
        t = self._t
        if t._ro:
            row = await t._one(Q["message_wait"], (name, key))
        else:
            # Message-started runs live in domain "default" with subject = key:
            # the same lock as runs.active's for them, so the two never deadlock.
            lock = subject_lock("default", key)
            row = await t._one(Q["message_wait_locked"], (name, key), lock=lock)
        return SubscriptionRecord(*row) if row else None

    async def take_wait(self, name: str, key: str, now: float) -> SubscriptionRecord | None:
        # One statement after the key's lock (see wait): the wait and its removal.
        lock = subject_lock("default", key)
        row = await self._t._one(Q["take_message_wait"], (name, key, now), lock=lock)
        return SubscriptionRecord(*row) if row else None

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
        # One statement after the locks (see id_seen and wait), and the lease of the
        # run it delivers to after it: all queued, so that with the COMMIT they are
        # one round trip; a lost reply is settled by the commit mark.
        t = self._t
        delivery = MessageDelivery()
        token, unannounce = t._announce_maybe(now)
        params: dict[str, Any] = dict(
            mid=message_id,
            fresh=fresh_after,
            name=name,
            key=key,
            now=now,
            body=body,
            mark=new_mark(),
            token=token,
        )

        def found(result: str | None) -> None:
            delivery.known = True
            if result == "duplicate":
                delivery.outcome = "duplicate"
            elif result and result.startswith("delivered "):
                delivery.outcome, delivery.run_id = "delivered", result[len("delivered ") :]
                t._task_runs.add(delivery.run_id)
                if delivery.lease is not None:
                    delivery.lease.run_id = delivery.run_id
            if delivery.outcome != "delivered":
                unannounce()  # nothing added: nothing announced
                delivery.lease = None

        if message_id is not None:
            await t._write(Q["xact_lock"], (lock_key("message-id", message_id),))
        delivery.lease = await deliver_leased(
            t,
            Q["deliver_message"],
            params,
            found,
            lock=subject_lock("default", key),
            owner=owner,
            now=now,
            wall_now=wall_now,
            lease_until=lease_until,
        )
        return delivery

    async def add(self, message: MessageRecord) -> int:
        m = message
        row = await self._t._one(
            Q["add_message"],
            (
                m.name,
                m.key,
                m.payload,
                m.message_id,
                m.status,
                m.reason,
                m.received_at,
                m.expires_at,
            ),
        )
        assert row is not None
        return int(row[0])

    async def oldest(self, name: str, key: str, now: float) -> MessageRecord | None:
        t = self._t
        if t._ro:
            row = await t._one(Q["oldest_message"], (name, key, now))
        else:
            lock = subject_lock("default", key)
            row = await t._one(Q["oldest_message_locked"], (name, key, now), lock=lock)
        return MessageRecord(*row) if row else None

    async def get(self, message_id: int) -> MessageRecord | None:
        t = self._t
        row = await t._one(Q["get_message" if t._ro else "get_message_locked"], (message_id,))
        return MessageRecord(*row) if row else None

    async def list(self, status: str | None) -> builtins.list[MessageRecord]:
        t = self._t
        if status is None:
            rows = await t._all(Q["list_messages"])
        else:
            rows = await t._all(Q["list_messages_by_status"], (status,))
        return [MessageRecord(*row) for row in rows]

    async def delete(self, message_id: int) -> None:
        await self._t._write(Q["delete_message"], (message_id,))

    async def update(
        self, message_id: int, status: str, reason: str | None, expires_at: float
    ) -> None:
        await self._t._write(Q["update_message"], (status, reason, expires_at, message_id))

    async def expire(self, now: float, reason: str) -> builtins.list[MessageRecord]:
        rows = await self._t._all(Q["expire_messages"], (reason, now))
        return sorted((MessageRecord(*row) for row in rows), key=lambda m: m.id)

    async def id_seen(self, message_id: str) -> float | None:
        t = self._t
        lock = None if t._ro else lock_key("message-id", message_id)
        row = await t._one(Q["message_id_seen"], (message_id,), lock=lock)
        return float(row[0]) if row else None

    async def remember_id(self, message_id: str, at: float) -> None:
        await self._t._write(Q["remember_message_id"], (message_id, at))

    async def prune_ids(self, before: float) -> None:
        await self._t._write(Q["prune_message_ids"], (before,))
