"""SQLite store: the embedded default (``sqlite:///path/to.db``).

One connection per process, used from the event loop thread: every statement
is short, and a thread hop per statement would cost more than the statement.
WAL mode lets readers in other processes proceed while one writer commits;
``BEGIN IMMEDIATE`` takes the write lock up front so two processes never
deadlock upgrading a read transaction. ``synchronous=NORMAL`` in WAL mode
keeps every commit atomic and consistent after a crash of the process; only
an OS crash or power loss can roll back the last transactions.

This module is the store's life (open, migrate, close), its transactions and
the worker's calls; the transaction's operations are in tx.py, the WAL's
background checkpoints in checkpoints.py, the wake-ups of other processes in
wakeup.py.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager

import orjson

from parkway.errors import ParkwayError, StoreError
from parkway.store.base import LoadedRun, StoreStats, load_in_transaction
from parkway.store.sqlite.checkpoints import FOREGROUND_CHECKPOINT_PAGES, Checkpoints
from parkway.store.sqlite.failures import Reserve, is_full, translate
from parkway.store.sqlite.statements import CLAIM, CLAIM_SERVED, MIGRATIONS, Q
from parkway.store.sqlite.tx import SQLiteTx
from parkway.store.sqlite.wakeup import Wakeups

log = logging.getLogger("parkway.store.sqlite")

# How long a write waits for another process's write lock before it fails with
# StoreBusyError.
BUSY_TIMEOUT_MS = 10_000


class SQLiteStore:
    """A SQLite database file, shared safely by several processes on one machine."""

    capabilities: frozenset[str] = frozenset(
        {"persistent", "shared", "group_commit", "reports_own", "loop_bound"}
    )

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        # The transaction object of the open connection, begun again by each
        # transaction (see SQLiteTx).
        self._tx: SQLiteTx | None = None
        self._lock = asyncio.Lock()
        self._data_version = -1
        # The WAL checkpointed by a thread of the store's (see checkpoints.py).
        self._checkpoints = Checkpoints(path, self._lock)
        # Datagrams that wake other processes' workers when a commit adds tasks
        # (see parkway.store.sqlite.wakeup); the worker's poll of data_version stays.
        self.wakeups = Wakeups(path) if path != ":memory:" else None
        # This process's watchers (its worker), told of its own commits that added
        # tasks as they commit (see watch()).
        self._watchers: list[Callable[[float | None], None]] = []
        # Runs this store's claims took over from an expired lease (see StoreStats),
        # counted by a trigger of the connection's while a claim runs.
        self._takeovers = 0
        self._claiming = False
        # What the last claims read of the runs they leased, until load_run takes it.
        self._claimed: dict[str, LoadedRun] = {}
        # Room kept to come back from a full disk (see failures.py).
        self._reserve = Reserve(path) if path != ":memory:" else None

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
        except sqlite3.Error as exc:
            raise translate(self.path, exc) from exc
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS:d}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            # A page cache large enough for the subscription index of many parked runs
            # (the default 2 MB makes every publish read pages back from the OS).
            conn.execute("PRAGMA cache_size = -32768")
            if self.path != ":memory:":
                conn.execute(f"PRAGMA wal_autocheckpoint = {FOREGROUND_CHECKPOINT_PAGES:d}")
            if self._reserve is not None and self._reserve.missing():
                # First open, or the disk was full (maybe still is): the WAL is
                # copied out and truncated before anything is written.
                self._reserve.make_room(conn)
            self._migrate(conn)
            conn.create_function("parkway_took_over", 0, self._took_over)
            conn.execute(Q["takeovers_trigger"])
        except sqlite3.Error as exc:
            conn.close()
            if is_full(exc) and self._reserve is not None:
                self._reserve.full = True
            error = translate(self.path, exc)
            raise type(error)(
                f"cannot open SQLite database {self.path!r}: {error}", took_effect=False
            ) from exc
        self._conn = conn
        self._tx = SQLiteTx(conn)
        self._data_version = conn.execute("PRAGMA data_version").fetchone()[0]
        if self.path != ":memory:":
            self._checkpoints.start()

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
        self._claimed.clear()
        await self._checkpoints.close()
        if self.wakeups is not None:
            self.wakeups.close()
        if self._conn is not None:
            async with self._lock:
                self._conn.close()
                self._conn = None
                self._tx = None

    @asynccontextmanager
    async def transaction(self, *, readonly: bool = False) -> AsyncIterator[SQLiteTx]:
        if not readonly and not self._checkpoints.writable.is_set():
            await self._checkpoints.writable.wait()  # (see checkpoints.py)
        async with self._lock:
            conn, tx = self.conn, self._tx
            assert tx is not None  # (made with the connection)
            tx.begin()
            if readonly:
                # Reads in autocommit mode: each statement sees the latest commit. Readers
                # need no snapshot across statements: a run's journal changes only under
                # its lease, and nothing read here is written back.
                try:
                    yield tx
                except sqlite3.Error as exc:
                    raise translate(self.path, exc) from exc
                return
            reserve = self._reserve
            if reserve is not None and reserve.full:
                reserve.make_room(conn)  # (before this writes: see failures.py)
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._failed(exc) from exc
            try:
                yield tx
            except BaseException as exc:
                self._rollback()
                if isinstance(exc, sqlite3.Error):
                    raise self._failed(exc) from exc
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise self._failed(exc, committing=True) from exc
            if reserve is not None and not reserve.kept:
                reserve.committed(conn)
            self._checkpoints.committed()
            notes = tx.transport
            if notes.tell_others:
                for callback in self._watchers:
                    callback(None)
                if self.wakeups is not None:
                    self.wakeups.announce()
            if notes.streamed and self.wakeups is not None:
                self.wakeups.announce_streams(notes.streamed)

    def _rollback(self) -> None:
        """End the transaction under way, if SQLite has not ended it already (a
        failed COMMIT may have)."""
        conn = self.conn
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error as exc:  # (the error that got here is the one to tell)
                log.debug("rollback after a failure failed: %s", exc)

    def _failed(self, exc: sqlite3.Error, *, committing: bool = False) -> StoreError:
        """The error to raise for ``exc``; for a write that failed for space, first an
        attempt to make room (see failures.py)."""
        if self._reserve is not None and is_full(exc):
            self._reserve.full = True
            self._reserve.make_room(self.conn)
        return translate(self.path, exc, committing=committing)

    @asynccontextmanager
    async def _reading(self) -> AsyncIterator[None]:
        """The store's lock, for reads outside a transaction: a SQLite failure is a
        StoreError."""
        async with self._lock:
            try:
                yield
            except sqlite3.Error as exc:
                raise translate(self.path, exc) from exc

    async def claim(
        self,
        owner: str,
        *,
        now: float,
        wall_now: float,
        lease_until: float,
        limit: int,
        serves: Sequence[str] | None = None,
    ) -> list[str]:
        # The runs are read in the claim's transaction, all of them at once, and
        # load_run hands each over (see SQLiteRuns.load_claimed).
        params: tuple[object, ...] = (owner, lease_until, now, wall_now, limit)
        if serves is not None:
            params = (*params, orjson.dumps(list(serves)).decode())
        async with self.transaction() as tx:
            self._claiming = True
            try:
                rows = self.conn.execute(
                    CLAIM if serves is None else CLAIM_SERVED, params
                ).fetchall()
            finally:
                self._claiming = False
            loaded = tx.runs.load_claimed(rows, now, owner) if rows else []
        for one in loaded:
            self._claimed[one.run.id] = one
        return [one.run.id for one in loaded]

    def _took_over(self) -> None:
        if self._claiming:  # (not a hand-over's lease_run: see StoreStats)
            self._takeovers += 1

    async def stats(self, now: float) -> StoreStats:
        async with self._reading():
            conn = self.conn
            by_workflow = conn.execute(Q["stats_parked"]).fetchall()
            due, oldest = conn.execute(Q["stats_due"], (now,)).fetchone()
            (dead,) = conn.execute(Q["stats_dead_letters"]).fetchone()
        parked = {name: count for name, count, _ in by_workflow if count}
        held = {name: count for name, _, count in by_workflow if count}
        return StoreStats(parked, due, oldest, dead, self._takeovers, held=held)

    async def extend_leases(self, owner: str, run_ids: Sequence[str], lease_until: float) -> None:
        async with self.transaction():
            self.conn.executemany(Q["extend_lease"], [(lease_until, r, owner) for r in run_ids])

    async def release_leases(self, owner: str) -> None:
        async with self.transaction():
            self.conn.execute(Q["release_leases"], (owner,))

    async def next_due(self, *, after: float | None = None) -> float | None:
        async with self._reading():
            if after is None:
                row = self.conn.execute(Q["next_due"]).fetchone()
            else:
                row = self.conn.execute(Q["next_due_after"], (after,)).fetchone()
            return row[0] if row else None

    async def load_run(
        self, run_id: str, now: float, *, owner: str | None = None
    ) -> LoadedRun | None:
        claimed = self._claimed.pop(run_id, None)
        if claimed is not None:  # (read by the claim that leased it, just now)
            return claimed
        return await load_in_transaction(self, run_id, now, owner)

    def watch(self, callback: Callable[[float | None], None]) -> None:
        # This process's commits that added tasks to runs it did not lease to its own
        # worker in the same transaction are told at commit ("reports_own"); other
        # processes' by their wake-up. Not "push": a wake-up may be lost (see
        # parkway.store.sqlite.wakeup), so the worker polls changed() as well.
        self._watchers.append(callback)
        if self.wakeups is not None and self._conn is not None:
            self.wakeups.listen(lambda: callback(None))

    def watch_streams(self, callback: Callable[[str | None], None]) -> None:
        # Other processes' stream commits, by their wake-up datagram; a lost one
        # costs the reader its poll (see parkway.core.streams).
        if self.wakeups is not None and self._conn is not None:
            self.wakeups.listen_streams(callback)

    async def has_due(self, now: float) -> bool:
        async with self._reading():
            return self.conn.execute(Q["has_due"], (now,)).fetchone() is not None

    async def changed(self) -> bool:
        async with self._reading():
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
