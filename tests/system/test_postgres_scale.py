"""Several ``parkway worker`` processes on one PostgreSQL database.

1,000 runs of a five-step workflow are started by a client that does no work
itself; three worker processes share them. Each step appends ``<run> <step>
<worker pid>`` to one log (a single ``write`` on an ``O_APPEND`` descriptor:
lines never tear or interleave), so the log is the order in which step side
effects happened, across processes.

- One worker is SIGKILLed mid-way and a fourth is started. The log must show
  that no run was advanced by two workers at once, that a run changed hands
  only from the killed worker (after its death), that a step ran twice only if
  the killed worker was executing it and had not committed it, and that every
  worker did a share of the work.
- The workers' database connections are all terminated (``pg_terminate_backend``,
  what a server restart or failover does to clients) while runs are in flight:
  every run still completes, and the workers live on.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from parkway import Engine, RunStatus

pytestmark = [
    pytest.mark.parametrize("backend", ["postgres"], indirect=True),
    pytest.mark.timeout(120),
]

STEPS = 5
LEASE = 2
CONCURRENCY = 8

APP = f"""
import os
import time

from parkway import Engine

STEPS = {STEPS}
PAUSE = float(os.environ.get("SCALE_STEP_PAUSE", "0.002"))
engine = Engine(os.environ["PARKWAY_URL"])


def record(run_id, index):
    line = f"{{run_id}} {{index}} {{os.getpid()}}\\n".encode()
    fd = os.open(os.environ["SCALE_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)
    time.sleep(PAUSE)  # widens the window between a side effect and its commit
    return f"{{run_id}}:{{index}}"


@engine.workflow(name="five_steps")
async def five_steps(ctx, input):
    results = [await ctx.step(record, ctx.run_id, i, name=f"step-{{i}}") for i in range(STEPS)]
    return {{"run": ctx.run_id, "results": results}}
"""


def expected_output(run_id: str) -> dict[str, object]:
    return {"run": run_id, "results": [f"{run_id}:{i}" for i in range(STEPS)]}


@dataclass
class Worker:
    """A ``python -m parkway worker scale_app:engine`` process."""

    name: str
    folder: Path
    url: str
    log: Path
    proc: asyncio.subprocess.Process | None = None

    @property
    def stderr(self) -> Path:
        return self.folder / f"{self.name}.stderr"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def start(self) -> None:
        env = {**os.environ, "PARKWAY_URL": self.url, "SCALE_LOG": str(self.log)}
        with self.stderr.open("wb") as err:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "parkway",
                "worker",
                "scale_app:engine",
                "--lease",
                str(LEASE),
                "--concurrency",
                str(CONCURRENCY),
                "--log-level",
                "warning",
                cwd=self.folder,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=err,
            )

    def output(self, tail: int = 3000) -> str:
        text = self.stderr.read_text(errors="replace") if self.stderr.exists() else ""
        return f"--- {self.name}:\n" + (text if len(text) <= tail else "..." + text[-tail:])

    async def stop(self, signum: int, timeout: float = 20) -> int:
        assert self.proc is not None
        self.proc.send_signal(signum)
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            pytest.fail(f"{self.name} did not exit {timeout}s after {signum}:\n{self.output()}")

    async def ensure_dead(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


@dataclass
class Scenario:
    client: Engine
    url: str
    folder: Path
    log: Path
    ids: list[str]
    workers: list[Worker] = field(default_factory=list)

    async def spawn(self) -> Worker:
        worker = Worker(f"worker{len(self.workers) + 1}", self.folder, self.url, self.log)
        self.workers.append(worker)
        await worker.start()
        return worker

    async def completed(self) -> int:
        runs = await self.client.list_runs(
            workflow="five_steps", status="completed", limit=len(self.ids) + 1
        )
        return len(runs)

    async def wait_for(self, enough: int, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while (done := await self.completed()) < enough:
            if time.monotonic() > deadline:
                runs = await self.client.list_runs(workflow="five_steps", limit=len(self.ids) + 1)
                stuck = [(r.id, r.status.value, r.error) for r in runs if r.status != "completed"]
                logs = "\n".join(w.output() for w in self.workers)
                pytest.fail(
                    f"{done}/{len(self.ids)} runs completed after {timeout}s; not done: "
                    f"{stuck[:10]}\n{logs}"
                )
            await asyncio.sleep(0.05)
        return done

    async def check_outputs(self) -> None:
        runs = await self.client.list_runs(workflow="five_steps", limit=len(self.ids) + 1)
        assert len(runs) == len(self.ids)
        for info in runs:
            assert info.status == RunStatus.COMPLETED, info
            assert info.output == expected_output(info.id), info


@asynccontextmanager
async def scenario(tmp_path: Path, url: str, runs: int) -> AsyncIterator[Scenario]:
    (tmp_path / "scale_app.py").write_text(APP)
    log = tmp_path / "steps.log"
    log.touch()
    client = Engine(url, worker=False)
    async with client:

        @client.workflow(name="five_steps")
        async def five_steps(ctx, input):  # type: ignore[no-untyped-def]
            raise AssertionError("the client never works")

        ids = [f"run-{i:04d}" for i in range(runs)]
        it = Scenario(client, url, tmp_path, log, ids)
        try:
            yield it
        finally:
            for worker in it.workers:
                await worker.ensure_dead()


async def start_runs(it: Scenario) -> None:
    for first in range(0, len(it.ids), 50):
        batch = it.ids[first : first + 50]
        await asyncio.gather(*(it.client.start("five_steps", id=r) for r in batch))


def executions(data: bytes) -> list[tuple[str, int, int]]:
    out = []
    for line in data.decode().splitlines():
        run_id, step, pid = line.split()
        out.append((run_id, int(step), int(pid)))
    return out


def local_ports(pid: int) -> set[int]:
    """The local TCP ports of process ``pid``'s sockets (Linux /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


async def sessions_gone(url: str, ports: set[int], timeout: float = 10.0) -> None:
    """Wait until the server has no session left from these client ports."""
    deadline = time.monotonic() + timeout
    while True:
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE client_port = ANY(%s)",
                (list(ports),),
            ).fetchone()
        if row is not None and row[0] == 0:
            return
        assert time.monotonic() < deadline, f"sessions of ports {ports} still open"
        await asyncio.sleep(0.02)


def committed_steps(url: str) -> dict[str, set[int]]:
    """Every committed step, read straight from the journal (one query, right after a kill)."""
    steps: dict[str, set[int]] = defaultdict(set)
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT run_id, pos FROM parkway.journal WHERE kind = 'step' AND state = 'done'"
        ).fetchall()
    for run_id, pos in rows:
        steps[run_id].add(pos)
    return steps


