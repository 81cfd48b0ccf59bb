"""A PostgreSQL transaction's events (``tx.events``): a publish, the usual way (its
reads in one round trip, then its writes) or in one statement with its commit
(``deliver``), and the runs each event started and resumed.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from parkway.ids import new_mark
from parkway.matching import payload_digest
from parkway.store.events import EventFilter
from parkway.store.fleet import EventLink
from parkway.store.postgres.connections import Step
from parkway.store.postgres.fleet import S as FLEET
from parkway.store.postgres.runs import deliver_leased
from parkway.store.postgres.statements import DELIVER_EVENT, DELIVER_EVENT_SHAPES, Q, lock_key
from parkway.store.postgres.transport import Part
from parkway.store.records import CANCEL_PREFIX, EventDelivery, EventRecord, SubscriptionRecord


class PostgresEvents(Part):
    """Events, the fused publish among them."""

    async def record(
        self,
        event: EventRecord,
        fresh_after: float,
        *,
        digest: Callable[[str], str | None] | None = None,
    ) -> EventRecord | None:
        # One round trip for what a publish reads: the id's lock and any event with
        # that id, the name's lock, the insert (a no-op if the id is taken), the
        # shapes of the waits on the name, and the waits under each shape the last
        # publish of the name found (shapes rarely change); subscriptions.shapes()
        # and .find() then hand them over.
        t = self._t
        name = (event.domain, event.name)
        row = (event.id, event.name, event.domain, event.subject, event.payload, event.published_at)
        steps: builtins.list[Step] = [
            (Q["xact_lock"], (lock_key("event-id", event.id),)),
            (Q["get_event"], (event.id,)),
            (Q["xact_lock_shared"], (lock_key("event-name", *name),)),
            (Q["insert_new_event"], row),
            (Q["shapes"], (*name, *name)),
        ]
        ahead: builtins.list[tuple[str, str, str, str, str, str]] = []
        if digest is not None:
            for shape in t._store._shapes_seen.get(name, ()):
                digested = digest(shape)
                if digested is not None:
                    key = (*name, shape, digested, event.subject or "*", "event")
                    ahead.append(key)
                    steps.append((Q["find_subscriptions_locked"], key))
        _, found, _, _, shapes, *waits = await t._run(steps)
        if t._shapes is None or t._found is None:
            t._shapes, t._found = {}, {}
        t._shapes[name] = t._store._saw_shapes(name, [r[0] for r in shapes.rows or []])
        for key, result in zip(ahead, waits, strict=True):
            t._found[key] = [SubscriptionRecord(*r) for r in result.rows or []]
        if not found.rows:
            return None
        existing = EventRecord(*found.rows[0])
        if existing.published_at >= fresh_after:
            return existing
        # Past retention: a new event that reuses the id.
        await t._write(Q["delete_event"], (event.id,))
        await t._write(Q["insert_event"], row)
        return None

    async def deliver(
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
        # One statement after the shared lock of the event's name (see insert), and
        # the lease of the first run it delivers to after it: all queued, so that
        # with the COMMIT they are one round trip (a publish the usual way is two:
        # the reads, then the writes that depend on them); a lost reply is settled
        # by the commit mark. The server applies the match rule; the digests, which
        # only Python computes, are for the shapes this store has seen on the name
        # (see _saw_shapes), and a shape it has not seen makes the statement decline.
        t = self._t
        name = (event.domain, event.name)
        known = t._store._shapes_seen.get(name, ())
        digests = ((shape, payload_digest(payload, shape)) for shape in known)
        digested = [(shape, digest) for shape, digest in digests if digest is not None]
        if len(digested) > DELIVER_EVENT_SHAPES:
            return EventDelivery(known=True)  # declined, nothing written
        now = event.published_at
        delivery = EventDelivery()
        token, unannounce = t._announce_maybe(now)
        params: dict[str, Any] = dict(
            domain=event.domain,
            name=event.name,
            known=orjson.dumps(known).decode(),
            id=event.id,
            cancels=CANCEL_PREFIX + event.name,
            subject=event.subject,
            subject_or_any=event.subject or "*",
            payload=event.payload,
            now=now,
            fresh=fresh_after,
            envelope=envelope,
            mark=new_mark(),
            token=token,
        )
        for i, (shape, digest) in enumerate(digested):
            params[f"shape{i}"], params[f"digest{i}"] = shape, digest

        def found(result: str | None) -> None:
            delivery.known = True
            if result == "duplicate":
                delivery.outcome = "duplicate"
            elif result and result.startswith("published "):
                delivery.outcome = "published"
                delivery.waits = [(str(r), str(w)) for r, w in orjson.loads(result[10:])]
                t._task_runs.update(run_id for run_id, _ in delivery.waits)
                if delivery.lease is not None and delivery.waits:
                    delivery.lease.run_id = delivery.waits[0][0]
            if not delivery.waits:
                unannounce()  # nothing added: nothing announced
                delivery.lease = None

        delivery.lease = await deliver_leased(
            t,
            DELIVER_EVENT[len(digested)],
            params,
            found,
            lock=lock_key("event-name", *name),
            shared=True,
            owner=owner,
            now=now,
            wall_now=wall_now,
            lease_until=lease_until,
        )
        return delivery

    async def get(self, event_id: str) -> EventRecord | None:
        t = self._t
        lock = None if t._ro else lock_key("event-id", event_id)
        row = await t._one(Q["get_event"], (event_id,), lock=lock)
        return EventRecord(*row) if row else None

    async def insert(self, event: EventRecord) -> None:
        await self._t._write(
            Q["insert_event"],
            (event.id, event.name, event.domain, event.subject, event.payload, event.published_at),
            lock=lock_key("event-name", event.domain, event.name),
            shared=True,
        )

    async def delete(self, event_id: str) -> None:
        await self._t._write(Q["delete_event"], (event_id,))

    async def since(self, domain: str, name: str, since: float) -> builtins.list[EventRecord]:
        t = self._t
        lock = None if t._ro else lock_key("event-name", domain, name)
        rows = await t._all(Q["events_since"], (domain, name, since), lock=lock)
        return [EventRecord(*row) for row in rows]

    async def prune(self, before: float) -> int:
        return (await self._t._exec(Q["prune_events"], (before,))).rowcount

    async def list(
        self, query: EventFilter
    ) -> builtins.list[tuple[str, str, str, str | None, bytes | None, float]]:
        params = dict(name=query.name, subject=query.subject, since=query.since, limit=query.limit)
        return [tuple(row) for row in await self._t._all(FLEET["list_events"], params)]

    async def link(self, event_id: str, at: float, how: str, run_ids: Sequence[str]) -> None:
        if run_ids:
            params = dict(id=event_id, how=how, runs=builtins.list(run_ids), at=at)
            await self._t._write(FLEET["link_event"], params)

    async def links(self, event_ids: Sequence[str]) -> builtins.list[EventLink]:
        rows = await self._t._all(FLEET["event_links"], (builtins.list(event_ids),))
        return [EventLink(*row) for row in rows]
