"""Crash safety of real worker processes on SQLite.

200 runs of a five-step workflow (see ``crash_app.py``) are started by a client
that does not work itself. A ``parkway worker`` subprocess advances them and is
killed mid-way, with SIGKILL (no cleanup at all) or SIGTERM (graceful); a second
worker finishes the job. The step log then shows that steps run at least once
and commit exactly once: a step whose result was committed never runs again,
and only a step that was executing at the kill may run a second time.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sys
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType

import pytest

from parkway import Engine, RunStatus
from tests.helpers import APPS

RUNS = 200
CONCURRENCY = 8
LEASE = 2


def _load_app() -> ModuleType:
    # By path, so the test does not depend on pytest's import mode.
    spec = importlib.util.spec_from_file_location("parkway_crash_app", APPS / "crash_app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


crash_app = _load_app()


class Worker:
    """A ``parkway worker crash_app:engine`` subprocess, its stderr kept in a file."""

    def __init__(self, tmp_path: Path, url: str, log: Path, name: str) -> None:
        self.url, self.log, self.stderr = url, log, tmp_path / f"{name}.stderr"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        env = {**os.environ, "PARKWAY_URL": self.url, "CRASH_LOG": str(self.log)}
        with self.stderr.open("wb") as err:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "parkway",
                "worker",
                "crash_app:engine",
                "--lease",
                str(LEASE),
                "--concurrency",
                str(CONCURRENCY),
                cwd=APPS,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=err,
            )

    def output(self, tail: int = 4000) -> str:
        text = self.stderr.read_text(errors="replace")
        return text if len(text) <= tail else "...\n" + text[-tail:]

    async def stop(self, signum: int, timeout: float) -> int:
        assert self.proc is not None
        self.proc.send_signal(signum)
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            pytest.fail(f"worker did not exit {timeout}s after {signum}:\n{self.output()}")

    async def ensure_dead(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


@asynccontextmanager
async def scenario(tmp_path: Path) -> AsyncIterator[tuple[Engine, list[str], Path, list[Worker]]]:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    log = tmp_path / "steps.log"
    log.touch()
    workers: list[Worker] = []
    client: Engine = crash_app.build(url, worker=False)
    async with client:
        ids = [f"run-{i:03d}" for i in range(RUNS)]
        for run_id in ids:
            await client.start("five_steps", id=run_id)
        try:
            yield client, ids, log, workers
        finally:
            for w in workers:
                await w.ensure_dead()


async def spawn(tmp_path: Path, client: Engine, log: Path, workers: list[Worker]) -> Worker:
    worker = Worker(tmp_path, client.url, log, f"worker{len(workers) + 1}")
    workers.append(worker)
    await worker.start()
    return worker


async def completed(client: Engine) -> int:
    runs = await client.list_runs(workflow="five_steps", status="completed", limit=RUNS + 1)
    return len(runs)


async def wait_for(
    client: Engine, enough: Callable[[int], bool], timeout: float, workers: list[Worker]
) -> int:
    deadline = time.monotonic() + timeout
    while True:
        done = await completed(client)
        if enough(done):
            return done
        if time.monotonic() > deadline:
            logs = "\n".join(w.output() for w in workers)
            pytest.fail(
                f"only {done}/{RUNS} runs completed after {timeout}s; workers said:\n{logs}"
            )
        await asyncio.sleep(0.02)


def executions(data: bytes) -> list[tuple[str, int]]:
    out = []
    for line in data.decode().splitlines():
        run_id, index = line.split()
        out.append((run_id, int(index)))
    return out


async def committed_steps(client: Engine, ids: list[str]) -> dict[str, set[int]]:
    steps: dict[str, set[int]] = {}
    for run_id in ids:
        history = await client.history(run_id)
        steps[run_id] = {e.position for e in history if e.kind == "step" and e.status == "done"}
    return steps


async def check_outputs(client: Engine, ids: list[str]) -> None:
    for run_id in ids:
        info = await client.get_run(run_id)
        assert info.status == RunStatus.COMPLETED, info
        assert info.output == crash_app.expected_output(run_id)


async def test_sigkill_mid_way_reruns_only_steps_in_flight(tmp_path: Path) -> None:
    async with scenario(tmp_path) as (client, ids, log, workers):
        first = await spawn(tmp_path, client, log, workers)
        done_before = await wait_for(client, lambda n: n >= RUNS // 5, 30, workers)
        assert first.proc is not None
        assert await first.stop(signal.SIGKILL, 10) == -signal.SIGKILL
        done_at_kill = await completed(client)
        assert done_before <= done_at_kill < RUNS, "the worker finished before the kill"
        before_kill = log.read_bytes()  # the dead worker can write no more
        committed = await committed_steps(client, ids)

        second = await spawn(tmp_path, client, log, workers)
        await wait_for(client, lambda n: n == RUNS, 60, workers)
        assert await second.stop(signal.SIGTERM, 10) == 0, second.output()
        await check_outputs(client, ids)

    phase1 = executions(before_kill)
    phase2 = executions(log.read_bytes()[len(before_kill) :])
    first_runs: dict[str, list[int]] = defaultdict(list)
    second_runs: dict[str, list[int]] = defaultdict(list)
    for run_id, index in phase1:
        first_runs[run_id].append(index)
    for run_id, index in phase2:
        second_runs[run_id].append(index)

    rerun: list[tuple[str, int]] = []
    for run_id in ids:
        ran1, ran2, done = first_runs[run_id], second_runs[run_id], committed[run_id]
        # Each worker runs a run's steps in order, once each.
        assert ran1 == list(range(len(ran1))), (run_id, ran1)
        # Committed results were produced by the first worker, and every step it
        # ran but the last is committed (its result is flushed before the next starts).
        assert done <= set(ran1), (run_id, ran1, done)
        in_flight = set(ran1) - done
        assert in_flight <= {len(ran1) - 1}, (run_id, ran1, done)
        # A committed step never runs again; the second worker starts after them.
        assert not done & set(ran2), (run_id, done, ran2)
        assert ran2 == list(range(len(done), crash_app.STEPS)), (run_id, done, ran2)
        rerun += [(run_id, index) for index in in_flight if index in ran2]

    counts = Counter(phase1 + phase2)
    assert set(counts) == {(r, i) for r in ids for i in range(crash_app.STEPS)}
    twice = sorted(pair for pair, n in counts.items() if n > 1)
    assert all(counts[pair] == 2 for pair in twice)
    assert twice == sorted(rerun)
    assert len(twice) <= CONCURRENCY, twice
    print(f"killed at {done_at_kill}/{RUNS} completed; re-executed steps in flight: {twice}")


async def test_sigterm_stops_gracefully_without_duplicates(tmp_path: Path) -> None:
    async with scenario(tmp_path) as (client, ids, log, workers):
        first = await spawn(tmp_path, client, log, workers)
        await wait_for(client, lambda n: n >= RUNS // 5, 30, workers)
        began = time.monotonic()
        assert await first.stop(signal.SIGTERM, 10) == 0, first.output()
        assert time.monotonic() - began < 5, "graceful stop took too long"
        stopped_at = await completed(client)
        assert stopped_at < RUNS, "the worker finished before SIGTERM"
        output = first.stderr.read_text()
        assert "parkway worker: started" in output and "stopped (SIGTERM)" in output, output
        # In-flight runs were finished, not abandoned: nothing is left mid-way.
        for run_id in ids:
            info = await client.get_run(run_id)
            assert info.status in (RunStatus.PENDING, RunStatus.COMPLETED), info

        second = await spawn(tmp_path, client, log, workers)
        await wait_for(client, lambda n: n == RUNS, 60, workers)
        assert await second.stop(signal.SIGINT, 10) == 0, second.output()
        await check_outputs(client, ids)

    counts = Counter(executions(log.read_bytes()))
    assert set(counts) == {(r, i) for r in ids for i in range(crash_app.STEPS)}
    assert [pair for pair, n in counts.items() if n != 1] == []


async def test_sigkill_during_the_step_after_a_signal_loses_no_signal(tmp_path: Path) -> None:
    # The wait's result commits with the step after it, so a kill mid-step leaves
    # both uncommitted: the next worker must take the same signal and run the step
    # again with it.
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    log = tmp_path / "steps.log"
    log.touch()
    workers: list[Worker] = []
    client: Engine = crash_app.build(url, worker=False)
    ids = [f"sig-{i:03d}" for i in range(RUNS // 2)]
    try:
        async with client:
            for run_id in ids:
                await client.start("signalled", id=run_id)
            first = await spawn(tmp_path, client, log, workers)
            deadline = time.monotonic() + 30
            while len(await client.list_runs(status="parked", limit=RUNS)) < len(ids):
                assert time.monotonic() < deadline, first.output()
                await asyncio.sleep(0.05)
            for n, run_id in enumerate(ids):
                await client.signal(run_id, "go", {"n": 1000 + n})
            while not log.read_bytes().count(b"\n") >= len(ids) // 4:
                assert time.monotonic() < deadline, first.output()
                await asyncio.sleep(0.01)
            assert await first.stop(signal.SIGKILL, 10) == -signal.SIGKILL
            killed_at = len(await client.list_runs(status="completed", limit=RUNS))
            assert killed_at < len(ids), "the worker finished before the kill"

            second = await spawn(tmp_path, client, log, workers)
            while len(await client.list_runs(status="completed", limit=RUNS)) < len(ids):
                assert time.monotonic() < deadline + 60, second.output()
                await asyncio.sleep(0.05)
            assert await second.stop(signal.SIGTERM, 10) == 0, second.output()
            for n, run_id in enumerate(ids):
                info = await client.get_run(run_id)
                assert info.output == f"{run_id}:{1000 + n}", info
    finally:
        for w in workers:
            await w.ensure_dead()
    # Every run's step ran with its own signal, once or (cut off by the kill) twice.
    counts = Counter(executions(log.read_bytes()))
    assert set(counts) == {(run_id, 1000 + n) for n, run_id in enumerate(ids)}
    assert all(count <= 2 for count in counts.values()), counts
    twice = sum(count == 2 for count in counts.values())
    print(f"killed at {killed_at}/{len(ids)} completed; steps run twice: {twice}")


async def test_sigkill_mid_gather_reruns_no_committed_step(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    log = tmp_path / "steps.log"
    log.touch()
    workers: list[Worker] = []
    client: Engine = crash_app.build(url, worker=False)
    ids = [f"g-{i:02d}" for i in range(20)]
    total = crash_app.GATHER_BRANCHES * crash_app.GATHER_STEPS
    try:
        async with client:
            for run_id in ids:
                await client.start("gathered", id=run_id)
            first = await spawn(tmp_path, client, log, workers)
            deadline = time.monotonic() + 30
            while len(executions(log.read_bytes())) < len(ids) * total // 3:
                assert time.monotonic() < deadline, first.output()
                await asyncio.sleep(0.01)
            assert await first.stop(signal.SIGKILL, 10) == -signal.SIGKILL
            before_kill = log.read_bytes()
            committed: dict[str, set[int]] = {}
            for run_id in ids:
                history = await client.history(run_id)
                committed[run_id] = {
                    int(e.name[1:].split("-")[0]) * 10 + int(e.name.split("-")[1])
                    for e in history
                    if e.kind == "step" and e.status == "done"
                }
            second = await spawn(tmp_path, client, log, workers)
            for run_id in ids:
                result = await client.handle(run_id).result(timeout=60)
                assert result == crash_app.expected_gathered(run_id), second.output()
            assert await second.stop(signal.SIGTERM, 10) == 0, second.output()
    finally:
        for w in workers:
            await w.ensure_dead()
    phase2 = executions(log.read_bytes()[len(before_kill) :])
    assert any(committed.values()), "the kill came before any step committed"
    for run_id, index in phase2:
        assert index not in committed[run_id], (run_id, index, "ran again though committed")
    counts = Counter(executions(log.read_bytes()))
    assert all(n <= 2 for n in counts.values())
    assert len(counts) == len(ids) * total


async def test_sigkill_of_a_worker_holding_parked_runs_in_memory_loses_nothing(
    tmp_path: Path,
) -> None:
    # The first worker keeps the parked runs' machines and wakes them on each tick
    # without a replay; killed mid-way through the second tick, it leaves the
    # second worker to replay each run's journal: a tick whose step committed is
    # never run again, and every tick is taken.
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    log = tmp_path / "steps.log"
    log.touch()
    workers: list[Worker] = []
    client: Engine = crash_app.build(url, worker=False)
    ids = [f"t-{i:03d}" for i in range(60)]

    async def parked_count() -> int:
        return len(await client.list_runs(workflow="ticked", status="parked", limit=len(ids) + 1))

    def steps(data: bytes) -> list[tuple[str, int]]:
        return [(run_id, n) for run_id, n in executions(data) if n >= 0]

    async def wait_logged(count: int, worker: Worker, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while len(steps(log.read_bytes())) < count:
            assert time.monotonic() < deadline, worker.output()
            await asyncio.sleep(0.01)

    try:
        async with client:
            for run_id in ids:
                await client.start("ticked", id=run_id)
            first = await spawn(tmp_path, client, log, workers)
            deadline = time.monotonic() + 30
            while await parked_count() < len(ids):
                assert time.monotonic() < deadline, first.output()
                await asyncio.sleep(0.05)
            for run_id in ids:
                await client.signal(run_id, "tick", {"n": 0})
            await wait_logged(len(ids), first)
            while await parked_count() < len(ids):  # all parked again, held in memory
                assert time.monotonic() < deadline, first.output()
                await asyncio.sleep(0.02)
            for run_id in ids:
                await client.signal(run_id, "tick", {"n": 1})
            await wait_logged(len(ids) + len(ids) // 3, first)
            assert await first.stop(signal.SIGKILL, 10) == -signal.SIGKILL
            before_kill = log.read_bytes()
            committed = {
                run_id: {
                    e.name
                    for e in await client.history(run_id)
                    if e.kind == "step" and e.status == "done"
                }
                for run_id in ids
            }
            for run_id in ids:
                await client.signal(run_id, "tick", {"n": 2})
            second = await spawn(tmp_path, client, log, workers)
            for run_id in ids:
                result = await client.handle(run_id).result(timeout=60)
                assert result == [f"{run_id}:{n}" for n in range(crash_app.TICKS)], result
            assert await second.stop(signal.SIGTERM, 10) == 0, second.output()
    finally:
        for w in workers:
            await w.ensure_dead()
    assert all("tick-0" in names for names in committed.values())
    assert any("tick-1" in names for names in committed.values()), "killed before tick 1"
    assert not all("tick-1" in names for names in committed.values()), "killed after tick 1"
    # The first worker ran each run's code from the top once: it woke them after.
    tops = Counter(run_id for run_id, n in executions(before_kill) if n < 0)
    assert tops == dict.fromkeys(ids, 1), tops
    for run_id, n in steps(log.read_bytes()[len(before_kill) :]):
        assert f"tick-{n}" not in committed[run_id], (run_id, n, "ran again though committed")
    counts = Counter(steps(log.read_bytes()))
    assert set(counts) == {(r, n) for r in ids for n in range(crash_app.TICKS)}
    assert all(c <= 2 for c in counts.values()), counts
