"""What only the PostgreSQL store has to get right: connecting, schema, privileges, outages.

Each test gets a fresh database cloned from the schema template (the ``engine_url``
fixture, pinned to the postgres backend); tests that need an empty database, a
restricted role or a killed connection make them through the admin URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

import orjson
import psycopg
import pytest

from parkway import Engine, ParkwayError, RunHandle, StoreError
from parkway.errors import LeaseLostError
from parkway.matching import shape_of
from parkway.store import open_store
from parkway.store.base import EventDelivery, MessageDelivery, NewTask, Sent
from parkway.store.postgres import (
    DELIVER_EVENT_SHAPES,
    MIGRATIONS,
    PostgresStore,
    rows,
    statements,
    transport,
    wire,
)
from parkway.store.runs import RunFilter
from tests.helpers import wait_for

from ..conftest import postgres_harness
from .conformance.support import NOW, WALL, entry, event, event_wait, message_wait, run, show_shapes

pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)

HARNESS = postgres_harness()
ADMIN_URL = HARNESS.admin_url()


def with_port(url: str, port: int) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1].rsplit(":", 1)[0]
    user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{user}{host}:{port}"))


def with_path(url: str, database: str, user: str | None = None) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc
    if user is not None:
        netloc = f"{user}@{netloc.rsplit('@', 1)[-1]}"
    return urlunsplit(parts._replace(netloc=netloc, path=f"/{database}"))


def admin_sql(statement: str, database: str | None = None) -> list[tuple[object, ...]]:
    url = ADMIN_URL if database is None else with_path(ADMIN_URL, database)
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement.encode())
        return cursor.fetchall() if cursor.description else []


def database_of(url: str) -> str:
    return urlsplit(url).path.lstrip("/")


@pytest.fixture
def empty_database(engine_url: str) -> Iterator[str]:
    """A database without parkway's schema (the template's clone is dropped first)."""
    name = HARNESS.own_database(f"empty_{uuid.uuid4().hex[:8]}")
    admin_sql(f'CREATE DATABASE "{name}"')
    admin_sql(f"COMMENT ON DATABASE \"{name}\" IS '{HARNESS.MARKER}{HARNESS.RUN}'")
    try:
        yield name
    finally:
        admin_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def limited_role() -> Iterator[str]:
    """A login role with no privileges beyond PUBLIC's (trust authentication)."""
    role = f"parkway_limited_{uuid.uuid4().hex[:8]}"
    admin_sql(f'CREATE ROLE "{role}" LOGIN')
    try:
        yield role
    finally:
        for (name,) in admin_sql(
            "SELECT datname FROM pg_database WHERE datname LIKE 'parkway_t_%'"
        ):
            with contextlib.suppress(psycopg.Error):  # the database may be gone already
                admin_sql(f'DROP OWNED BY "{role}"', str(name))
        admin_sql(f'DROP ROLE IF EXISTS "{role}"')


@pytest.fixture
async def store(engine_url: str) -> AsyncIterator[PostgresStore]:
    opened = open_store(engine_url)
    assert isinstance(opened, PostgresStore)
    await opened.open()
    yield opened
    await opened.close()


# ---------------------------------------------------------------------------------------------
# Connecting: clear errors


async def test_an_unreachable_server_is_named_in_the_error(engine_url: str) -> None:
    url = with_port(engine_url, 1) + "?connect_timeout=2"
    with pytest.raises(ParkwayError, match=r"cannot connect to PostgreSQL .*:1/") as err:
        await open_store(url).open()
    assert "check the host and port" in str(err.value)


async def test_an_unknown_host_is_named_in_the_error(engine_url: str) -> None:
    url = urlunsplit(urlsplit(engine_url)._replace(netloc="postgres@no-such-host.invalid:5432"))
    with pytest.raises(ParkwayError, match=r"cannot connect to PostgreSQL.*no-such-host\.invalid"):
        await open_store(url + "?connect_timeout=2").open()


async def test_a_missing_database_says_how_to_create_it(engine_url: str) -> None:
    url = with_path(engine_url, "parkway_no_such_db")
    with pytest.raises(ParkwayError, match="database 'parkway_no_such_db' does not exist") as err:
        await open_store(url).open()
    assert "createdb parkway_no_such_db" in str(err.value)


async def test_a_missing_role_is_named(engine_url: str) -> None:
    url = with_path(engine_url, database_of(engine_url), user="parkway_nobody")
    with pytest.raises(ParkwayError, match="role 'parkway_nobody' does not exist"):
        await open_store(url).open()


async def test_a_password_is_never_shown(engine_url: str) -> None:
    url = with_port(engine_url, 1).replace("@", ":s3cret@", 1)
    with pytest.raises(ParkwayError) as err:
        await open_store(url + "?connect_timeout=2").open()
    assert "s3cret" not in str(err.value)
    with pytest.raises(ParkwayError, match="pool_size") as err:
        open_store(url + "?pool_size=many")
    assert "s3cret" not in str(err.value)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("pool_size=0", "pool_size .* must be a whole number >= 1"),
        ("statement_timeout=soon", "statement_timeout"),
        ("pool_timeout=-1", "pool_timeout"),
        ("no_such_option=1", "bad PostgreSQL url"),
    ],
)
async def test_bad_url_options_are_refused_before_connecting(
    engine_url: str, query: str, message: str
) -> None:
    with pytest.raises(ParkwayError, match=message):
        open_store(f"{engine_url}?{query}")


async def test_parkway_options_are_applied(engine_url: str) -> None:
    store = open_store(f"{engine_url}?pool_size=3&statement_timeout=1500ms&application_name=mine")
    assert isinstance(store, PostgresStore) and store.pool_size == 3
    await store.open()
    try:
        async with store.transaction(readonly=True) as tx:
            row = await tx._t._one(
                "SELECT current_setting('statement_timeout'), current_setting('application_name')"
            )
        assert row == ("1500ms", "mine")
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("query", "setting", "value"),
    [
        ("options=-c%20search_path%3Dpublic", "options", "-c search_path=public"),
        ("sslmode=disable&pool_size=2", "sslmode", "disable"),
        ("application_name=shop%20worker", "application_name", "shop worker"),
    ],
)
async def test_libpq_options_pass_through_the_url(
    engine_url: str, query: str, setting: str, value: str
) -> None:
    store = open_store(f"{engine_url}?{query}")
    assert isinstance(store, PostgresStore)
    assert store._params[setting].startswith(value)
    assert "statement_timeout=30000" in store._params["options"]


async def test_the_postgres_scheme_works_too(engine_url: str) -> None:
    async with Engine(engine_url.replace("postgresql://", "postgres://"), worker=False) as engine:
        assert await engine.list_runs() == []


# ---------------------------------------------------------------------------------------------
# Schema and migrations


async def test_a_newer_schema_asks_for_a_newer_parkway(engine_url: str) -> None:
    future = MIGRATIONS[-1][0] + 1
    admin_sql(f"INSERT INTO parkway.schema_version VALUES ({future}, 0)", database_of(engine_url))
    with pytest.raises(ParkwayError, match=f"version {future}.*upgrade parkway"):
        await open_store(engine_url).open()


