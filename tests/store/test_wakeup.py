"""parkway.store.wakeup: datagrams that wake the workers of other processes on one SQLite file."""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
from pathlib import Path

import pytest

from parkway.store.sqlite import wakeup
from parkway.store.sqlite.wakeup import Wakeups

pytestmark = pytest.mark.skipif(not wakeup.supported(), reason="no Unix sockets here")


async def woken(event: asyncio.Event) -> bool:
    try:
        await asyncio.wait_for(event.wait(), 2)
    except TimeoutError:
        return False
    return True


async def test_an_announcement_wakes_the_others_but_not_the_sender(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    listener, sender = Wakeups(db), Wakeups(db)
    heard, echoed = asyncio.Event(), asyncio.Event()
    try:
        assert listener.listen(heard.set)
        assert sender.listen(echoed.set)  # (listening too: its own socket is skipped)
        sender.announce()
        assert await woken(heard)
        assert sender.sent == 1
        await asyncio.sleep(0.05)
        assert not echoed.is_set()
    finally:
        listener.close()
        sender.close()


async def test_another_path_to_the_same_file_finds_the_same_folder(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    direct, roundabout = str(tmp_path / "x.db"), str(tmp_path / "sub" / ".." / "x.db")
    assert wakeup.folder_for(direct) == wakeup.folder_for(roundabout)
    assert wakeup.folder_for(direct) != wakeup.folder_for(str(tmp_path / "y.db"))


async def test_a_dead_listeners_socket_is_removed_by_the_next_announcement(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "x.db")
    alive, sender = Wakeups(db), Wakeups(db)
    heard = asyncio.Event()
    assert alive.listen(heard.set)
    # A process that died without closing: its socket file stays, nobody reads it.
    stale = os.path.join(alive.folder, "999999-dead.sock")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dead.bind(stale)
    dead.close()
    try:
        sender.announce()
        assert await woken(heard)  # the live one is woken all the same
        assert not os.path.exists(stale)
    finally:
        alive.close()
        sender.close()


async def test_the_last_listener_out_removes_the_folder(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    first, second = Wakeups(db), Wakeups(db)
    assert first.listen(lambda: None) and second.listen(lambda: None)
    first.close()
    assert os.listdir(second.folder) != []
    second.close()
    assert not os.path.exists(second.folder)
    second.announce()  # nobody listens: nothing to do, no error


async def test_a_folder_path_too_long_for_a_socket_means_polling_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 120)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    wakeups = Wakeups(str(tmp_path / "x.db"))
    assert wakeups.listen(lambda: None) is False
    wakeups.announce()
    wakeups.close()


async def test_a_folder_that_is_not_this_users_own_is_not_listened_in(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    wakeups = Wakeups(db)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, wakeups.folder)  # planted where the folder should be
    try:
        assert wakeups.listen(lambda: None) is False
        assert list(elsewhere.iterdir()) == []  # no socket bound there
    finally:
        os.unlink(wakeups.folder)
        wakeups.close()
