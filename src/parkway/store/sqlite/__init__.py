"""SQLite store: the embedded default (``sqlite:///path/to.db``), by job.

- :mod:`.store`: :class:`SQLiteStore`, its life, its transactions and the
  worker's calls;
- :mod:`.tx`: :class:`SQLiteTx`, the transaction's operations, one part per
  entity over the connection (:mod:`.transport`), each in a module of its own:
  :mod:`.runs`, :mod:`.journal`, :mod:`.tasks` (tasks, signals), :mod:`.events`,
  :mod:`.subscriptions`, :mod:`.messages`, :mod:`.values` (values, updates),
  :mod:`.schedules`, :mod:`.admission`, :mod:`.people` (callbacks, human
  tasks), :mod:`.streams` and :mod:`.fleet` (workers, operators);
- :mod:`.statements`: the named SQL of ``queries.sql`` and the migrations
  (``migrations/NNN_*.sql``);
- :mod:`.checkpoints`: the WAL's checkpoints, off the commits' path;
- :mod:`.wakeup`: datagrams that wake other processes' workers on one file.
"""

from __future__ import annotations

from parkway.store.sqlite.statements import MIGRATIONS
from parkway.store.sqlite.store import SQLiteStore
from parkway.store.sqlite.tx import SQLiteTx

__all__ = ["MIGRATIONS", "SQLiteStore", "SQLiteTx"]
