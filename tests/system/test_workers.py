"""Version-aware workers on every backend: each worker lists itself with what it serves, claims
only runs of those workflows and versions, and a run that no live worker serves is marked;
across real processes on PostgreSQL, two workers serving two versions of one workflow each
advance only their own runs, and a SIGKILLed one drops out of engine.workers() within three
lease periods.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_workers.py.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from parkway.cli import cli
from tests.acceptance.test_workers import LEASE, _until, fleet_app
from tests.helpers import APPS, subprocess_env


class Workers:
    """``parkway worker fleet_app:engine`` subprocesses, each serving some versions."""

    def __init__(self, tmp_path: Path, url: str) -> None:
        self.tmp_path, self.url = tmp_path, url
        self.procs: list[tuple[asyncio.subprocess.Process, Path]] = []

    async def spawn(self, versions: str) -> asyncio.subprocess.Process:
        env = subprocess_env(PARKWAY_URL=self.url, FLEET_VERSIONS=versions)
        stderr = self.tmp_path / f"worker{len(self.procs) + 1}.stderr"
        with stderr.open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "parkway",
                "worker",
                "fleet_app:engine",
                "--lease",
                str(LEASE),
                cwd=APPS,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=err,
            )
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
