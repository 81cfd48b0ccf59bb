"""Throwaway PostgreSQL databases for tests: one per test, cloned from a template.

The template database ``parkway_tpl_<digest>`` holds parkway's schema, named
by the digest of the migrations: checkouts with different schemas (two
branches tested at once on one server) never share or rebuild each other's
template. It is built once, at the first use of that schema (the digest is
also kept as the database's comment), so each test only pays ``CREATE
DATABASE ... TEMPLATE parkway_tpl_<digest>``. Databases are dropped when the next one is made
and at exit; ones left behind by a crashed session (dead pid) are dropped at
the first use.

The admin URL is ``PARKWAY_TEST_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/test``). With no server there, tests
skip, unless ``CI`` is set: then they fail, so CI never passes by skipping.
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import concurrent.futures
import contextlib
import hashlib
import itertools
import os
import re
import time
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from parkway.store.postgres import MIGRATIONS, PostgresStore

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"
PREFIX = "parkway_t_"

_counter = itertools.count(1)
_created: list[str] = []
# Clones are prepared ahead, several at once: CREATE DATABASE waits mostly on
# fsyncs, which concurrent clones share (one at a time: ~5/s here; three: ~40/s).
AHEAD = 4
_background = concurrent.futures.ThreadPoolExecutor(3, thread_name_prefix="parkway-test-db")
_ahead: collections.deque[concurrent.futures.Future[str]] = collections.deque()
_state: dict[str, object] = {}


def admin_url() -> str:
    return os.environ.get("PARKWAY_TEST_POSTGRES_URL") or DEFAULT_ADMIN_URL


def url_for(database: str) -> str:
    """The admin URL pointed at ``database``."""
    parts = urlsplit(admin_url())
    return urlunsplit(parts._replace(path=f"/{database}"))


def _connect(database: str | None = None) -> psycopg.Connection[tuple[object, ...]]:
    url = admin_url() if database is None else url_for(database)
    return psycopg.connect(url, autocommit=True, connect_timeout=3)


def _unavailable(exc: Exception) -> None:
    message = (
        f"PostgreSQL is not reachable at {admin_url()} ({str(exc).strip().splitlines()[0]}); "
        "start PostgreSQL on 127.0.0.1:5432 or set PARKWAY_TEST_POSTGRES_URL"
    )
    _state["unavailable"] = message
    _fail_or_skip(message)


def _fail_or_skip(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for version, script in MIGRATIONS:
        digest.update(f"{version}\n{script}\n".encode())
    return f"parkway schema {digest.hexdigest()[:16]}"


TEMPLATE = "parkway_tpl_" + _fingerprint().rsplit(" ", 1)[1]


def _ensure_template(admin: psycopg.Connection[tuple[object, ...]]) -> None:
    fingerprint = _fingerprint()
    row = admin.execute(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
        (TEMPLATE,),
    ).fetchone()
    if row is not None and row[0] == fingerprint:
        return
    if row is not None:
        admin.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
    with contextlib.suppress(psycopg.errors.DuplicateDatabase):  # built by another session
        admin.execute(f'CREATE DATABASE "{TEMPLATE}"')
    store = PostgresStore.from_url(url_for(TEMPLATE))
    # In a thread of its own: the caller may be inside a running event loop.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, _open_close(store)).result()
    admin.execute(f"COMMENT ON DATABASE \"{TEMPLATE}\" IS '{fingerprint}'")


async def _open_close(store: PostgresStore) -> None:
    await store.open()  # creates the schema (migrations run under an advisory lock)
    await store.close()


def _drop_stale(admin: psycopg.Connection[tuple[object, ...]]) -> None:
    """Drop test databases whose session (pid on this machine) is gone."""
    rows = admin.execute(
        "SELECT datname FROM pg_database WHERE datname LIKE %s", (PREFIX + "%",)
    ).fetchall()
    for (name,) in rows:
        match = re.match(rf"^{PREFIX}(\d+)_\d+$", str(name))
        if match and not _alive(int(match.group(1))):
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _drop(admin: psycopg.Connection[tuple[object, ...]], names: list[str]) -> None:
    for name in names:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _clone(admin: psycopg.Connection[tuple[object, ...]], name: str) -> None:
    for attempt in range(50):
        try:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
            return
        except psycopg.errors.ObjectInUse:
            # Another session is connected to the template (building it): wait.
            if attempt == 49:
                raise
            time.sleep(0.1)


def _prepare(drop: list[str], name: str) -> str:
    """Drop finished tests' databases and clone the next one (in the background)."""
    with _connect() as admin:
        _drop(admin, drop)
        _clone(admin, name)
    return name


def _next_name() -> str:
    return f"{PREFIX}{os.getpid()}_{next(_counter)}"


def _drop_all() -> None:
    while _ahead:
        with contextlib.suppress(Exception):
            _created.append(_ahead.popleft().result(timeout=60))
    if _created:
        with contextlib.suppress(psycopg.Error), _connect() as admin:
            _drop(admin, _created)
    _created.clear()


def new_database() -> str:
    """A fresh database holding parkway's schema, for this test alone; its URL.

    The next ones are cloned in the background while tests run (and finished
    tests' databases dropped), so a test rarely waits for ``CREATE DATABASE``.
    Skips the test (fails it under ``CI``) when PostgreSQL is not reachable.
    """
    if "unavailable" in _state:
        _fail_or_skip(str(_state["unavailable"]))
    if "ready" not in _state:
        try:
            admin = _connect()
        except psycopg.OperationalError as exc:
            _unavailable(exc)
            raise
        with admin:
            _drop_stale(admin)
            _ensure_template(admin)
        atexit.register(_drop_all)
        _state["ready"] = True
    # The previous test's engines are closed by now: its database can go.
    finished = list(_created)
    _created.clear()
    while len(_ahead) < AHEAD:
        _ahead.append(_background.submit(_prepare, [], _next_name()))
    try:
        name = _ahead.popleft().result(timeout=60)
    except psycopg.OperationalError as exc:
        _unavailable(exc)
        raise
    _created.append(name)
    _ahead.append(_background.submit(_prepare, finished, _next_name()))
    return url_for(name)
