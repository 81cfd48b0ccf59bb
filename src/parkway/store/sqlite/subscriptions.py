"""A SQLite transaction's subscriptions (``tx.subscriptions``): parked runs' waits for
events and messages."""

from __future__ import annotations

import builtins

from parkway.store.base import SubscriptionRecord
from parkway.store.sqlite.statements import FIND_SUBSCRIPTIONS, Q, listing
from parkway.store.sqlite.transport import Part
from parkway.store.subscriptions import WaitKey


class SQLiteSubscriptions(Part):
    """Subscriptions' statements on the transaction's connection."""

    async def add(self, sub: SubscriptionRecord) -> None:
        self._c.execute(
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
        self._c.execute(Q["add_shape"], (sub.domain, sub.name, sub.shape))

    async def shapes(self, domain: str, name: str) -> builtins.list[str]:
        return [row[0] for row in self._c.execute(Q["shapes"], (domain, name))]

    async def find(self, key: WaitKey) -> builtins.list[SubscriptionRecord]:
        if key.kind not in FIND_SUBSCRIPTIONS:
            raise ValueError(f"unknown subscription kind {key.kind!r}")
        # The kind goes in as a literal (see the query); '*' never names a real
        # subject, so a missing subject matches only wildcards.
        rows = self._c.execute(
            FIND_SUBSCRIPTIONS[key.kind],
            (key.domain, key.name, key.shape, key.digest, key.subject or "*"),
        )
        return [SubscriptionRecord(*row) for row in rows]

    async def list(
        self, *, run_id: str | None = None, name: str | None = None
    ) -> builtins.list[SubscriptionRecord]:
        given = (("run_id", run_id), ("name", name))
        columns = tuple(column for column, value in given if value is not None)
        params = [value for _, value in given if value is not None]
        rows = self._c.execute(
            listing("list_subscriptions", columns, "ORDER BY created_at"), params
        )
        return [SubscriptionRecord(*row) for row in rows]

    async def delete(self, run_id: str, pos: int) -> None:
        self._c.execute(Q["delete_subscription"], (run_id, pos))

    async def delete_run(self, run_id: str) -> None:
        self._c.execute(Q["delete_run_subscriptions"], (run_id,))

    async def sweep(self, now: float) -> int:
        count = self._c.execute(Q["sweep_subscriptions"], (now,)).rowcount
        self._c.execute(Q["sweep_shapes"])
        return count
