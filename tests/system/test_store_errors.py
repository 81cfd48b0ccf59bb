"""Store failures reach the caller as StoreError subclasses naming the cause and whether the
operation took effect; HTTP answers them 503 with Retry-After; a SQLite store on a full disk
loses nothing and comes back once 1 MiB is freed.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_store_errors.py.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from parkway import (
    Engine,
    StoreFullError,
)
from tests.acceptance.test_store_errors import register

MiB = 1024 * 1024


@pytest.fixture
def small_volume(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted for this test (as root only)."""
    where = tmp_path / f"volume-{uuid.uuid4().hex[:8]}"
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a 4 MiB tmpfs to fill needs root; run as root to test a full disk")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(
            f"cannot mount a 4 MiB tmpfs to fill ({mounted.stderr.strip()}): the container "
            "lacks CAP_SYS_ADMIN"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def free_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


async def fill(engine: Engine, prefix: str) -> tuple[list[str], StoreFullError]:
    """Start runs until the disk is full for good (three refusals in a row); the ids of
    those that were started, and the last refusal."""
    started: list[str] = []
    refusals: list[StoreFullError] = []
    n = 0
    while len(refusals) < 3:
        run_id = f"{prefix}-{n}"
        n += 1
        try:
            await engine.start("note", "x" * 3000, id=run_id)
        except StoreFullError as exc:
            refusals.append(exc)
            continue
        started.append(run_id)
        refusals.clear()
    return started, refusals[-1]


@pytest.mark.timeout(300)
async def test_a_full_disk_is_a_store_error_loses_nothing_and_recovers_with_1_mib(
    small_volume: Path,
) -> None:
    url = f"sqlite:///{small_volume / 'full.db'}"
    ballast = small_volume / "ballast"
    engine = Engine(url, worker=False)
    register(engine)
    async with engine:
        ballast.write_bytes(bytes(MiB))  # the MiB freed later
        started, refused = await fill(engine, "before")
        assert started, "nothing fit at all"
        assert refused.took_effect is False and "disk is full" in str(refused)
        assert free_bytes(small_volume) < 64 * 1024
    # The worker restarts only after the space is freed: it must come back by itself.
    ballast.unlink()

    engine = Engine(url)
    register(engine)
    async with engine:
        for run_id in started:  # nothing committed was lost
            assert (await engine.get_run(run_id)).id == run_id
        # The store takes writes again: new runs start and complete.
        handles = [await engine.start("note", "after", id=f"after-{i}") for i in range(20)]
        for handle in handles:
            assert await handle.result(timeout=30) == 5
    with contextlib.closing(sqlite3.connect(small_volume / "full.db")) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


@pytest.mark.timeout(300)
async def test_a_store_that_filled_its_disk_comes_back_without_a_restart(
    small_volume: Path,
) -> None:
    url = f"sqlite:///{small_volume / 'full.db'}"
    ballast = small_volume / "ballast"
    engine = Engine(url, worker=False)
    register(engine)
    async with engine:
        ballast.write_bytes(bytes(MiB))
        started, _ = await fill(engine, "before")
        ballast.unlink()
        again = [await engine.start("note", "y" * 3000, id=f"again-{i}") for i in range(50)]
        assert len(again) == 50
        for run_id in [*started, *(h.id for h in again)]:
            assert (await engine.get_run(run_id)).id == run_id
    with contextlib.closing(sqlite3.connect(small_volume / "full.db")) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
