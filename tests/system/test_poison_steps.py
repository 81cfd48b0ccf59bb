"""A poison step stops only its own run: not its worker, nor the other runs.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_poison_steps.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from pathlib import Path

import pytest

from parkway import RunStatus
from tests.acceptance.test_poison_steps import attempts, poison_app, poison_fails
from tests.helpers import APPS, subprocess_env


class WorkerProcess:
    """A ``parkway worker poison_app:engine`` subprocess, its stderr kept in a file."""

    def __init__(self, tmp_path: Path, url: str, *args: str) -> None:
        self.url, self.args = url, args
        self.stderr = tmp_path / "worker.stderr"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = subprocess_env(PARKWAY_URL=self.url)
        with self.stderr.open("wb") as err:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "parkway",
                "worker",
                "poison_app:engine",
                *self.args,
                cwd=APPS,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=err,
            )

    def output(self) -> str:
        return self.stderr.read_text(errors="replace")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def stop(self, timeout: float) -> tuple[int, float]:
        """SIGTERM; its exit code and how long it took to exit."""
        assert self.proc is not None
        began = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            pytest.fail(f"the worker did not exit {timeout}s after SIGTERM:\n{self.output()}")
        return code, time.monotonic() - began

    async def kill(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.kill()
            await self.proc.wait()


@contextlib.asynccontextmanager
async def worker_process(tmp_path: Path, url: str, *args: str):  # type: ignore[no-untyped-def]
    worker = WorkerProcess(tmp_path, url, *args)
    await worker.start()
    try:
        yield worker
    finally:
        await worker.kill()


@pytest.mark.requires("shared")
@pytest.mark.timeout(180)
async def test_a_worker_process_outlives_its_poison_steps(
    make_engine, engine_url: str, tmp_path: Path
) -> None:
    client = await make_engine(clock=None, worker=False)
    log = tmp_path / "steps.log"
    poison = {
        f"{kind}-{'async' if is_async else 'def'}": (kind, is_async)
        for kind in ("SystemExit", "KeyboardInterrupt", "Unprintable")
        for is_async in (False, True)
    }
    async with worker_process(tmp_path, engine_url, "--concurrency", "4") as worker:
        for run_id, (kind, is_async) in poison.items():
            await client.start(
                "poison", {"kind": kind, "async": is_async, "log": str(log)}, id=run_id
            )
        fine = [await client.start("fine", {"x": x, "log": str(log)}) for x in range(6)]
        for run_id, (kind, _) in poison.items():
            await poison_fails(client, run_id, kind)
        assert [await h.result(timeout=30) for h in fine] == [0, 2, 4, 6, 8, 10]
        assert worker.alive, worker.output()
        later = await client.start("fine", {"x": 7})
        assert await later.result(timeout=30) == 14
        assert worker.alive, worker.output()
        code, _ = await worker.stop(timeout=30)
    assert code == 0, worker.output()
    lines = attempts(log)
    for kind, _ in poison.values():
        assert lines.count(f"poison {kind}") == 2 * poison_app.ATTEMPTS  # (def and async)
    assert "Logging error" not in worker.output()


@pytest.mark.requires("shared")
@pytest.mark.timeout(120)
async def test_sigterm_stops_a_worker_whose_def_steps_sleep_for_minutes(
    make_engine, engine_url: str, tmp_path: Path
) -> None:
    client = await make_engine(clock=None, worker=False)
    log = tmp_path / "steps.log"
    grace = 1.0
    async with worker_process(tmp_path, engine_url, "--grace", str(grace)) as worker:
        lone = await client.start("sleeper", {"seconds": 600, "log": str(log)})
        pair = await client.start("sleeper", {"seconds": 600, "gather": True, "log": str(log)})
        deadline = time.monotonic() + 30
        while attempts(log).count("napping") < 3:  # all three steps are in their threads
            assert time.monotonic() < deadline, worker.output()
            assert worker.alive, worker.output()
            await asyncio.sleep(0.05)
        code, took = await worker.stop(timeout=grace + 15)
    output = worker.output()
    assert code == 0, output
    assert took < grace + 10, output  # (the grace, then the stop itself: not 600 s)
    assert "abandoned 3 step(s) still running" in output, output
    # The runs were let go, for another worker to take over.
    for handle in (lone, pair):
        info = await handle.info()
        assert info.status == RunStatus.RUNNING
