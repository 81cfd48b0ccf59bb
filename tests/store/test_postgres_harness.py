"""The tests' PostgreSQL harness drops only what harness runs made, and only once
those runs are over: never a foreign ``parkway_t_*`` database, never a live run's."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from ..conftest import postgres_harness

HARNESS = postgres_harness()
pytestmark = pytest.mark.backends("postgres")


def exists(admin: psycopg.Connection[tuple[object, ...]], name: str) -> bool:
    row = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
    return row is not None


@pytest.fixture
def admin() -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    HARNESS.new_database()  # (skips, or fails under CI, without a server; holds our lock)
    made: list[str] = []
    with psycopg.connect(HARNESS.admin_url(), autocommit=True) as conn:
        conn.info  # noqa: B018 (connected)
        yield conn
        for (name,) in conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", ("parkway\\_t\\_harness%",)
        ).fetchall():
            made.append(str(name))
        for name in made:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_cleanup_leaves_foreign_databases_and_live_runs_alone(
    admin: psycopg.Connection[tuple[object, ...]],
) -> None:
    tag = uuid.uuid4().hex[:6]
    # Another tool's database, named as the old harness named its own, with a pid no
    # process here can have (past Linux's pid_max): an old harness dropped such ones.
    foreign = f"parkway_t_{4_194_305 + int(tag, 16)}_1"
    admin.execute(f'CREATE DATABASE "{foreign}"')
    try:
        check_cleanup(admin, tag, foreign)
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{foreign}" WITH (FORCE)')


def check_cleanup(admin: psycopg.Connection[tuple[object, ...]], tag: str, foreign: str) -> None:
    # A marked database whose name is not of its run's: not the harness's making.
    misnamed = f"parkway_t_harness{tag}_other"
    # A live run's (its session holds its lock), and a finished run's.
    live_run, dead_run = f"harness{tag}live", f"harness{tag}dead"
    live, dead = f"parkway_t_{live_run}_1", f"parkway_t_{dead_run}_1"
    for name in (misnamed, live, dead):
        admin.execute(f'CREATE DATABASE "{name}"')
    HARNESS.mark(admin, misnamed, run=dead_run)
    HARNESS.mark(admin, live, run=live_run)
    HARNESS.mark(admin, dead, run=dead_run)

    with psycopg.connect(HARNESS.admin_url(), autocommit=True) as holder:
        holder.execute(
            "SELECT pg_advisory_lock(%s, %s)", (HARNESS.LOCK_CLASS, HARNESS._lock_key(live_run))
        )
        assert HARNESS.run_alive(admin, live_run)
        assert not HARNESS.run_alive(admin, dead_run)

        dropped = HARNESS.drop_stale(admin)

        assert dead in dropped
        assert not exists(admin, dead)
        for name in (foreign, misnamed, live):
            assert exists(admin, name), name
    # The live run ended (its connection closed): now its database goes too.
    assert live in HARNESS.drop_stale(admin)
    assert exists(admin, foreign) and exists(admin, misnamed)


def test_this_run_s_databases_are_marked_and_kept_while_it_lives(
    admin: psycopg.Connection[tuple[object, ...]],
) -> None:
    url = HARNESS.new_database()
    name = url.rsplit("/", 1)[1].split("?")[0]
    assert name.startswith(f"{HARNESS.PREFIX}{HARNESS.RUN}_")
    [(comment,)] = admin.execute(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
        (name,),
    ).fetchall()
    assert comment == f"{HARNESS.MARKER}{HARNESS.RUN}"
    assert HARNESS.run_alive(admin, HARNESS.RUN)  # (held by this session)
    assert name not in HARNESS.drop_stale(admin)
    assert exists(admin, name)


def test_the_admin_database_can_be_named_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HARNESS.URL_ENV, "postgresql://ci@db.internal:5433/postgres")
    monkeypatch.setenv(HARNESS.ADMIN_DB_ENV, "ci_admin")
    assert HARNESS.admin_url() == "postgresql://ci@db.internal:5433/ci_admin"
    monkeypatch.delenv(HARNESS.URL_ENV)
    monkeypatch.delenv(HARNESS.ADMIN_DB_ENV)
    assert HARNESS.admin_url() == HARNESS.DEFAULT_ADMIN_URL
