"""What every parkway benchmark shape shares: percentiles, process figures, the database.

The shapes live in ``benchmarks.parkway_bench`` (and the modules it names); each runs
in a fresh process on a fresh database made here (a temporary SQLite file, or a new
database on the PostgreSQL server named by ``--pg-url``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from parkway import Engine

DEFAULT_PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/test"


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), like the DBOS harness."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = (len(ordered) - 1) * q
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def latency(values_s: Sequence[float], extremes: bool = False) -> dict[str, Any]:
    """Percentiles and mean of latencies in seconds, in ms. ``extremes``: min and max too,
    and ``{"n_measured": 0}`` for no latencies (a peer's wake loop that woke nothing)."""
    ms = [v * 1000 for v in values_s]
    if extremes and not ms:
        return {"n_measured": 0}
    figures = {
        "p50_ms": round(percentile(ms, 0.5), 3),
        "p99_ms": round(percentile(ms, 0.99), 3),
        "p999_ms": round(percentile(ms, 0.999), 3),
        "mean_ms": round(sum(ms) / len(ms), 3),
        "n_measured": len(ms),
    }
    if extremes:
        figures.update(min_ms=round(min(ms), 3), max_ms=round(max(ms), 3))
    return figures


def process_figures() -> dict[str, Any]:
    return {
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "threads": threading.active_count(),
    }


def db_bytes(path: Path) -> int:
    if not path.exists():
        return 0
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


class Bench:
    def __init__(
        self, db: str, folder: Path, pg_admin: str, options: argparse.Namespace | None = None
    ) -> None:
        # The shape's command-line options (--workers, --via, --steps, ...).
        self.options = options if options is not None else argparse.Namespace()
        self.path = folder / "bench.db"
        self.url = "memory://" if db == "memory" else f"sqlite:///{self.path}"
        self.pg_admin, self.pg_database = pg_admin, ""
        self._pg: Any = None  # count_completed's connection
        if db == "postgres":
            # A fresh database on the server, dropped at the end (see close()).
            import psycopg

            self.pg_database = f"parkway_bench_{os.getpid()}"
            with psycopg.connect(pg_admin, autocommit=True) as conn:
                # A shape killed outright (its runner stopped, say) left its database
                # behind: one named after a process that no longer exists is dropped,
                # unless someone is connected to it (then it is not a leftover).
                names = conn.execute(
                    "SELECT datname FROM pg_database WHERE datname LIKE 'parkway\\_bench\\_%'"
                ).fetchall()
                for (name,) in names:
                    pid = name.rpartition("_")[2]
                    if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                        with contextlib.suppress(psycopg.Error):
                            conn.execute(f"DROP DATABASE IF EXISTS {name}")
                conn.execute(f"DROP DATABASE IF EXISTS {self.pg_database}")
                conn.execute(f"CREATE DATABASE {self.pg_database}")
            base, _, _ = pg_admin.rpartition("/")
            self.url = f"{base}/{self.pg_database}"

    def close(self) -> None:
        if self._pg is not None:
            self._pg.close()
        if self.pg_database:
            import psycopg

            with psycopg.connect(self.pg_admin, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {self.pg_database} WITH (FORCE)")

    def engine(self, **options: Any) -> Engine:
        telemetry = getattr(self.options, "telemetry", "off")
        if telemetry in ("on", "metrics"):
            options.setdefault("metrics", _registry())
        if telemetry in ("on", "tracing"):
            options.setdefault(
                "tracing", _tracer_provider(getattr(self.options, "trace_ratio", 1.0))
            )
        cached = getattr(self.options, "cached_runs", None)
        if cached is not None:
            options.setdefault("cached_runs", cached)
        return Engine(self.url, **options)

    def count_completed(self) -> int:
        """How many runs have completed, by one cheap query on a connection of its own."""
        query = "SELECT count(*) FROM {}runs WHERE status = 'completed'"
        if self.pg_database:
            import psycopg

            if self._pg is None:
                self._pg = psycopg.connect(self.url, autocommit=True)
            row = self._pg.execute(query.format("parkway.")).fetchone()
        else:
            with sqlite3.connect(self.path) as conn:
                row = conn.execute(query.format("")).fetchone()
        return int(row[0]) if row else 0


def _registry() -> Any:
    """A Prometheus registry of the shape's own (``--telemetry on``)."""
    from prometheus_client import CollectorRegistry

    return CollectorRegistry()


def _tracer_provider(ratio: float = 1.0) -> Any:
    """An OpenTelemetry SDK provider whose spans are batched to an exporter that drops
    them (``--telemetry on``): the cost of making and ending spans, not of shipping them.
    ``ratio`` < 1: that share of traces sampled (``--trace-ratio``), as production
    tracing usually is."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    class Dropped(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    sampler = ParentBased(TraceIdRatioBased(ratio)) if ratio < 1 else None
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    return provider


def table_bytes(path: Path) -> dict[str, dict[str, int]]:
    """Bytes per table and index of a SQLite file, after a TRUNCATE checkpoint.

    From the ``dbstat`` virtual table: ``pages`` is what the b-tree's pages take on
    disk, ``payload`` the bytes of its records in them, ``cells`` its entries
    (rows, or index entries; interior pages' cells included).
    """
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = conn.execute(
            "SELECT name, SUM(pgsize), SUM(payload), SUM(ncell) FROM dbstat GROUP BY name"
        ).fetchall()
    finally:
        conn.close()
    return {
        name: {"pages": int(pages), "payload": int(payload), "cells": int(cells)}
        for name, pages, payload, cells in rows
    }


class Workers:
    """``parkway worker`` processes on an app module written next to the database.

    This process is a client only: its engine knows the workflow by name (for
    ``start``) and leaves running it to the workers.
    """

    def __init__(self, bench: Bench, module: str, source: str, workflow: str) -> None:
        self.folder = bench.path.parent
        self.module = module
        (self.folder / f"{module}.py").write_text(source.format(url=bench.url))
        self.client = bench.engine(worker=False)

        async def elsewhere(ctx: Any, input: Any) -> Any:
            raise AssertionError("runs in the worker processes")

        self.client.workflow(workflow)(elsewhere)
        self.processes: list[subprocess.Popen[bytes]] = []

    def start(self, count: int) -> None:
        for _ in range(count):
            self.processes.append(
                subprocess.Popen(
                    [sys.executable, "-m", "parkway", "worker", f"{self.module}:engine"],
                    cwd=self.folder,
                    stderr=subprocess.DEVNULL,
                )
            )

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(timeout=60)
