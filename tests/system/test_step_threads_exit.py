"""A process whose step threads were never shut down still exits."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.helpers import subprocess_env

SCRIPT = textwrap.dedent(
    """
    import asyncio
    from parkway.worker.threads import StepThreads

    async def main():
        pool = StepThreads(2)
        assert await pool.run(lambda: 41 + 1) == 42
        # (no pool.shutdown(): an engine left open, say)

    asyncio.run(main())
    print("done")
    """
)


def test_idle_step_threads_do_not_keep_the_process_alive() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done"
