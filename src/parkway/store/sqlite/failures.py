"""What a SQLite failure means, told to the user; and coming back from a full disk.

**Errors.** Every ``sqlite3.Error`` the store meets becomes a :class:`StoreError`
subclass naming the cause (a full disk, a database locked past the busy
timeout, ...) and whether the operation took effect: a SQLite transaction is
all or nothing, so one that failed before or at its COMMIT saved nothing.

**A full disk.** When a write fails for lack of space, the WAL holds what was
committed since the last complete checkpoint, and copying it into the
database file may itself need room (new pages): freed space that the next
writes take first would be gone before a checkpoint could use it, and the
store would never come back. So the store keeps a small reserve file beside
the database. A write that fails for space deletes it, checkpoints the WAL
and truncates it (the WAL's space goes back to the volume), then makes the
reserve again if there is room for it. Until that checkpoint has succeeded
the store is "full": every write transaction first tries it again, before it
writes, so the first space freed goes to the checkpoint. Until the reserve is
back, every commit checkpoints the WAL whole after it (slower, but the WAL
never grows into the little room there is). A process opening a store whose
reserve is missing does the same, so a restarted worker comes back as well.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3

from parkway.errors import StoreBusyError, StoreError, StoreFullError

log = logging.getLogger("parkway.store.sqlite")

# Room kept for the checkpoint that frees a full disk (a file of zeros, written:
# a sparse one would hold no room).
RESERVE_BYTES = 1024 * 1024

# SQLite's primary result codes (the low byte of an extended one).
_BUSY, _LOCKED, _IOERR, _FULL = 5, 6, 10, 13
# Extended codes for writes that fail for space on some file systems (the WAL-index
# grown with writes, a truncate, a short write).
_NO_ROOM = {
    "SQLITE_IOERR_SHMSIZE",
    "SQLITE_IOERR_WRITE",
    "SQLITE_IOERR_TRUNCATE",
    "SQLITE_IOERR_FSTAT",
}


def is_full(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that failed for lack of space."""
    if not isinstance(exc, sqlite3.Error):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    name = getattr(exc, "sqlite_errorname", None)
    if code is not None and code & 0xFF == _FULL:
        return True
    if name in _NO_ROOM:
        return True
    return "disk is full" in str(exc)


def translate(path: str, exc: sqlite3.Error, *, committing: bool = False) -> StoreError:
    """The error to raise for ``exc``, met on the database at ``path`` (``committing``:
    by its COMMIT)."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    detail = str(exc).strip() or type(exc).__name__
    where = f"SQLite {path!r}"
    if is_full(exc):
        return StoreFullError(
            f"{where}: the disk is full ({detail}); nothing of the operation was saved. "
            "Free space on the volume: the store checkpoints its WAL and goes on by itself"
        )
    if primary in (_BUSY, _LOCKED) or "locked" in detail or "busy" in detail:
        return StoreBusyError(
            f"{where}: the database stayed locked by another writer ({detail}); nothing of "
            "the operation was saved; retry it"
        )
    # Other failures (I/O errors, a read-only or corrupt file): a failed COMMIT of
    # one of those may have reached the file or not.
    took_effect = None if committing and primary == _IOERR else False
    outcome = "it may or may not have been saved" if took_effect is None else "nothing was saved"
    return StoreError(f"{where}: {detail} ({outcome})", took_effect=took_effect)


class Reserve:
    """The reserve file of the database at ``path``, and the store's state: ``full`` (a
    write failed for space: make room before the next one writes) and ``kept`` (the
    reserve file is there; without it every commit checkpoints the WAL whole, so the
    WAL never takes the little room the volume has)."""

    def __init__(self, path: str) -> None:
        self.path = f"{path}-reserve"
        self.full = False
        self.kept = True

    def ensure(self) -> bool:
        """Make the reserve file if it is missing; whether it is there now."""
        try:
            if os.path.getsize(self.path) >= RESERVE_BYTES:
                self.kept = True
                return True
        except OSError:
            pass
        try:
            with open(self.path, "wb") as out:
                out.write(bytes(RESERVE_BYTES))
                out.flush()
                os.fsync(out.fileno())
        except OSError as exc:  # no room for it (yet): the next recovery tries again
            with contextlib.suppress(OSError):
                os.remove(self.path)
            log.debug("cannot make the reserve file %s: %s", self.path, exc)
            self.kept = False
            return False
        self.kept = True
        return True

    def missing(self) -> bool:
        return not os.path.exists(self.path)

    def make_room(self, conn: sqlite3.Connection) -> bool:
        """Give the reserve up, checkpoint and truncate the WAL, make the reserve again
        if there is room for it. Whether the WAL was checkpointed whole (the store is
        no longer full)."""
        with contextlib.suppress(OSError):
            os.remove(self.path)
        self.kept = False
        if not self._truncate(conn):
            self.full = True
            return False
        was_full, self.full = self.full, False
        self._maybe_keep()
        if not self.kept:
            log.warning(
                "the WAL of the SQLite store was checkpointed, but there is no room for its "
                "%d-byte reserve file yet (%s): every commit checkpoints until there is; "
                "free space on the volume",
                RESERVE_BYTES,
                self.path,
            )
        elif was_full:
            log.warning("the SQLite store has room again: writes go on")
        return True

    def committed(self, conn: sqlite3.Connection) -> None:
        """After a commit while the reserve is missing: the WAL checkpointed whole (its
        room back to the volume), the reserve made again once there is room for it."""
        if not self._truncate(conn):
            self.full = True
            return
        self._maybe_keep()
        if self.kept:
            log.warning("the SQLite store has room again: its reserve file is back")

    def _maybe_keep(self) -> None:
        # Only with room to spare: writing it (and removing it again) at every
        # commit on a nearly full volume would cost more than the commit.
        folder = os.path.dirname(os.path.abspath(self.path))
        try:
            stat = os.statvfs(folder)
        except OSError:
            return
        if stat.f_bavail * stat.f_frsize >= 2 * RESERVE_BYTES:
            self.ensure()

    @staticmethod
    def _truncate(conn: sqlite3.Connection) -> bool:
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error as exc:
            log.warning("the disk is still full: cannot checkpoint the WAL (%s)", exc)
            return False
        return not busy  # (busy: another connection kept it from completing)
