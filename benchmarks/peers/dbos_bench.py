"""DBOS peer harness: measures DBOS (pip ``dbos``) on the shapes parkway is measured on.

Run from the project root, one shape per invocation::

    python -m benchmarks.peers.dbos_bench --shape SHAPE --n N --db sqlite|postgres [--pg-url URL]

Exactly one line of JSON goes to stdout; every log line (ours and DBOS's) goes to stderr.
Each invocation is a fresh process on a fresh temporary system database: a file in a new
temp dir for SQLite, a new ``dbos_bench_<hex>`` database on the Postgres server named by
``--pg-url`` (an admin URL; the database is dropped at the end). If ``dbos`` cannot be
imported, or Postgres cannot be reached, the line is ``{"available": false, "reason": ...}``
and the exit code is 0.

Shapes
------
``steps3`` (default N=1000)
    N workflows of 3 trivial steps each (int -> int -> dict -> int). Clock runs from the first
    start to the last result: ``wf_per_s`` = N / ``seconds``.
``park`` (default N=10000)
    N workflows each started and parked on ``recv(topic, timeout_seconds=86400)``. Clock runs
    from the first start until the system database holds N durable recv timeouts (the
    ``DBOS.sleep`` checkpoint DBOS writes as the last act before waiting; polled every 20 ms
    on a separate connection): ``runs_per_s``. At that parked point: ``peak_rss_mb``
    (getrusage ru_maxrss), ``rss_mb``, ``threads`` (``threading.active_count()``),
    ``os_threads`` (psutil), ``db_bytes`` (SQLite: file + ``-wal`` after
    ``PRAGMA wal_checkpoint(TRUNCATE)``; Postgres: ``pg_database_size``) and
    ``bytes_per_run`` = (``db_bytes`` - ``db_baseline_bytes``) / N, where the baseline is the
    freshly migrated, empty database. Then every run is sent its message and awaited
    (``--finish send``, bounded by ``--finish-timeout``), or DBOS is just shut down.
``wake`` (default N=1000)
    N runs parked as above; then, one run at a time: t0, ``send(wfid, msg, topic)``, wait
    for that workflow's result (it returns right after ``recv``). Latency percentiles
    ``p50_ms``/``p99_ms`` use linear interpolation between closest ranks (numpy's default).
    Stops after ``--max-seconds`` of sending and reports ``n_measured``.

Variants and fairness
---------------------
DBOS offers several ways to run a workflow, so each shape is measured in every way a user
would reasonably pick, each variant in its own fresh child process on its own fresh
database, and the best is reported at top level (``variant``), with every variant's figures
under ``variants``. Pin one with ``--variant``.

* ``steps3``: ``start`` (sync workflows, ``DBOS.start_workflow`` in a loop, then
  ``get_result``), ``queue`` (``Queue.enqueue`` on a queue with no concurrency limit, polled
  every ``--queue-poll`` s, 0.05 by default instead of DBOS's 1 s; the queue is registered
  and its worker given time to start before the clock starts), ``direct`` (the sync
  ``@DBOS.workflow()`` function called directly, one call after the other: DBOS runs it in
  the calling thread, durably, its fastest way here), ``async`` (async workflows,
  ``await DBOS.start_workflow_async`` in a loop, then ``asyncio.gather`` of the results) and
  ``direct_async`` (the async workflow function awaited directly, one after the other).
  Best = highest ``wf_per_s``; the best of the sync variants (``start``, ``queue``,
  ``direct``: ``def`` steps) and of the async ones (``async def`` steps) are reported too,
  as ``sync_variant``/``sync_wf_per_s`` and ``async_variant``/``async_wf_per_s``.
* ``park`` / ``wake``: ``sync`` (``DBOS.recv`` in a sync workflow: DBOS runs every sync
  workflow on its own executor thread, unbounded by default, so each parked run holds an OS
  thread) and ``async`` (``await DBOS.recv_async`` in an async workflow on one event loop).
  Best = highest ``runs_per_s`` for ``park``, lowest ``p50_ms`` for ``wake``.

DBOS runs with its defaults: a pool of 20 connections, LISTEN/NOTIFY on Postgres, and on
SQLite a rollback journal with ``synchronous=FULL`` and a notification poller that wakes
every 1 s and checks each waiting ``recv`` with its own query. A sequential send-then-wait
loop falls into step with that poller, so SQLite wake latency is about 1 s by design: pass
``--n 50`` there, or ``--notification-poll`` to shorten the interval. ``--sqlite-journal
wal`` instead gives DBOS's SQLite file a WAL journal and ``synchronous=NORMAL`` (set through
a SQLAlchemy connect hook), for comparison with an engine that runs SQLite that way. Any
such departure from the defaults is reported in the JSON (``sqlite_journal``,
``notification_poll_s``, ``queue_polling_interval_sec``).
Everything is bounded: ``--park-timeout`` for parking, ``--max-seconds`` for the wake loop,
``--finish-timeout`` for finishing, and a ``--timeout`` watchdog for the whole process that
prints what was measured with ``"error"`` set and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

SHAPES = ("steps3", "park", "wake")
DEFAULT_N = {"steps3": 1000, "park": 10000, "wake": 1000}
VARIANTS: dict[str, tuple[str, ...]] = {
    "steps3": ("start", "queue", "direct", "async", "direct_async"),
    "park": ("sync", "async"),
    "wake": ("sync", "async"),
}
# steps3: the kind of steps (and workflow) each variant runs, for the best of each kind.
STEP_KIND = {
    "start": "sync",
    "queue": "sync",
    "direct": "sync",
    "async": "async",
    "direct_async": "async",
}
# The figure each shape's best variant is chosen on, and whether higher is better.
PRIMARY: dict[str, tuple[str, bool]] = {
    "steps3": ("wf_per_s", True),
    "park": ("runs_per_s", True),
    "wake": ("p50_ms", False),
}
DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
APP_NAME = "parkway_dbos_bench"
QUEUE_NAME = "bench_queue"
TOPIC = "bench"
RECV_TIMEOUT_S = 86400.0
PARK_POLL_S = 0.02
SEND_CHUNK = 1000
FAILED_STATUSES = "('ERROR', 'CANCELLED', 'MAX_RECOVERY_ATTEMPTS_EXCEEDED')"
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def log(msg: str) -> None:
    print(f"[dbos_bench] {msg}", file=sys.stderr, flush=True)


class Output:
    """Owns the real stdout, so that exactly one JSON line is ever written to it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._emitted = False
        self._stream: TextIO = sys.stdout

    def capture(self) -> None:
        """Keep a private handle on stdout and point fd 1 at stderr for everyone else."""
        sys.stdout.flush()
        self._stream = os.fdopen(os.dup(1), "w")
        os.dup2(2, 1)

    def emit(self, obj: dict[str, Any]) -> bool:
        with self._lock:
            if self._emitted:
                return False
            self._emitted = True
            self._stream.write(json.dumps(obj) + "\n")
            self._stream.flush()
            return True


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


