"""Races between events, subscriptions and runs (issue 4), and crash safety on SQLite.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_event_races.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from parkway import Engine, RunStatus

DIE_APP = """
import os
import signal

from parkway import Engine

engine = Engine(os.environ["PARKWAY_URL"])


def ship(order):
    marker = os.environ["CRASH_MARKER"]
    if not os.path.exists(marker):  # the first attempt kills its worker, mid-step
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return f"shipped:{order}"


@engine.workflow()
async def order(ctx, input):
    if input == "event":
        got = await ctx.wait_for_event("payment")
    elif input == "signal":
        got = await ctx.wait_for_signal("payment")
    else:
        got = await ctx.sleep("200ms")
    return [got, await ctx.step(ship, input, name="ship")]
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "wait",
    [
        "event",
        "sleep",
        "signal",
    ],
)
async def test_a_worker_killed_right_after_a_wait_loses_no_run(tmp_path: Path, wait) -> None:
    (tmp_path / "dieapp.py").write_text(textwrap.dedent(DIE_APP))
    url = f"sqlite:///{tmp_path / 'die.db'}"
    env = {**os.environ, "PARKWAY_URL": url, "CRASH_MARKER": str(tmp_path / "died")}
    client = Engine(url, worker=False)

    @client.workflow(name="order")
    async def order_stub(ctx, input):
        raise AssertionError("the client must not advance runs")

    async def spawn(name: str) -> asyncio.subprocess.Process:
        with (tmp_path / f"{name}.stderr").open("wb") as err:
            return await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "parkway",
                "worker",
                "dieapp:engine",
                "--lease",
                "1",
                cwd=tmp_path,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=err,
            )

    async def status_becomes(wanted: RunStatus, timeout: float) -> RunStatus:
        deadline = time.monotonic() + timeout
        while (current := (await client.get_run("r")).status) is not wanted:
            if time.monotonic() > deadline:
                return current
            await asyncio.sleep(0.01)
        return current

    async with client:
        first = await spawn("first")
        second = None
        try:
            await client.start("order", wait, id="r")
            assert await status_becomes(RunStatus.PARKED, 10) is RunStatus.PARKED
            if wait == "event":
                assert (await client.publish("payment", "paid")).resumed == ["r"]
            elif wait == "signal":
                await client.signal("r", "payment", "paid")
            assert await asyncio.wait_for(first.wait(), 10) == -signal.SIGKILL
            assert (tmp_path / "died").exists()

            second = await spawn("second")
            # The dead worker's lease (1 s) expires; the new worker must finish the run.
            final = await status_becomes(RunStatus.COMPLETED, 5)
            history = [(e.kind, e.status) for e in await client.history("r")]
            assert final is RunStatus.COMPLETED, (final, history)
            expected = None if wait == "sleep" else "paid"
            assert await client.handle("r").result(timeout=1) == [expected, f"shipped:{wait}"]
        finally:
            for proc in (first, second):
                if proc is not None and proc.returncode is None:
                    proc.kill()
                    await proc.wait()


APP = """
import os
import time

from parkway import Engine

engine = Engine(os.environ["PARKWAY_URL"])


def work(order, what):
    time.sleep(float(os.environ.get("STEP_PAUSE", "0.02")))
    return f"{what}:{order}"


@engine.workflow()
async def order(ctx, input):
    reserved = await ctx.step(work, input, "reserved", name="reserve")
    payment = await ctx.wait_for_event("payment", match={"order": input})
    shipped = await ctx.step(work, input, "shipped", name="ship")
    return {"order": input, "steps": [reserved, shipped], "paid": payment["amount"]}
"""


ORDERS = 120


