"""A worker keeps parked runs in memory and wakes them where they parked.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_cached_runs.py.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from parkway import (
    Engine,
    RunCancelledError,
    RunClosedError,
    RunStatus,
)
from tests.acceptance.test_cached_runs import (
    _fresh,  # noqa: F401  (a fixture)
    added,
    counter,
    parked,
)


@pytest.mark.requires("shared")
async def test_a_run_held_in_memory_cancelled_from_another_process_stays_cancelled(
    engine: Engine, engine_url: str
) -> None:
    engine.workflow(name="counter")(counter)
    run = await engine.start("counter", 0, id="c")
    await run.signal("add", 1)
    await parked(engine, "c")
    script = (
        "import asyncio, sys\n"
        "from parkway import Engine\n"
        "async def main():\n"
        "    async with Engine(sys.argv[1], worker=False) as client:\n"
        "        await client.cancel('c')\n"
        "asyncio.run(main())\n"
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, engine_url, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    with pytest.raises(RunCancelledError):
        await run.result(timeout=10)
    with pytest.raises(RunClosedError):
        await run.signal("add", 2)
    await engine.idle()
    assert (await run.info()).status is RunStatus.CANCELLED
    assert added == [("c", 1)]