# --------------------------------------------------------------------------- database


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


# --------------------------------------------------------------------------- workflows


@dataclass(frozen=True)
class Workflows:
    steps3: Callable[[int], int]
    steps3_async: Callable[[int], Coroutine[Any, Any, int]]
    parker: Callable[[], Any]
    parker_async: Callable[[], Coroutine[Any, Any, Any]]


def define_workflows() -> Workflows:
    """Register the benchmark's workflows with DBOS (called once, before DBOS launches)."""
    from dbos import DBOS

    @DBOS.step(name="bench_step_a")
    def step_a(i: int) -> int:
        return i + 1

    @DBOS.step(name="bench_step_b")
    def step_b(x: int) -> dict[str, int]:
        return {"v": x}

    @DBOS.step(name="bench_step_c")
    def step_c(d: dict[str, int]) -> int:
        return d["v"] * 2

    @DBOS.workflow(name="bench_steps3")
    def steps3(i: int) -> int:
        return step_c(step_b(step_a(i)))

    @DBOS.step(name="bench_step_a_async")
    async def step_a_async(i: int) -> int:
        return i + 1

    @DBOS.step(name="bench_step_b_async")
    async def step_b_async(x: int) -> dict[str, int]:
        return {"v": x}

    @DBOS.step(name="bench_step_c_async")
    async def step_c_async(d: dict[str, int]) -> int:
        return d["v"] * 2

    @DBOS.workflow(name="bench_steps3_async")
    async def steps3_async(i: int) -> int:
        return await step_c_async(await step_b_async(await step_a_async(i)))

    @DBOS.workflow(name="bench_parker")
    def parker() -> Any:
        REACHED.incr()
        return DBOS.recv(TOPIC, timeout_seconds=RECV_TIMEOUT_S)

    @DBOS.workflow(name="bench_parker_async")
    async def parker_async() -> Any:
        REACHED.incr()
        return await DBOS.recv_async(TOPIC, timeout_seconds=RECV_TIMEOUT_S)

    return Workflows(steps3, steps3_async, parker, parker_async)