class WorkerProcess:
    """``python -m parkway worker eventapp:engine --lease 1``, stderr kept in a file."""

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
                "eventapp:engine",
                "--lease",
                "1",
                "--concurrency",
                "8",
                cwd=self.cwd,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=err,
            )

    def output(self) -> str:
        return self.stderr.read_text(errors="replace")[-4000:]

    async def stop(self, signum: int) -> int:
        assert self.proc is not None
        self.proc.send_signal(signum)
        try:
            return await asyncio.wait_for(self.proc.wait(), 15)
        except TimeoutError:
            self.proc.kill()
            pytest.fail(f"worker did not exit after signal {signum}:\n{self.output()}")

    async def ensure_dead(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


async def count(client: Engine, status: str) -> int:
    return len(await client.list_runs(workflow="order", status=status, limit=ORDERS + 1))


async def wait_until(
    client: Engine, status: str, enough: int, workers: list[WorkerProcess], timeout: float = 30
) -> int:
    deadline = time.monotonic() + timeout
    while True:
        n = await count(client, status)
        if n >= enough:
            return n
        if time.monotonic() > deadline:
            logs = "\n".join(w.output() for w in workers)
            pytest.fail(f"only {n} runs {status} after {timeout}s; workers said:\n{logs}")
        await asyncio.sleep(0.01)


class LostRunsError(AssertionError):
    """Runs that no worker advances any more."""


async def all_completed(client: Engine, stall: float = 4.0) -> None:
    """Wait until every run completed; give up once nothing has moved for ``stall`` s.

    ``stall`` covers the dead worker's lease (1 s) and the new worker's start.
    """
    last, moved = -1, time.monotonic()
    while True:
        done = await count(client, "completed")
        if done == ORDERS:
            return
        if done != last:
            last, moved = done, time.monotonic()
        elif time.monotonic() - moved > stall:
            stuck = [
                (r.id, r.status.value)
                for r in await client.list_runs(workflow="order", limit=ORDERS + 1)
                if r.status is not RunStatus.COMPLETED
            ]
            raise LostRunsError(f"{len(stuck)} runs never completed: {stuck}")
        await asyncio.sleep(0.02)


async def check_consistent(client: Engine, delivered: set[str]) -> Counter[str]:
    """No orphan subscription, and no parked run that nobody can resume.

    ``delivered``: runs a publish resumed, whose delivery may still be queued.
    """
    subs = await client.subscriptions(name="payment")
    by_run = Counter(s.run_id for s in subs)
    assert all(n == 1 for n in by_run.values()), by_run
    statuses: Counter[str] = Counter()
    for info in await client.list_runs(workflow="order", limit=ORDERS + 1):
        statuses[info.status.value] += 1
        assert info.status is not RunStatus.FAILED, info
        assert info.status is not RunStatus.CANCELLED, info
        pending = [e for e in await client.history(info.id) if e.status == "pending"]
        waits = [e for e in pending if e.kind == "event" and e.name == "payment"]
        if info.id in by_run:
            # Every subscription belongs to a run parked on that very wait.
            assert info.status is RunStatus.PARKED, info
            assert len(waits) == 1, (info.id, pending)
            assert info.id not in delivered, info.id
        elif info.status is RunStatus.PARKED:
            # A parked run with no subscription must have its delivery on the way.
            assert waits, (info.id, pending)
            assert info.id in delivered, f"{info.id} is parked and nobody can resume it"
    return statuses


@pytest.mark.timeout(90)
async def test_killing_a_worker_leaves_no_orphan_subscription_nor_lost_run(
    tmp_path: Path,
) -> None:
    (tmp_path / "eventapp.py").write_text(textwrap.dedent(APP))
    url = f"sqlite:///{tmp_path / 'events.db'}"
    client = Engine(url, worker=False)

    @client.workflow(name="order")
    async def order_stub(ctx, input):  # the client only starts runs; workers run them
        raise AssertionError("the client must not advance runs")

    workers: list[WorkerProcess] = []

    async def spawn() -> WorkerProcess:
        w = WorkerProcess(tmp_path, url, f"worker{len(workers) + 1}")
        workers.append(w)
        await w.start()
        return w

    async with client:
        ids = [f"order-{i:03d}" for i in range(ORDERS)]
        for i, run_id in enumerate(ids):
            await client.start("order", i, id=run_id)
        try:
            # Phase 1: kill the worker (no cleanup at all) while runs are parking.
            first = await spawn()
            parked = await wait_until(client, "parked", ORDERS // 4, workers)
            assert await first.stop(signal.SIGKILL) == -signal.SIGKILL
            parked = await count(client, "parked")
            assert parked < ORDERS, "every run parked before the kill; nothing was tested"
            statuses = await check_consistent(client, delivered=set())
            assert statuses["completed"] == 0

            # A new worker takes over the dead one's runs once their leases expire.
            second = await spawn()
            await wait_until(client, "parked", ORDERS, workers)
            await check_consistent(client, delivered=set())

            # Phase 2: publish every payment and kill the worker with deliveries in flight.
            delivered: set[str] = set()
            for i, run_id in enumerate(ids):
                result = await client.publish("payment", {"order": i, "amount": i * 10})
                assert result.resumed == [run_id], (run_id, result)
                delivered.add(run_id)
            assert await client.subscriptions() == []
            await wait_until(client, "completed", ORDERS // 4, workers)
            assert await second.stop(signal.SIGKILL) == -signal.SIGKILL
            statuses = await check_consistent(client, delivered)
            assert statuses["completed"] < ORDERS, "all done before the kill; nothing tested"

            # Phase 3: a third worker finishes everything; every run completed exactly once.
            third = await spawn()
            await all_completed(client)
            assert await third.stop(signal.SIGTERM) == 0, third.output()
        finally:
            for w in workers:
                await w.ensure_dead()

        for i, run_id in enumerate(ids):
            info = await client.get_run(run_id)
            assert info.status is RunStatus.COMPLETED, info
            assert info.output == {
                "order": i,
                "steps": [f"reserved:{i}", f"shipped:{i}"],
                "paid": i * 10,
            }
            kinds = [(e.kind, e.name, e.status) for e in await client.history(run_id)]
            assert kinds == [
                ("step", "reserve", "done"),
                ("event", "payment", "done"),
                ("step", "ship", "done"),
            ]
        assert await client.subscriptions() == []
