"""A SQLite transaction's messages (``tx.messages``): buffered and dead-lettered
messages, the waits they go to, and the message ids seen."""

from __future__ import annotations

import builtins
from collections.abc import Coroutine
from typing import Any

from parkway.store import composed
from parkway.store.base import MessageRecord, SubscriptionRecord
from parkway.store.sqlite.statements import Q
from parkway.store.sqlite.transport import Part


class SQLiteMessages(Part):
    """Messages' statements on the transaction's connection."""

    async def wait(self, name: str, key: str) -> SubscriptionRecord | None:
        row = self._c.execute(Q["message_wait"], (name, key)).fetchone()
        return SubscriptionRecord(*row) if row else None

    def take_wait(
        self, name: str, key: str, now: float
    ) -> Coroutine[Any, Any, SubscriptionRecord | None]:
        # (the composed operation's coroutine itself, not one awaiting it)
        return composed.take_message_wait(self._tx, name, key, now)

    async def add(self, message: MessageRecord) -> int:
        m = message
        cursor = self._c.execute(
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
        return int(cursor.lastrowid or 0)

    async def oldest(self, name: str, key: str, now: float) -> MessageRecord | None:
        row = self._c.execute(Q["oldest_message"], (name, key, now)).fetchone()
        return MessageRecord(*row) if row else None

    async def get(self, message_id: int) -> MessageRecord | None:
        if not _is_int64(message_id):  # sqlite3 cannot bind it: no message has it
            return None
        row = self._c.execute(Q["get_message"], (message_id,)).fetchone()
        return MessageRecord(*row) if row else None

    async def list(self, status: str | None) -> builtins.list[MessageRecord]:
        if status is None:
            rows = self._c.execute(Q["list_messages"])
        else:
            rows = self._c.execute(Q["list_messages_by_status"], (status,))
        return [MessageRecord(*row) for row in rows]

    async def delete(self, message_id: int) -> None:
        if _is_int64(message_id):
            self._c.execute(Q["delete_message"], (message_id,))

    async def update(
        self, message_id: int, status: str, reason: str | None, expires_at: float
    ) -> None:
        if _is_int64(message_id):
            self._c.execute(Q["update_message"], (status, reason, expires_at, message_id))

    async def expire(self, now: float, reason: str) -> builtins.list[MessageRecord]:
        rows = self._c.execute(Q["expire_messages"], (reason, now)).fetchall()
        return [MessageRecord(*row) for row in rows]

    async def id_seen(self, message_id: str) -> float | None:
        row = self._c.execute(Q["message_id_seen"], (message_id,)).fetchone()
        return float(row[0]) if row else None

    async def remember_id(self, message_id: str, at: float) -> None:
        self._c.execute(Q["remember_message_id"], (message_id, at))

    async def prune_ids(self, before: float) -> None:
        self._c.execute(Q["prune_message_ids"], (before,))


def _is_int64(value: int) -> bool:
    """Whether SQLite can hold ``value`` as an INTEGER (message ids are such integers)."""
    return -(2**63) <= value < 2**63
