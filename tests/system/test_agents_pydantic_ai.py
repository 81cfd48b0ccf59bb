"""Durable pydantic-ai agents (``parkway.integrations.pydantic_ai``), offline.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_agents_pydantic_ai.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from parkway import Engine
from parkway.errors import MissingExtraError
from tests.acceptance.test_agents_pydantic_ai import lines
from tests.helpers import APPS


@pytest.mark.parametrize(
    ("module", "extra", "missing"),
    [
        ("parkway.integrations.pydantic_ai", "pydantic-ai", "pydantic_ai"),
    ],
)
def test_without_the_extra_the_import_names_it(module: str, extra: str, missing: str) -> None:
    script = textwrap.dedent(f"""
        import sys
        sys.modules[{missing!r}] = None  # as if the extra were not installed
        from parkway.errors import MissingExtraError
        try:
            import {module}
        except MissingExtraError as exc:
            assert isinstance(exc, ImportError)
            print(exc.extra, "|", exc)
        else:
            raise SystemExit("imported without the extra")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"{extra} |")
    assert f"pip install 'parkway[{extra}]'" in done.stdout
    assert MissingExtraError.__mro__[1].__name__ == "ParkwayError"


# On PostgreSQL too: there a step's result commits while the agent decides its next
# request (parkway.worker.drive), which must still precede the next step.
@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_a_worker_killed_mid_conversation_repeats_no_completed_call(
    engine_url: str, tmp_path: Path
) -> None:
    url = engine_url
    log = tmp_path / "calls.log"
    env = {**os.environ, "PARKWAY_URL": url, "AGENT_LOG": str(log)}

    async def worker(**extra: str) -> asyncio.subprocess.Process:
        with (tmp_path / "worker.err").open("ab") as err:
            return await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "parkway",
                "worker",
                "agent_crash_app:engine",
                "--lease",
                "2",
                cwd=APPS,
                env={**env, **extra},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=err,
            )

    async def log_has(line: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while line not in lines(log):
            if time.monotonic() > deadline:
                pytest.fail(f"no {line!r} in {lines(log)}: {(tmp_path / 'worker.err').read_text()}")
            await asyncio.sleep(0.05)

    client = Engine(url, worker=False)
    procs: list[asyncio.subprocess.Process] = []
    async with client:
        handle = await client.start("support", "My kettle arrived broken", id="conversation")
        try:
            procs.append(await worker(AGENT_HANG_IN_REFUND="1"))
            await log_has("tool refund 42", 60)  # it hangs in the refund tool: kill it there
            procs[0].kill()
            assert await procs[0].wait() == -signal.SIGKILL
            procs.append(await worker())
            answer = await handle.result(timeout=60)
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
        steps = [
            e.name
            for e in await client.history(handle.id)
            if e.kind == "step" and not e.name.endswith("event_stream_handler")
        ]
    assert answer == "order 42: a kettle, delivered damaged; refunded 1250 cents on order 42"
    assert len(steps) == 5
    # What completed before the kill ran once; the refund, in flight at the kill, ran again.
    assert lines(log) == [
        "model 0",
        "tool lookup_order 42",
        "model 1",
        "tool refund 42",
        "tool refund 42",
        "model 2",
    ]