async def test_workers_share_runs_and_one_dies_mid_way(tmp_path: Path, engine_url: str) -> None:
    async with scenario(tmp_path, engine_url, runs=1000) as it:
        for _ in range(3):
            await it.spawn()
        began = time.monotonic()
        await start_runs(it)
        await it.wait_for(250, timeout=40)
        victim = it.workers[0]
        ports = local_ports(victim.pid)
        assert ports, "the victim holds no connection to the server"
        assert await victim.stop(signal.SIGKILL) == -signal.SIGKILL
        at_kill = it.log.read_bytes()  # the victim can write no more
        # A commit it had sent may still be landing: wait for its sessions to end.
        await sessions_gone(engine_url, ports)
        # Its leases live up to LEASE seconds more: nothing of its runs commits meanwhile.
        committed = committed_steps(engine_url)
        killed_at = time.monotonic() - began
        done_at_kill = await it.completed()
        assert done_at_kill < len(it.ids), "everything finished before the kill"

        await it.spawn()
        await it.wait_for(len(it.ids), timeout=50)
        elapsed = time.monotonic() - began
        for worker in it.workers[1:]:
            assert await worker.stop(signal.SIGTERM) == 0, worker.output()
        await it.check_outputs()

    log = executions(it.log.read_bytes())
    kill_offset = len(executions(at_kill))
    victim_pid = victim.pid
    pids = {w.pid for w in it.workers}

    per_run: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for offset, (run_id, step, pid) in enumerate(log):
        assert pid in pids, (run_id, step, pid)
        per_run[run_id].append((offset, step, pid))

    rerun: list[tuple[str, int]] = []
    handed_over = 0
    for run_id in it.ids:
        lines = per_run[run_id]
        owners = [pid for _o, _s, pid in lines]
        # Maximal stretches of one worker: at most two, and the first is the victim's.
        stretches = [pid for i, pid in enumerate(owners) if i == 0 or owners[i - 1] != pid]
        assert len(stretches) <= 2, (run_id, lines)
        if len(stretches) == 1:
            # One worker ran it alone: every step once, in order.
            assert [s for _o, s, _p in lines] == list(range(STEPS)), (run_id, lines)
            continue
        handed_over += 1
        first, second = stretches
        assert first == victim_pid, f"{run_id} changed hands between live workers: {lines}"
        mine = [(o, s) for o, s, p in lines if p == first]
        theirs = [(o, s) for o, s, p in lines if p == second]
        # The successor started only after the victim was dead: never both at once.
        assert all(o < kill_offset for o, _s in mine), (run_id, lines)
        assert all(o >= kill_offset for o, _s in theirs), (run_id, lines)
        ran1, ran2 = [s for _o, s in mine], [s for _o, s in theirs]
        done = committed.get(run_id, set())
        assert ran1 == list(range(len(ran1))), (run_id, lines)
        # Every step the victim ran but its last was committed before the next began;
        # the successor picks up at the first step not committed, and runs the rest.
        assert done == set(range(len(done))) and done <= set(ran1), (run_id, ran1, done)
        assert set(ran1) - done <= {ran1[-1]}, (run_id, ran1, done)
        assert ran2 == list(range(len(done), STEPS)), (run_id, done, ran2)
        rerun += [(run_id, s) for s in set(ran1) & set(ran2)]

    counts = Counter((run_id, step) for run_id, step, _pid in log)
    assert set(counts) == {(r, s) for r in it.ids for s in range(STEPS)}
    twice = sorted(pair for pair, n in counts.items() if n > 1)
    assert all(counts[pair] == 2 for pair in twice)
    assert twice == sorted(rerun)  # only steps in flight at the kill ran twice
    assert len(twice) <= CONCURRENCY, twice
    shares = Counter(pid for _r, _s, pid in log)
    assert set(shares) == pids, shares
    assert min(shares.values()) >= len(log) // 50, shares  # everyone did a fair part
    print(
        f"\n{len(it.ids)} runs x {STEPS} steps on 3+1 workers in {elapsed:.1f}s "
        f"({len(log) / elapsed:.0f} steps/s); killed {victim.name} at {killed_at:.1f}s with "
        f"{done_at_kill} runs done; {handed_over} runs handed over, re-executed {twice}; "
        f"steps per worker {sorted(shares.values(), reverse=True)}"
    )


