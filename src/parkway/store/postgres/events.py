"""A PostgreSQL transaction's operations on events and the waits on them
(subscriptions): a publish, the usual way (its reads in one round trip, then
its writes) or in one statement with its commit (deliver_event).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from parkway.ids import new_mark
from parkway.matching import payload_digest
from parkway.store.base import EventDelivery, EventRecord, SubscriptionRecord
from parkway.store.postgres.connections import Step
from parkway.store.postgres.runs import RunOps
from parkway.store.postgres.statements import (
    DELIVER_EVENT,
    DELIVER_EVENT_SHAPES,
    Q,
    listing,
    lock_key,
)
from parkway.store.records import CANCEL_PREFIX

SUBSCRIPTIONS_ORDER = "ORDER BY created_at, run_id, pos"


class EventOps(RunOps):
    """Events, and the subscriptions that wait for them."""

    # What record_event read ahead, which shapes() and find_subscriptions() hand
    # over: shapes of waits by (domain, name), and waits by find_subscriptions'
    # arguments. (None until a record_event: most transactions publish nothing.)
    _shapes: dict[tuple[str, str], list[str]] | None = None
    _found: dict[tuple[str, ...], list[SubscriptionRecord]] | None = None

    # -- events ------------------------------------------------------------------------------

    async def record_event(
        self,
        event: EventRecord,
        fresh_after: float,
        *,
        digest: Callable[[str], str | None] | None = None,
    ) -> EventRecord | None:
        # One round trip for what a publish reads: the id's lock and any event with
        # that id, the name's lock, the insert (a no-op if the id is taken), the
        # shapes of the waits on the name, and the waits under each shape the last
        # publish of the name found (shapes rarely change); shapes() and
        # find_subscriptions() then hand them over.
        name = (event.domain, event.name)
        row = (event.id, event.name, event.domain, event.subject, event.payload,
               event.published_at)  # fmt: skip
        steps: list[Step] = [
            (Q["xact_lock"], (lock_key("event-id", event.id),)),
            (Q["get_event"], (event.id,)),
            (Q["xact_lock_shared"], (lock_key("event-name", *name),)),
            (Q["insert_new_event"], row),
            (Q["shapes"], (*name, *name)),
        ]
        ahead: list[tuple[str, str, str, str, str, str]] = []
        if digest is not None:
            for shape in self._store._shapes_seen.get(name, ()):
                digested = digest(shape)
                if digested is not None:
                    key = (*name, shape, digested, event.subject or "*", "event")
                    ahead.append(key)
                    steps.append((Q["find_subscriptions_locked"], key))
        _, found, _, _, shapes, *waits = await self._run(steps)
        if self._shapes is None or self._found is None:
            self._shapes, self._found = {}, {}
        self._shapes[name] = self._store._saw_shapes(name, [r[0] for r in shapes.rows or []])
        for key, result in zip(ahead, waits, strict=True):
            self._found[key] = [SubscriptionRecord(*r) for r in result.rows or []]
        if not found.rows:
            return None
        existing = EventRecord(*found.rows[0])
        if existing.published_at >= fresh_after:
            return existing
        # Past retention: a new event that reuses the id.
        await self._write(Q["delete_event"], (event.id,))
        await self._write(Q["insert_event"], row)
        return None

    async def deliver_event(
        self,
        event: EventRecord,
        payload: Any,
        envelope: bytes,
        *,
        fresh_after: float,
        owner: str | None = None,
        wall_now: float = 0.0,
        lease_until: float = 0.0,
    ) -> EventDelivery:
        # One statement after the shared lock of the event's name (see insert_event),
        # and the lease of the first run it delivers to after it: all queued, so that
        # with the COMMIT they are one round trip (a publish the usual way is two:
        # the reads, then the writes that depend on them); a lost reply is settled
        # by the commit mark. The server applies the match rule; the digests, which
        # only Python computes, are for the shapes this store has seen on the name
        # (see _saw_shapes), and a shape it has not seen makes the statement decline.
        name = (event.domain, event.name)
        known = self._store._shapes_seen.get(name, ())
        digests = ((shape, payload_digest(payload, shape)) for shape in known)
        digested = [(shape, digest) for shape, digest in digests if digest is not None]
        if len(digested) > DELIVER_EVENT_SHAPES:
            return EventDelivery(known=True)  # declined, nothing written
        now = event.published_at
        delivery = EventDelivery()
        token, unannounce = self._announce_maybe(now)
        params: dict[str, Any] = dict(
            domain=event.domain, name=event.name, known=orjson.dumps(known).decode(), id=event.id,
            cancels=CANCEL_PREFIX + event.name,
            subject=event.subject, subject_or_any=event.subject or "*", payload=event.payload,
            now=now, fresh=fresh_after, envelope=envelope, mark=new_mark(),
            token=token,
        )  # fmt: skip
        for i, (shape, digest) in enumerate(digested):
            params[f"shape{i}"], params[f"digest{i}"] = shape, digest

        def found(result: str | None) -> None:
            delivery.known = True
            if result == "duplicate":
                delivery.outcome = "duplicate"
            elif result and result.startswith("published "):
                delivery.outcome = "published"
                delivery.waits = [(str(r), str(w)) for r, w in orjson.loads(result[10:])]
                self._task_runs.update(run_id for run_id, _ in delivery.waits)
                if delivery.lease is not None and delivery.waits:
                    delivery.lease.run_id = delivery.waits[0][0]
            if not delivery.waits:
                unannounce()  # nothing added: nothing announced
                delivery.lease = None

        delivery.lease = await self._deliver(
            DELIVER_EVENT[len(digested)], params, found,
            lock=lock_key("event-name", *name), shared=True,
            owner=owner, now=now, wall_now=wall_now, lease_until=lease_until,
        )  # fmt: skip
        return delivery

    async def get_event(self, event_id: str) -> EventRecord | None:
        lock = None if self._ro else lock_key("event-id", event_id)
        row = await self._one(Q["get_event"], (event_id,), lock=lock)
        return EventRecord(*row) if row else None

    async def insert_event(self, event: EventRecord) -> None:
        await self._write(
            Q["insert_event"],
            (event.id, event.name, event.domain, event.subject, event.payload, event.published_at),
            lock=lock_key("event-name", event.domain, event.name),
            shared=True,
        )

    async def delete_event(self, event_id: str) -> None:
        await self._write(Q["delete_event"], (event_id,))

    async def events_since(self, domain: str, name: str, since: float) -> list[EventRecord]:
        lock = None if self._ro else lock_key("event-name", domain, name)
        rows = await self._all(Q["events_since"], (domain, name, since), lock=lock)
        return [EventRecord(*row) for row in rows]

    async def prune_events(self, before: float) -> int:
        return (await self._exec(Q["prune_events"], (before,))).rowcount

    # -- subscriptions -----------------------------------------------------------------------

    async def add_subscription(self, sub: SubscriptionRecord) -> None:
        await self._write(
            Q["add_subscription"],
            (
                sub.run_id, sub.pos, sub.kind, sub.domain, sub.name, sub.subject, sub.shape,
                sub.digest, sub.match, sub.stored_wait, sub.expires_at, sub.created_at,
                sub.deadline,
            ),
        )  # fmt: skip

    async def shapes(self, domain: str, name: str) -> list[str]:
        if self._shapes is not None:  # read by record_event, in this transaction
            read = self._shapes.pop((domain, name), None)
            if read is not None:
                return read
        rows = await self._all(Q["shapes"], (domain, name, domain, name))
        return self._store._saw_shapes((domain, name), [row[0] for row in rows])

    async def find_subscriptions(
        self, *, domain: str, name: str, shape: str, digest: str, subject: str | None, kind: str
    ) -> list[SubscriptionRecord]:
        # '*' never names a real subject, so a missing subject matches only wildcards.
        key = (domain, name, shape, digest, subject or "*", kind)
        if self._found is not None:  # read by record_event, in this transaction
            read = self._found.pop(key, None)
            if read is not None:
                return read
        query = Q["find_subscriptions" if self._ro else "find_subscriptions_locked"]
        rows = await self._all(query, key)
        return [SubscriptionRecord(*row) for row in rows]

    async def list_subscriptions(
        self, *, run_id: str | None = None, name: str | None = None
    ) -> list[SubscriptionRecord]:
        given = (("run_id", run_id), ("name", name))
        columns = tuple(column for column, value in given if value is not None)
        params = [value for _, value in given if value is not None]
        query = listing("list_subscriptions", columns, SUBSCRIPTIONS_ORDER)
        return [SubscriptionRecord(*row) for row in await self._all(query, params)]

    async def delete_subscription(self, run_id: str, pos: int) -> None:
        if not self._fuse("delete_subscription", (run_id, pos), run_id):
            await self._write(Q["delete_subscription"], (run_id, pos))

    async def delete_run_subscriptions(self, run_id: str) -> None:
        if not self._fuse("delete_run_subscriptions", (run_id,), run_id):
            await self._write(Q["delete_run_subscriptions"], (run_id,))

    async def sweep_subscriptions(self, now: float) -> int:
        return (await self._exec(Q["sweep_subscriptions"], (now,))).rowcount
