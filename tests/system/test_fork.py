"""Forking runs on every backend: a fork replays the copied prefix of its source's journal
without calling those steps again, goes on live with the code registered now, records where
it came from, and refuses bad arguments at the edge.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_fork.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import write_app

FORK_APP = """
from parkway import Engine

engine = Engine({url!r})


@engine.workflow()
async def pipeline(ctx, input):
    n = await ctx.step(lambda: input["n"], name="fetch")
    return await ctx.step(lambda: n * 2, name="double")
"""


WORK = """
import asyncio, shop

async def main():
    async with shop.engine:
        await shop.engine.idle()

asyncio.run(main())
"""


def test_parkway_fork_from_the_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    write_app(tmp_path, "shop", FORK_APP, url)

    def parkway(*args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}
        return subprocess.run(
            [sys.executable, "-m", "parkway", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    started = parkway("start", "pipeline", '{"n": 5}', "--app", "shop:engine")
    assert started.returncode == 0, started.stderr
    source = json.loads(started.stdout)
    subprocess.run([sys.executable, "-c", WORK], cwd=tmp_path, check=True, timeout=60)
    shown = json.loads(parkway("show", source["id"], "--app", "shop:engine").stdout)
    assert shown["output"] == 10
    forked = parkway(
        "fork", source["id"], "--at", "1", "--input", '{"n": 7}', "--app", "shop:engine"
    )
    assert forked.returncode == 0, forked.stderr
    fork = json.loads(forked.stdout)
    assert fork["forked_from"] == {"run_id": source["id"], "at": 1}
    assert fork["input"] == {"n": 7} and fork["status"] == "pending"
    for args, fragment in (
        (["fork", "no-such-run", "--app", "shop:engine"], "no-such-run"),
        (["fork", source["id"], "--at", "9", "--app", "shop:engine"], "at must be"),
        (["fork", source["id"], "--at", "-1", "--app", "shop:engine"], "--at"),
        (["fork", source["id"], "--input", "{not json", "--app", "shop:engine"], "not valid JSON"),
    ):
        failed = parkway(*args)
        assert failed.returncode != 0 and fragment in failed.stderr, (args, failed.stderr)