def terminate_backends(url: str) -> int:
    """End every session on the test database but this one, as a server restart would."""
    database = urlsplit(url).path.lstrip("/")
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchall()
    return len(rows)


async def test_runs_complete_after_every_connection_is_killed(
    tmp_path: Path, engine_url: str
) -> None:
    async with scenario(tmp_path, engine_url, runs=600) as it:
        for _ in range(3):
            await it.spawn()
        began = time.monotonic()
        await start_runs(it)
        killed = []
        for fraction in (0.2, 0.5):
            await it.wait_for(int(len(it.ids) * fraction), timeout=40)
            killed.append(terminate_backends(engine_url))
        assert all(n >= 3 for n in killed), killed  # at least each worker's listener
        await it.wait_for(len(it.ids), timeout=50)
        elapsed = time.monotonic() - began
        for worker in it.workers:
            assert worker.proc is not None and worker.proc.returncode is None, worker.output()
            assert await worker.stop(signal.SIGTERM) == 0, worker.output()
        await it.check_outputs()

    counts = Counter((run_id, step) for run_id, step, _pid in executions(it.log.read_bytes()))
    assert set(counts) == {(r, s) for r in it.ids for s in range(STEPS)}
    again = sorted(pair for pair, n in counts.items() if n > 1)
    # A step runs again only when the commit that followed it was cut off.
    assert all(counts[pair] == 2 for pair in again), again
    assert len(again) <= 2 * 3 * CONCURRENCY, again
    print(
        f"\n{len(it.ids)} runs in {elapsed:.1f}s with connections killed twice "
        f"({killed} sessions); steps run twice: {len(again)}"
    )
