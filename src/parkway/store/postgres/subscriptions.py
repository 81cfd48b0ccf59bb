"""A PostgreSQL transaction's subscriptions (``tx.subscriptions``): parked runs'
waits for events and messages, handed over from what ``events.record`` read ahead
where it did."""

from __future__ import annotations

import builtins

from parkway.store.postgres.statements import Q, listing
from parkway.store.postgres.transport import Part
from parkway.store.records import SubscriptionRecord
from parkway.store.subscriptions import WaitKey

SUBSCRIPTIONS_ORDER = "ORDER BY created_at, run_id, pos"


class PostgresSubscriptions(Part):
    """The waits of parked runs."""

    async def add(self, sub: SubscriptionRecord) -> None:
        await self._t._write(
            Q["add_subscription"],
            (
                sub.run_id,
                sub.pos,
                sub.kind,
                sub.domain,
                sub.name,
                sub.subject,
                sub.shape,
                sub.digest,
                sub.match,
                sub.stored_wait,
                sub.expires_at,
                sub.created_at,
                sub.deadline,
            ),
        )

    async def shapes(self, domain: str, name: str) -> builtins.list[str]:
        t = self._t
        if t._shapes is not None:  # read by events.record, in this transaction
            read = t._shapes.pop((domain, name), None)
            if read is not None:
                return read
        rows = await t._all(Q["shapes"], (domain, name, domain, name))
        return t._store._saw_shapes((domain, name), [row[0] for row in rows])

    async def find(self, key: WaitKey) -> builtins.list[SubscriptionRecord]:
        # '*' never names a real subject, so a missing subject matches only wildcards.
        t = self._t
        found = (key.domain, key.name, key.shape, key.digest, key.subject or "*", key.kind)
        if t._found is not None:  # read by events.record, in this transaction
            read = t._found.pop(found, None)
            if read is not None:
                return read
        query = Q["find_subscriptions" if t._ro else "find_subscriptions_locked"]
        return [SubscriptionRecord(*row) for row in await t._all(query, found)]

    async def list(
        self, *, run_id: str | None = None, name: str | None = None
    ) -> builtins.list[SubscriptionRecord]:
        given = (("run_id", run_id), ("name", name))
        columns = tuple(column for column, value in given if value is not None)
        params = [value for _, value in given if value is not None]
        query = listing("list_subscriptions", columns, SUBSCRIPTIONS_ORDER)
        return [SubscriptionRecord(*row) for row in await self._t._all(query, params)]

    async def delete(self, run_id: str, pos: int) -> None:
        t = self._t
        if not t._fuse("delete_subscription", (run_id, pos), run_id):
            await t._write(Q["delete_subscription"], (run_id, pos))

    async def delete_run(self, run_id: str) -> None:
        t = self._t
        if not t._fuse("delete_run_subscriptions", (run_id,), run_id):
            await t._write(Q["delete_run_subscriptions"], (run_id,))

    async def sweep(self, now: float) -> int:
        return (await self._t._exec(Q["sweep_subscriptions"], (now,))).rowcount
