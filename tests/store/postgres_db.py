"""Throwaway PostgreSQL databases for tests: one per test, cloned from a template.

The template database ``parkway_tpl_<digest>`` holds parkway's schema, named
by the digest of the migrations: checkouts with different schemas (two
branches tested at once on one server) never share or rebuild each other's
template. It is built once, at the first use of that schema (the digest is
also kept as the database's comment), so each test only pays ``CREATE
DATABASE ... TEMPLATE parkway_tpl_<digest>``.

Each test session (each pytest process) is a *run* with a random id of its
own: its databases are named ``parkway_t_<run>_<n>`` and carry the comment
``parkway test harness run <run>`` (the marker). The session drops the ones it
made, as tests finish and at exit. Ones a crashed session left behind are
dropped by a later session only when both hold: the marker names a harness run,
and that run is over, which the server itself knows: every session holds a
session-level advisory lock named by its run id for as long as it lives (on a
connection of its own), on any host. Any other database (``parkway_t_*`` ones
included, made by another tool or an older harness) is never touched.

The admin URL (where databases are created and dropped from) is
``PARKWAY_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/postgres``);
``PARKWAY_TEST_POSTGRES_ADMIN_DB`` names another admin database on that server.
With no server there, tests skip, unless ``CI`` is set: then they fail, so CI
never passes by skipping.
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
import secrets
import time
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from parkway.store.postgres import MIGRATIONS, PostgresStore

DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
URL_ENV, ADMIN_DB_ENV = "PARKWAY_TEST_POSTGRES_URL", "PARKWAY_TEST_POSTGRES_ADMIN_DB"
PREFIX = "parkway_t_"
# This session's run id (a letter first: never mistaken for a pid by older harnesses),
# the marker its databases carry, and the advisory lock that says it is alive.
RUN = "r" + secrets.token_hex(6)
MARKER = "parkway test harness run "
LOCK_CLASS = 0x70617274  # (the first int4 key of the two-key advisory locks: "part")

_counter = itertools.count(1)
_created: list[str] = []
# Clones are prepared ahead, several at once: CREATE DATABASE waits mostly on
# fsyncs, which concurrent clones share (one at a time: ~5/s here; three: ~40/s).
AHEAD = 4
_background = concurrent.futures.ThreadPoolExecutor(3, thread_name_prefix="parkway-test-db")
_ahead: collections.deque[concurrent.futures.Future[str]] = collections.deque()
_state: dict[str, object] = {}


def admin_url() -> str:
    url = os.environ.get(URL_ENV) or DEFAULT_ADMIN_URL
    database = os.environ.get(ADMIN_DB_ENV)
    if database:
        url = urlunsplit(urlsplit(url)._replace(path=f"/{database}"))
    return url


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
        f"start PostgreSQL on 127.0.0.1:5432 or set {URL_ENV} (see docs/contributing.md)"
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


def _lock_key(run: str) -> int:
    """The second int4 key of ``run``'s advisory lock."""
    digest = hashlib.sha256(run.encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


def _hold_run_lock() -> None:
    """Hold this run's advisory lock for as long as the session lives: a connection
    of its own, kept open (PostgreSQL frees the lock when it closes, crash or not)."""
    holder = _connect()
    holder.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_CLASS, _lock_key(RUN)))
    _state["lock_holder"] = holder


def mark(admin: psycopg.Connection[tuple[object, ...]], name: str, run: str = RUN) -> None:
    """Mark database ``name`` as made by harness run ``run``."""
    admin.execute(f"COMMENT ON DATABASE \"{name}\" IS '{MARKER}{run}'")


def run_alive(admin: psycopg.Connection[tuple[object, ...]], run: str) -> bool:
    """Whether harness run ``run``'s session still holds its lock (on any host)."""
    key = _lock_key(run)
    row = admin.execute("SELECT pg_try_advisory_lock(%s, %s)", (LOCK_CLASS, key)).fetchone()
    if row is None or not row[0]:
        return True
    admin.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_CLASS, key))
    return False


def drop_stale(admin: psycopg.Connection[tuple[object, ...]]) -> list[str]:
    """Drop the databases of harness runs that are over; their names. Only databases
    marked by the harness are looked at (see the module)."""
    rows = admin.execute(
        "SELECT datname, shobj_description(oid, 'pg_database') FROM pg_database "
        "WHERE datname LIKE %s AND shobj_description(oid, 'pg_database') LIKE %s",
        (PREFIX.replace("_", "\\_") + "%", MARKER + "%"),
    ).fetchall()
    dropped: list[str] = []
    verdicts: dict[str, bool] = {}
    for name, comment in rows:
        run = str(comment).removeprefix(MARKER)
        if run == RUN or not str(name).startswith(f"{PREFIX}{run}_"):
            continue  # (ours: dropped as tests finish; a name not of its run: not ours)
        if run not in verdicts:
            verdicts[run] = run_alive(admin, run)
        if not verdicts[run]:
            quoted = str(name).replace('"', '""')
            admin.execute(f'DROP DATABASE IF EXISTS "{quoted}" WITH (FORCE)')
            dropped.append(str(name))
    return dropped


def _drop(admin: psycopg.Connection[tuple[object, ...]], names: list[str]) -> None:
    for name in names:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _clone(admin: psycopg.Connection[tuple[object, ...]], name: str) -> None:
    for attempt in range(50):
        try:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{TEMPLATE}"')
            mark(admin, name)
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
    return f"{PREFIX}{RUN}_{next(_counter)}"


def own_database(label: str) -> str:
    """The name for a database a test makes itself (``CREATE DATABASE``): of this run,
    so that it is marked and cleaned up as the harness's own (call :func:`mark`)."""
    return f"{PREFIX}{RUN}_{label}"


def _drop_all() -> None:
    while _ahead:
        with contextlib.suppress(Exception):
            _created.append(_ahead.popleft().result(timeout=60))
    if _created:
        with contextlib.suppress(psycopg.Error), _connect() as admin:
            _drop(admin, _created)
    _created.clear()
    holder = _state.pop("lock_holder", None)
    if isinstance(holder, psycopg.Connection):
        holder.close()


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
            _hold_run_lock()
            drop_stale(admin)
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
