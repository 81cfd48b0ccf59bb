"""``parkway schedules``: list, pause and resume, in a subprocess as users run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import failed, ok_json, parkway, write_app

APP_SOURCE = """
from parkway import Engine, Schedule

engine = Engine({url!r})


@engine.workflow(schedule=Schedule("0 6 * * 1-5", timezone="Europe/Paris", catch_up="none"))
async def morning_report(ctx, input):
    return ctx.scheduled_at.isoformat()
"""


# What a deployment's worker does first: open the app's engine, which registers its
# decorator schedules on the store.
OPEN_ONCE = (
    "import asyncio, reports\n\nasync def main():\n    async with reports.engine:\n"
    "        pass\n\nasyncio.run(main())\n"
)


@pytest.fixture
def app(tmp_path: Path) -> Path:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    write_app(tmp_path, "reports", APP_SOURCE, url)
    env = {k: v for k, v in os.environ.items() if k != "PARKWAY_URL"}
    subprocess.run([sys.executable, "-c", OPEN_ONCE], cwd=tmp_path, env=env, check=True, timeout=60)
    return tmp_path


def test_schedules_are_listed_paused_and_resumed(app: Path) -> None:
    [listed] = ok_json(parkway("schedules", "--app", "reports:engine", cwd=app))
    assert {k: listed[k] for k in ("id", "workflow", "cron", "timezone", "paused", "catch_up")} == {
        "id": "morning_report",
        "workflow": "morning_report",
        "cron": "0 6 * * 1-5",
        "timezone": "Europe/Paris",
        "paused": False,
        "catch_up": "none",
    }
    assert listed["next_at"] is not None and listed["last_run_id"] is None

    url = f"sqlite:///{app / 'app.db'}"
    paused = ok_json(parkway("--url", url, "schedules", "pause", "morning_report", cwd=app))
    assert (paused["paused"], paused["next_at"]) == (True, None)
    [again] = ok_json(parkway("--url", url, "schedules", cwd=app))
    assert again["paused"] is True
    resumed = ok_json(
        parkway("schedules", "resume", "morning_report", "--app", "reports:engine", cwd=app)
    )
    assert resumed["paused"] is False and resumed["next_at"] is not None


def test_an_unknown_schedule_is_a_clean_error(app: Path) -> None:
    for action in ("pause", "resume"):
        failed(
            parkway("schedules", action, "nope", "--app", "reports:engine", cwd=app),
            "no schedule with id 'nope'",
        )


def test_listing_without_the_app_reads_the_store(app: Path) -> None:
    url = f"sqlite:///{app / 'app.db'}"
    [listed] = ok_json(parkway("--url", url, "schedules", cwd=app))
    assert listed["id"] == "morning_report"


def test_listing_a_missing_database_does_not_create_it(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'missing.db'}"
    failed(parkway("--url", url, "schedules", cwd=tmp_path), "no parkway database")
    assert not (tmp_path / "missing.db").exists()
