"""Sagas and run deadlines: ctx.step(compensate=), ctx.compensate(), compensation on
failure, cancel and timeout, and @engine.workflow(timeout=) / engine.start(timeout=)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from parkway import (
    Engine,
    RunCancelledError,
    RunStatus,
    WorkflowFailedError,
)

HERE = Path(__file__).parent


def booking(engine: Engine, done: list[str], *, fail_ship: bool = False) -> None:
    """The classic saga: reserve, charge, ship; each undone by its compensation."""

    def reserve(order: str) -> dict[str, Any]:
        done.append("reserve")
        return {"hold": f"H-{order}"}

    async def charge(order: str) -> str:
        done.append("charge")
        return f"P-{order}"

    def ship(order: str) -> str:
        if fail_ship:
            raise RuntimeError("no courier")
        done.append("ship")
        return f"S-{order}"

    def release(hold: dict[str, Any]) -> str:
        done.append(f"release {hold['hold']}")
        return "released"

    async def refund(payment: str) -> str:
        done.append(f"refund {payment}")
        return "refunded"

    @engine.workflow()
    async def book(ctx, order: str) -> str:
        await ctx.step(reserve, order, name="reserve", compensate=release)
        await ctx.step(charge, order, name="charge", compensate=refund)
        await ctx.wait_for_signal("go")
        return await ctx.step(ship, order, name="ship")


async def test_a_failure_undoes_the_saga_in_reverse(engine: Engine) -> None:
    done: list[str] = []
    booking(engine, done, fail_ship=True)
    h = await engine.start("book", "o1")
    await engine.signal(h.id, "go")
    with pytest.raises(WorkflowFailedError) as caught:
        await h.result(timeout=5)
    assert caught.value.type == "StepFailedError"
    assert done == ["reserve", "charge", "refund P-o1", "release H-o1"]
    history = await engine.history(h.id)
    assert [(e.kind, e.name, e.status) for e in history if "compensation" in e.kind] == [
        ("compensation.registered", "reserve", "done"),
        ("compensation.registered", "charge", "done"),
        ("compensation", "charge", "done"),
        ("compensation", "reserve", "done"),
    ]
    assert [e.result for e in history if e.kind == "compensation"] == ["refunded", "released"]


async def test_a_completed_run_leaves_its_compensations_unrun(engine: Engine) -> None:
    done: list[str] = []
    booking(engine, done)
    h = await engine.start("book", "o2")
    await engine.signal(h.id, "go")
    assert await h.result(timeout=5) == "S-o2"
    assert done == ["reserve", "charge", "ship"]
    assert not [e for e in await engine.history(h.id) if e.kind == "compensation"]


async def test_a_cancel_undoes_the_saga_in_reverse_before_the_run_ends(engine: Engine) -> None:
    done: list[str] = []
    booking(engine, done)
    h = await engine.start("book", "o3")
    await wait_parked(engine, h.id)
    await engine.cancel(h.id)
    with pytest.raises(RunCancelledError):
        await h.result(timeout=5)
    assert done == ["reserve", "charge", "refund P-o3", "release H-o3"]
    assert (await engine.get_run(h.id)).status == RunStatus.CANCELLED
    history = await engine.history(h.id)
    assert [(e.kind, e.name) for e in history if e.kind in ("compensation", "stop")] == [
        ("stop", "cancel"),
        ("compensation", "charge"),
        ("compensation", "reserve"),
    ]


async def test_a_cancel_of_a_run_without_compensations_ends_it_at_once(engine: Engine) -> None:
    @engine.workflow()
    async def plain(ctx, _: None) -> None:
        await ctx.step(lambda: 1, name="one")
        await ctx.wait_for_signal("never")

    h = await engine.start("plain")
    await wait_parked(engine, h.id)
    await engine.cancel(h.id)
    # (No worker is needed: the cancel ended it in its own transaction.)
    assert (await engine.get_run(h.id)).status == RunStatus.CANCELLED
    assert [e.kind for e in await engine.history(h.id)] == ["step", "signal"]


async def wait_parked(engine: Engine, run_id: str) -> None:
    for _ in range(500):
        if (await engine.get_run(run_id)).status == RunStatus.PARKED:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"run {run_id} never parked")


def _load_crash_app() -> ModuleType:
    # By path, so the test does not depend on pytest's import mode.
    spec = importlib.util.spec_from_file_location("saga_crash_app", HERE / "saga_crash_app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _worker(url: str, log: Path, stderr: Path, **env: str) -> asyncio.subprocess.Process:
    with stderr.open("wb") as err:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "parkway", "worker", "saga_crash_app:engine", "--lease", "1",
            cwd=HERE, env={**os.environ, "PARKWAY_URL": url, "SAGA_LOG": str(log), **env},
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=err,
        )  # fmt: skip


@pytest.mark.requires("shared")
async def test_sigkill_mid_compensation_reruns_no_completed_compensation(
    engine_url: str, tmp_path: Path
) -> None:
    app = _load_crash_app()
    log = tmp_path / "saga.log"
    log.touch()
    procs: list[asyncio.subprocess.Process] = []
    async with app.build(engine_url, worker=False) as client:
        try:
            h = await client.start("undone", id="saga-1")
            # The first worker hangs in the compensation of step 1 (3 and 2 are done).
            procs.append(await _worker(engine_url, log, tmp_path / "w1.err", SAGA_HANG="1"))
            await _until(lambda: "saga-1 1" in log.read_text(), procs, tmp_path)
            procs[0].send_signal(signal.SIGKILL)
            assert await procs[0].wait() == -signal.SIGKILL
            killed_at = log.read_text().split()
            procs.append(await _worker(engine_url, log, tmp_path / "w2.err"))
            with pytest.raises(WorkflowFailedError) as caught:
                await h.result(timeout=60)
            assert caught.value.type == "RuntimeError"
            history = await client.history(h.id)
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
    assert killed_at == ["saga-1", "3", "saga-1", "2", "saga-1", "1"]
    ran = [int(index) for index in log.read_text().split()[1::2]]
    # Newest first; only the one in flight at the kill ran again.
    assert ran == [3, 2, 1, 1, 0]
    done = [(e.name, e.result) for e in history if e.kind == "compensation"]
    assert done == [("step-3", 3), ("step-2", 2), ("step-1", 1), ("step-0", 0)]


async def _until(
    check: Callable[[], bool], procs: list[asyncio.subprocess.Process], tmp_path: Path
) -> None:
    deadline = time.monotonic() + 30
    while not check():
        if time.monotonic() > deadline:
            errors = [p.read_text() for p in sorted(tmp_path.glob("*.err"))]
            pytest.fail(f"timed out; workers said: {errors}")
        await asyncio.sleep(0.02)
