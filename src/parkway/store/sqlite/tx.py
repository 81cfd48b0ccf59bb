"""A SQLite transaction's operations: one connection, each a statement or two.

Apart from the store (store.py), which opens, checkpoints and wakes, because
this is the part the engine calls inside a transaction; the operations the
protocol composes from these (a publish's reads and writes, a delivery, a
signal) come from :class:`~parkway.store.base.ComposedTx`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from parkway.models import RunStatus
from parkway.store.base import (
    ENDED,
    RUN_MUTABLE,
    AttemptRecord,
    ComposedTx,
    EventRecord,
    JournalEntry,
    Lease,
    LoadedRun,
    MessageRecord,
    NewTask,
    RunRecord,
    SignalRecord,
    SubscriptionRecord,
    TaskRecord,
    UpdateRecord,
    holds_journal,
    load_with,
    reads_mailbox,
)
from parkway.store.sqlite.fleet import SQLiteFleet
from parkway.store.sqlite.flow import FlowOps
from parkway.store.sqlite.people import SQLitePeople
from parkway.store.sqlite.schedules import SQLiteSchedules
from parkway.store.sqlite.statements import (
    FIND_SUBSCRIPTIONS,
    INSERT_NEW_RUN,
    LEASE,
    Q,
    listing,
    update_run,
)
from parkway.store.sqlite.streams import StreamOps
from parkway.store.sqltext import run_conditions

RUNS_ORDER = "ORDER BY created_at DESC, id DESC LIMIT ?"


class SQLiteTx(SQLiteSchedules, SQLitePeople, SQLiteFleet, FlowOps, StreamOps, ComposedTx):
    """Primitive operations on an open SQLite transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._c = conn
        self.added_tasks = False  # other processes' workers are told at commit
        self.streamed: set[str] = set()  # (and their stream readers: see StreamOps)
        # Runs given a task here, until this transaction leased them to this process
        # (a hand-over): their tasks are its worker's, whom a claim elsewhere could
        # not take them from, so telling the others would only wake them to claim
        # nothing (see tell_others).
        self._given: set[str] = set()
        # Runs this transaction inserted pending: a hand-over's lease of one sets its
        # status (see lease_run), any other run's is left unnamed.
        self._pending: set[str] = set()

    async def get_run(self, run_id: str) -> RunRecord | None:
        row = self._c.execute(Q["get_run"], (run_id,)).fetchone()
        return RunRecord(*row) if row else None

    async def insert_run(self, run: RunRecord) -> None:
        self._c.execute(Q["insert_run"], _run_row(run))
        if run.status == "pending":
            self._pending.add(run.id)

    async def start_run(
        self, run: RunRecord, due_at: float, *, task_payload: bytes | None = None
    ) -> None:
        # One statement where ComposedTx reads first: an id taken is not inserted.
        if self._c.execute(INSERT_NEW_RUN, _run_row(run)).rowcount == 1:
            if run.status == "pending":
                self._pending.add(run.id)
            await self.add_tasks([NewTask(run.id, due_at, "start", payload=task_payload)])

    async def lease_run(
        self, run_id: str, *, owner: str, now: float, wall_now: float, lease_until: float
    ) -> Lease:
        # The statement for the status the run most likely has first, the other if
        # that one found no run to lease (each leases only a run of its status).
        if run_id in self._pending:
            queries = ("lease_pending_run", "lease_run")
        else:
            queries = ("lease_run", "lease_pending_run")
        params = (owner, lease_until, run_id, wall_now)
        for query in queries:
            row = self._c.execute(LEASE[query], params).fetchone()
            if row is not None:
                self._given.discard(run_id)
                loaded = await load_with(self, RunRecord(*row), now, owner)
                return Lease(run_id, taken=True, loaded=loaded)
        return Lease(run_id, taken=False)

    def load_claimed(
        self, rows: Sequence[Sequence[Any]], now: float, owner: str
    ) -> list[LoadedRun]:
        """What advancing the runs of a claim's rows (its ``RETURNING``) needs, as
        :func:`~parkway.store.base.load_in` reads it for one run, in a statement for
        each kind of row for all of them: a claim takes up to a worker's free places,
        and three statements a run were most of what loading them cost."""
        runs = [RunRecord(*row) for row in rows]
        started = [run for run in runs if run.status == "pending"]
        if started:
            self._c.execute(Q["claim_started"], (json.dumps([run.id for run in started]),))
            for run in started:
                run.status = RunStatus.RUNNING
        tasks: dict[str, list[TaskRecord]] = {run.id: [] for run in runs}
        ids = json.dumps(list(tasks))
        for row in self._c.execute(Q["claimed_tasks"], (ids, now)):
            tasks[row[1]].append(TaskRecord(*row))
        reading = [r.id for r in runs if r.status not in ENDED and not holds_journal(r, owner)]
        journals: dict[str, list[JournalEntry]] = {run_id: [] for run_id in reading}
        if reading:
            for run_id, *entry in self._c.execute(Q["claimed_journals"], (json.dumps(reading),)):
                journals[run_id].append(JournalEntry(*entry))
        mailboxes: dict[str, list[SignalRecord]] = {
            run.id: [] for run in runs if reads_mailbox(run, tasks[run.id])
        }
        if mailboxes:
            for row in self._c.execute(Q["claimed_signals"], (json.dumps(list(mailboxes)),)):
                mailboxes[row[1]].append(SignalRecord(*row))
        return [
            LoadedRun(
                run,
                tasks[run.id],
                journals.get(run.id, [] if run.status in ENDED else None),
                mailboxes.get(run.id),
            )
            for run in runs
        ]

    async def update_run(
        self,
        run_id: str,
        changes: dict[str, Any],
        *,
        owner: str | None = None,
        release: bool = True,
    ) -> bool:
        if not set(changes) <= RUN_MUTABLE:
            raise ValueError(f"not updatable: {set(changes) - RUN_MUTABLE}")
        query = update_run(tuple(changes), owned=owner is not None, release=release)
        params: list[Any] = [*changes.values(), run_id]
        if owner is not None:
            params.append(owner)
        return self._c.execute(query, params).rowcount == 1

    async def drop_cache_marks(self, run_ids: Sequence[str], owner: str) -> None:
        # (No row lock to skip: SQLite's writer holds the whole database.)
        self._c.executemany(Q["drop_cache_mark"], [(run_id, owner) for run_id in run_ids])

    async def list_runs(
        self,
        *,
        workflow: str | None,
        status: str | None,
        subject: str | None,
        domain: str | None,
        parent_id: str | None,
        limit: int,
        search: str | None = None,
        created_after: float | None = None,
        created_before: float | None = None,
        before: str | None = None,
    ) -> list[RunRecord]:
        given = (
            ("workflow", workflow),
            ("status", status),
            ("subject", subject),
            ("domain", domain),
            ("parent_id", parent_id),
        )
        columns = tuple(column for column, value in given if value is not None)
        params = [value for _, value in given if value is not None]
        # Internal runs are listed only by their own name.
        extra, more = run_conditions(search, created_after, created_before, before)
        query = listing(
            "list_runs", columns, RUNS_ORDER, hide_internal=workflow is None, extra=extra
        )
        rows = self._c.execute(query, (*params, *more, limit)).fetchall()
        return [RunRecord(*row) for row in rows]

    async def run_counts(self) -> list[tuple[str, str, int]]:
        return [(w, s, n) for w, s, n in self._c.execute(Q["run_counts"])]

    async def find_runs(
        self,
        *,
        statuses: Sequence[str],
        workflow: str | None,
        subject: str | None,
        created_before: float | None,
        after: str | None,
        limit: int,
    ) -> list[RunRecord]:
        params = (json.dumps(list(statuses)), workflow, subject, created_before, after, limit)
        return [RunRecord(*row) for row in self._c.execute(Q["find_runs"], params)]

    async def expired_runs(
        self, before: float, *, workflow: str | None, exclude: Sequence[str], limit: int
    ) -> list[str]:
        if workflow is not None:
            rows = self._c.execute(Q["expired_runs_of"], (before, workflow, limit))
        else:
            params = (before, json.dumps(list(exclude)), limit)
            rows = self._c.execute(Q["expired_runs_except"], params)
        return [run_id for (run_id,) in rows]

    async def delete_runs(self, run_ids: Sequence[str]) -> None:
        ids = [(run_id,) for run_id in run_ids]
        for name in (
            "delete_run", "clear_journal", "delete_all_tasks", "delete_run_subscriptions",
            "delete_run_signals", "delete_run_values", "delete_run_updates",
            "delete_run_attempts",
        ):  # fmt: skip
            self._c.executemany(Q[name], ids)
        self._delete_people(ids)
        self._delete_streams(ids)
        self._delete_operator_entries(ids)

    async def journal(self, run_id: str) -> list[JournalEntry]:
        return [JournalEntry(*row) for row in self._c.execute(Q["journal"], (run_id,))]

    async def put_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        self._c.executemany(
            Q["put_journal"],
            [
                (run_id, e.pos, e.kind, e.name, e.state, e.value, e.deadline, e.at, e.branch, e.seq)
                for e in entries
            ],
        )

    async def journal_outline(self, run_id: str) -> list[tuple[int, str]]:
        return [(pos, state) for pos, state in self._c.execute(Q["journal_outline"], (run_id,))]

    async def copy_journal(self, source_id: str, run_id: str, before: int | None) -> None:
        self._c.execute(Q["copy_journal"], (run_id, source_id, before))

    async def clear_journal(self, run_id: str) -> None:
        self._c.execute(Q["clear_journal"], (run_id,))
        self._c.execute(Q["delete_run_attempts"], (run_id,))

    @property
    def tell_others(self) -> bool:
        """Whether other processes' workers are told of this transaction's tasks at
        commit: some went to a run it did not lease to this process."""
        return self.added_tasks or bool(self._given)

    async def add_tasks(self, tasks: Sequence[NewTask]) -> None:
        self._given.update(t.run_id for t in tasks)
        self._c.executemany(
            Q["add_task"], [(t.run_id, t.due_at, t.kind, t.pos, t.payload) for t in tasks]
        )

    async def due_tasks(self, run_id: str, now: float) -> list[TaskRecord]:
        return [TaskRecord(*row) for row in self._c.execute(Q["due_tasks"], (run_id, now))]

    async def delete_tasks(self, ids: Sequence[int]) -> None:
        self._c.executemany(Q["delete_task"], [(i,) for i in ids])

    async def delete_wait_tasks(
        self, run_id: str, pos: int | None = None, *, keep: Sequence[int] = ()
    ) -> None:
        if keep:  # rare and short: the kept ids as a JSON array
            query = Q["delete_wait_tasks_keep" if pos is None else "delete_wait_tasks_at_keep"]
            args: tuple[Any, ...] = (run_id,) if pos is None else (run_id, pos)
            self._c.execute(query, (*args, json.dumps(list(keep))))
        elif pos is None:
            self._c.execute(Q["delete_wait_tasks"], (run_id,))
        else:
            self._c.execute(Q["delete_wait_tasks_at"], (run_id, pos))

    async def delete_all_tasks(self, run_id: str) -> None:
        self._c.execute(Q["delete_all_tasks"], (run_id,))

    async def add_signal(self, run_id: str, name: str, payload: bytes | None, at: float) -> None:
        self._c.execute(Q["add_signal"], (run_id, name, payload, at))

    async def signals(self, run_id: str) -> list[SignalRecord]:
        return [SignalRecord(*row) for row in self._c.execute(Q["signals"], (run_id,))]

    async def delete_signals(self, ids: Sequence[int]) -> None:
        self._c.executemany(Q["delete_signal"], [(i,) for i in ids])

    async def get_event(self, event_id: str) -> EventRecord | None:
        row = self._c.execute(Q["get_event"], (event_id,)).fetchone()
        return EventRecord(*row) if row else None

    async def insert_event(self, event: EventRecord) -> None:
        self._c.execute(
            Q["insert_event"],
            (event.id, event.name, event.domain, event.subject, event.payload, event.published_at),
        )

    async def delete_event(self, event_id: str) -> None:
        self._c.execute(Q["delete_event"], (event_id,))
        self._delete_event_links(event_id)

    async def events_since(self, domain: str, name: str, since: float) -> list[EventRecord]:
        rows = self._c.execute(Q["events_since"], (domain, name, since))
        return [EventRecord(*row) for row in rows]

    async def prune_events(self, before: float) -> int:
        self._prune_event_links(before)
        return self._c.execute(Q["prune_events"], (before,)).rowcount

    async def add_subscription(self, sub: SubscriptionRecord) -> None:
        self._c.execute(
            Q["add_subscription"],
            (
                sub.run_id, sub.pos, sub.kind, sub.domain, sub.name, sub.subject, sub.shape,
                sub.digest, sub.match, sub.stored_wait, sub.expires_at, sub.created_at,
                sub.deadline,
            ),
        )  # fmt: skip
        self._c.execute(Q["add_shape"], (sub.domain, sub.name, sub.shape))

    async def shapes(self, domain: str, name: str) -> list[str]:
        return [row[0] for row in self._c.execute(Q["shapes"], (domain, name))]

    async def find_subscriptions(
        self, *, domain: str, name: str, shape: str, digest: str, subject: str | None, kind: str
    ) -> list[SubscriptionRecord]:
        if kind not in FIND_SUBSCRIPTIONS:
            raise ValueError(f"unknown subscription kind {kind!r}")
        # The kind goes in as a literal (see the query); '*' never names a real
        # subject, so a missing subject matches only wildcards.
        rows = self._c.execute(
            FIND_SUBSCRIPTIONS[kind], (domain, name, shape, digest, subject or "*")
        )
        return [SubscriptionRecord(*row) for row in rows]

    async def list_subscriptions(
        self, *, run_id: str | None = None, name: str | None = None
    ) -> list[SubscriptionRecord]:
        given = (("run_id", run_id), ("name", name))
        columns = tuple(column for column, value in given if value is not None)
        params = [value for _, value in given if value is not None]
        rows = self._c.execute(
            listing("list_subscriptions", columns, "ORDER BY created_at"), params
        )
        return [SubscriptionRecord(*row) for row in rows]

    async def delete_subscription(self, run_id: str, pos: int) -> None:
        self._c.execute(Q["delete_subscription"], (run_id, pos))

    async def delete_run_subscriptions(self, run_id: str) -> None:
        self._c.execute(Q["delete_run_subscriptions"], (run_id,))

    async def sweep_subscriptions(self, now: float) -> int:
        count = self._c.execute(Q["sweep_subscriptions"], (now,)).rowcount
        self._c.execute(Q["sweep_shapes"])
        return count

    async def active_run(self, workflow: str, domain: str, subject: str | None) -> str | None:
        row = self._c.execute(Q["active_run"], (workflow, domain, subject)).fetchone()
        return row[0] if row else None

    async def message_wait(self, name: str, key: str) -> SubscriptionRecord | None:
        row = self._c.execute(Q["message_wait"], (name, key)).fetchone()
        return SubscriptionRecord(*row) if row else None

    async def add_message(self, message: MessageRecord) -> int:
        m = message
        cursor = self._c.execute(
            Q["add_message"],
            (m.name, m.key, m.payload, m.message_id, m.status, m.reason, m.received_at,
             m.expires_at),
        )  # fmt: skip
        return int(cursor.lastrowid or 0)

    async def oldest_message(self, name: str, key: str, now: float) -> MessageRecord | None:
        row = self._c.execute(Q["oldest_message"], (name, key, now)).fetchone()
        return MessageRecord(*row) if row else None

    async def get_message(self, message_id: int) -> MessageRecord | None:
        if not _is_int64(message_id):  # sqlite3 cannot bind it: no message has it
            return None
        row = self._c.execute(Q["get_message"], (message_id,)).fetchone()
        return MessageRecord(*row) if row else None

    async def list_messages(self, status: str | None) -> list[MessageRecord]:
        if status is None:
            rows = self._c.execute(Q["list_messages"])
        else:
            rows = self._c.execute(Q["list_messages_by_status"], (status,))
        return [MessageRecord(*row) for row in rows]

    async def delete_message(self, message_id: int) -> None:
        if _is_int64(message_id):
            self._c.execute(Q["delete_message"], (message_id,))

    async def update_message(
        self, message_id: int, status: str, reason: str | None, expires_at: float
    ) -> None:
        if _is_int64(message_id):
            self._c.execute(Q["update_message"], (status, reason, expires_at, message_id))

    async def expire_messages(self, now: float, reason: str) -> list[MessageRecord]:
        rows = self._c.execute(Q["expire_messages"], (reason, now)).fetchall()
        return [MessageRecord(*row) for row in rows]

    # -- values and updates ------------------------------------------------------------------

    async def put_values(self, run_id: str, values: Mapping[str, bytes], at: float) -> None:
        self._c.executemany(Q["put_value"], [(run_id, k, v, at) for k, v in values.items()])

    async def run_values(self, run_ids: Sequence[str]) -> dict[str, dict[str, bytes]]:
        out: dict[str, dict[str, bytes]] = {}
        for run_id, key, value in self._c.execute(Q["run_values"], (json.dumps(list(run_ids)),)):
            out.setdefault(run_id, {})[key] = value
        return out

    async def add_attempts(self, attempts: Sequence[AttemptRecord]) -> None:
        self._c.executemany(
            Q["add_attempts"],
            [
                (a.run_id, a.pos, a.step, a.attempt, a.error, a.started_at, a.ended_at)
                for a in attempts
            ],
        )

    async def attempts(self, run_id: str) -> list[AttemptRecord]:
        return [AttemptRecord(*row) for row in self._c.execute(Q["attempts"], (run_id,))]

    async def add_update(self, update: UpdateRecord) -> UpdateRecord | None:
        u = update
        cursor = self._c.execute(
            Q["add_update"], (u.run_id, u.id, u.name, u.payload, u.status, u.result, u.created_at)
        )
        if cursor.rowcount:
            return None
        return await self.get_update(u.run_id, u.id)

    async def get_update(self, run_id: str, update_id: str) -> UpdateRecord | None:
        row = self._c.execute(Q["get_update"], (run_id, update_id)).fetchone()
        return None if row is None else UpdateRecord(*row)

    async def pending_updates(self, run_id: str) -> list[UpdateRecord]:
        return [UpdateRecord(*row) for row in self._c.execute(Q["pending_updates"], (run_id,))]

    async def finish_update(
        self, run_id: str, update_id: str, status: str, result: bytes | None, at: float
    ) -> None:
        self._c.execute(Q["finish_update"], (status, result, at, run_id, update_id))

    async def message_id_seen(self, message_id: str) -> float | None:
        row = self._c.execute(Q["message_id_seen"], (message_id,)).fetchone()
        return float(row[0]) if row else None

    async def remember_message_id(self, message_id: str, at: float) -> None:
        self._c.execute(Q["remember_message_id"], (message_id, at))

    async def prune_message_ids(self, before: float) -> None:
        self._c.execute(Q["prune_message_ids"], (before,))


def _is_int64(value: int) -> bool:
    """Whether SQLite can hold ``value`` as an INTEGER (message ids are such integers)."""
    return -(2**63) <= value < 2**63


def _run_row(run: RunRecord) -> tuple[object, ...]:
    return (
        run.id, run.workflow, run.version, run.status, run.input, run.output, run.error,
        run.domain, run.subject, run.parent_id, run.trigger, run.generation,
        run.created_at, run.updated_at, run.lease_owner, run.lease_until,
    )  # fmt: skip