async def test_opening_an_up_to_date_schema_takes_no_lock(engine_url: str) -> None:
    # Another session holds the migration lock (say, a migration in progress elsewhere):
    # a store on an up-to-date schema must still open at once.
    from parkway.store.postgres import MIGRATION_LOCK

    with psycopg.connect(engine_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
        store = open_store(engine_url)
        await asyncio.wait_for(store.open(), 5)
        await store.close()


# ---------------------------------------------------------------------------------------------
# Privileges


async def test_a_role_that_may_not_create_the_schema_is_told_what_to_grant(
    empty_database: str, limited_role: str
) -> None:
    url = with_path(ADMIN_URL, empty_database, user=limited_role)
    with pytest.raises(ParkwayError, match="may not create parkway's schema") as err:
        await open_store(url).open()
    assert f'GRANT CREATE ON DATABASE "{empty_database}" TO "{limited_role}"' in str(err.value)
    admin_sql(f'GRANT CREATE ON DATABASE "{empty_database}" TO "{limited_role}"')
    store = open_store(url)
    await store.open()  # now it may: it creates the schema and owns it
    await store.close()


async def test_a_role_without_table_privileges_is_told_what_to_grant(
    engine_url: str, limited_role: str
) -> None:
    database = database_of(engine_url)
    url = with_path(engine_url, database, user=limited_role)
    with pytest.raises(ParkwayError, match="lacks USAGE on schema parkway") as err:
        await open_store(url).open()
    assert f'GRANT USAGE ON SCHEMA parkway TO "{limited_role}"' in str(err.value)

    admin_sql(f'GRANT USAGE ON SCHEMA parkway TO "{limited_role}"', database)
    admin_sql(f'GRANT SELECT ON ALL TABLES IN SCHEMA parkway TO "{limited_role}"', database)
    with pytest.raises(ParkwayError, match="lacks SELECT, INSERT, UPDATE or DELETE on parkway"):
        await open_store(url).open()

    admin_sql(
        f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA parkway TO "{limited_role}"',
        database,
    )
    async with Engine(url) as engine:

        @engine.workflow()
        async def hello(ctx, input):  # type: ignore[no-untyped-def]
            return await ctx.step(lambda: f"hello {input}")

        assert await (await engine.start("hello", "you")).result(timeout=10) == "hello you"


# ---------------------------------------------------------------------------------------------
# Outages, timeouts, notifications


def terminate_backends(database: str, application: str = "parkway") -> int:
    rows = admin_sql(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        f"WHERE datname = '{database}' AND application_name = '{application}'"
    )
    return len(rows)


async def test_transactions_survive_killed_connections(
    store: PostgresStore, engine_url: str
) -> None:
    # Fill the pool with several connections, then kill them all.
    async def hold() -> None:
        async with store.transaction() as tx:
            await tx.runs.get("x")
            await asyncio.sleep(0.2)

    await asyncio.gather(*(hold() for _ in range(4)))
    assert terminate_backends(database_of(engine_url)) >= 4
    await asyncio.sleep(0.2)
    for i in range(10):  # each dead connection is replaced as it is met
        async with store.transaction() as tx:
            await tx.runs.insert(run(f"r{i}"))
    assert await store.has_due(NOW) is False
    assert await store.claim("w", now=NOW, wall_now=NOW, lease_until=NOW + 1, limit=1) == []
    async with store.transaction(readonly=True) as tx:
        assert len(await tx.runs.list(RunFilter(limit=100))) == 10


def terminate_pid(pid: int) -> None:
    admin_sql(f"SELECT pg_terminate_backend({pid})")


async def backend_pid(tx: object) -> int:
    return int(tx._t._c.info.backend_pid)  # type: ignore[attr-defined]


async def test_a_transaction_whose_connection_dies_midway_is_replayed(
    store: PostgresStore,
) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("r"))
    async with store.transaction() as tx:
        found = await tx.runs.get("r")
        assert found is not None
        terminate_pid(await backend_pid(tx))
        await asyncio.sleep(0.1)
        # The next statement meets the dead connection: the transaction so far is
        # replayed on a fresh one (same results), and carries on.
        assert await tx.runs.update("r", {"status": "parked"})
        await tx.tasks.add([NewTask("r", NOW, "start")])
    async with store.transaction(readonly=True) as tx:
        after = await tx.runs.get("r")
        assert after is not None and after.status == "parked"
        assert len(await tx.tasks.due("r", NOW)) == 1


async def test_a_replay_that_reads_something_else_gives_up(
    store: PostgresStore, engine_url: str
) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("r"))
    with pytest.raises(ParkwayError, match="lost mid-transaction and the data it had read changed"):
        async with store.transaction() as tx:
            await tx.runs.get("r")
            terminate_pid(await backend_pid(tx))
            await asyncio.sleep(0.1)
            admin_sql("UPDATE parkway.runs SET status = 'failed'", database_of(engine_url))
            await tx.runs.update("r", {"status": "parked"})
    after = await store_run(store, "r")
    assert after.status == "failed"


async def test_a_connection_lost_at_commit_is_resolved(store: PostgresStore) -> None:
    # The server ended the session before COMMIT reached it: nothing was committed,
    # so the transaction is replayed and committed again.
    async with store.transaction() as tx:
        await tx.runs.insert(run("before"))
        terminate_pid(await backend_pid(tx))
        await asyncio.sleep(0.1)
    assert (await store_run(store, "before")).id == "before"

    # COMMIT did happen but its reply was lost: the transaction's status says so,
    # and it is not applied twice.
    # (Its first round trip begins the transaction; the second carries the COMMIT.)
    with reply_lost_after_commit(at_commit=True) as cut:
        async with store.transaction() as tx:
            await tx.signals.add("r", "once", None, NOW)
    assert cut  # the COMMIT went through, and its reply was lost
    async with store.transaction(readonly=True) as tx:
        assert [s.name for s in await tx.signals.list("r")] == ["once"]


async def leased_run(store: PostgresStore, run_id: str) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run(run_id))
        await tx.tasks.add([NewTask(run_id, NOW, "start")])
    assert await store.claim("w", now=NOW, wall_now=NOW, lease_until=NOW + 60, limit=1) == [run_id]


async def _plus_one(i: int) -> int:
    return i + 1


@contextlib.contextmanager
def sends() -> Iterator[list[list[str]]]:
    """The round trips the store makes meanwhile, each as its statements' first words."""
    sent: list[list[str]] = []
    original = wire.send

    async def spy(conn: psycopg.AsyncConnection, steps: list) -> object:  # type: ignore[type-arg]
        sent.append([str(query).split()[0] for query, _params in steps])
        return await original(conn, steps)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wire, "send", spy)
        yield sent


@contextlib.contextmanager
def reply_lost_after_commit(*, at_commit: bool = False) -> Iterator[list[bool]]:
    """The first round trip (a commit, in the tests using it; with ``at_commit``, the
    first that ends in ``COMMIT``) goes through, then its connection dies before the
    reply is read."""
    cut: list[bool] = []
    original = wire.send

    async def commit_then_vanish(conn: psycopg.AsyncConnection, steps: list) -> object:  # type: ignore[type-arg]
        results = await original(conn, steps)
        if not cut and (not at_commit or steps[-1][0] == "COMMIT"):
            cut.append(True)
            await conn.close()
            raise psycopg.OperationalError("the connection is lost")
        return results

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wire, "send", commit_then_vanish)
        yield cut


