"""Sagas and run deadlines: ctx.step(compensate=), ctx.compensate(), compensation on failure,
cancel and timeout, and @engine.workflow(timeout=) / engine.start(timeout=).

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_sagas.py.
"""

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

import pytest

from parkway import WorkflowFailedError
from tests.helpers import APPS


def _load_crash_app() -> ModuleType:
    # By path, so the test does not depend on pytest's import mode.
    spec = importlib.util.spec_from_file_location("saga_crash_app", APPS / "saga_crash_app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _worker(url: str, log: Path, stderr: Path, **env: str) -> asyncio.subprocess.Process:
    with stderr.open("wb") as err:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "parkway",
            "worker",
            "saga_crash_app:engine",
            "--lease",
            "1",
            cwd=APPS,
            env={**os.environ, "PARKWAY_URL": url, "SAGA_LOG": str(log), **env},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=err,
        )


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
