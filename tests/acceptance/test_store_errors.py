"""Store failures reach the caller as StoreError subclasses naming the cause and
whether the operation took effect; HTTP answers them 503 with Retry-After; a
SQLite store on a full disk loses nothing and comes back once 1 MiB is freed."""

from __future__ import annotations

import sqlite3
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