async def worker_commit(store: PostgresStore, run_id: str) -> None:
    async with store.transaction() as tx:
        await tx.runs.update_leased(run_id, {"status": "parked"}, owner="w", release=False)
        await tx.journal.put(run_id, [entry(0)])
        await tx.tasks.add([NewTask(run_id, NOW + 60, "timer", 0)])


async def test_the_heartbeat_skips_a_run_whose_row_a_commit_holds(
    store: PostgresStore, engine_url: str
) -> None:
    # A commit under way holds the row of one leased run (here another connection's
    # open transaction): the heartbeat does not wait for it, which could deadlock
    # with a batch locking rows in an order of its own, and extends the others.
    await leased_run(store, "held")
    await leased_run(store, "free")
    async with await psycopg.AsyncConnection.connect(engine_url) as other, other.transaction():
        await other.execute("UPDATE parkway.runs SET updated_at = updated_at WHERE id = 'held'")
        await asyncio.wait_for(store.extend_leases("w", ["held", "free"], WALL + 500), 5)
    held, free = await store_run(store, "held"), await store_run(store, "free")
    assert (held.lease_until, free.lease_until) == (NOW + 60, WALL + 500)  # type: ignore[attr-defined]
    await store.extend_leases("w", ["held", "free"], WALL + 600)  # the next beat
    assert (await store_run(store, "held")).lease_until == WALL + 600  # type: ignore[attr-defined]


async def test_a_worker_commit_is_one_round_trip(store: PostgresStore) -> None:
    await leased_run(store, "r")
    with sends() as sent:
        await worker_commit(store, "r")
    assert sent == [["BEGIN", "WITH", "--", "COMMIT"]]
    with sends() as sent:
        async with store.transaction() as tx:  # a step's commit: one statement
            await tx.runs.update_leased("r", {"status": "running"}, owner="w", release=False)
            await tx.journal.put("r", [entry(1)])
    assert sent == [["WITH"]]


async def test_the_commits_of_a_running_run_are_hot_updates(engine_url: str) -> None:
    # A step's commit changes no indexed column of the run (updated_at is indexed
    # only as ended_at, once the run has ended), so PostgreSQL updates its row in
    # place of its page, without new index entries: a HOT update. The last commit,
    # which ends the run (its status), is not one.
    async with Engine(engine_url) as engine:

        @engine.workflow()
        async def three(ctx, i):  # type: ignore[no-untyped-def]
            for _ in range(3):
                i = await ctx.step(_plus_one, i)
            return i

        handles = [await engine.start("three", i) for i in range(20)]
        assert [await h.result(timeout=10) for h in handles] == [i + 3 for i in range(20)]
    # Closed: each server process reported its counts as it exited.
    query = (
        "SELECT pg_stat_clear_snapshot(), n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
        "WHERE schemaname = 'parkway' AND relname = 'runs'"
    )
    for _ in range(100):
        [(_cleared, updates, hot)] = admin_sql(query, database_of(engine_url))
        if updates == 60:
            break
        await asyncio.sleep(0.05)
    assert updates == 60  # three commits a run
    assert hot >= 30, (updates, hot)  # of the 40 that did not end a run (none before)


async def _void_column(url: str) -> tuple[object, object]:
    """``pg_notify``'s void result read as text, then with wire.BinaryRows."""
    query = "SELECT pg_notify('parkway_test', '')"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        [text] = await wire.send(conn, [(query, ())])
        [binary] = await wire.send(conn, [(wire.BinaryRows(query), ())])
    return text.rows[0][0], binary.rows[0][0]  # type: ignore[index]


async def test_a_claim_reads_its_rows_in_binary_as_it_would_in_text(
    store: PostgresStore, engine_url: str
) -> None:
    # The claims' rows come back in PostgreSQL's binary format (wire.BinaryRows):
    # the same values as the text format gives, NULLs inside arrays included.
    async with store.transaction() as tx:
        await tx.runs.insert(run("r"))
        await tx.tasks.add([NewTask("r", NOW, "signal"), NewTask("r", NOW - 1, "timer", 2)])
        await tx.signals.add("r", "go", b'{"n": 1.5}', NOW)
        await tx.journal.put(
            "r",
            [
                entry(0, value=b'"x"'),
                entry(1, value=None, branch="b/1"),
                entry(2, state="pending", value=None, deadline=NOW + 0.25),
            ],
        )
    assert type(statements.CLAIM_DUE) is wire.BinaryRows
    params = dict(now=NOW, wall=WALL, limit=5, owner="w", until=WALL + 30)
    async with await psycopg.AsyncConnection.connect(engine_url, autocommit=True) as conn:
        settings = (statements.Q["claim_settings"], ())
        claim_text = (str(statements.CLAIM_DUE), params)  # (str(): a plain string, read as text)
        as_text = await wire.send(conn, [("BEGIN", ()), settings, claim_text])
        await wire.send(conn, [("ROLLBACK", ())])
        as_binary = await wire.send(conn, [("BEGIN", ()), settings, (statements.CLAIM_DUE, params)])
        await wire.send(conn, [("ROLLBACK", ())])
    # (Told apart by a value the two formats give differently: a void column.)
    void_text, void_binary = await _void_column(engine_url)
    assert (void_text, void_binary) == ("", b"")
    [text_row], [binary_row] = as_text[-1].rows, as_binary[-1].rows  # type: ignore[misc]
    assert binary_row == text_row
    loaded = rows.claimed_run(binary_row, "w")
    assert loaded.journal is not None and [e.pos for e in loaded.journal] == [0, 1, 2]
    assert loaded.journal[1].value is None and loaded.journal[1].branch == "b/1"
    assert loaded.journal[2].deadline == NOW + 0.25
    assert [t.kind for t in loaded.tasks] == ["signal", "timer"]
    assert loaded.signals is not None and loaded.signals[0].payload == b'{"n": 1.5}'


async def test_a_start_is_one_round_trip_and_is_sent_again_when_cut_off(
    store: PostgresStore,
) -> None:
    with sends() as sent:
        async with store.transaction() as tx:
            await tx.runs.start(run("one"), NOW)
    assert sent == [["--"]]  # one statement: a transaction of its own
    with reply_lost_after_commit() as cut:
        async with store.transaction() as tx:
            await tx.runs.start(run("two"), NOW)
    assert cut
    async with store.transaction(readonly=True) as tx:
        assert await tx.runs.get("two") == run("two")
        assert len(await tx.tasks.due("two", NOW)) == 1  # committed, then sent again: once


async def test_a_worker_commit_cut_off_before_it_reached_the_server_is_sent_again(
    store: PostgresStore,
) -> None:
    await leased_run(store, "r")
    async with store.transaction() as tx:
        await tx.runs.update_leased("r", {"status": "parked"}, owner="w", release=False)
        await tx.journal.put("r", [entry(0)])
        terminate_pid(await backend_pid(tx))
        await asyncio.sleep(0.1)
    async with store.transaction(readonly=True) as tx:
        assert await tx.journal.read("r") == [entry(0)]
        assert (await tx.runs.get("r")).status == "parked"  # type: ignore[union-attr]