def expected_steps3(i: int) -> int:
    return (i + 1) * 2


def launch_dbos(url: str, args: argparse.Namespace) -> None:
    from dbos import DBOS, DBOSConfig

    config: DBOSConfig = {
        "name": APP_NAME,
        "system_database_url": url,
        "log_level": args.log_level,
    }
    if args.notification_poll is not None:
        config["notification_listener_polling_interval_sec"] = args.notification_poll
    if args.db == "sqlite" and args.sqlite_journal == "wal":
        from sqlalchemy import Engine, event

        def synchronous_normal(dbapi_conn: Any, _record: Any) -> None:
            if isinstance(dbapi_conn, sqlite3.Connection):
                dbapi_conn.execute("PRAGMA synchronous=NORMAL")

        event.listen(Engine, "connect", synchronous_normal)
    DBOS(config=config)
    DBOS.launch()


def destroy_dbos(timeout_s: float) -> bool:
    """DBOS.destroy() on a side thread, so that a stuck shutdown cannot hang the harness."""
    from dbos import DBOS

    done = threading.Event()

    def target() -> None:
        try:
            DBOS.destroy()
        except Exception as e:  # pragma: no cover - reported, not fatal
            log(f"DBOS.destroy failed: {e!r}")
        done.set()

    threading.Thread(target=target, name="bench-destroy", daemon=True).start()
    if not done.wait(timeout_s):
        return False
    # Work already running on DBOS's executor (e.g. a cancelled async workflow's last
    # write) outlives destroy(); give it a moment so that it cannot re-create the SQLite
    # file after we delete it. Threads still parked in a sync recv() are left behind.
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline and any(
        t.name.startswith("dbos-executor-") for t in threading.enumerate()
    ):
        time.sleep(0.05)
    return True


# --------------------------------------------------------------------------- measurements


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default method)."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def latency_stats(latencies_s: Sequence[float]) -> dict[str, Any]:
    ms = sorted(x * 1000.0 for x in latencies_s)
    if not ms:
        return {"n_measured": 0}
    return {
        "n_measured": len(ms),
        "p50_ms": round(percentile(ms, 0.50), 3),
        "p99_ms": round(percentile(ms, 0.99), 3),
        "mean_ms": round(sum(ms) / len(ms), 3),
        "min_ms": round(ms[0], 3),
        "max_ms": round(ms[-1], 3),
    }


def process_figures() -> dict[str, Any]:
    figures: dict[str, Any] = {
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "threads": threading.active_count(),
        "executor_threads": sum(
            1 for t in threading.enumerate() if t.name.startswith("dbos-executor-")
        ),
    }
    try:
        import psutil  # type: ignore[import-untyped,unused-ignore]

        proc = psutil.Process()
        figures["os_threads"] = proc.num_threads()
        figures["rss_mb"] = round(proc.memory_info().rss / (1024.0 * 1024.0), 1)
    except ImportError:
        pass
    return figures


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


@dataclass
class Context:
    args: argparse.Namespace
    db: BenchDB
    wfs: Workflows
    partial: dict[str, Any]


# --------------------------------------------------------------------------- shapes


def steps3_start(ctx: Context) -> dict[str, Any]:
    from dbos import DBOS

    n = ctx.args.n
    t0 = time.perf_counter()
    handles = [DBOS.start_workflow(ctx.wfs.steps3, i) for i in range(n)]
    started = time.perf_counter() - t0
    results = [h.get_result() for h in handles]
    seconds = time.perf_counter() - t0
    return steps3_figures(n, results, seconds, started)


