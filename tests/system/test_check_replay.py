"""Checking code against stored runs on every backend: ``engine.check_replay`` finds exactly
the runs the registered code no longer replays and writes nothing; ``export_run`` and
``parkway.testing.check_replay`` check one run in a test; ``parkway check`` exits 1, then 0
once the code is fixed.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_check_replay.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

CHECKED_APP = """
from parkway import Engine

engine = Engine({url!r}, worker=False)


@engine.workflow()
async def order(ctx, input):
    await ctx.step(lambda: 1, name="reserve")
    await ctx.step(lambda: 2, name={second!r})
    return await ctx.wait_for_signal("done")
"""


def _parkway(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}
    env["PYTHONPATH"] = str(cwd)
    return subprocess.run(
        [sys.executable, "-m", "parkway", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_parkway_check_exits_1_then_0_around_a_fix(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    app = tmp_path / "shop.py"
    app.write_text(textwrap.dedent(CHECKED_APP.format(url=url, second="charge")))
    started = _parkway(tmp_path, "start", "order", "--app", "shop:engine")
    assert started.returncode == 0, started.stderr
    # A worker advances it to its wait; then the code changes.
    worked = _parkway(tmp_path, "check", "shop:engine")
    assert worked.returncode == 0, worked.stdout + worked.stderr  # pending: nothing journaled
    run_id = json.loads(started.stdout)["id"]
    ran = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import asyncio, sys
            sys.path.insert(0, {str(tmp_path)!r})
            import shop
            async def main():
                shop.engine.run_worker = True
                async with shop.engine:
                    await shop.engine.idle()
            asyncio.run(main())
        """),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr

    app.write_text(textwrap.dedent(CHECKED_APP.format(url=url, second="pay")))
    broken = _parkway(tmp_path, "check", "shop:engine")
    assert broken.returncode == 1, broken.stdout + broken.stderr
    assert run_id in broken.stdout and "'charge'" in broken.stdout and "'pay'" in broken.stdout
    as_json = _parkway(tmp_path, "check", "shop:engine", "--json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["diverged"][0]["run_id"] == run_id

    app.write_text(textwrap.dedent(CHECKED_APP.format(url=url, second="charge")))
    fixed = _parkway(tmp_path, "check", "shop:engine", "--workflow", "order", "--limit", "10")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "1 run(s) checked" in fixed.stdout

    exported = _parkway(tmp_path, "export", run_id, "--app", "shop:engine")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["run"]["id"] == run_id
    missing = _parkway(tmp_path, "export", "no-such-run", "--app", "shop:engine")
    assert missing.returncode != 0 and "no-such-run" in missing.stderr
