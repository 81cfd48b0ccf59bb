"""parkway.store.pgwire: statements through libpq, prepared once per connection, pipelined.

Against the real server (a fresh database per test), compared with what a psycopg
cursor returns for the same statements.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from parkway.store.postgres import wire as pgwire
from parkway.store.postgres.wire import Result

from .test_postgres import admin_sql

pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)

Conn = psycopg.AsyncConnection[tuple[Any, ...]]


@pytest.fixture
async def conn(engine_url: str) -> AsyncIterator[Conn]:
    connection = await psycopg.AsyncConnection.connect(engine_url, autocommit=True)
    await connection.execute(
        "CREATE TABLE t (id text PRIMARY KEY, f float8, b bytea, n int8, ok bool, tags text[])"
    )
    yield connection
    await connection.close()


async def prepared(conn: Conn) -> list[str]:
    cursor = await conn.execute("SELECT statement FROM pg_prepared_statements ORDER BY name")
    return [row[0] for row in await cursor.fetchall()]


async def test_values_round_trip_as_through_a_cursor(conn: Conn) -> None:
    row = ("a", 1.5, b"\x00{}\xff", 2**40, True, ["x", "y"])
    insert = "INSERT INTO t VALUES (%s, %s, %s, %s, %s, %s)"
    assert await pgwire.send(conn, [(insert, row)]) == [Result(None, 1)]
    await pgwire.send(conn, [(insert, ("b", None, None, None, None, None))])
    select = "SELECT * FROM t ORDER BY id"
    (got,) = await pgwire.send(conn, [(select, ())])
    cursor = await conn.execute(select)
    assert got == Result(await cursor.fetchall(), 2)
    assert got.rows == [row, ("b", None, None, None, None, None)]


async def test_named_placeholders_and_escaped_percent(conn: Conn) -> None:
    query = "SELECT %(a)s::int + %(b)s::int, %(a)s::int, 'a%%b' LIKE 'a%%'"
    assert await pgwire.send(conn, [(query, {"a": 2, "b": 3})]) == [Result([(5, 2, True)], 1)]
    with pytest.raises(psycopg.ProgrammingError, match="missing: b"):
        await pgwire.send(conn, [(query, {"a": 2})])
    with pytest.raises(psycopg.ProgrammingError, match="2 placeholders but 1"):
        await pgwire.send(conn, [("SELECT %s::int, %s::int", (1,))])
    with pytest.raises(TypeError, match="named placeholders require a mapping"):
        await pgwire.send(conn, [(query, (1, 2))])


async def test_a_statement_is_prepared_once_per_connection_and_parameter_types(
    conn: Conn,
) -> None:
    query = "SELECT %s * 2"
    for value in (1, 2, 3):
        assert await pgwire.send(conn, [(query, (value,))]) == [Result([(value * 2,)], 1)]
    assert await prepared(conn) == ["SELECT $1 * 2"]
    # A value psycopg dumps as another type (int8 rather than int2) is another statement.
    assert (await pgwire.send(conn, [(query, (2**40,))]))[0].rows == [(2**41,)]
    assert await prepared(conn) == ["SELECT $1 * 2"] * 2


async def test_a_pipeline_is_one_transaction_between_begin_and_commit(conn: Conn) -> None:
    insert = "INSERT INTO t (id, n) VALUES (%s, %s)"
    count = "SELECT count(*) FROM t"
    steps = [("BEGIN", ()), (insert, ("a", 1)), (insert, ("b", 2)), (count, ()), ("COMMIT", ())]
    results = await pgwire.send(conn, steps)
    assert [r.rows for r in results] == [None, None, None, [(2,)], None]
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


async def test_the_first_error_is_raised_and_what_followed_did_not_run(conn: Conn) -> None:
    insert = "INSERT INTO t (id, n) VALUES (%s, %s)"
    await pgwire.send(conn, [(insert, ("a", 1))])
    with pytest.raises(psycopg.errors.UniqueViolation):
        await pgwire.send(conn, [(insert, ("b", 2)), (insert, ("a", 3)), (insert, ("c", 4))])
    # One implicit transaction up to the pipeline's end: "b" went with it.
    (count,) = await pgwire.send(conn, [("SELECT string_agg(id, ',') FROM t", ())])
    assert count.rows == [("a",)]
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


async def test_a_statement_that_failed_to_prepare_is_prepared_again(conn: Conn) -> None:
    query = "SELECT count(*) FROM later WHERE n > %s"
    with pytest.raises(psycopg.errors.UndefinedTable):
        await pgwire.send(conn, [(query, (0,))])
    assert await prepared(conn) == []
    await conn.execute("CREATE TABLE later (n int8)")
    assert await pgwire.send(conn, [(query, (0,))]) == [Result([(0,)], 1)]


async def test_a_failed_transaction_stays_failed_until_rolled_back(conn: Conn) -> None:
    with pytest.raises(psycopg.errors.DivisionByZero):
        await pgwire.send(conn, [("BEGIN", ()), ("SELECT 1 / %s", (0,))])
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
    with pytest.raises(psycopg.errors.InFailedSqlTransaction):
        await pgwire.send(conn, [("SELECT 1", ())])
    await pgwire.send(conn, [("ROLLBACK", ())])
    assert await pgwire.send(conn, [("SELECT 1", ())]) == [Result([(1,)], 1)]


async def test_a_cancelled_wait_closes_the_connection(conn: Conn) -> None:
    sending = asyncio.ensure_future(pgwire.send(conn, [("SELECT pg_sleep(%s)", (5,))]))
    await asyncio.sleep(0.2)
    sending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sending
    assert conn.closed  # its state unknown: the pool replaces a closed connection


async def test_a_killed_connection_is_an_operational_error(conn: Conn, engine_url: str) -> None:
    (pid,) = await pgwire.send(conn, [("SELECT pg_backend_pid()", ())])
    assert pid.rows is not None
    admin_sql(f"SELECT pg_terminate_backend({pid.rows[0][0]})")
    with pytest.raises(psycopg.OperationalError) as caught:
        await pgwire.send(conn, [("SELECT 1", ())])
    assert caught.value.sqlstate in (None, "57P01") or conn.broken


async def test_a_pipeline_larger_than_the_socket_buffers_goes_through(conn: Conn) -> None:
    # ~16 MB of parameters: more than the kernel's send and receive buffers hold, so
    # the flush waits for the socket (while reading what the server already sent).
    blob = bytes(range(256)) * 256  # 64 KiB
    insert = "INSERT INTO t (id, b) VALUES (%s, %s) RETURNING length(b)"
    steps = [(insert, (f"r{i:03d}", blob)) for i in range(256)]
    results = await pgwire.send(conn, [("BEGIN", ()), *steps, ("COMMIT", ())])
    assert [r.rows for r in results[1:-1]] == [[(len(blob),)]] * 256
    (count,) = await pgwire.send(conn, [("SELECT count(*), sum(length(b)) FROM t", ())])
    assert count.rows == [(256, 256 * len(blob))]


async def test_a_round_trip_leaves_no_callback_on_the_socket(conn: Conn) -> None:
    loop = asyncio.get_running_loop()
    fd = conn.pgconn.socket
    await pgwire.send(conn, [("SELECT 1", ())])
    # (Removing what is not there returns False: nothing of the wait was left behind.)
    assert loop.remove_reader(fd) is False and loop.remove_writer(fd) is False
    sending = asyncio.ensure_future(pgwire.send(conn, [("SELECT pg_sleep(%s)", (5,))]))
    await asyncio.sleep(0.1)
    sending.cancel()
    with pytest.raises(asyncio.CancelledError):
        await sending
    assert loop.remove_reader(fd) is False and loop.remove_writer(fd) is False
