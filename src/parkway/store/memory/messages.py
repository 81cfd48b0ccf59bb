"""The memory store's messages (``tx.messages``): buffered and dead-lettered messages,
the waits they go to, and the message ids seen."""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Coroutine
from typing import Any

from parkway.store import composed
from parkway.store.base import MessageRecord, SubscriptionRecord
from parkway.store.memory.state import _copy, _Part


class MemoryMessages(_Part):
    """Messages by id (a dict's order is theirs), the ids seen with when."""

    async def wait(self, name: str, key: str) -> SubscriptionRecord | None:
        found = self._s.message_waits.get((name, key))
        return self._s.subs.get(found) if found else None

    def take_wait(
        self, name: str, key: str, now: float
    ) -> Coroutine[Any, Any, SubscriptionRecord | None]:
        # (the composed operation's coroutine itself, not one awaiting it)
        return composed.take_message_wait(self._tx, name, key, now)

    async def add(self, message: MessageRecord) -> int:
        message_id = self._s.next_message
        self._s.next_message += 1
        self._s.messages[message_id] = dataclasses.replace(message, id=message_id)
        self._undo.append(lambda: self._s.messages.pop(message_id, None))
        return message_id

    async def oldest(self, name: str, key: str, now: float) -> MessageRecord | None:
        for message in self._s.messages.values():  # insertion order = id order
            if (
                message.name == name
                and message.key == key
                and message.status == "buffered"
                and message.expires_at > now
            ):
                return _copy(message)
        return None

    async def get(self, message_id: int) -> MessageRecord | None:
        message = self._s.messages.get(message_id)
        return _copy(message) if message else None

    async def list(self, status: str | None) -> builtins.list[MessageRecord]:
        return [_copy(m) for m in self._s.messages.values() if status is None or m.status == status]

    async def delete(self, message_id: int) -> None:
        old = self._s.messages.pop(message_id, None)
        if old is not None:
            self._undo.append(lambda: self._restore(old))

    def _restore(self, message: MessageRecord) -> None:
        self._s.messages[message.id] = message
        self._s.messages = dict(sorted(self._s.messages.items()))

    async def update(
        self, message_id: int, status: str, reason: str | None, expires_at: float
    ) -> None:
        old = self._s.messages.get(message_id)
        if old is None:
            return
        self._s.messages[message_id] = dataclasses.replace(
            old, status=status, reason=reason, expires_at=expires_at
        )
        self._undo.append(lambda: self._s.messages.__setitem__(message_id, old))

    async def expire(self, now: float, reason: str) -> builtins.list[MessageRecord]:
        out = []
        for message in builtins.list(self._s.messages.values()):
            if message.status == "buffered" and message.expires_at <= now:
                await self.update(message.id, "expired", reason, message.expires_at)
                out.append(self._s.messages[message.id])
        return out

    async def id_seen(self, message_id: str) -> float | None:
        return self._s.message_ids.get(message_id)

    async def remember_id(self, message_id: str, at: float) -> None:
        old = self._s.message_ids.get(message_id)
        self._s.message_ids[message_id] = at

        def undo() -> None:
            if old is None:
                self._s.message_ids.pop(message_id, None)
            else:
                self._s.message_ids[message_id] = old

        self._undo.append(undo)

    async def prune_ids(self, before: float) -> None:
        for message_id, at in builtins.list(self._s.message_ids.items()):
            if at < before:
                del self._s.message_ids[message_id]