def steps3_queue(ctx: Context) -> dict[str, Any]:
    from dbos import DBOS

    n, poll = ctx.args.n, ctx.args.queue_poll
    queue = DBOS.register_queue(QUEUE_NAME, polling_interval_sec=poll)
    # The queue manager discovers new queues once a second: let its worker start first,
    # as it would have long before any work arrives in a real application.
    time.sleep(1.5)
    t0 = time.perf_counter()
    handles = [queue.enqueue(ctx.wfs.steps3, i) for i in range(n)]
    started = time.perf_counter() - t0
    results = [h.get_result(polling_interval_sec=poll) for h in handles]
    seconds = time.perf_counter() - t0
    figures = steps3_figures(n, results, seconds, started)
    figures["queue_polling_interval_sec"] = poll
    return figures


def steps3_async(ctx: Context) -> dict[str, Any]:
    from dbos import DBOS

    n = ctx.args.n

    async def run() -> dict[str, Any]:
        t0 = time.perf_counter()
        handles = [await DBOS.start_workflow_async(ctx.wfs.steps3_async, i) for i in range(n)]
        started = time.perf_counter() - t0
        results = await asyncio.gather(*(h.get_result() for h in handles))
        seconds = time.perf_counter() - t0
        return steps3_figures(n, list(results), seconds, started)

    return asyncio.run(run())


def steps3_direct(ctx: Context) -> dict[str, Any]:
    """The workflow function called directly, one call after the other (DBOS runs it
    in the calling thread, durably: its fastest way to run workflows here)."""
    n = ctx.args.n
    t0 = time.perf_counter()
    results = [ctx.wfs.steps3(i) for i in range(n)]
    seconds = time.perf_counter() - t0
    return steps3_figures(n, results, seconds, seconds)


def steps3_direct_async(ctx: Context) -> dict[str, Any]:
    """The async workflow function awaited directly, one call after the other."""
    n = ctx.args.n

    async def run() -> dict[str, Any]:
        t0 = time.perf_counter()
        results = [await ctx.wfs.steps3_async(i) for i in range(n)]
        seconds = time.perf_counter() - t0
        return steps3_figures(n, results, seconds, seconds)

    return asyncio.run(run())


def steps3_figures(n: int, results: list[int], seconds: float, started: float) -> dict[str, Any]:
    wrong = sum(1 for i, r in enumerate(results) if r != expected_steps3(i))
    if wrong:
        raise RuntimeError(f"{wrong}/{n} steps3 results were wrong")
    return {
        "wf_per_s": round(n / seconds, 1),
        "seconds": round(seconds, 4),
        "start_seconds": round(started, 4),
    }


def park_sync(ctx: Context) -> dict[str, Any]:
    from dbos import DBOS, SendMessage

    args, db = ctx.args, ctx.db
    baseline = db.size_bytes()
    t0 = time.perf_counter()
    ids = [DBOS.start_workflow(ctx.wfs.parker).get_workflow_id() for _ in range(args.n)]
    figures = park_figures(ctx, baseline, t0, wait_parked(db, args.n, t0, args.park_timeout))
    if args.finish == "send":
        for k in range(0, len(ids), SEND_CHUNK):
            DBOS.send_bulk([SendMessage(w, "go", TOPIC) for w in ids[k : k + SEND_CHUNK]])
        figures.update(wait_finished(db, args.n, args.finish_timeout))
    return figures


def park_async(ctx: Context) -> dict[str, Any]:
    from dbos import DBOS, SendMessage

    args, db = ctx.args, ctx.db

    async def run() -> dict[str, Any]:
        baseline = db.size_bytes()
        t0 = time.perf_counter()
        ids = []
        for _ in range(args.n):
            handle = await DBOS.start_workflow_async(ctx.wfs.parker_async)
            ids.append(handle.get_workflow_id())
        parked = await asyncio.to_thread(wait_parked, db, args.n, t0, args.park_timeout)
        figures = park_figures(ctx, baseline, t0, parked)
        if args.finish == "send":
            for k in range(0, len(ids), SEND_CHUNK):
                await DBOS.send_bulk_async(
                    [SendMessage(w, "go", TOPIC) for w in ids[k : k + SEND_CHUNK]]
                )
            figures.update(await asyncio.to_thread(wait_finished, db, args.n, args.finish_timeout))
        return figures

    return asyncio.run(run())


