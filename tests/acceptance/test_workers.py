"""Version-aware workers on every backend: each worker lists itself with what it
serves, claims only runs of those workflows and versions, and a run that no live
worker serves is marked; across real processes on PostgreSQL, two workers serving
two versions of one workflow each advance only their own runs, and a SIGKILLed
one drops out of engine.workers() within three lease periods."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import socket
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

import parkway
from parkway import Engine, RunStatus, WorkerInfo
from parkway.cli import cli

HERE = Path(__file__).parent
LEASE = 1.0


def _load_app() -> ModuleType:
    # By path, so the test does not depend on pytest's import mode.
    spec = importlib.util.spec_from_file_location("parkway_fleet_app", HERE / "fleet_app.py")
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


class Workers:
    """``parkway worker fleet_app:engine`` subprocesses, each serving some versions."""

    def __init__(self, tmp_path: Path, url: str) -> None:
        self.tmp_path, self.url = tmp_path, url
        self.procs: list[tuple[asyncio.subprocess.Process, Path]] = []

    async def spawn(self, versions: str) -> asyncio.subprocess.Process:
        env = {**os.environ, "PARKWAY_URL": self.url, "FLEET_VERSIONS": versions}
        source = str(Path(parkway.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join([source, *filter(None, [env.get("PYTHONPATH")])])
        stderr = self.tmp_path / f"worker{len(self.procs) + 1}.stderr"
        with stderr.open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "parkway", "worker", "fleet_app:engine",
                "--lease", str(LEASE), cwd=HERE, env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=err,
            )  # fmt: skip
        self.procs.append((proc, stderr))
        return proc

    def output(self) -> str:
        return "\n".join(err.read_text(errors="replace")[-3000:] for _, err in self.procs)

    async def stop_all(self) -> None:
        for proc, _ in self.procs:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in self.procs:
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
async def test_two_worker_processes_each_advance_only_their_own_versions(
    engine_url: str, tmp_path: Path
) -> None:
    workers = Workers(tmp_path, engine_url)
    old_client = fleet_app.build(engine_url, versions="v1", worker=False)
    new_client = fleet_app.build(engine_url, versions="v2", worker=False)
    try:
        async with old_client, new_client:
            old_proc = await workers.spawn("v1")
            new_proc = await workers.spawn("v2")

            async def both() -> bool:
                return len(await old_client.workers()) == 2

            await _until(both, "both workers' rows: " + workers.output())
            served = {w.pid: w.workflows for w in await old_client.workers()}
            assert served == {old_proc.pid: {"deploy": ["v1"]}, new_proc.pid: {"deploy": ["v2"]}}
            olds = [await old_client.start("deploy", None, id=f"old-{i}") for i in range(5)]
            news = [await new_client.start("deploy", None, id=f"new-{i}") for i in range(5)]
            for handle in [*olds, *news]:
                await old_client.signal(handle.id, "go")
            for handle in olds:
                assert await handle.result(timeout=30) == ["v1", old_proc.pid], workers.output()
            for handle in news:
                assert await handle.result(timeout=30) == ["v2", new_proc.pid], workers.output()

            # A SIGKILLed worker drops out within three lease periods.
            old_proc.send_signal(signal.SIGKILL)
            await old_proc.wait()
            killed = time.monotonic()

            async def gone() -> bool:
                return [w.pid for w in await old_client.workers()] == [new_proc.pid]

            await _until(gone, "the killed worker to drop out", timeout=3 * LEASE + 2)
            assert time.monotonic() - killed <= 3 * LEASE + 2

            # Its version is served by nobody now: a new v1 run waits, marked.
            late = await old_client.start("deploy", None, id="old-late")
            await old_client.signal(late.id, "go")
            await asyncio.sleep(3 * LEASE / 3 + 0.5)  # (the v2 worker claims meanwhile)
            assert await old_client.unserved_runs() == [late.id]
            result = await asyncio.to_thread(CliRunner().invoke, cli, ["runs", "--url", engine_url])
            assert result.exit_code == 0, result.output
            line = next(x for x in result.output.splitlines() if x.startswith("old-late"))
            assert "(unserved)" in line
            args = ["workers", "--url", engine_url, "--json"]
            result = await asyncio.to_thread(CliRunner().invoke, cli, args)
            assert result.exit_code == 0, result.output
            assert [w["pid"] for w in json.loads(result.output)] == [new_proc.pid]
            back = await workers.spawn("v1")
            assert await late.result(timeout=30) == ["v1", back.pid], workers.output()
    finally:
        await workers.stop_all()
