"""SQLite store specifics: the WAL is checkpointed off the commits' path."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

import parkway.store.sqlite.checkpoints
import parkway.store.sqlite.store
from parkway.store.sqlite import SQLiteStore

from .conformance.support import run


async def commit_runs(store: SQLiteStore, count: int) -> None:
    for i in range(count):
        async with store.transaction() as tx:
            await tx.runs.insert(run(f"r{i}", input=b'"' + b"x" * 8000 + b'"'))


@pytest.mark.parametrize("background", [True, False])
async def test_commits_are_checkpointed_by_a_thread_of_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, background: bool
) -> None:
    # The pages the commits wrote reach the database file (from the WAL) with no
    # commit doing it: ~1,000 pages, under the commits' own threshold.
    if not background:  # the control: no background checkpoint, nothing copied back
        monkeypatch.setattr(parkway.store.sqlite.checkpoints, "CHECKPOINT_EVERY", 3600.0)
    path = tmp_path / "c.db"
    store = SQLiteStore(str(path))
    await store.open()
    try:
        before = os.path.getsize(path)
        await commit_runs(store, 400)
        assert os.path.getsize(path) == before  # all of it still in the WAL
        for _ in range(50 if background else 5):  # (the control waits 0.5 s)
            await asyncio.sleep(0.1)
            if os.path.getsize(path) > before + 2_000_000:
                break
        copied = os.path.getsize(path) > before + 2_000_000
        assert copied is background
        threads = [t.name for t in threading.enumerate() if "parkway-checkpoint" in t.name]
        assert bool(threads) is background
    finally:
        await store.close()
    assert not [t for t in threading.enumerate() if "parkway-checkpoint" in t.name]


async def test_under_steady_commits_the_wal_starts_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Commits that never stop would keep every PASSIVE checkpoint of the thread from
    # finding the WAL fully copied, so it would never start over: past
    # RESTART_FRAMES the thread checkpoints once more with this process's writes
    # held back, and the WAL starts over (SQLite counts it in the WAL's header). The
    # commits' own threshold is out of reach here, so it is not what starts it over.
    monkeypatch.setattr(parkway.store.sqlite.checkpoints, "RESTART_FRAMES", 200)
    monkeypatch.setattr(parkway.store.sqlite.store, "FOREGROUND_CHECKPOINT_PAGES", 10**7)
    path = tmp_path / "w.db"
    store = SQLiteStore(str(path))
    await store.open()
    try:
        committed = 0

        async def commit() -> None:
            nonlocal committed
            async with store.transaction() as tx:
                await tx.runs.insert(run(f"r{committed}", input=b'"' + b"x" * 8000 + b'"'))
            committed += 1
            await asyncio.sleep(0)  # (the checkpoint task's turn)

        await commit()
        first = wal_sequence(path)
        deadline = asyncio.get_running_loop().time() + 30
        while wal_sequence(path) < first + 3:
            assert asyncio.get_running_loop().time() < deadline, "the WAL never started over"
            await commit()
        assert store._checkpoints.restarts >= 1
        assert store._checkpoints.writable.is_set()
        async with store.transaction(readonly=True) as tx:
            assert await tx.runs.get(f"r{committed - 1}") is not None
    finally:
        await store.close()


def wal_sequence(path: Path) -> int:
    """How many times the WAL started over: its header's checkpoint sequence number."""
    with open(f"{path}-wal", "rb") as wal:
        return int.from_bytes(wal.read(16)[12:16], "big")