def park_figures(ctx: Context, baseline: int, t0: float, parked: dict[str, Any]) -> dict[str, Any]:
    figures = {**parked, **process_figures()}
    db_bytes = ctx.db.size_bytes()
    figures.update(
        db_bytes=db_bytes,
        db_baseline_bytes=baseline,
        bytes_per_run=round((db_bytes - baseline) / ctx.args.n, 1),
    )
    ctx.partial.update(figures)
    log(f"parked {ctx.args.n}: {figures}")
    return figures


def wake_sync(ctx: Context) -> dict[str, Any]:
    from dbos import DBOS, SendMessage

    args, db = ctx.args, ctx.db
    t0 = time.perf_counter()
    handles = [DBOS.start_workflow(ctx.wfs.parker) for _ in range(args.n)]
    parked = wait_parked(db, args.n, t0, args.park_timeout)
    ctx.partial.update(park_seconds=parked["seconds"])
    latencies: list[float] = []
    ctx.partial["latencies"] = latencies
    start = time.perf_counter()
    for i, handle in enumerate(handles):
        if time.perf_counter() - start > args.max_seconds:
            break
        t = time.perf_counter()
        DBOS.send(handle.get_workflow_id(), i, TOPIC)
        result = handle.get_result()
        latencies.append(time.perf_counter() - t)
        if result != i:
            raise RuntimeError(f"run {i} returned {result!r}")
    figures = wake_figures(ctx, latencies, time.perf_counter() - start)
    rest = [h.get_workflow_id() for h in handles[len(latencies) :]]
    if args.finish == "send" and rest:
        for k in range(0, len(rest), SEND_CHUNK):
            DBOS.send_bulk([SendMessage(w, "go", TOPIC) for w in rest[k : k + SEND_CHUNK]])
        figures.update(wait_finished(db, args.n, args.finish_timeout))
    return figures


def wake_async(ctx: Context) -> dict[str, Any]:
    from dbos import DBOS, SendMessage

    args, db = ctx.args, ctx.db

    async def run() -> dict[str, Any]:
        t0 = time.perf_counter()
        handles = [await DBOS.start_workflow_async(ctx.wfs.parker_async) for _ in range(args.n)]
        parked = await asyncio.to_thread(wait_parked, db, args.n, t0, args.park_timeout)
        ctx.partial.update(park_seconds=parked["seconds"])
        latencies: list[float] = []
        ctx.partial["latencies"] = latencies
        start = time.perf_counter()
        for i, handle in enumerate(handles):
            remaining = args.max_seconds - (time.perf_counter() - start)
            if remaining <= 0:
                break
            t = time.perf_counter()
            await DBOS.send_async(handle.get_workflow_id(), i, TOPIC)
            try:
                result = await asyncio.wait_for(handle.get_result(), timeout=remaining + 5)
            except TimeoutError:
                log(f"run {i} did not wake within the budget")
                break
            latencies.append(time.perf_counter() - t)
            if result != i:
                raise RuntimeError(f"run {i} returned {result!r}")
        figures = wake_figures(ctx, latencies, time.perf_counter() - start)
        rest = [h.get_workflow_id() for h in handles[len(latencies) :]]
        if args.finish == "send" and rest:
            for k in range(0, len(rest), SEND_CHUNK):
                await DBOS.send_bulk_async(
                    [SendMessage(w, "go", TOPIC) for w in rest[k : k + SEND_CHUNK]]
                )
            figures.update(await asyncio.to_thread(wait_finished, db, args.n, args.finish_timeout))
        return figures

    return asyncio.run(run())


def wake_figures(ctx: Context, latencies: list[float], seconds: float) -> dict[str, Any]:
    figures = {
        "park_seconds": ctx.partial.get("park_seconds"),
        **latency_stats(latencies),
        "wake_loop_seconds": round(seconds, 3),
        "budget_exhausted": len(latencies) < ctx.args.n,
    }
    ctx.partial.pop("latencies", None)
    ctx.partial.update(figures)
    return figures


RUNNERS: dict[tuple[str, str], Callable[[Context], dict[str, Any]]] = {
    ("steps3", "start"): steps3_start,
    ("steps3", "queue"): steps3_queue,
    ("steps3", "async"): steps3_async,
    ("steps3", "direct"): steps3_direct,
    ("steps3", "direct_async"): steps3_direct_async,
    ("park", "sync"): park_sync,
    ("park", "async"): park_async,
    ("wake", "sync"): wake_sync,
    ("wake", "async"): wake_async,
}


