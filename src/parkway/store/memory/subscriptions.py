"""The memory store's subscriptions (``tx.subscriptions``): parked runs' waits, indexed
as a publish looks them up."""

from __future__ import annotations

import builtins

from parkway.store.base import SubscriptionRecord
from parkway.store.memory.state import _Part
from parkway.store.subscriptions import WaitKey


class MemorySubscriptions(_Part):
    """Waits by (run, position), with the publish index, the shapes in use and the
    message waits by (name, key)."""

    async def add(self, sub: SubscriptionRecord) -> None:
        key = (sub.run_id, sub.pos)
        if key in self._s.subs:
            await self.delete(*key)
        if sub.kind == "message":
            wait_key = (sub.name, sub.subject)
            if wait_key in self._s.message_waits:
                raise KeyError(f"message wait {wait_key} is taken")
            self._s.message_waits[wait_key] = key
            self._undo.append(lambda: self._s.message_waits.pop(wait_key, None))
        self._s.subs[key] = sub
        index = (sub.domain, sub.name, sub.shape, sub.digest, sub.subject)
        self._s.sub_index.setdefault(index, set()).add(key)
        self._s.run_subs.setdefault(sub.run_id, set()).add(sub.pos)
        shapes = self._s.shapes.setdefault((sub.domain, sub.name), set())
        new_shape = sub.shape not in shapes
        shapes.add(sub.shape)

        def undo() -> None:
            self._s.subs.pop(key, None)
            self._s.sub_index[index].discard(key)
            self._s.run_subs[sub.run_id].discard(sub.pos)
            if new_shape:
                shapes.discard(sub.shape)

        self._undo.append(undo)

    async def shapes(self, domain: str, name: str) -> builtins.list[str]:
        return sorted(self._s.shapes.get((domain, name), ()))

    async def find(self, key: WaitKey) -> builtins.list[SubscriptionRecord]:
        keys: set[tuple[str, int]] = set()
        index = self._s.sub_index
        for candidate in {key.subject or "*", "*"}:
            keys |= index.get((key.domain, key.name, key.shape, key.digest, candidate), set())
        found = [self._s.subs[k] for k in keys if self._s.subs[k].kind == key.kind]
        return sorted(found, key=lambda s: (s.created_at, s.run_id))

    async def list(
        self, *, run_id: str | None = None, name: str | None = None
    ) -> builtins.list[SubscriptionRecord]:
        out = [
            s
            for s in self._s.subs.values()
            if (run_id is None or s.run_id == run_id) and (name is None or s.name == name)
        ]
        return sorted(out, key=lambda s: s.created_at)

    async def delete(self, run_id: str, pos: int) -> None:
        key = (run_id, pos)
        sub = self._s.subs.pop(key, None)
        if sub is None:
            return
        index = (sub.domain, sub.name, sub.shape, sub.digest, sub.subject)
        self._s.sub_index[index].discard(key)
        self._s.run_subs[run_id].discard(pos)
        if sub.kind == "message":
            wait_key = (sub.name, sub.subject)
            self._s.message_waits.pop(wait_key, None)
            self._undo.append(lambda: self._s.message_waits.__setitem__(wait_key, key))

        def undo() -> None:
            self._s.subs[key] = sub
            self._s.sub_index.setdefault(index, set()).add(key)
            self._s.run_subs.setdefault(run_id, set()).add(pos)

        self._undo.append(undo)

    async def delete_run(self, run_id: str) -> None:
        for pos in builtins.list(self._s.run_subs.get(run_id, ())):
            await self.delete(run_id, pos)

    async def sweep(self, now: float) -> int:
        expired = [k for k, s in self._s.subs.items() if s.expires_at < now]
        for key in expired:
            await self.delete(*key)
        used = {(s.domain, s.name, s.shape) for s in self._s.subs.values()}
        for (domain, name), shapes in self._s.shapes.items():
            shapes.intersection_update({sh for d, n, sh in used if d == domain and n == name})
        return len(expired)
