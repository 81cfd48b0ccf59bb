"""SQLite store: the embedded default (``sqlite:///path/to.db``).

One connection per process, used from the event loop thread: every statement
is short, and a thread hop per statement would cost more than the statement.
WAL mode lets readers in other processes proceed while one writer commits;
``BEGIN IMMEDIATE`` takes the write lock up front so two processes never
deadlock upgrading a read transaction. ``synchronous=NORMAL`` in WAL mode
keeps every commit atomic and consistent after a crash of the process; only
an OS crash or power loss can roll back the last transactions.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from parkway.errors import ParkwayError, StoreError
from parkway.store.base import (
    RUN_MUTABLE,
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
    load_in,
    load_in_transaction,
)
from parkway.store.sql import load_migrations, load_queries
from parkway.store.wakeup import Wakeups

log = logging.getLogger("parkway.store.sqlite")

Q = load_queries("sqlite.sql")
# find_subscriptions by kind, the kind a literal (see the query); made once, not at
# every publish.
FIND_SUBSCRIPTIONS = {
    kind: Q["find_subscriptions"].replace("'event'", f"'{kind}'") for kind in ("event", "message")
}
MIGRATIONS = load_migrations("sqlite_migrations")


class SQLiteTx(ComposedTx):
    """Primitive operations on an open SQLite transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._c = conn
        self.added_tasks = False  # other processes' workers are told at commit

    async def get_run(self, run_id: str) -> RunRecord | None:
        row = self._c.execute(Q["get_run"], (run_id,)).fetchone()
        return RunRecord(*row) if row else None

    async def insert_run(self, run: RunRecord) -> None:
        self._c.execute(
            Q["insert_run"],
            (
                run.id, run.workflow, run.version, run.status, run.input, run.output, run.error,
                run.domain, run.subject, run.parent_id, run.trigger, run.generation,
                run.created_at, run.updated_at, run.lease_owner, run.lease_until,
            ),
        )  # fmt: skip

    async def lease_run(
        self, run_id: str, *, owner: str, now: float, wall_now: float, lease_until: float
    ) -> Lease:
        cursor = self._c.execute(Q["lease_run"], (owner, lease_until, run_id, wall_now))
        if cursor.rowcount != 1:
            return Lease(run_id, taken=False)
        return Lease(run_id, taken=True, loaded=await load_in(self, run_id, now))

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
        # Column names come from RUN_MUTABLE above, never from the caller's data.
        sets = [f"{key} = ?" for key in changes]
        params: list[Any] = list(changes.values())
        where = "id = ?"
        params.append(run_id)
        if owner is not None:
            if release:
                sets += ["lease_owner = NULL", "lease_until = NULL"]
            where += " AND lease_owner = ?"
            params.append(owner)
        cursor = self._c.execute(f"UPDATE runs SET {', '.join(sets)} WHERE {where}", params)
        return cursor.rowcount == 1

    async def list_runs(
        self,
        *,
        workflow: str | None,
        status: str | None,
        subject: str | None,
        domain: str | None,
        parent_id: str | None,
        limit: int,
    ) -> list[RunRecord]:
        clauses, params = [], []
        for column, value in (
            ("workflow", workflow),
            ("status", status),
            ("subject", subject),
            ("domain", domain),
            ("parent_id", parent_id),
        ):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if workflow is None:  # internal runs are listed only by their own name
            clauses.append("workflow NOT LIKE 'parkway.%'")
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        sql = Q["get_run"].replace("WHERE id = ?", where)
        rows = self._c.execute(
            f"{sql} ORDER BY created_at DESC, id DESC LIMIT ?", (*params, limit)
        ).fetchall()
        return [RunRecord(*row) for row in rows]

    async def journal(self, run_id: str) -> list[JournalEntry]:
        return [JournalEntry(*row) for row in self._c.execute(Q["journal"], (run_id,))]

    async def put_journal(self, run_id: str, entries: Sequence[JournalEntry]) -> None:
        self._c.executemany(
            Q["put_journal"],
            [(run_id, e.pos, e.kind, e.name, e.state, e.value, e.deadline, e.at) for e in entries],
        )

    async def clear_journal(self, run_id: str) -> None:
        self._c.execute(Q["clear_journal"], (run_id,))

    async def add_tasks(self, tasks: Sequence[NewTask]) -> None:
        self.added_tasks = True
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

    async def events_since(self, domain: str, name: str, since: float) -> list[EventRecord]:
        rows = self._c.execute(Q["events_since"], (domain, name, since))
        return [EventRecord(*row) for row in rows]

    async def prune_events(self, before: float) -> int:
        return self._c.execute(Q["prune_events"], (before,)).rowcount

    async def add_subscription(self, sub: SubscriptionRecord) -> None:
        self._c.execute(
            Q["add_subscription"],
            (
                sub.run_id, sub.pos, sub.kind, sub.domain, sub.name, sub.subject, sub.shape,
                sub.digest, sub.match, sub.wait, sub.expires_at, sub.created_at, sub.deadline,
            ),
        )  # fmt: skip
        self._c.execute(Q["add_shape"], (sub.domain, sub.name, sub.shape))

    async def shapes(self, domain: str, name: str) -> list[str]:
        return [row[0] for row in self._c.execute(Q["shapes"], (domain, name))]

    async def find_subscriptions(
        self, *, domain: str, name: str, shape: str, digest: str, subject: str | None, kind: str
    ) -> list[SubscriptionRecord]:
        if kind not in ("event", "message"):
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
        clauses, params = [], []
        if run_id is not None:
            clauses.append("run_id = ?")
            params.append(run_id)
        if name is not None:
            clauses.append("name = ?")
            params.append(name)
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._c.execute(Q["list_subscriptions"] + where + " ORDER BY created_at", params)
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
            rows = self._c.execute(Q["list_messages"] + " ORDER BY id")
        else:
            rows = self._c.execute(Q["list_messages"] + " WHERE status = ? ORDER BY id", (status,))
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

    async def message_id_seen(self, message_id: str) -> float | None:
        row = self._c.execute(Q["message_id_seen"], (message_id,)).fetchone()
        return float(row[0]) if row else None

    async def remember_message_id(self, message_id: str, at: float) -> None:
        self._c.execute(Q["remember_message_id"], (message_id, at))

    async def prune_message_ids(self, before: float) -> None:
        self._c.execute(Q["prune_message_ids"], (before,))


