"""Admission across real worker processes (``parkway worker admission_app:engine``):
a worker SIGKILLed while its run holds a key's slot, and three workers on
PostgreSQL that never let a key have more active runs than its limit."""

from __future__ import annotations

import asyncio
import importlib.util
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest

from parkway import Engine, RunStatus
from tests.helpers import APPS, subprocess_env

LEASE = 2


def _load_app() -> ModuleType:
    # By path, so the test does not depend on pytest's import mode.
    spec = importlib.util.spec_from_file_location(
        "parkway_admission_app", APPS / "admission_app.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


admission_app = _load_app()


class Workers:
    """``parkway worker admission_app:engine`` subprocesses, each one's stderr in a file."""

    def __init__(self, tmp_path: Path, url: str, log: Path) -> None:
        self.tmp_path, self.url, self.log = tmp_path, url, log
        self.procs: list[tuple[asyncio.subprocess.Process, Path]] = []

    async def spawn(self) -> asyncio.subprocess.Process:
        env = subprocess_env(PARKWAY_URL=self.url, ADMISSION_LOG=str(self.log))
        stderr = self.tmp_path / f"worker{len(self.procs) + 1}.stderr"
        with stderr.open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "parkway",
                "worker",
                "admission_app:engine",
                "--lease",
                str(LEASE),
                "--concurrency",
                "8",
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


@contextmanager
def logged(tmp_path: Path) -> Iterator[Path]:
    log = tmp_path / "admission.log"
    log.touch()
    yield log


def lines(log: Path) -> list[tuple[str, str]]:
    return [tuple(line.split()) for line in log.read_text().splitlines()]  # type: ignore[misc]


@pytest.mark.requires("shared", "persistent")
async def test_a_sigkilled_worker_holding_a_slot_hands_it_on_after_its_lease(
    engine_url: str, tmp_path: Path
) -> None:
    """Three runs of one key with limit 1: the worker advancing the first is killed
    mid-step. Its lease expires, another worker takes the run over and finishes it,
    and only then do the others start, one at a time."""
    with logged(tmp_path) as log:
        workers = Workers(tmp_path, engine_url, log)
        client: Engine = admission_app.build(engine_url, worker=False)
        try:
            async with client:
                ids = ["s1", "s2", "s3"]
                for run_id in ids:
                    await client.start("serial", {"key": "k"}, id=run_id)
                first = await workers.spawn()
                deadline = time.monotonic() + 30
                # Killed in its "hold" step: once its "begin" step is committed (the
                # step's side effect alone could still be run again: at least once).
                while not any(
                    e.name == "begin" and e.status == "done" for e in await client.history("s1")
                ):
                    assert time.monotonic() < deadline, workers.output()
                    await asyncio.sleep(0.01)
                first.send_signal(signal.SIGKILL)
                await first.wait()
                assert (await client.get_run("s1")).status is RunStatus.RUNNING
                assert {(await client.get_run(r)).status for r in ("s2", "s3")} == {
                    RunStatus.PENDING
                }
                await workers.spawn()
                for run_id in ids:
                    assert await client.handle(run_id).result(timeout=60) == "end"
        finally:
            await workers.stop_all()
        seen = lines(log)
        # s1's begin was committed before the kill: never run again
        assert seen.count(("s1", "begin")) == 1, seen
        order = [entry for entry in seen if entry[1] in ("begin", "end")]
        assert order == [
            ("s1", "begin"),
            ("s1", "end"),
            ("s2", "begin"),
            ("s2", "end"),
            ("s3", "begin"),
            ("s3", "end"),
        ], seen


RUNS = 1000
INVARIANT_SQL = """
SELECT convert_from(input, 'UTF8')::json->>'key' AS key, count(*)
FROM parkway.runs WHERE workflow = 'limited' AND status IN ('running', 'parked')
GROUP BY key
"""


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
async def test_three_workers_never_run_more_than_the_limit_of_a_key(
    engine_url: str, tmp_path: Path
) -> None:
    """1,000 runs over 10 keys with limit 2, started while three worker processes
    drain them; a checker reads the store (one statement: one snapshot) all along
    and never finds a key with more than 2 active runs."""
    import psycopg

    with logged(tmp_path) as log:
        workers = Workers(tmp_path, engine_url, log)
        client: Engine = admission_app.build(engine_url, worker=False)
        most: dict[str, int] = {}
        looks = 0
        stop = asyncio.Event()

        async def check() -> None:
            nonlocal looks
            async with await psycopg.AsyncConnection.connect(engine_url, autocommit=True) as conn:
                while not stop.is_set():
                    rows = await (await conn.execute(INVARIANT_SQL)).fetchall()
                    looks += 1
                    for key, count in rows:
                        most[key] = max(most.get(key, 0), count)
                        assert count <= admission_app.LIMIT, (key, count)
                    await asyncio.sleep(0.005)

        try:
            async with client:
                for _ in range(3):
                    await workers.spawn()
                checker = asyncio.create_task(check())
                ids = [f"r{i:04d}" for i in range(RUNS)]
                for i, run_id in enumerate(ids):
                    await client.start("limited", {"key": f"k{i % admission_app.KEYS}"}, id=run_id)
                deadline = time.monotonic() + 240
                while True:
                    done = await client.list_runs(
                        workflow="limited", status="completed", limit=RUNS + 1
                    )
                    if len(done) == RUNS:
                        break
                    assert not checker.done(), checker.exception()
                    assert time.monotonic() < deadline, (len(done), workers.output())
                    await asyncio.sleep(0.2)
                stop.set()
                await checker
        finally:
            stop.set()
            await workers.stop_all()
    print(f"{looks} looks at the store; most active runs seen per key: {most}")
    assert looks > 10
    # The limit was reached (the test saw the queue at work), never passed.
    assert max(most.values()) == admission_app.LIMIT
