"""What a SQLite transaction's parts share: the connection, and what the transaction
did that the store acts on at commit."""

from __future__ import annotations

import sqlite3

from parkway.store.base import Tx


class Transport:
    """The store's connection, and the transaction's notes for its commit.

    The store begins every transaction on the same one (its lock lets one run at a
    time), so the parts over it are made once per connection, not at every commit.
    """

    __slots__ = ("added_tasks", "conn", "given", "pending", "streamed")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.added_tasks = False  # other processes' workers are told at commit
        self.streamed: set[str] = set()  # (and their stream readers: see SQLiteStreams)
        # Runs given a task here, until this transaction leased them to this process
        # (a hand-over): their tasks are its worker's, whom a claim elsewhere could
        # not take them from, so telling the others would only wake them to claim
        # nothing (see tell_others).
        self.given: set[str] = set()
        # Runs this transaction inserted pending: a hand-over's lease of one sets its
        # status (see SQLiteRuns.lease), any other run's is left unnamed.
        self.pending: set[str] = set()

    def begin(self) -> None:
        """A transaction starts: the last one's notes are dropped."""
        self.added_tasks = False
        self.streamed.clear()
        self.given.clear()
        self.pending.clear()

    @property
    def tell_others(self) -> bool:
        """Whether other processes' workers are told of this transaction's tasks at
        commit: some went to a run it did not lease to this process."""
        return self.added_tasks or bool(self.given)


class Part:
    """What every part of a :class:`parkway.store.sqlite.SQLiteTx` holds: the
    connection, the transport and the transaction (for the parts it composes with)."""

    def __init__(self, tx: Tx, transport: Transport) -> None:
        self._tx = tx
        self._t = transport
        self._c = transport.conn
