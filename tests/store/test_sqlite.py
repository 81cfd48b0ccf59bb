"""SQLite store specifics: the WAL is checkpointed off the commits' path."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

import parkway.store.sqlite.checkpoints
from parkway.store.sqlite import SQLiteStore

from .test_conformance import run


async def commit_runs(store: SQLiteStore, count: int) -> None:
    for i in range(count):
        async with store.transaction() as tx:
            await tx.insert_run(run(f"r{i}", input=b'"' + b"x" * 8000 + b'"'))


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
            subs = await tx.list_subscriptions()
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
