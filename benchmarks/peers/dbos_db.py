"""DBOS's system database for one benchmark run: made fresh, observed, dropped.

Part of the DBOS adapter (``benchmarks.peers.dbos_bench``): the counts it polls to
know when N runs are parked or finished, read on a connection of its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import threading
import time
import uuid
from typing import Any

PARK_POLL_S = 0.02
FAILED_STATUSES = "('ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED')"


class Counter:
    """Thread-safe count of runs that reached the line just before recv."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0
        self.first_reached: float | None = None
        self.last_reached: float | None = None

    def incr(self) -> None:
        now = time.perf_counter()
        with self._lock:
            self.value += 1
            if self.first_reached is None:
                self.first_reached = now
            self.last_reached = now


REACHED = Counter()


class BenchDB:
    """A fresh system database for one run, plus a side connection to observe it."""

    def __init__(self, kind: str, admin_url: str, sqlite_journal: str = "dbos") -> None:
        self.kind = kind
        self.admin_url = admin_url
        self.sqlite_journal = sqlite_journal
        self.url = ""
        self._tmpdir: str | None = None
        self._path: str | None = None
        self._pg_name: str | None = None
        self._conn: Any = None
        self._lock = threading.Lock()
        self._prefix = "" if kind == "sqlite" else "dbos."

    def create(self) -> str:
        if self.kind == "sqlite":
            self._tmpdir = tempfile.mkdtemp(prefix="dbos_bench_")
            self._path = os.path.join(self._tmpdir, "dbos.sqlite")
            self.url = f"sqlite:///{self._path}"
            if self.sqlite_journal == "wal":
                # journal_mode=WAL is a property of the file, so DBOS inherits it.
                with contextlib.closing(sqlite3.connect(self._path)) as c:
                    c.execute("PRAGMA journal_mode=WAL")
        else:
            import psycopg
            from sqlalchemy import make_url

            self._pg_name = f"dbos_bench_{uuid.uuid4().hex[:12]}"
            with psycopg.connect(self._admin_conninfo(), autocommit=True, connect_timeout=10) as c:
                c.execute(f'CREATE DATABASE "{self._pg_name}"')
            url = make_url(self.admin_url).set(database=self._pg_name)
            self.url = url.render_as_string(hide_password=False)
        return self.url

    def _admin_conninfo(self) -> str:
        from sqlalchemy import make_url

        url = make_url(self.admin_url).set(drivername="postgresql")
        return url.render_as_string(hide_password=False)

    def _connection(self) -> Any:
        if self._conn is None:
            if self.kind == "sqlite":
                assert self._path is not None
                self._conn = sqlite3.connect(
                    self._path, timeout=30, isolation_level=None, check_same_thread=False
                )
            else:
                import psycopg

                self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        return self._conn

    def _scalars(self, sql: str) -> tuple[Any, ...]:
        with self._lock:
            row = self._connection().execute(sql).fetchone()
        assert row is not None
        return tuple(row)

    def counts(self) -> tuple[int, int, int]:
        """(durably parked recvs, successful workflows, failed workflows)."""
        p = self._prefix
        parked, ok, failed = self._scalars(
            f"SELECT (SELECT count(*) FROM {p}operation_outputs"
            f" WHERE function_name = 'DBOS.sleep'),"
            f" (SELECT count(*) FROM {p}workflow_status WHERE status = 'SUCCESS'),"
            f" (SELECT count(*) FROM {p}workflow_status WHERE status IN {FAILED_STATUSES})"
        )
        return int(parked), int(ok), int(failed)

    def size_bytes(self) -> int:
        if self.kind == "sqlite":
            assert self._path is not None
            for _ in range(20):
                busy = self._scalars("PRAGMA wal_checkpoint(TRUNCATE)")[0]
                if not busy:
                    break
                time.sleep(0.05)
            return sum(
                os.path.getsize(p) for p in (self._path, self._path + "-wal") if os.path.exists(p)
            )
        return int(self._scalars("SELECT pg_database_size(current_database())")[0])

    def drop(self) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None
        if self._tmpdir is not None:
            # A straggling DBOS thread may still touch the file: retry until the dir is gone.
            for _ in range(10):
                shutil.rmtree(self._tmpdir, ignore_errors=True)
                if not os.path.exists(self._tmpdir):
                    self._tmpdir = None
                    break
                time.sleep(0.1)
        if self._pg_name is not None:
            import psycopg

            with psycopg.connect(self._admin_conninfo(), autocommit=True, connect_timeout=10) as c:
                c.execute(f'DROP DATABASE IF EXISTS "{self._pg_name}" WITH (FORCE)')
            self._pg_name = None


def wait_parked(db: BenchDB, n: int, t0: float, timeout_s: float) -> dict[str, Any]:
    """Poll until N recv timeouts are durable; returns the parking figures."""
    deadline = t0 + timeout_s
    parked = failed = 0
    while True:
        parked, _, failed = db.counts()
        now = time.perf_counter()
        if parked >= n:
            break
        if failed:
            raise RuntimeError(f"{failed} workflows failed while parking ({parked}/{n} parked)")
        if now > deadline:
            raise TimeoutError(f"only {parked}/{n} runs parked after {timeout_s:.0f}s")
        time.sleep(PARK_POLL_S)
    seconds = now - t0
    reached = REACHED.last_reached - t0 if REACHED.last_reached is not None else None
    return {
        "seconds": round(seconds, 4),
        "runs_per_s": round(n / seconds, 1),
        "reached_recv_s": round(reached, 4) if reached is not None else None,
    }


def wait_finished(db: BenchDB, n: int, timeout_s: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    ok = failed = 0
    while time.perf_counter() - t0 < timeout_s:
        _, ok, failed = db.counts()
        if ok + failed >= n:
            break
        time.sleep(0.05)
    return {
        "finish_s": round(time.perf_counter() - t0, 3),
        "finished_ok": ok,
        "finished_failed": failed,
    }
