"""A poison step stops only its own run: not its worker, nor the other runs.

A step that raises ``SystemExit`` (a library calling ``sys.exit()``),
``KeyboardInterrupt``, another ``BaseException``, or an exception that cannot be
described fails its attempt like any exception: retried under its ``Retry``,
then a ``StepFailedError`` into the workflow. The worker goes on, in this process
(the ``engine`` fixture, every backend) and as a ``parkway worker`` subprocess
(``poison_app.py``, on the stores processes share). A step whose result the
store refuses fails its run with a ``StoreError`` after a few tries of the
commit, its side effect done once; and a worker whose ``def`` steps sleep for
minutes stops on SIGTERM within its grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

import parkway
from parkway import Engine, RunStatus, StoreError, WorkflowFailedError
from parkway.errors import StoreFailedError

HERE = Path(__file__).parent
KINDS = ["SystemExit", "KeyboardInterrupt", "GeneratorExit", "Custom", "Unprintable"]


def _load_app() -> ModuleType:
    # By path, so the test does not depend on pytest's import mode.
    spec = importlib.util.spec_from_file_location("parkway_poison_app", HERE / "poison_app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


poison_app = _load_app()


def attempts(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


async def poison_fails(engine: Engine, run_id: str, kind: str) -> WorkflowFailedError:
    """The poison run's failure, which must name the step and what it raised."""
    with pytest.raises(WorkflowFailedError) as failed:
        await engine.handle(run_id).result(timeout=30)
    error = failed.value
    assert error.type == "StepFailedError", error
    assert f"failed after {poison_app.ATTEMPTS} attempt(s): {kind}" in error.error_message
    return error


# -- in this process, every backend ------------------------------------------------------------


@pytest.mark.parametrize("is_async", [False, True], ids=["def", "async"])
@pytest.mark.parametrize("kind", KINDS)
async def test_a_step_raising_a_base_exception_fails_its_run_and_the_worker_goes_on(
    engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str, is_async: bool
) -> None:
    caplog.set_level(logging.INFO)
    poison_app.register(engine)
    log = tmp_path / "steps.log"
    poison = await engine.start(
        "poison", {"kind": kind, "async": is_async, "log": str(log)}, id="poison"
    )
    fine = [await engine.start("fine", {"x": x, "log": str(log)}) for x in range(3)]

    await poison_fails(engine, poison.id, kind)
    assert [await h.result(timeout=30) for h in fine] == [0, 2, 4]
    assert attempts(log).count(f"poison {kind}") == poison_app.ATTEMPTS  # retried, then no more
    # The worker lives: a run started now completes too.
    later = await engine.start("fine", {"x": 5})
    assert await later.result(timeout=30) == 10
    assert (await poison.info()).status == RunStatus.FAILED
    # Every log line could be made (an exception whose str() raises included).
    for record in caplog.records:
        record.getMessage()
    failed_lines = [r.getMessage() for r in caplog.records if "attempt 2 failed" in r.getMessage()]
    assert failed_lines and kind in failed_lines[0]


async def test_an_exception_that_cannot_be_described_is_recorded_by_its_type(
    engine: Engine,
) -> None:
    poison_app.register(engine)
    handle = await engine.start("poison", {"kind": "Unprintable", "async": False})
    error = await poison_fails(engine, handle.id, "Unprintable")
    assert error.error_message.endswith("Unprintable: Unprintable")
    # (Its failed attempts stand before it, as entries of kind "attempt".)
    [entry] = [e for e in await engine.history(handle.id) if e.kind != "attempt"]
    assert (entry.kind, entry.status) == ("step", "error")
    assert entry.error is not None and entry.error.message.endswith("Unprintable: Unprintable")


async def test_an_error_message_no_store_can_encode_is_recorded_escaped(engine: Engine) -> None:
    def garbled() -> None:
        raise ValueError("bad byte \udcff from a decoder")

    @engine.workflow()
    async def decodes(ctx, _input):
        await ctx.step(garbled)

    handle = await engine.start("decodes")
    with pytest.raises(WorkflowFailedError) as failed:
        await handle.result(timeout=30)
    assert failed.value.error_message.endswith("ValueError: bad byte \\udcff from a decoder")
    [entry] = [e for e in await engine.history(handle.id) if e.kind != "attempt"]
    assert entry.status == "error"


# -- a worker process -----------------------------------------------------------------------------


class WorkerProcess:
    """A ``parkway worker poison_app:engine`` subprocess, its stderr kept in a file."""

    def __init__(self, tmp_path: Path, url: str, *args: str) -> None:
        self.url, self.args = url, args
        self.stderr = tmp_path / "worker.stderr"
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        # The subprocess imports this parkway (the source tree under test), whatever the cwd.
        source = str(Path(parkway.__file__).resolve().parents[1])
        env = {
            **os.environ, "PARKWAY_URL": self.url,
            "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")]),
        }  # fmt: skip
        with self.stderr.open("wb") as err:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "parkway", "worker", "poison_app:engine", *self.args,
                cwd=HERE, env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=err,
            )  # fmt: skip

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


# -- results the store refuses -------------------------------------------------------------------


def refuse_journal_entries(url: str, name: str) -> None:
    """Make the store refuse, every time, the journal entry of an operation named
    ``name``: a trigger of the test's database, as a column refuses a value that does
    not fit it (which values reach the store at all is the edge's business)."""
    if url.startswith("sqlite:"):
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
            db.execute(
                f"CREATE TRIGGER refuse_{name} BEFORE INSERT ON journal "
                f"WHEN NEW.name = '{name}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
            db.commit()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute(
            "CREATE FUNCTION parkway.refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'refused %', NEW.name; END $$"
        )
        db.execute(
            "CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON parkway.journal FOR EACH ROW "
            f"WHEN (NEW.name = '{name}') EXECUTE FUNCTION parkway.refuse()"
        )


@pytest.mark.requires("persistent")
@pytest.mark.parametrize("then", ["ends", "steps again"])
async def test_a_step_whose_result_the_store_refuses_fails_its_run_once(
    engine: Engine, engine_url: str, clock, then: str
) -> None:
    effects: list[str] = []
    after: list[str] = []

    def charge() -> str:
        effects.append("charged")
        return "receipt"

    def ship() -> str:
        after.append("shipped")
        return "shipped"

    @engine.workflow()
    async def order(ctx, _input):
        receipt = await ctx.step(charge, name="unstorable")
        if then == "ends":  # (refused in the final commit)
            return receipt
        return await ctx.step(ship)  # (refused in the commit before this step)

    refuse_journal_entries(engine_url, "unstorable")
    handle = await engine.start("order")
    with pytest.raises(WorkflowFailedError) as failed:
        await handle.result(timeout=30)
    assert failed.value.type == "StoreFailedError"
    assert issubclass(StoreFailedError, StoreError)
    assert "refused to save what the run decided, 3 times" in failed.value.error_message
    # Its side effect ran once: the commit was tried again, never the step.
    assert (effects, after) == (["charged"], [])
    # And it stays failed: nothing retries it later.
    await clock.advance(60)
    await engine.idle()
    assert (await handle.info()).status == RunStatus.FAILED
    assert effects == ["charged"]
    assert [e.kind for e in await engine.history(handle.id)] == []
