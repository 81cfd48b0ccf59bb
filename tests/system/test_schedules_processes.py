"""Two ``parkway worker`` processes on one store start each schedule tick once.

The app schedules a workflow every second; its one step appends ``<run id>
<pid>`` to a log (one ``write`` on an ``O_APPEND`` descriptor). Both workers
fire due ticks as soon as they are due, racing for each one, for several
seconds of real time. The store must then hold one run per tick, with no tick
missing between the first and the last, and the log one execution per run.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import textwrap
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from parkway import Engine, RunStatus
from tests.helpers import subprocess_env

pytestmark = [
    pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True),
    pytest.mark.timeout(120),
]

APP = """
import os

from parkway import Engine

engine = Engine(os.environ["PARKWAY_URL"])


def record(run_id):
    fd = os.open(os.environ["SCHEDULE_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{run_id} {os.getpid()}\\n".encode())
    finally:
        os.close(fd)


@engine.workflow(schedule="* * * * * *")
async def each_second(ctx, input):
    await ctx.step(record, ctx.run_id)
    return ctx.scheduled_at.isoformat()
"""


async def test_two_worker_processes_start_each_tick_once(tmp_path: Path, engine_url: str) -> None:
    (tmp_path / "tick_app.py").write_text(textwrap.dedent(APP))
    log = tmp_path / "runs.log"
    log.touch()
    env = subprocess_env(PARKWAY_URL=engine_url, SCHEDULE_LOG=str(log))
    workers = []
    for name in ("a", "b"):
        command = [sys.executable, "-m", "parkway", "worker", "tick_app:engine"]
        with (tmp_path / f"{name}.stderr").open("wb") as err:
            proc = await asyncio.create_subprocess_exec(
                *command,
                cwd=tmp_path,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=err,
            )
        workers.append(proc)
    try:
        await asyncio.sleep(7)
    finally:
        for proc in workers:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
        for proc in workers:
            await asyncio.wait_for(proc.wait(), 30)
    errors = "\n".join((tmp_path / f"{n}.stderr").read_text(errors="replace") for n in "ab")
    assert "Traceback" not in errors, errors

    client = Engine(engine_url, worker=False)
    async with client:
        runs = await client.list_runs(workflow="each_second", limit=1000)
    ticks = sorted(datetime.fromisoformat(r.id.removeprefix("sched:each_second:")) for r in runs)
    assert len(ticks) >= 4, errors
    seconds = [int(t.timestamp()) for t in ticks]
    assert seconds == list(range(seconds[0], seconds[0] + len(seconds)))  # none lost, none twice
    done = [r for r in runs if r.status is RunStatus.COMPLETED]
    for r in done:
        assert r.output == r.id.removeprefix("sched:each_second:")
    executions = Counter(line.split()[0] for line in log.read_text().splitlines())
    assert set(executions) >= {r.id for r in done}
    assert max(executions.values()) == 1, executions.most_common(3)
