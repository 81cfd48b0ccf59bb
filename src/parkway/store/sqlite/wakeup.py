"""Cross-process wake-ups for processes sharing one SQLite file.

SQLite has no notifications, so an idle worker polls ``PRAGMA data_version``
every millisecond while work flows (see :mod:`parkway.worker`): a run woken by
another process waited half a millisecond on average, a whole one at worst,
before its worker even looked. Here each worker also listens on a Unix
datagram socket in a folder named after the database file, and a commit that
added tasks sends one byte to every socket there but its own: the worker looks
at once. The poll stays, as the safety net: a datagram is an optimisation,
never the only way a worker learns of work (one lost to a full buffer or a
folder another user owns costs a poll interval, not a run).

The folder is under the system's temporary directory, named by a hash of the
database's real path, so every process opening that file finds the same one
without writing anything beside the database. A socket whose process died
refuses the next datagram and is removed by the sender that found it so.

The same sockets carry the news of a commit that changed a run's streams (a
datagram ``s<run id>``, where a task's is ``t``), so a reader in another process
than the writer's is woken as a worker is.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import logging
import os
import socket
import stat
import tempfile
import time
import uuid
from collections.abc import Callable, Collection

log = logging.getLogger("parkway.store.wakeup")

# Unix socket paths are limited (108 bytes on Linux, 104 on macOS, with the NUL).
_MAX_PATH = 100
_SUFFIX = ".sock"
# The folder is listed again at least this often (seconds), should a socket have
# come within the same tick of the folder's clock as the last listing.
_RELIST_EVERY = 1.0
# The largest datagram read: a stream's note carries a run id (at most 255
# characters, up to 4 bytes each).
_DATAGRAM = 1100


def folder_for(database: str) -> str:
    """The wake-up folder of the SQLite file at ``database`` (any path to it)."""
    # Short names: a socket's whole path must fit in ~100 bytes, and macOS's
    # temporary directory alone takes ~50.
    digest = hashlib.sha256(os.path.realpath(database).encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"parkway-{digest}")


def supported() -> bool:
    return os.name == "posix" and hasattr(socket, "AF_UNIX")


class Wakeups:
    """The wake-up sockets of one store: its own (while watched) and the others'."""

    def __init__(self, database: str) -> None:
        self.folder = folder_for(database)
        self._sender: socket.socket | None = None
        self._listener: socket.socket | None = None
        self._own: str | None = None
        # The others' sockets, listed again whenever the folder changed (its mtime
        # moves when a socket is added or removed): a stat per announce, no listing.
        self._peers: list[str] = []
        self._listed_at: int | None = None
        self._listed_when = 0.0
        self.sent = 0  # datagrams sent, for tests
        self._on_tasks: list[Callable[[], None]] = []
        self._on_streams: list[Callable[[str], None]] = []

    def listen(self, callback: Callable[[], None]) -> bool:
        """Call ``callback`` on the event loop whenever another process announces
        tasks.

        Returns whether listening started (not on a platform without Unix
        sockets, nor where the folder cannot be made or the path is too long).
        """
        self._on_tasks.append(callback)
        return self._bind()

    def listen_streams(self, callback: Callable[[str], None]) -> bool:
        """Call ``callback(run_id)`` on the event loop whenever another process
        announces a change to the run's streams (same socket as :meth:`listen`)."""
        self._on_streams.append(callback)
        return self._bind()

    def _bind(self) -> bool:
        if self._listener is not None or not supported():
            return self._listener is not None
        path = os.path.join(self.folder, f"{os.getpid()}-{uuid.uuid4().hex[:6]}{_SUFFIX}")
        if len(path) > _MAX_PATH:
            log.debug("wake-up socket path too long (%d bytes): polling only", len(path))
            return False
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.setblocking(False)
            try:
                self._make_folder()
                sock.bind(path)
            except FileNotFoundError:  # the last listener removed the folder meanwhile
                self._make_folder()
                sock.bind(path)
        except OSError as exc:
            sock.close()
            log.debug("cannot listen for wake-ups in %s (%s): polling only", self.folder, exc)
            return False
        self._listener, self._own = sock, path

        def readable() -> None:
            tasks, runs = False, set()
            while True:  # drain: many announcements wake once
                try:
                    note = sock.recv(_DATAGRAM)
                except OSError:  # drained (BlockingIOError), or closed
                    break
                if note.startswith(b"s"):
                    runs.add(note[1:].decode("utf-8", "replace"))
                else:
                    tasks = True
            if tasks:
                for on_tasks in self._on_tasks:
                    on_tasks()
            for run_id in runs:
                for on_streams in self._on_streams:
                    on_streams(run_id)

        asyncio.get_running_loop().add_reader(sock.fileno(), readable)
        return True

    def _make_folder(self) -> None:
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        # Only a folder of this user's own, never one planted (or a symlink) by
        # another: its sockets would be bound where that user says.
        info = os.lstat(self.folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            raise PermissionError(f"{self.folder} is not a folder of this user's")

    def announce(self) -> None:
        """Wake every other listener on this database (a commit added tasks)."""
        self._send([b"t"])

    def announce_streams(self, run_ids: Collection[str]) -> None:
        """Tell every other listener that these runs' streams changed."""
        self._send([b"s" + run_id.encode() for run_id in run_ids])

    def _send(self, notes: list[bytes]) -> None:
        peers = self._current_peers()
        if not peers:
            return
        if self._sender is None:
            self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._sender.setblocking(False)
        for path in peers:
            try:
                for note in notes:
                    self._sender.sendto(note, path)
                self.sent += 1
            except (BlockingIOError, InterruptedError):
                pass  # its buffer is full: it has wake-ups enough to read
            except OSError as exc:
                if exc.errno in (errno.ECONNREFUSED, errno.ENOENT):
                    # Its process is gone (or its socket was removed): tidy up.
                    with contextlib.suppress(OSError):
                        os.unlink(path)
                    self._listed_at = None
                # Anything else (permissions, say): that worker polls instead.

    def _current_peers(self) -> list[str]:
        try:
            changed = os.stat(self.folder).st_mtime_ns
        except OSError:
            return []  # nobody listens yet
        now = time.monotonic()
        if changed != self._listed_at or now - self._listed_when > _RELIST_EVERY:
            try:
                names = os.listdir(self.folder)
            except OSError:
                return []
            own = os.path.basename(self._own) if self._own else None
            self._peers = [
                os.path.join(self.folder, name)
                for name in names
                if name.endswith(_SUFFIX) and name != own
            ]
            self._listed_at, self._listed_when = changed, now
        return self._peers

    def close(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(RuntimeError, ValueError):  # the loop may be gone
                asyncio.get_running_loop().remove_reader(self._listener.fileno())
            self._listener.close()
            self._listener = None
        if self._own is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._own)
                os.rmdir(self.folder)  # the last one out: fails while others listen
            self._own = None
        if self._sender is not None:
            self._sender.close()
            self._sender = None
        self._listed_at = None