# --------------------------------------------------------------------------- drivers


def base_result(args: argparse.Namespace, variant: str) -> dict[str, Any]:
    from importlib.metadata import version

    result: dict[str, Any] = {
        "available": True,
        "peer": "dbos",
        "peer_version": version("dbos"),
        "shape": args.shape,
        "db": args.db,
        "n": args.n,
        "variant": variant,
        "python": sys.version.split()[0],
    }
    if args.db == "sqlite":
        result["sqlite_journal"] = args.sqlite_journal
        if args.shape in ("park", "wake"):
            result["notification_poll_s"] = args.notification_poll or 1.0
    if args.shape in ("park", "wake"):
        result["finish"] = args.finish
    return result


def run_single(args: argparse.Namespace, out: Output) -> int:
    """Measure one variant in this process; emit its JSON line."""
    wall0 = time.perf_counter()
    result = base_result(args, args.variant)
    db = BenchDB(args.db, args.pg_url, args.sqlite_journal)
    partial: dict[str, Any] = {}

    def finalize(extra: dict[str, Any]) -> dict[str, Any]:
        latencies = partial.pop("latencies", None)
        final = {**result, **partial, **extra}
        if latencies is not None and "p50_ms" not in final:
            final.update(latency_stats(latencies))
        final["wall_s"] = round(time.perf_counter() - wall0, 3)
        return final

    def watchdog() -> None:
        out.emit(finalize({"error": f"watchdog: gave up after {args.timeout:.0f}s"}))
        try:
            db.drop()
        finally:
            sys.stderr.flush()
            os._exit(1)

    timer = threading.Timer(args.timeout, watchdog)
    timer.daemon = True
    timer.start()

    code = 0
    extra: dict[str, Any] = {}
    try:
        db.create()
    except Exception as e:
        timer.cancel()
        out.emit({"available": False, "reason": f"cannot create {args.db} database: {e}"})
        return 0
    try:
        wfs = define_workflows()
        launch_dbos(db.url, args)
        extra = RUNNERS[(args.shape, args.variant)](Context(args, db, wfs, partial))
    except Exception as e:
        log(f"failed: {e!r}")
        extra = {"error": f"{type(e).__name__}: {e}"}
        code = 1
    finally:
        if not destroy_dbos(60.0):
            extra["shutdown"] = "DBOS.destroy timed out after 60s"
            log(extra["shutdown"])
        try:
            db.drop()
        except Exception as e:
            log(f"could not drop the database: {e!r}")
    timer.cancel()
    out.emit(finalize(extra))
    with contextlib.suppress(Exception):
        db.drop()  # again, for a temp dir that a straggling thread re-created
    return code


def child_argv(args: argparse.Namespace, variant: str) -> list[str]:
    argv = [
        sys.executable,
        "-m",
        "benchmarks.peers.dbos_bench",
        "--shape",
        args.shape,
        "--n",
        str(args.n),
        "--db",
        args.db,
        "--pg-url",
        args.pg_url,
        "--variant",
        variant,
        "--max-seconds",
        str(args.max_seconds),
        "--timeout",
        str(args.timeout),
        "--park-timeout",
        str(args.park_timeout),
        "--finish",
        args.finish,
        "--finish-timeout",
        str(args.finish_timeout),
        "--queue-poll",
        str(args.queue_poll),
        "--log-level",
        args.log_level,
        "--sqlite-journal",
        args.sqlite_journal,
    ]
    if args.notification_poll is not None:
        argv += ["--notification-poll", str(args.notification_poll)]
    return argv