async def test_a_worker_commit_whose_reply_was_lost_is_not_applied_twice(
    store: PostgresStore,
) -> None:
    await leased_run(store, "r")
    with reply_lost_after_commit() as cut:
        await worker_commit(store, "r")
    assert cut
    async with store.transaction(readonly=True) as tx:
        assert await tx.journal.read("r") == [entry(0)]
        assert [t.kind for t in await tx.tasks.due("r", NOW + 60)] == ["start", "timer"]


async def signal_alone(store: PostgresStore, run_id: str, name: str = "go") -> Sent:
    async with store.transaction() as tx:
        return await tx.signals.send(run_id, name, b"1", NOW)


async def mailbox(store: PostgresStore, run_id: str) -> list[str]:
    async with store.transaction(readonly=True) as tx:
        return [s.name for s in await tx.signals.list(run_id)]


async def test_a_signal_is_one_round_trip(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transport, "PRUNE_MARKS", 0.0)
    await leased_run(store, "r")
    with sends() as sent:
        found = await signal_alone(store, "r")
    assert sent == [["--"]]  # one statement, its own transaction: with its COMMIT
    assert (found.known, found.status) == (True, "running")
    with sends() as sent:
        found = await signal_alone(store, "nobody")
    assert (found.known, found.status) == (True, None)


async def test_a_signal_whose_reply_was_lost_is_settled_by_its_mark(store: PostgresStore) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run("r", status="completed"))
    await leased_run(store, "live")
    for run_id, status in (("live", "running"), ("r", "completed"), ("nobody", None)):
        with reply_lost_after_commit() as cut:
            found = await signal_alone(store, run_id)
        assert cut
        # What the statement found, recorded by the mark it committed.
        assert (found.known, found.status) == (True, status), run_id
    assert await mailbox(store, "live") == ["go"]  # committed once, not sent again
    assert await mailbox(store, "r") == []


@contextlib.contextmanager
def first_send_cut_off() -> Iterator[list[bool]]:
    """The next round trip dies before it reaches the server (its connection closed)."""
    original = wire.send
    cut: list[bool] = []

    async def vanish_first(conn: psycopg.AsyncConnection, steps: list) -> object:  # type: ignore[type-arg]
        if not cut:
            cut.append(True)
            await conn.close()
            raise psycopg.OperationalError("the connection is lost")
        return await original(conn, steps)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wire, "send", vanish_first)
        yield cut


async def test_a_signal_cut_off_before_it_reached_the_server_is_sent_again(
    store: PostgresStore,
) -> None:
    await leased_run(store, "r")
    with first_send_cut_off() as cut:
        found = await signal_alone(store, "r")
    assert cut and (found.known, found.status) == (True, "running")
    assert await mailbox(store, "r") == ["go"]  # the mark said "not committed": sent again


async def waiting_for(store: PostgresStore, run_id: str, key: str) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run(run_id, status="parked"))
        await tx.subscriptions.add(message_wait(run_id, "payment", key))


async def deliver_alone(store: PostgresStore, key: str, *, lease: bool = False) -> MessageDelivery:
    terms: dict[str, object] = {}
    if lease:
        terms = dict(owner="w", wall_now=WALL, lease_until=WALL + 30)
    async with store.transaction() as tx:
        return await tx.messages.deliver(
            "payment",
            key,
            b"body",
            NOW,
            message_id=f"id-{key}",
            fresh_after=NOW - 60,
            **terms,  # type: ignore[arg-type]
        )


async def task_kinds(store: PostgresStore, run_id: str) -> list[str]:
    """The kinds of the run's tasks due now."""
    async with store.transaction(readonly=True) as tx:
        return [t.kind for t in await tx.tasks.due(run_id, NOW)]


