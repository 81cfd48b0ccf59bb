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
import contextlib
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from benchmarks.harness import latency
from benchmarks.peers.dbos_db import BenchDB
from benchmarks.peers.dbos_shapes import (
    RUNNERS,
    Context,
    define_workflows,
    destroy_dbos,
    launch_dbos,
)
from benchmarks.procs import Output, best_variant, logger, run_child, watchdog

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

log = logger("dbos_bench")


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
            final.update(latency(latencies, extremes=True))
        final["wall_s"] = round(time.perf_counter() - wall0, 3)
        return final

    def gave_up() -> None:
        out.emit(finalize({"error": f"watchdog: gave up after {args.timeout:.0f}s"}))
        try:
            db.drop()
        finally:
            sys.stderr.flush()
            os._exit(1)

    timer = watchdog(args.timeout, gave_up)
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
        *("--shape", args.shape, "--n", str(args.n), "--db", args.db),
        *("--pg-url", args.pg_url, "--variant", variant),
        *("--max-seconds", str(args.max_seconds), "--timeout", str(args.timeout)),
        *("--park-timeout", str(args.park_timeout), "--finish", args.finish),
        *("--finish-timeout", str(args.finish_timeout), "--queue-poll", str(args.queue_poll)),
        *("--log-level", args.log_level, "--sqlite-journal", args.sqlite_journal),
    ]
    if args.notification_poll is not None:
        argv += ["--notification-poll", str(args.notification_poll)]
    return argv


def run_variant(args: argparse.Namespace, variant: str) -> dict[str, Any]:
    """One variant, in a fresh child process of its own."""
    log(f"variant {variant}: starting")
    child = run_child(
        "benchmarks.peers.dbos_bench", child_argv(args, variant), args.timeout + 60, log
    )
    return {"variant": variant, **child}


def run_best(args: argparse.Namespace, out: Output) -> int:
    """Measure each variant in its own process; report the best at top level."""
    metric, higher = PRIMARY[args.shape]
    variants = {v: run_variant(args, v) for v in VARIANTS[args.shape]}
    if any(r.get("available") is False for r in variants.values()):
        out.emit(next(r for r in variants.values() if r.get("available") is False))
        return 0
    best, ok = best_variant(variants, metric, higher)
    if best is None:
        out.emit(
            {**base_result(args, "best"), "error": "every variant failed", "variants": variants}
        )
        return 1
    by_kind: dict[str, Any] = {}
    if args.shape == "steps3":
        # The best of each kind of steps, so that ratios compare like with like.
        for kind in ("sync", "async"):
            top, _ = best_variant(
                {v: r for v, r in ok.items() if STEP_KIND[v] == kind}, metric, True
            )
            if top is not None:
                by_kind[f"{kind}_variant"] = top
                by_kind[f"{kind}_{metric}"] = ok[top][metric]
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