def run_child(args: argparse.Namespace, variant: str) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    log(f"variant {variant}: starting")
    try:
        proc = subprocess.run(
            child_argv(args, variant),
            stdout=subprocess.PIPE,
            text=True,
            cwd=PROJECT_ROOT,
            env=env,
            timeout=args.timeout + 60,
        )
    except subprocess.TimeoutExpired:
        return {"available": True, "variant": variant, "error": "child process timed out"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if not lines:
        return {"variant": variant, "error": f"child exited {proc.returncode} without output"}
    child: dict[str, Any] = json.loads(lines[-1])
    log(f"variant {variant}: {child}")
    return child


def run_best(args: argparse.Namespace, out: Output) -> int:
    """Measure each variant in its own process; report the best at top level."""
    metric, higher = PRIMARY[args.shape]
    variants = {v: run_child(args, v) for v in VARIANTS[args.shape]}
    if any(r.get("available") is False for r in variants.values()):
        out.emit(next(r for r in variants.values() if r.get("available") is False))
        return 0
    ok = {v: r for v, r in variants.items() if "error" not in r and metric in r}
    if not ok:
        out.emit(
            {**base_result(args, "best"), "error": "every variant failed", "variants": variants}
        )
        return 1
    best = (max if higher else min)(ok, key=lambda v: float(ok[v][metric]))
    by_kind: dict[str, Any] = {}
    if args.shape == "steps3":
        # The best of each kind of steps, so that ratios compare like with like.
        for kind in ("sync", "async"):
            same = {v: r for v, r in ok.items() if STEP_KIND[v] == kind}
            if same:
                top = max(same, key=lambda v: float(same[v][metric]))
                by_kind[f"{kind}_variant"] = top
                by_kind[f"{kind}_{metric}"] = same[top][metric]
    out.emit(
        {
            **variants[best],
            **by_kind,
            "variant": best,
            "selected_by": f"{'max' if higher else 'min'} {metric}",
            "variants": {
                v: {k: x for k, x in r.items() if k not in _COMMON_KEYS}
                for v, r in variants.items()
            },
        }
    )
    return 0


_COMMON_KEYS = frozenset(
    {
        "available",
        "peer",
        "peer_version",
        "shape",
        "db",
        "n",
        "python",
        "variant",
        "finish",
        "sqlite_journal",
        "notification_poll_s",
    }
)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.peers.dbos_bench",
        description="Measure DBOS on parkway's benchmark shapes; print one JSON line.",
    )
    p.add_argument("--shape", required=True, choices=SHAPES)
    p.add_argument("--n", type=int, default=None, help="runs (default: per shape)")
    p.add_argument("--db", required=True, choices=("sqlite", "postgres"))
    p.add_argument("--pg-url", default=DEFAULT_ADMIN_URL, help="admin URL of the PG server")
    p.add_argument("--variant", default="best", help="best (default) or one of the shape's")
    p.add_argument("--max-seconds", type=float, default=120.0, help="wake: sending budget")
    p.add_argument("--park-timeout", type=float, default=600.0, help="bound on parking N runs")
    p.add_argument(
        "--finish",
        choices=("send", "shutdown"),
        default="send",
        help="park/wake: message every parked run and await it, or just shut down",
    )
    p.add_argument("--finish-timeout", type=float, default=120.0)
    p.add_argument("--timeout", type=float, default=1800.0, help="watchdog for one variant")
    p.add_argument("--queue-poll", type=float, default=0.05, help="steps3 queue poll interval")
    p.add_argument(
        "--notification-poll",
        type=float,
        default=None,
        help="SQLite recv poll interval (DBOS default: 1.0 s)",
    )
    p.add_argument(
        "--sqlite-journal",
        choices=("dbos", "wal"),
        default="dbos",
        help="dbos: as DBOS ships (rollback journal, synchronous=FULL); "
        "wal: WAL journal and synchronous=NORMAL",
    )
    p.add_argument("--log-level", default="WARNING", help="DBOS log level (to stderr)")
    args = p.parse_args(argv)
    if args.n is None:
        args.n = DEFAULT_N[args.shape]
    if args.n <= 0:
        p.error("--n must be positive")
    if args.variant != "best" and args.variant not in VARIANTS[args.shape]:
        p.error(f"--variant for {args.shape}: best, {', '.join(VARIANTS[args.shape])}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    out = Output()
    out.capture()
    try:
        import dbos  # noqa: F401
    except Exception as e:
        out.emit({"available": False, "reason": f"dbos is not importable: {e!r}"})
        return 0
    if args.variant == "best":
        return run_best(args, out)
    return run_single(args, out)


if __name__ == "__main__":
    code = main()
    sys.stderr.flush()
    # DBOS's executor threads may still sit in recv(); never wait for them at exit.
    os._exit(code)