async def test_a_delivery_and_its_lease_are_one_round_trip(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await waiting_for(store, "r", "K1")
    with sends() as sent:
        delivery = await deliver_alone(store, "K1", lease=True)
    # The key's and the message id's locks, the delivery, the lease, with the COMMIT.
    assert len(sent) == 1 and sent[0][0] == "BEGIN" and sent[0][-1] == "COMMIT"
    assert (delivery.known, delivery.outcome, delivery.run_id) == (True, "delivered", "r")
    assert delivery.lease is not None and delivery.lease.taken is True
    with sends() as sent:
        nobody = await deliver_alone(store, "K9")
    assert len(sent) == 1 and (nobody.known, nobody.outcome) == (True, None)


async def test_a_delivery_whose_reply_was_lost_is_settled_by_its_mark(
    store: PostgresStore,
) -> None:
    await waiting_for(store, "r", "K1")
    for key, outcome in (("K1", "delivered"), ("K1", "duplicate"), ("K2", None)):
        with reply_lost_after_commit() as cut:
            delivery = await deliver_alone(store, key, lease=True)
        assert cut
        # What the statement did, recorded by the mark it committed; whether the
        # lease was taken is not known (the worker loads the run to see).
        assert (delivery.known, delivery.outcome) == (True, outcome), key
        if outcome == "delivered":
            assert delivery.run_id == "r" and delivery.lease is not None
            assert delivery.lease.run_id == "r" and delivery.lease.taken is None
        else:
            assert delivery.lease is None
    assert await task_kinds(store, "r") == ["message"]  # committed once, not sent again


async def test_a_delivery_cut_off_before_it_reached_the_server_is_sent_again(
    store: PostgresStore,
) -> None:
    await waiting_for(store, "r", "K1")
    with first_send_cut_off() as cut:
        delivery = await deliver_alone(store, "K1", lease=True)
    assert cut and (delivery.known, delivery.outcome, delivery.run_id) == (True, "delivered", "r")
    assert await task_kinds(store, "r") == ["message"]  # the mark said "not committed"


async def deliveries_together(store: PostgresStore, keys: list[str]) -> list[MessageDelivery]:
    """One transaction of several deliveries, as a sender's batch is (unleased)."""
    async with store.transaction() as tx:
        return [
            await tx.messages.deliver(
                "payment", key, b"body", NOW, message_id=None, fresh_after=NOW - 60
            )
            for key in keys
        ]


async def test_deliveries_sharing_a_commit_whose_reply_was_lost_are_each_settled(
    store: PostgresStore,
) -> None:
    await waiting_for(store, "a", "K1")
    await waiting_for(store, "b", "K3")
    with reply_lost_after_commit() as cut:
        found = await deliveries_together(store, ["K1", "K2", "K3"])
    assert cut
    # Each statement's own mark says what it did; none was sent again.
    assert [(d.known, d.outcome, d.run_id) for d in found] == [
        (True, "delivered", "a"),
        (True, None, None),
        (True, "delivered", "b"),
    ]
    assert await task_kinds(store, "a") == ["message"]
    assert await task_kinds(store, "b") == ["message"]


async def test_deliveries_sharing_a_commit_cut_off_are_sent_again_with_new_marks(
    store: PostgresStore,
) -> None:
    await waiting_for(store, "a", "K1")
    await waiting_for(store, "b", "K2")
    with first_send_cut_off() as cut:
        found = await deliveries_together(store, ["K1", "K2"])
    assert cut and [(d.outcome, d.run_id) for d in found] == [
        ("delivered", "a"),
        ("delivered", "b"),
    ]
    assert await task_kinds(store, "a") == ["message"]
    assert await task_kinds(store, "b") == ["message"]


async def test_a_lost_reply_that_cannot_be_settled_is_an_unknown_outcome(
    store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The commit went through; asking about it failed. The caller must not take it
    # as rolled back (a sender's batch would then send its deliveries again).
    await waiting_for(store, "a", "K1")

    async def unreachable(mark: int) -> tuple[bool, str | None]:
        raise StoreError("PostgreSQL: no connection (rolled back; retry)")

    monkeypatch.setattr(store, "_mark_outcome", unreachable)
    with reply_lost_after_commit() as cut, pytest.raises(StoreError) as raised:
        await deliveries_together(store, ["K1", "K2"])
    assert cut and raised.value.outcome_unknown
    assert "may or may not have happened" in str(raised.value)
    assert await task_kinds(store, "a") == ["message"]  # it had committed


async def test_a_delivery_that_found_nobody_does_not_unannounce_one_that_delivered(
    store: PostgresStore,
) -> None:
    # This process's worker hears of the tasks its own commits add from the store
    # (it drops its own notifications): a batch whose first delivery found nobody
    # still tells it of the second's task.
    await waiting_for(store, "b", "K2")
    reports: list[float | None] = []
    store.watch(reports.append)
    await deliveries_together(store, ["K1", "K2"])
    # (None: the listener, connecting, says something may have changed meanwhile.)
    assert [due for due in reports if due is not None] == [NOW]


async def parked_loans(engine: Engine, count: int) -> list[RunHandle]:
    """``count`` runs parked on messages "score" keyed K0, K1, ..."""

    @engine.workflow()
    async def loan(ctx, key):  # type: ignore[no-untyped-def]
        return await ctx.wait_for_message("score", key)

    handles = [await engine.start("loan", f"K{i}", id=f"loan-{i}") for i in range(count)]
    await engine.idle(timeout=30)
    return handles


async def test_messages_in_flight_from_one_sender_share_commits(engine_url: str) -> None:
    async with Engine(engine_url) as engine:
        handles = await parked_loans(engine, 16)
        results = await asyncio.gather(*(engine.correlate("score", f"K{i}", i) for i in range(16)))
        assert [(r.outcome, r.run_id) for r in results] == [
            ("delivered", f"loan-{i}") for i in range(16)
        ]
        assert [await h.result(timeout=10) for h in handles] == list(range(16))
        sends = engine._rt.sends
        assert sends is not None and sends.jobs == 16 and sends.batches < 16


async def test_a_run_evicted_from_the_cache_resumes_in_two_round_trips(engine_url: str) -> None:
    # More runs parked than the worker keeps: the ones it let go of come with their
    # journal in the correlate's lease, so their resume needs no read of its own.
    async with Engine(engine_url, cached_runs=1) as engine:

        @engine.workflow()
        async def loan(ctx, key):  # type: ignore[no-untyped-def]
            return await ctx.wait_for_message("score", key)

        handles = []
        for i in range(3):  # one at a time: each commit clears the run evicted before it
            handles.append(await engine.start("loan", f"K{i}", id=f"loan-{i}"))
            await engine.idle(timeout=30)
        assert engine.worker is not None and engine.worker.cache.evictions == 2
        # "loan-0"'s mark went with "loan-2"'s commit, "loan-1"'s goes with "loan-0"'s.
        for i in (0, 1):
            with sends() as sent:
                await engine.correlate("score", f"K{i}", i)
                assert await handles[i].result(timeout=10) == i
            # The delivery with its lease, then the worker's commit: no journal read.
            assert len(sent) == 2 and sent[0][0] == "BEGIN", sent
            assert "WITH" in sent[1] and "SELECT" not in sent[1], sent


class FailFirstBatch:
    """A store whose first transaction of several deliveries fails, rolled back."""

    def __init__(self, store: object) -> None:
        self._store, self.failed = store, False

    @contextlib.asynccontextmanager
    async def transaction(self, *, readonly: bool = False) -> AsyncIterator[object]:
        async with self._store.transaction(readonly=readonly) as tx:  # type: ignore[attr-defined]
            calls = 0
            deliver = tx.messages.deliver

            async def counting(*args: object, **kwargs: object) -> object:
                nonlocal calls
                calls += 1
                return await deliver(*args, **kwargs)

            tx.messages.deliver = counting
            yield tx
            if calls > 1 and not self.failed:
                self.failed = True
                raise StoreError("PostgreSQL: deadlock detected (rolled back; retry)")


async def test_messages_of_a_failed_batch_are_sent_again_each_and_handed_over(
    engine_url: str,
) -> None:
    async with Engine(engine_url) as engine:
        handles = await parked_loans(engine, 8)
        assert engine._rt.sends is not None and engine.worker is not None
        failing = FailFirstBatch(engine._rt.sends._store)
        engine._rt.sends._store = failing  # type: ignore[assignment]
        launched: list[str] = []
        launch = engine.worker._launch

        def spy(run_id: str, *args: object) -> None:
            launched.append(run_id)
            launch(run_id, *args)  # type: ignore[arg-type]

        engine.worker._launch = spy  # type: ignore[method-assign]
        results = await asyncio.gather(*(engine.correlate("score", f"K{i}", i) for i in range(8)))
        assert failing.failed
        assert [(r.outcome, r.run_id) for r in results] == [
            ("delivered", f"loan-{i}") for i in range(8)
        ]
        assert [await h.result(timeout=10) for h in handles] == list(range(8))
        # Each run handed to the worker by the send that delivered to it; none
        # launched for a lease of the failed batch, which leased nothing.
        assert sorted(launched) == sorted(f"loan-{i}" for i in range(8))


async def paying(store: PostgresStore, run_id: str, order_id: int) -> None:
    async with store.transaction() as tx:
        await tx.runs.insert(run(run_id, status="parked"))
        await tx.subscriptions.add(event_wait(run_id, {"order_id": order_id}))


async def publish_alone(
    store: PostgresStore, order_id: int, event_id: str = "e1", *, lease: bool = False
) -> EventDelivery:
    terms: dict[str, object] = {}
    if lease:
        terms = dict(owner="w", wall_now=WALL, lease_until=WALL + 30)
    payload = {"order_id": order_id}
    body = f'{{"order_id":{order_id}}}'.encode()
    async with store.transaction() as tx:
        return await tx.events.deliver(
            event(event_id, payload=body),
            payload,
            body,
            fresh_after=NOW - 60,
            **terms,  # type: ignore[arg-type]
        )


async def test_a_publish_at_once_and_its_lease_are_one_round_trip(store: PostgresStore) -> None:
    await paying(store, "r", 1)
    await show_shapes(store, shape_of({"order_id": 1}))
    with sends() as sent:
        delivery = await publish_alone(store, 1, lease=True)
    # The name's shared lock, the publish, the lease, with the COMMIT.
    assert sent == [["BEGIN", "SELECT", "--", "--", "COMMIT"]]
    assert (delivery.known, delivery.outcome, delivery.waits) == (
        True,
        "published",
        [("r", "wait#0")],
    )
    assert delivery.lease is not None and delivery.lease.taken is True
    with sends() as sent:
        nobody = await publish_alone(store, 2, "e2")
    assert len(sent) == 1 and (nobody.outcome, nobody.waits) == ("published", [])


async def test_a_publish_at_once_declines_a_shape_it_has_not_seen(store: PostgresStore) -> None:
    # The digests are Python's: for a shape this store has not read, it has none,
    # and the statement writes nothing rather than miss the waits under it.
    await paying(store, "r", 1)
    with sends() as sent:
        declined = await publish_alone(store, 1, lease=True)
    assert len(sent) == 1
    assert (declined.known, declined.outcome, declined.waits, declined.lease) == (
        True,
        None,
        [],
        None,
    )
    async with store.transaction(readonly=True) as tx:
        assert await tx.events.get("e1") is None
        assert len(await tx.subscriptions.list(run_id="r")) == 1
        # The usual path reads the shapes; from then on the store knows them.
        assert await tx.subscriptions.shapes("default", "order.paid") == ['["order_id"]']
    assert (await publish_alone(store, 1)).waits == [("r", "wait#0")]
    # A shape whose waits are all gone is still known: no decline when one comes back.
    assert (await publish_alone(store, 1, "e2")).waits == []
    await paying(store, "r2", 1)
    assert (await publish_alone(store, 1, "e3")).waits == [("r2", "wait#0")]


async def test_a_publish_at_once_declines_more_shapes_than_it_looks_under(
    store: PostgresStore,
) -> None:
    keys = [f"k{i}" for i in range(DELIVER_EVENT_SHAPES + 1)]
    async with store.transaction() as tx:
        for i, key in enumerate(keys):
            await tx.subscriptions.add(event_wait(f"r{i}", {key: 1}))
    await show_shapes(store, *(shape_of({key: 1}) for key in keys))
    payload = {key: 1 for key in keys}
    body = orjson.dumps(payload)
    with sends() as sent:
        async with store.transaction() as tx:
            many = await tx.events.deliver(event("e1", payload=body), payload, body, fresh_after=0)
    assert sent == [] and (many.known, many.outcome) == (True, None)
    fewer = {key: 1 for key in keys[1:]}  # one shape the payload lacks a key of
    body = orjson.dumps(fewer)
    async with store.transaction() as tx:
        some = await tx.events.deliver(event("e1", payload=body), fewer, body, fresh_after=0)
    assert some.outcome == "published" and len(some.waits) == DELIVER_EVENT_SHAPES


async def test_a_publish_at_once_whose_reply_was_lost_is_settled_by_its_mark(
    store: PostgresStore,
) -> None:
    await paying(store, "r", 1)
    await show_shapes(store, shape_of({"order_id": 1}))
    cases = (
        ("e1", "published", [("r", "wait#0")]),
        ("e1", "duplicate", []),
        ("e2", "published", []),
    )
    for event_id, outcome, waits in cases:
        with reply_lost_after_commit() as cut:
            delivery = await publish_alone(store, 1, event_id, lease=True)
        assert cut
        assert (delivery.known, delivery.outcome, delivery.waits) == (True, outcome, waits)
        if waits:
            assert delivery.lease is not None
            assert delivery.lease.run_id == "r" and delivery.lease.taken is None
        else:
            assert delivery.lease is None
    assert await task_kinds(store, "r") == ["delivery"]  # committed once, not sent again


async def test_a_publish_at_once_cut_off_before_it_reached_the_server_is_sent_again(
    store: PostgresStore,
) -> None:
    await paying(store, "r", 1)
    await show_shapes(store, shape_of({"order_id": 1}))
    with first_send_cut_off() as cut:
        delivery = await publish_alone(store, 1, lease=True)
    assert cut and (delivery.outcome, delivery.waits) == ("published", [("r", "wait#0")])
    assert await task_kinds(store, "r") == ["delivery"]  # the mark said "not committed"


async def test_publishes_in_flight_from_one_sender_share_commits(engine_url: str) -> None:
    engine = Engine(engine_url)

    @engine.workflow()
    async def payer(ctx: object, order_id: int) -> object:
        return await ctx.wait_for_event("order.paid", match={"order_id": order_id})  # type: ignore[attr-defined]

    async with engine:
        handles = [await engine.start("payer", i, id=f"p{i}") for i in range(40)]
        await engine.idle(timeout=30)
        await engine.publish("order.paid", {"order_id": -1})  # (this process learns the shape)
        with sends() as sent:
            results = await asyncio.gather(
                *(engine.publish("order.paid", {"order_id": i}) for i in range(40))
            )
        assert [r.resumed for r in results] == [[f"p{i}"] for i in range(40)]
        publishes = [trip for trip in sent if trip.count("--") >= 1 and "COMMIT" in trip]
        assert len(publishes) < 40  # some shared a commit
        for i, handle in enumerate(handles):
            assert await handle.result(timeout=30) == {"order_id": i}


async def test_a_mark_taken_by_the_settling_stops_a_late_commit(store: PostgresStore) -> None:
    # The settling inserts the mark when it finds none: a transaction still on its
    # way with that mark then fails rather than commit after being declared lost.
    await leased_run(store, "r")
    assert await store._mark_outcome(42) == (False, None)
    with pytest.raises(StoreError, match="commit_marks"):
        async with store.transaction() as tx:
            sent = await tx.signals.send("r", "go", b"1", NOW)
            # (Its statement carries mark 42, as a late copy of a settled one would.)
            tx._t._queued[0][1]["mark"] = 42  # type: ignore[index]
    assert not sent.known
    assert await mailbox(store, "r") == []


async def test_marks_older_than_an_hour_are_pruned_by_marked_commits(
    store: PostgresStore, engine_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await leased_run(store, "r")
    database = database_of(engine_url)
    admin_sql(
        "INSERT INTO parkway.commit_marks (mark, at) VALUES (1, now() - interval '2 hours'), "
        "(2, now() - interval '10 minutes')",
        database,
    )
    monkeypatch.setattr(transport, "PRUNE_MARKS", 1.0)  # (one commit in a thousand)
    await signal_alone(store, "r")
    marks = admin_sql("SELECT mark FROM parkway.commit_marks ORDER BY at", database)
    assert [m for (m,) in marks][:1] == [2] and len(marks) == 2  # 1 pruned; 2 and the new one
    # Deliveries and publishes sent at once prune too (a sender may never signal).
    for send in (lambda: deliver_alone(store, "K1"), lambda: publish_alone(store, 1)):
        admin_sql("UPDATE parkway.commit_marks SET at = now() - interval '2 hours'", database)
        await send()
        assert len(admin_sql("SELECT mark FROM parkway.commit_marks", database)) == 1


def test_the_prune_of_marks_reads_only_the_old_ones(engine_url: str) -> None:
    # A busy sender keeps millions of marks (an hour's): the prune, which rides in
    # a sender's commit, goes by the index on their time, not by a scan of them all.
    database = database_of(engine_url)
    admin_sql(
        "INSERT INTO parkway.commit_marks (mark, at) SELECT i, now() - i * interval '10 ms'"
        " FROM generate_series(1, 50000) AS i; ANALYZE parkway.commit_marks",
        database,
    )
    (plan,) = admin_sql(f"EXPLAIN (FORMAT JSON) {statements.Q['prune_marks']}", database)[0]
    text = orjson.dumps(plan).decode()
    assert "commit_marks_by_at" in text and '"Seq Scan"' not in text, text


async def test_a_lost_lease_fails_a_worker_commit_and_saves_nothing(store: PostgresStore) -> None:
    await leased_run(store, "r")
    await store.release_leases("w")
    with pytest.raises(LeaseLostError, match="lease on this run was lost"):
        await worker_commit(store, "r")
    async with store.transaction(readonly=True) as tx:
        assert await tx.journal.read("r") == []
        assert [t.kind for t in await tx.tasks.due("r", NOW + 60)] == ["start"]
    # The connection that saw the failed pipeline is fine for the next commits.
    async with store.transaction() as tx:
        await tx.tasks.delete_run("r")
    for i in range(12):
        await leased_run(store, f"next{i}")
        await worker_commit(store, f"next{i}")


async def store_run(store: PostgresStore, run_id: str) -> object:
    async with store.transaction(readonly=True) as tx:
        found = await tx.runs.get(run_id)
    assert found is not None
    return found


async def test_the_listener_reconnects_and_hears_again(engine_url: str) -> None:
    database = database_of(engine_url)
    mine, other = open_store(engine_url), open_store(f"{engine_url}?application_name=other")
    await mine.open()
    await other.open()
    try:
        await mine.changed()  # starts listening
        await wait_for(lambda: listening(database), "the listener to connect")
        assert terminate_backends(database) >= 1  # the listener, and the pool's connection
        await wait_for(lambda: not_listening(database), "the listener to be gone")
        await wait_for(lambda: listening(database), "the listener to come back")
        await wait_for(lambda: changed_is(mine, False), "the listener to settle")
        async with other.transaction() as tx:
            await tx.tasks.add([NewTask("r", NOW, "start")])
        await wait_for(lambda: changed_is(mine, True), "a notification after reconnecting")
    finally:
        await mine.close()
        await other.close()


async def listening(database: str) -> bool:
    rows = admin_sql(
        "SELECT 1 FROM pg_stat_activity WHERE query LIKE 'LISTEN%%' "
        f"AND datname = '{database}' AND application_name = 'parkway'"
    )
    return bool(rows)


async def not_listening(database: str) -> bool:
    return not await listening(database)


async def test_a_store_is_not_woken_by_its_own_commits(
    store: PostgresStore, engine_url: str
) -> None:
    await store.changed()  # (starts the listener)
    await wait_for(lambda: listening(database_of(engine_url)), "the listener to connect")
    # Once listening, the listener reports a change of its own (whatever was
    # committed while nobody listened): taken here, or it could land after the
    # commit below, as if that commit had woken the store.
    await wait_for(lambda: changed_is(store, True), "the listener's first look")
    async with store.transaction() as tx:
        await tx.tasks.add([NewTask("r", NOW, "start")])
    await asyncio.sleep(0.3)
    assert await store.changed() is False


async def test_a_claim_planned_on_empty_tables_still_probes_runs_by_key(engine_url: str) -> None:
    # A worker that starts with the deployment prepares its claim while the tables
    # are empty, and the connection keeps that plan: then a scan of runs looked
    # cheaper than the probe by key, and it stayed as the table grew.
    from parkway.store.postgres import wire as pgwire

    params = dict(now=NOW, wall=WALL, limit=16, owner="w", until=WALL + 30)
    claim = [(statements.Q["claim_settings"], ()), (statements.CLAIM_DUE, params)]
    async with await psycopg.AsyncConnection.connect(engine_url, autocommit=True) as conn:
        for _ in range(8):  # past the five custom plans: the generic one is cached
            assert (await pgwire.send(conn, claim))[1].rows == []
        admin_sql(
            "INSERT INTO parkway.runs (id, workflow, version, status, domain, generation,"
            " created_at, updated_at) SELECT 'r' || i, 'wf', '1', 'parked', 'default', 0, 0, 0"
            " FROM generate_series(1, 3000) AS i;"
            f" INSERT INTO parkway.tasks (run_id, due_at, kind) VALUES ('r7', {NOW}, 'signal')",
            database_of(engine_url),
        )
        (name,) = [
            name
            for (text, _), name in pgwire._WIRES[conn].prepared.items()
            if text.startswith(b"-- Lease the runs")
        ]
        values = f"{NOW}, {WALL}, 16, 'w', {WALL + 30}"
        explain = f"EXPLAIN (FORMAT JSON) EXECUTE {name.decode()}({values})"
        _, plan = await pgwire.send(conn, [(statements.Q["claim_settings"], ()), (explain, ())])
    assert plan.rows is not None
    text = orjson.dumps(plan.rows[0][0]).decode()
    assert '"Seq Scan"' not in text, text
    assert '"Tid Scan"' in text


def test_a_claimed_row_is_put_in_order_by_the_client(backend: str) -> None:
    # The claim aggregates each run's tasks, journal and mailbox unordered (an
    # ordered aggregate sorts on its own, once per column): the client orders them.
    run_columns = (
        "r",
        "wf",
        "1",
        "running",
        b"{}",
        None,
        None,
        "default",
        None,
        None,
        None,
        0,
        NOW,
        NOW,
        "w",
        WALL + 30,
        None,
    )
    tasks = ([7, 3], [NOW, NOW], ["signal", "signal"], [None, None], [None, None])
    journal = ([1, 0], ["step", "step"], ["b", "a"], ["done", "done"], [b"2", b"1"])
    journal_times = ([None, None], [NOW, NOW], [None, None], [None, None])  # + branch, seq
    mailbox = ([12, 11], ["second", "first"], [b"2", b"1"], [NOW, NOW])
    row = (*run_columns, *tasks, *journal, *journal_times, *mailbox, 2)
    loaded = rows.claimed_run(row, "w")
    assert [t.id for t in loaded.tasks] == [3, 7]
    assert loaded.journal is not None
    assert [(e.pos, e.name, e.value) for e in loaded.journal] == [(0, "a", b"1"), (1, "b", b"2")]
    assert loaded.signals is not None
    assert [(s.id, s.name) for s in loaded.signals] == [(11, "first"), (12, "second")]


def test_a_claimed_row_of_a_run_its_worker_parked_last_has_no_journal(backend: str) -> None:
    # The claim leaves out the journal of a run this worker's advance parked last
    # (advanced_by): its cache may hold the run's machine.
    run_columns = (
        "r",
        "wf",
        "1",
        "parked",
        b"{}",
        None,
        None,
        "default",
        None,
        None,
        None,
        0,
        NOW,
        NOW,
        "w",
        WALL + 30,
        "w",
    )
    tasks = ([7], [NOW], ["timer"], [0], [None])
    nothing = (None,) * 13
    mine = rows.claimed_run((*run_columns, *tasks, *nothing, 1), "w")
    assert mine.journal is None and [t.id for t in mine.tasks] == [7]
    # Another worker's claim of the same row reads the journal (here: empty).
    theirs = rows.claimed_run((*run_columns, *tasks, *nothing, 1), "other")
    assert theirs.journal == []


@contextlib.asynccontextmanager
async def task_notifications(url: str) -> AsyncIterator[Callable[[], Awaitable[list[str]]]]:
    """A LISTEN connection of the test's own; ``heard()``: the notifications of tasks
    committed since the last call (up to a marker it sends after them: notifications
    come in commit order, so no sleep decides that none came)."""
    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    await conn.execute("LISTEN parkway_tasks")

    async def heard() -> list[str]:
        marker = f"marker {uuid.uuid4().hex}"
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as other:
            await other.execute("SELECT pg_notify('parkway_tasks', %s)", (marker,))
        got: list[str] = []
        async for note in conn.notifies(timeout=10):
            if note.payload == marker:
                return got
            got.append(note.payload)
        pytest.fail("the marker notification did not come")

    try:
        yield heard
    finally:
        await conn.close()


async def wakes_to_lease(store: PostgresStore, *, held: bool) -> None:
    """A run parked on a signal ("s"), one on a message ("m", key K1) and one on an
    event ("p", order 1), each held by another worker's live lease if ``held``."""
    lease = dict(lease_owner="other", lease_until=WALL + 60) if held else {}
    async with store.transaction() as tx:
        for run_id in ("s", "m", "p"):
            await tx.runs.insert(run(run_id, status="parked", **lease))
        await tx.subscriptions.add(message_wait("m", "payment", "K1"))
        await tx.subscriptions.add(event_wait("p", {"order_id": 1}))
    await show_shapes(store, shape_of({"order_id": 1}))


async def signal_leased(store: PostgresStore, run_id: str) -> bool | None:
    """A signal to ``run_id`` with the lease for worker "w" after it; whether it took it."""
    async with store.transaction() as tx:
        sent = await tx.signals.send(run_id, "go", None, NOW)
        lease = await tx.runs.lease(
            run_id, owner="w", now=NOW, wall_now=WALL, lease_until=WALL + 30
        )
    assert sent.status == "parked"
    return lease.taken


async def wake_each_leased(store: PostgresStore) -> list[bool | None]:
    """Signal "s", deliver K1 to "m", publish order 1 to "p" (see wakes_to_lease),
    each with the lease for worker "w": whether each took it."""
    taken = [await signal_leased(store, "s")]
    delivered = await deliver_alone(store, "K1", lease=True)
    assert delivered.outcome == "delivered" and delivered.lease is not None
    published = await publish_alone(store, 1, lease=True)
    assert published.waits == [("p", "wait#0")] and published.lease is not None
    return [*taken, delivered.lease.taken, published.lease.taken]


async def test_a_wake_leased_to_this_process_notifies_no_other(
    store: PostgresStore, engine_url: str
) -> None:
    # Leased to this process's worker in the waking transaction, the run's task is
    # that worker's: another process told of it would only claim and find it leased.
    await wakes_to_lease(store, held=False)
    async with task_notifications(engine_url) as heard:
        assert await wake_each_leased(store) == [True, True, True]
        assert await heard() == []
        # Unleased, each notifies as before.
        await paying(store, "p2", 1)
        await waiting_for(store, "m2", "K2")
        async with store.transaction() as tx:
            await tx.signals.send("s", "again", None, NOW)
        await deliver_alone(store, "K2")
        await publish_alone(store, 1, "e2")
        assert [note.split()[0] for note in await heard()] == [store._token] * 3


async def test_a_wake_whose_lease_fails_still_notifies(
    store: PostgresStore, engine_url: str
) -> None:
    # The run is held by a worker elsewhere: the lease takes nothing, and sends the
    # notification the waking statement left to it (that worker hears of its task).
    await wakes_to_lease(store, held=True)
    async with task_notifications(engine_url) as heard:
        assert await wake_each_leased(store) == [False, False, False]
        assert [note.split()[0] for note in await heard()] == [store._token] * 3
    assert await task_kinds(store, "s") == ["signal"]
    assert await task_kinds(store, "m") == ["message"]
    assert await task_kinds(store, "p") == ["delivery"]


async def test_a_publish_leasing_one_of_several_runs_notifies_for_the_others(
    store: PostgresStore, engine_url: str
) -> None:
    await paying(store, "p1", 1)
    await paying(store, "p2", 1)
    await show_shapes(store, shape_of({"order_id": 1}))
    async with task_notifications(engine_url) as heard:
        published = await publish_alone(store, 1, lease=True)
        assert [run_id for run_id, _ in published.waits] == ["p1", "p2"]
        assert published.lease is not None and published.lease.taken is True
        assert published.lease.run_id == "p1"
        assert len(await heard()) == 1  # p2's task is anyone's


async def test_a_lock_wait_past_statement_timeout_fails_clearly(engine_url: str) -> None:
    blocker = open_store(engine_url)
    waiter = open_store(f"{engine_url}?statement_timeout=200ms")
    await blocker.open()
    await waiter.open()
    try:
        async with blocker.transaction() as tx:
            await tx.runs.insert(run("r"))
        async with blocker.transaction() as tx:
            await tx.runs.get("r")  # holds the row
            with pytest.raises(StoreError, match="statement_timeout") as err:
                async with waiter.transaction() as other:
                    await other.runs.update("r", {"status": "parked"})
        assert "rolled back" in str(err.value)
        async with waiter.transaction() as other:  # the store carries on
            assert await other.runs.update("r", {"status": "parked"})
    finally:
        await blocker.close()
        await waiter.close()


async def test_the_connection_returned_last_is_handed_out_first(store: PostgresStore) -> None:
    # (LIFO: it keeps one server process hot; see parkway.store.pgpool.)
    held = [await store._getconn() for _ in range(3)]
    pids = [conn.info.backend_pid for conn in held]
    assert len(set(pids)) == 3
    for conn in held:
        await store._putconn(conn)
    for _ in range(3):
        async with store.transaction() as tx:
            assert tx._t._c.info.backend_pid == pids[-1]
    # The one used longest ago is still where the pool closes idle connections from.
    assert [conn.info.backend_pid for conn in store.pool._pool] == pids


async def test_a_closed_store_says_so(engine_url: str) -> None:
    store = open_store(engine_url)
    with pytest.raises(ParkwayError, match="not open"):
        async with store.transaction():
            pass


async def changed_is(store: object, expected: bool) -> bool:
    assert isinstance(store, PostgresStore)
    return await store.changed() is expected


async def test_a_store_failure_mid_run_is_retried_not_thrown_into_the_workflow(
    engine_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import contextlib
    import inspect

    import parkway.worker.advance

    monkeypatch.setattr(parkway.worker.advance, "RETRY_DELAY", 0.1)
    engine = Engine(engine_url)

    @engine.workflow()
    async def two_steps(ctx, input):  # type: ignore[no-untyped-def]
        first = await ctx.step(lambda: 1, name="a")
        return first + await ctx.step(lambda: 2, name="b")

    async with engine:
        store = engine.store
        real = store.transaction
        failures = [ParkwayError("PostgreSQL ...: server unreachable (simulated)")]

        @contextlib.asynccontextmanager
        async def flaky(*, readonly: bool = False):  # type: ignore[no-untyped-def]
            in_flush = any(f.function == "flush" for f in inspect.stack()[:4])
            if in_flush and not readonly and failures:
                raise failures.pop()
            async with real(readonly=readonly) as tx:
                yield tx

        monkeypatch.setattr(store, "transaction", flaky)
        handle = await engine.start("two_steps")
        assert await handle.result(timeout=10) == 3
