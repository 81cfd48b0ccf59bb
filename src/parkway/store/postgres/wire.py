"""Statements sent straight through libpq: prepared once per connection, pipelined.

parkway sends a few dozen fixed statement texts, over and over, each with a
handful of parameters. Through psycopg's cursors and ``conn.pipeline()`` each
statement costs ~70 µs of Python in the client, which made the client, not the
server, the bottleneck of a worker (measured on a 2-core box: a pipeline of
``BEGIN``, five updates and ``COMMIT`` took 670 µs of CPU that way and 200 µs
through this module; one statement alone, 240 µs against 180 µs).

So psycopg keeps what it does well — connecting, pooling, adapting values (its
C ``Transformer`` dumps the parameters and loads the rows, exactly as a cursor
would) and mapping server errors to its exception classes — and this module
drives the connection's libpq handle for the rest:

- every statement is prepared on first use on a connection, in the same round
  trip as its first execution, keyed like psycopg's own prepared statements
  (query text and parameter types); one that failed to prepare is not
  remembered, so the next use prepares it again;
- several statements go as one pipeline with a single ``Sync`` at the end: one
  round trip, and (outside ``BEGIN``) one implicit transaction, as with
  psycopg's ``conn.pipeline()``;
- the first error is raised as psycopg would raise it (the statements after it
  in the pipeline were skipped by the server); a lost connection surfaces as
  :class:`psycopg.OperationalError`.

Rows come back in text format, loaded by psycopg's loaders: the same Python
values as from a cursor.
"""

from __future__ import annotations

import asyncio
import functools
import re
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import pq, sql
from psycopg.adapt import PyFormat, Transformer

Conn = psycopg.AsyncConnection[tuple[Any, ...]]
Query = str | sql.SQL | sql.Composed
Params = Sequence[Any] | Mapping[str, Any]

_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK, pq.ExecStatus.EMPTY_QUERY)
_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_SYNC = pq.ExecStatus.PIPELINE_SYNC
_TEXT = pq.Format.TEXT
_BINARY = pq.Format.BINARY


class BinaryRows(str):
    """A query whose rows come back in PostgreSQL's binary format.

    For the claims, which bring a run's journal as arrays: the server sends a
    float, an array or a ``bytea`` as it holds it instead of printing it, and the
    client reads it without parsing text. A journal of 5,000 entries read as
    arrays: 9.5 ms in text, 5.4 ms in binary (the same rows, prepared, on the
    machine of ``docs/performance.md``). The values come back as the same Python
    types; only a ``void`` column (``pg_notify``'s) reads as ``b""`` instead of ``""``.
    """

    __slots__ = ()


# %s, %(name)s, or an escaped %%: psycopg's placeholder syntax.
_PLACEHOLDER = re.compile(rb"%(?:\((\w+)\))?(s)|%%")


@dataclass(frozen=True, slots=True)
class Result:
    """What one statement returned: its rows (``None``: it returns none) and row
    count (-1: unknown)."""

    rows: list[tuple[Any, ...]] | None
    rowcount: int


class _Wire:
    """What one connection has prepared, and its value adapter."""

    __slots__ = ("next_name", "prepared", "transformer")

    def __init__(self, conn: Conn) -> None:
        self.prepared: dict[tuple[bytes, tuple[int, ...]], bytes] = {}
        self.transformer = Transformer(conn)
        self.next_name = 0


_WIRES: weakref.WeakKeyDictionary[Conn, _Wire] = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=1024)
def _convert_text(query: str) -> tuple[bytes, tuple[str, ...] | None, int]:
    """:func:`_convert` of a query given as text. Cached by the text itself: parkway's
    statements are module constants, whose hash Python keeps, so a hit costs no
    encoding and no hashing of the statement's bytes."""
    return _convert(query.encode())


@functools.lru_cache(maxsize=1024)
def _convert(query: bytes) -> tuple[bytes, tuple[str, ...] | None, int]:
    """``%s`` / ``%(name)s`` placeholders as ``$n``; the names in order (``None``:
    positional), and how many parameters."""
    names: list[str] = []
    count = 0

    def number(match: re.Match[bytes]) -> bytes:
        nonlocal count
        if match.group(2) is None:  # %%
            return b"%"
        name = match.group(1)
        if name is None:
            count += 1
            return b"$%d" % count
        key = name.decode()
        if key not in names:
            names.append(key)
        return b"$%d" % (names.index(key) + 1)

    converted = _PLACEHOLDER.sub(number, query)
    if names and count:
        raise psycopg.ProgrammingError("a query may not mix %s and %(name)s placeholders")
    return converted, (tuple(names) if names else None), (len(names) if names else count)


def _values(query: Query, params: Params, conn: Conn) -> tuple[bytes, Sequence[Any]]:
    if isinstance(query, str):
        converted, names, count = _convert_text(query)
    else:
        converted, names, count = _convert(query.as_bytes(conn))
    if names is None:
        if isinstance(params, Mapping):
            if count:
                raise TypeError("positional placeholders (%s) require a sequence of parameters")
            return converted, ()
        if len(params) != count:
            raise psycopg.ProgrammingError(
                f"the query has {count} placeholders but {len(params)} parameters were passed"
            )
        return converted, params
    if not isinstance(params, Mapping):
        raise TypeError("named placeholders require a mapping of parameters")
    try:
        return converted, [params[name] for name in names]
    except KeyError as exc:
        raise psycopg.ProgrammingError(f"query parameter missing: {exc.args[0]}") from None