# WAL checkpoints. SQLite's default has the commit that fills the WAL past 1,000
# pages copy it back into the database file, on that commit's path: 3-4 ms on the
# event loop every ~50 wakes. Here a thread of the store's checkpoints instead
# (PASSIVE: it never blocks a writer) every CHECKPOINT_EVERY seconds while commits
# come; a commit still checkpoints itself past FOREGROUND_CHECKPOINT_PAGES, should
# that thread fall behind.
CHECKPOINT_EVERY = 0.1
FOREGROUND_CHECKPOINT_PAGES = 20_000


class SQLiteStore:
    """A SQLite database file, shared safely by several processes on one machine."""

    capabilities: frozenset[str] = frozenset({"persistent", "shared", "group_commit"})

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = asyncio.Lock()
        self._data_version = -1
        # Background checkpoints (see CHECKPOINT_EVERY): commits so far and at the
        # last checkpoint, the task that schedules them and the thread that runs them.
        self._commits = self._checkpointed = 0
        self._checkpoints: asyncio.Task[None] | None = None
        self._checkpointer: concurrent.futures.ThreadPoolExecutor | None = None
        self._checkpoint_conn: sqlite3.Connection | None = None
        # Datagrams that wake other processes' workers when a commit adds tasks
        # (see parkway.store.wakeup); the worker's poll of data_version stays.
        self.wakeups = Wakeups(path) if path != ":memory:" else None

    @classmethod
    def from_url(cls, url: str) -> SQLiteStore:
        """``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or ``sqlite:///:memory:``."""
        prefix = "sqlite:///"
        if not url.startswith(prefix) or len(url) == len(prefix):
            raise ParkwayError(
                f"bad SQLite url {url!r}: write sqlite:///path/to.db (relative) "
                "or sqlite:////absolute/path/to.db"
            )
        return cls(url[len(prefix) :])

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise ParkwayError("the store is not open; use `async with engine:` first")
        return self._conn

    async def open(self) -> None:
        if self._conn is not None:
            return
        folder = os.path.dirname(os.path.abspath(self.path))
        if self.path != ":memory:" and not os.path.isdir(folder):
            raise ParkwayError(
                f"cannot open SQLite database {self.path!r}: folder {folder!r} does not exist"
            )
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA busy_timeout = 10000")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            # A page cache large enough for the subscription index of many parked runs
            # (the default 2 MB makes every publish read pages back from the OS).
            conn.execute("PRAGMA cache_size = -32768")
            if self.path != ":memory:":
                conn.execute(f"PRAGMA wal_autocheckpoint = {FOREGROUND_CHECKPOINT_PAGES:d}")
            self._migrate(conn)
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        self._conn = conn
        self._data_version = conn.execute("PRAGMA data_version").fetchone()[0]

    @staticmethod
    def _migrate(conn: sqlite3.Connection) -> None:
        # BEGIN IMMEDIATE serialises processes that open a fresh file together.
        conn.execute("BEGIN IMMEDIATE")
        try:
            current = conn.execute("PRAGMA user_version").fetchone()[0]
            latest = MIGRATIONS[-1][0]
            if current > latest:
                raise ParkwayError(
                    f"database schema version {current} is newer than this parkway "
                    f"(knows up to {latest}); upgrade parkway"
                )
            for version, script in MIGRATIONS:
                if version > current:
                    for statement in _statements(script):
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {version:d}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    async def close(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.cancel()
            await asyncio.gather(self._checkpoints, return_exceptions=True)
            self._checkpoints = None
        if self._checkpointer is not None:
            await asyncio.get_running_loop().run_in_executor(
                self._checkpointer, self._close_checkpoint_conn
            )
            self._checkpointer.shutdown()
            self._checkpointer = None
        if self.wakeups is not None:
            self.wakeups.close()
        if self._conn is not None:
            async with self._lock:
                self._conn.close()
                self._conn = None

    def _committed(self) -> None:
        self._commits += 1
        if self.path != ":memory:" and (self._checkpoints is None or self._checkpoints.done()):
            self._checkpoints = asyncio.create_task(self._checkpoint_while_busy())

    async def _checkpoint_while_busy(self) -> None:
        """Checkpoint the WAL in the background while commits come (see CHECKPOINT_EVERY)."""
        loop = asyncio.get_running_loop()
        while self._conn is not None:
            await asyncio.sleep(CHECKPOINT_EVERY)
            if self._commits == self._checkpointed:
                return  # quiet: the next commit starts this again
            self._checkpointed = self._commits
            if self._checkpointer is None:
                self._checkpointer = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1, thread_name_prefix="parkway-checkpoint"
                )
            try:
                await loop.run_in_executor(self._checkpointer, self._checkpoint)
            except sqlite3.Error as exc:  # busy, say: the commits' own checkpoint is the net
                log.debug("background checkpoint of %s failed: %s", self.path, exc)

    def _checkpoint(self) -> None:
        # On the checkpoint thread, with a connection of its own.
        if self._checkpoint_conn is None:
            self._checkpoint_conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False
            )
            self._checkpoint_conn.execute("PRAGMA busy_timeout = 1000")
        self._checkpoint_conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _close_checkpoint_conn(self) -> None:
        if self._checkpoint_conn is not None:
            self._checkpoint_conn.close()
            self._checkpoint_conn = None

    @asynccontextmanager
    async def transaction(self, *, readonly: bool = False) -> AsyncIterator[SQLiteTx]:
        async with self._lock:
            conn = self.conn
            if readonly:
                # Reads in autocommit mode: each statement sees the latest commit. Readers
                # need no snapshot across statements: a run's journal changes only under
                # its lease, and nothing read here is written back.
                yield SQLiteTx(conn)
                return
            conn.execute("BEGIN IMMEDIATE")
            tx = SQLiteTx(conn)
            try:
                yield tx
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            self._committed()
            if tx.added_tasks and self.wakeups is not None:
                self.wakeups.announce()

    async def claim(
        self, owner: str, *, now: float, wall_now: float, lease_until: float, limit: int
    ) -> list[str]:
        async with self.transaction():
            rows = self.conn.execute(
                Q["claim"], (owner, lease_until, now, wall_now, limit)
            ).fetchall()
            return [run_id for (run_id,) in rows]

    async def extend_leases(self, owner: str, run_ids: Sequence[str], lease_until: float) -> None:
        async with self.transaction():
            self.conn.executemany(Q["extend_lease"], [(lease_until, r, owner) for r in run_ids])

    async def release_leases(self, owner: str) -> None:
        async with self.transaction():
            self.conn.execute(Q["release_leases"], (owner,))

    async def next_due(self, *, after: float | None = None) -> float | None:
        async with self._lock:
            if after is None:
                row = self.conn.execute(Q["next_due"]).fetchone()
            else:
                row = self.conn.execute(Q["next_due_after"], (after,)).fetchone()
            return row[0] if row else None

    async def load_run(self, run_id: str, now: float) -> LoadedRun | None:
        return await load_in_transaction(self, run_id, now)

    def watch(self, callback: Callable[[float | None], None]) -> None:
        # Not "push": a wake-up may be lost (see parkway.store.wakeup), so the
        # worker polls changed() as well; this only makes it look sooner.
        if self.wakeups is not None and self._conn is not None:
            self.wakeups.listen(lambda: callback(None))

    async def has_due(self, now: float) -> bool:
        async with self._lock:
            return self.conn.execute(Q["has_due"], (now,)).fetchone() is not None

    async def changed(self) -> bool:
        async with self._lock:
            if self._conn is None:
                return False
            version = self._conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:
            self._data_version = version
            return True
        return False


def _statements(script: str) -> list[str]:
    """Split a migration into statements (comments dropped: they may hold semicolons)."""
    code = "\n".join(line for line in script.splitlines() if not line.lstrip().startswith("--"))
    return [s.strip() for s in code.split(";") if s.strip()]


def _is_int64(value: int) -> bool:
    """Whether SQLite can hold ``value`` as an INTEGER (message ids are such integers)."""
    return -(2**63) <= value < 2**63
