"""Store failures reach the caller as StoreError subclasses naming the cause and
whether the operation took effect; HTTP answers them 503 with Retry-After; a
SQLite store on a full disk loses nothing and comes back once 1 MiB is freed."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from parkway import (
    Engine,
    StoreBusyError,
    StoreConflictError,
    StoreConnectionError,
    StoreError,
    StoreFullError,
)
from parkway.http import create_app
from parkway.store.sqlite import store as sqlite_store

MiB = 1024 * 1024


def register(engine: Engine) -> None:
    @engine.workflow()
    async def note(ctx: Any, text: str) -> int:
        return await ctx.step(lambda: len(text), name="measure")


# -- the errors ------------------------------------------------------------------------------


def test_each_store_error_names_its_cause_and_what_took_effect() -> None:
    for cls in (StoreFullError, StoreBusyError, StoreConnectionError, StoreConflictError):
        assert issubclass(cls, StoreError)
        error = cls("x")
        assert error.took_effect is False and not error.outcome_unknown
        assert error.retry_after > 0
    assert StoreConflictError("x").conflict and not StoreBusyError("x").conflict
    unknown = StoreConnectionError("lost while committing", outcome_unknown=True)
    assert unknown.took_effect is None and unknown.outcome_unknown
    assert StoreError("x", took_effect=None).outcome_unknown


async def test_a_postgres_server_that_does_not_answer_is_a_connection_error() -> None:
    engine = Engine("postgresql://postgres@127.0.0.1:1/parkway?connect_timeout=2")
    with pytest.raises(StoreConnectionError) as caught:
        await engine.open()
    assert caught.value.took_effect is False
    assert "cannot connect to PostgreSQL" in str(caught.value)


@pytest.fixture
def short_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT_MS", 200)


@pytest.mark.usefixtures("short_busy_timeout")
async def test_a_sqlite_database_locked_by_another_writer_is_a_busy_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "busy.db"
    engine = Engine(f"sqlite:///{path}", worker=False)
    register(engine)
    async with engine:
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(StoreBusyError) as caught:
                await engine.start("note", "locked out", id="n-1")
            assert caught.value.took_effect is False
            assert "locked" in str(caught.value)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        # Nothing was saved: the same start goes through now.
        await engine.start("note", "let in", id="n-1")
        assert (await engine.get_run("n-1")).input == "let in"


async def test_http_answers_a_store_failure_503_with_retry_after(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = iter(
        [
            StoreFullError("the disk is full"),
            StoreBusyError("database is locked"),
            StoreConnectionError("connection refused"),
        ]
    )

    async def failing(**_: Any) -> None:
        raise next(failures)

    monkeypatch.setattr(engine, "list_runs", failing)
    transport = httpx.ASGITransport(app=create_app(engine, api_token=""))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        for error, after in [("StoreFullError", "30"), ("StoreBusyError", "1")]:
            answer = await c.get("/runs")
            assert answer.status_code == 503, answer.text
            assert answer.json()["error"] == error
            assert answer.headers["retry-after"] == after
        health = await c.get("/healthz")
        assert health.status_code == 503
        assert health.json()["error"] == "StoreConnectionError"
        assert health.headers["retry-after"] == "5"


# -- a full disk -----------------------------------------------------------------------------


@pytest.fixture
def small_volume(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted for this test (as root only)."""
    where = tmp_path / f"volume-{uuid.uuid4().hex[:8]}"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a 4 MiB tmpfs to fill needs root; run as root to test a full disk")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(
            f"cannot mount a 4 MiB tmpfs to fill ({mounted.stderr.strip()}): the container "
            "lacks CAP_SYS_ADMIN"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def free_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


async def fill(engine: Engine, prefix: str) -> tuple[list[str], StoreFullError]:
    """Start runs until the disk is full for good (three refusals in a row); the ids of
    those that were started, and the last refusal."""
    started: list[str] = []
    refusals: list[StoreFullError] = []
    n = 0
    while len(refusals) < 3:
        run_id = f"{prefix}-{n}"
        n += 1
        try:
            await engine.start("note", "x" * 3000, id=run_id)
        except StoreFullError as exc:
            refusals.append(exc)
            continue
        started.append(run_id)
        refusals.clear()
    return started, refusals[-1]


@pytest.mark.timeout(300)
async def test_a_full_disk_is_a_store_error_loses_nothing_and_recovers_with_1_mib(
    small_volume: Path,
) -> None:
    url = f"sqlite:///{small_volume / 'full.db'}"
    ballast = small_volume / "ballast"
    engine = Engine(url, worker=False)
    register(engine)
    async with engine:
        ballast.write_bytes(bytes(MiB))  # the MiB freed later
        started, refused = await fill(engine, "before")
        assert started, "nothing fit at all"
        assert refused.took_effect is False and "disk is full" in str(refused)
        assert free_bytes(small_volume) < 64 * 1024
    # The worker restarts only after the space is freed: it must come back by itself.
    ballast.unlink()

    engine = Engine(url)
    register(engine)
    async with engine:
        for run_id in started:  # nothing committed was lost
            assert (await engine.get_run(run_id)).id == run_id
        # The store takes writes again: new runs start and complete.
        handles = [await engine.start("note", "after", id=f"after-{i}") for i in range(20)]
        for handle in handles:
            assert await handle.result(timeout=30) == 5
    with contextlib.closing(sqlite3.connect(small_volume / "full.db")) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


@pytest.mark.timeout(300)
async def test_a_store_that_filled_its_disk_comes_back_without_a_restart(
    small_volume: Path,
) -> None:
    url = f"sqlite:///{small_volume / 'full.db'}"
    ballast = small_volume / "ballast"
    engine = Engine(url, worker=False)
    register(engine)
    async with engine:
        ballast.write_bytes(bytes(MiB))
        started, _ = await fill(engine, "before")
        ballast.unlink()
        again = [await engine.start("note", "y" * 3000, id=f"again-{i}") for i in range(50)]
        assert len(again) == 50
        for run_id in [*started, *(h.id for h in again)]:
            assert (await engine.get_run(run_id)).id == run_id
    with contextlib.closing(sqlite3.connect(small_volume / "full.db")) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_postgres_failures_are_told_by_their_cause() -> None:
    psycopg = pytest.importorskip("psycopg", reason="the postgres extra")
    from parkway.store.postgres.failures import failed

    params = {"user": "app", "dbname": "parkway"}
    cases = [
        (psycopg.errors.DiskFull("could not extend file: No space left"), StoreFullError, False),
        (psycopg.errors.LockNotAvailable("could not obtain lock"), StoreBusyError, False),
        (psycopg.errors.TooManyConnections("too many clients"), StoreBusyError, False),
        (psycopg.errors.DeadlockDetected("deadlock detected"), StoreConflictError, False),
        (psycopg.errors.AdminShutdown("terminating connection"), StoreConnectionError, False),
    ]
    for exc, cls, took_effect in cases:
        error = failed(params, "db:5432", exc)
        assert type(error) is cls, (exc, error)
        assert isinstance(error, StoreError) and error.took_effect is took_effect
    cut = failed(params, "db:5432", psycopg.OperationalError("server closed"), committing=True)
    assert type(cut) is StoreConnectionError and cut.took_effect is None
    assert cut.outcome_unknown
    assert failed(params, "db:5432", psycopg.errors.DeadlockDetected("x")).conflict