async def test_writes_held_back_for_a_checkpoint_wait_and_reads_do_not(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(str(tmp_path / "h.db"))
    await store.open()
    try:
        store._checkpoints.writable.clear()  # what the checkpoint thread's last pass does

        async def write() -> None:
            async with store.transaction() as tx:
                await tx.runs.insert(run("held"))

        writer = asyncio.create_task(write())
        async with store.transaction(readonly=True) as tx:
            assert await tx.runs.get("held") is None
        await asyncio.sleep(0.05)
        assert not writer.done()
        store._checkpoints.writable.set()
        await asyncio.wait_for(writer, 5)
        async with store.transaction(readonly=True) as tx:
            assert await tx.runs.get("held") is not None
    finally:
        await store.close()


async def test_an_upgrade_keeps_the_labels_of_parked_waits(tmp_path: Path) -> None:
    # Version 8 stops storing a subscription's usual label: the rows a version-7
    # database holds keep reading back the same, the usual label dropped (NULL)
    # and any other kept.
    import sqlite3

    from parkway.store.sqlite import MIGRATIONS

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for version, script in MIGRATIONS:
        if version <= 7:
            conn.executescript(script)
            conn.execute(f"PRAGMA user_version = {version}")
    rows = [("a", 3, "wait_for_event:paid#3"), ("b", 1, "node:pay")]
    for run_id, pos, wait in rows:
        conn.execute(
            "INSERT INTO subscriptions VALUES (?, ?, 'event', 'default', 'paid', '*', '', '',"
            " NULL, ?, 1e12, 1.0, NULL)",
            (run_id, pos, wait),
        )
    conn.close()

    store = SQLiteStore(str(path))
    await store.open()
    try:
        async with store.transaction() as tx:
            subs = await tx.subscriptions.list()
        assert sorted((s.run_id, s.wait) for s in subs) == [
            ("a", "wait_for_event:paid#3"),
            ("b", "node:pay"),
        ]
    finally:
        await store.close()
    conn = sqlite3.connect(path)
    stored = conn.execute("SELECT run_id, wait FROM subscriptions ORDER BY run_id").fetchall()
    assert stored == [("a", None), ("b", "node:pay")]
    assert conn.execute("PRAGMA user_version").fetchone()[0] == MIGRATIONS[-1][0]
    conn.close()


async def test_one_index_serves_the_counts_and_a_subjects_active_run(tmp_path: Path) -> None:
    # Version 12 replaces runs_by_workflow (workflow, status) and runs_by_subject
    # (workflow, domain, subject, status) by one (workflow, status, domain, subject):
    # a status change moves one index entry, not two. A version-11 file upgrades
    # with its runs found as before, and the readers seek on the index, none walks
    # a workflow's runs.
    import sqlite3

    from parkway.store.sqlite import MIGRATIONS
    from parkway.store.sqlite.statements import Q

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for version, script in MIGRATIONS:
        if version <= 11:
            conn.executescript(script)
            conn.execute(f"PRAGMA user_version = {version}")
    for run_id, subject, status in [
        ("ended", "acct-1", "completed"),
        ("live", "acct-1", "parked"),
        ("other", "acct-2", "running"),
    ]:
        conn.execute(
            "INSERT INTO runs (id, workflow, version, status, domain, subject, created_at,"
            " updated_at) VALUES (?, 'account', '1', ?, 'default', ?, 1.0, 1.0)",
            (run_id, status, subject),
        )
    conn.close()

    store = SQLiteStore(str(path))
    await store.open()
    try:
        async with store.transaction() as tx:
            assert await tx.runs.active("account", "default", "acct-1") == "live"
            assert await tx.runs.active("account", "default", "acct-2") == "other"
            assert await tx.runs.active("account", "default", "acct-3") is None
            assert await tx.runs.active("account", "elsewhere", "acct-1") is None
        plans = {
            name: " | ".join(
                row[3] for row in store.conn.execute(f"EXPLAIN QUERY PLAN {Q[name]}", args)
            )
            for name, args in [
                ("active_run", ("account", "default", "acct-1")),
                ("stats_parked", ()),
                ("run_counts", ()),
            ]
        }
    finally:
        await store.close()
    assert (
        "runs_by_workflow (workflow=? AND status=? AND domain=? AND subject=?)"
        in (plans["active_run"])
    )
    assert "runs_by_workflow (workflow=? AND status=?)" in plans["stats_parked"]
    assert "COVERING INDEX runs_by_workflow" in plans["run_counts"]
    conn = sqlite3.connect(path)
    indexes = {
        name
        for (name,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'runs'"
            " AND sql IS NOT NULL"
        )
    }
    conn.close()
    assert indexes == {"runs_by_created", "runs_by_workflow", "runs_by_parent", "runs_by_end"}
