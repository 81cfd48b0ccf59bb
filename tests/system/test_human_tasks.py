"""Human tasks: ``ctx.human_task``, ``engine.tasks``, ``engine.complete_task``.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_human_tasks.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers import failed, ok_json, parkway, write_app

CLI_APP = """
from parkway import Engine

engine = Engine({url!r})

FORM = {{"type": "object", "properties": {{"ok": {{"type": "boolean"}}}}, "required": ["ok"]}}


@engine.workflow()
async def review(ctx, who):
    return await ctx.human_task("review", form=FORM, assignees=[who])
"""


CLI_RUN = """
import asyncio, sys, reviews

async def main():
    async with reviews.engine as engine:
        if sys.argv[1] == "start":
            await engine.start("review", "ana", id="r1")
            await engine.idle()
        else:
            print(await engine.handle("r1").result(timeout=20))

asyncio.run(main())
"""


def test_tasks_are_listed_and_completed_from_the_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    write_app(tmp_path, "reviews", CLI_APP, url)
    (tmp_path / "drive.py").write_text(CLI_RUN)
    env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}

    def drive(step: str) -> str:
        done = subprocess.run(
            [sys.executable, "drive.py", step],
            cwd=tmp_path,
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.stdout.strip()

    drive("start")
    [task] = ok_json(parkway("tasks", "--app", "reviews:engine", cwd=tmp_path))
    assert (task["name"], task["run_id"], task["assignees"]) == ("review", "r1", ["ana"])
    assert ok_json(parkway("--url", url, "tasks", "--assignee", "ben", cwd=tmp_path)) == []
    assert len(ok_json(parkway("--url", url, "tasks", "--assignee", "ana", cwd=tmp_path))) == 1

    complete = ("tasks", "complete", task["id"])
    failed(parkway("--url", url, *complete, '{"ok": true}', "--by", "ben", cwd=tmp_path), "ana")
    failed(parkway("--url", url, *complete, '{"ok": "yes"}', "--by", "ana", cwd=tmp_path), "ok")
    failed(parkway("--url", url, *complete, "{not json", cwd=tmp_path), "not valid JSON")
    failed(parkway("--url", url, "tasks", "complete", "nope", "{}", cwd=tmp_path), "nope")
    done = ok_json(parkway("--url", url, *complete, '{"ok": true}', "--by", "ana", cwd=tmp_path))
    assert (done["status"], done["result"]) == ("completed", {"ok": True})
    assert ok_json(parkway("--url", url, "tasks", cwd=tmp_path)) == []
    [completed] = ok_json(parkway("--url", url, "tasks", "--status", "completed", cwd=tmp_path))
    assert completed["completed_by"] == "ana"
    assert drive("result") == "{'ok': True}"
