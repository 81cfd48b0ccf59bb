"""Correlation racing parking: every message is delivered exactly once.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_messages_race.py.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from parkway import Engine
from tests.acceptance.test_messages_race import N, check, race

APP = '''\
"""The message-race app: a parked run per key, served by a `parkway worker` subprocess."""

from parkway import Engine


def build(url=None, *, worker=True):
    engine = Engine(url, worker=worker)

    @engine.workflow(name="racer")
    async def racer(ctx, key):
        return await ctx.wait_for_message("race", key)

    return engine


engine = build()
'''


def load_app(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location("parkway_message_race_app", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class WorkerProcess:
    """A ``python -m parkway worker message_race_app:engine`` subprocess."""

    def __init__(self, cwd: Path, url: str, name: str) -> None:
        self.cwd, self.url, self.stderr = cwd, url, cwd / f"{name}.stderr"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = {**os.environ, "PARKWAY_URL": self.url}
        with self.stderr.open("wb") as err:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "parkway",
                "worker",
                "message_race_app:engine",
                "--concurrency",
                "8",
                "--lease",
                "5",
                "--grace",
                "5",
                cwd=self.cwd,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=err,
            )

    def output(self) -> str:
        return self.stderr.read_text(errors="replace")[-4000:]

    async def ready(self, timeout: float = 20) -> None:
        """Wait until the worker says it started (its signal handlers are installed)."""
        deadline = time.monotonic() + timeout
        while "started on" not in self.stderr.read_text(errors="replace"):
            assert self.proc is not None
            if self.proc.returncode is not None or time.monotonic() > deadline:
                pytest.fail(f"worker did not start:\n{self.output()}")
            await asyncio.sleep(0.02)

    async def stop(self) -> int:
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.proc.wait(), 20)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            pytest.fail(f"worker did not stop on SIGTERM:\n{self.output()}")

    async def ensure_dead(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


async def wait_until_all_complete(client: Engine, workers: list[WorkerProcess]) -> None:
    deadline = time.monotonic() + 60
    while True:
        done = await client.list_runs(workflow="racer", status="completed", limit=N + 1)
        if len(done) == N:
            return
        if time.monotonic() > deadline:
            logs = "\n".join(w.output() for w in workers)
            pytest.fail(f"only {len(done)}/{N} runs completed after 60s; workers said:\n{logs}")
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("order", ["jitter", "messages-first"])
async def test_race_across_processes_on_sqlite(tmp_path: Path, workers: int, order: str) -> None:
    (tmp_path / "message_race_app.py").write_text(APP)
    app = load_app(tmp_path / "message_race_app.py")
    url = f"sqlite:///{tmp_path / 'race.db'}"
    client: Engine = app.build(url, worker=False)
    procs = [WorkerProcess(tmp_path, url, f"worker{i}") for i in range(workers)]
    async with client:
        try:
            for proc in procs:
                await proc.start()
            results = await race(client, order, seed=workers, spread=0.5)
            await wait_until_all_complete(client, procs)
            outcomes = await check(client, results)
            assert outcomes["delivered"] + outcomes["buffered"] == N
            for proc in procs:
                await proc.ready()  # a worker may have had nothing left to do: that is fine
                assert await proc.stop() == 0, proc.output()
        finally:
            for proc in procs:
                await proc.ensure_dead()