async def send(conn: Conn, steps: Sequence[tuple[Query, Params]]) -> list[Result]:
    """Run ``steps`` (statement, parameters) in one round trip; their results.

    Raises the first statement's error as psycopg would, after reading the whole
    pipeline so the connection is ready for the next use (a ``ROLLBACK`` if a
    transaction was open, as after any failed statement).
    """
    wire = _WIRES.get(conn)
    if wire is None:
        wire = _WIRES[conn] = _Wire(conn)
    pgconn = conn.pgconn
    tx = wire.transformer
    # Names of the statements this pipeline prepares, by their position in it.
    preparing: dict[int, tuple[tuple[bytes, tuple[int, ...]], bytes]] = {}
    pgconn.enter_pipeline_mode()
    try:
        for i, (query, params) in enumerate(steps):
            text, values = _values(query, params, conn)
            dumped = tx.dump_sequence(values, [PyFormat.AUTO] * len(values))
            types = tuple(tx.types or ()) if values else ()
            formats = tx.formats if values else None
            key = (text, types)
            name = wire.prepared.get(key)
            if name is None:
                # Prepared in this round trip; remembered once the server agreed.
                name = b"_pw_%d" % wire.next_name
                wire.next_name += 1
                pgconn.send_prepare(name, text, types)
                preparing[i] = (key, name)
            result_format = _BINARY if type(query) is BinaryRows else _TEXT
            pgconn.send_query_prepared(name, dumped, formats, result_format)
        pgconn.pipeline_sync()
        results = await _communicate(pgconn)
    finally:
        try:
            pgconn.exit_pipeline_mode()
        except psycopg.Error:
            # Results still pending (the wait was cancelled): the connection is in
            # an unknown state; closed, the pool replaces it.
            pgconn.finish()
    done: list[Result] = []
    error: psycopg.Error | None = None
    at = 0
    for i in range(len(steps)):
        if i in preparing:
            prepared = results[at]
            at += 1
            if prepared.status == pq.ExecStatus.COMMAND_OK:
                key, name = preparing[i]
                wire.prepared[key] = name
            elif error is None:
                error = _error(prepared, conn)
        result = results[at]
        at += 1
        status = result.status
        if status not in _OK:
            if error is None:
                error = _error(result, conn)
            continue
        if status == _TUPLES_OK:
            tx.set_pgresult(result)
            done.append(Result(tx.load_rows(0, result.ntuples, tuple), result.ntuples))
        else:
            tuples = result.command_tuples
            done.append(Result(None, -1 if tuples is None else tuples))
    if error is not None:
        raise error
    return done


def _error(result: pq.abc.PGresult, conn: Conn) -> psycopg.Error:
    if result.status == pq.ExecStatus.PIPELINE_ABORTED:
        return psycopg.errors.PipelineAborted("pipeline aborted")
    return psycopg.errors.error_from_result(result, encoding=conn.info.encoding)


async def _communicate(pgconn: pq.abc.PGconn) -> list[pq.abc.PGresult]:
    """Flush what was queued, then read results up to the pipeline's ``Sync``.

    One result per command (a prepare or an execution), in order; the ``Sync``
    itself is not returned.

    The waits are the loop's reader (and, while the send buffer is full, writer)
    callbacks on a future: what psycopg's ``wait_async`` does, without its
    generator protocol and the timer it arms on every wait (which only wakes it
    to look again at a socket that the reader callback reports anyway). Those
    were a fifth of a round trip's Python on a busy worker.
    """
    try:
        loop = asyncio.get_running_loop()
        fd = pgconn.socket
        while pgconn.flush():
            # The socket took only part: wait until it takes more, reading what the
            # server sends meanwhile (it may be blocked sending to us).
            await _ready(loop, fd, write=True)
            pgconn.consume_input()
        results: list[pq.abc.PGresult] = []
        last: pq.abc.PGresult | None = None
        while True:
            while pgconn.is_busy():
                await _ready(loop, fd)
                pgconn.consume_input()
            result = pgconn.get_result()
            if result is None:  # the end of one command's results
                if last is not None:
                    results.append(last)
                    last = None
                continue
            if result.status == _SYNC:
                return results
            if result.status == pq.ExecStatus.PIPELINE_ABORTED and last is None:
                results.append(result)  # a skipped command: no None follows it
                continue
            last = result
    except OSError as exc:  # (as psycopg: the socket went away under the wait)
        raise psycopg.OperationalError(f"connection socket closed: {exc}") from exc


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _ready(loop: asyncio.AbstractEventLoop, fd: int, *, write: bool = False) -> None:
    """Until ``fd`` is readable (or, with ``write``, readable or writable)."""
    future = loop.create_future()
    loop.add_reader(fd, _wake, future)
    if write:
        loop.add_writer(fd, _wake, future)
    try:
        await future
    finally:
        loop.remove_reader(fd)
        if write:
            loop.remove_writer(fd)
