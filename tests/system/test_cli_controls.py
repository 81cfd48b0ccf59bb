"""The operator's commands, in a subprocess as users run them: pause, resume, retry
and cancel (of one run and in bulk), the runs table, --url after the command, and
the refusals that keep a typo from writing anywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import WorkerProcess, failed, ok_json, parkway, write_app

APP = "opsapp:engine"

APP_SOURCE = """
from pathlib import Path

from parkway import Engine

engine = Engine({url!r})
BROKEN = Path(__file__).with_name("broken")


@engine.workflow()
async def approval(ctx, input):
    return await ctx.wait_for_signal("approve")


def call():
    if BROKEN.exists():
        raise RuntimeError("the service is down")
    return "up"


@engine.workflow()
async def fragile(ctx, input):
    return await ctx.step(call, name="call")
"""


@pytest.fixture
def app(tmp_path: Path) -> Path:
    url = f"sqlite:///{tmp_path / 'ops.db'}"
    write_app(tmp_path, "opsapp", APP_SOURCE, url)
    return tmp_path


def _start(app: Path, workflow: str, run_id: str, *more: str) -> None:
    ok_json(parkway("start", workflow, "null", "--id", run_id, *more, "--app", APP, cwd=app))


def _status(app: Path, run_id: str) -> tuple[str, bool]:
    info = ok_json(parkway("show", run_id, "--app", APP, cwd=app))
    return info["status"], info["paused"]


def test_pause_resume_retry_and_cancel_one_run(app: Path) -> None:
    url = f"sqlite:///{app / 'ops.db'}"
    _start(app, "approval", "a1")
    (app / "broken").touch()
    _start(app, "fragile", "f1")
    worker = WorkerProcess(app, APP, "--lease", "5s")
    try:
        _wait_for(app, "a1", "parked")
        _wait_for(app, "f1", "failed")
        paused = ok_json(parkway("pause", "a1", "--url", url, cwd=app))  # --url after the command
        assert (paused["status"], paused["paused"]) == ("parked", True)
        table = parkway("runs", "--app", APP, cwd=app)
        assert table.returncode == 0, table.stderr
        lines = table.stdout.splitlines()
        assert lines[0].split() == [
            "ID",
            "WORKFLOW",
            "STATUS",
            "SUBJECT",
            "WAITING",
            "FOR",
            "UPDATED",
        ]
        row = next(line for line in lines if line.startswith("a1 "))
        assert "parked (paused)" in row and "signal 'approve'" in row
        ok_json(parkway("signal", "a1", "approve", '"yes"', "--app", APP, cwd=app))
        assert _status(app, "a1") == ("parked", True)  # kept: its worker does not take it
        resumed = ok_json(parkway("resume", "a1", "--app", APP, cwd=app))
        assert resumed["paused"] is False
        _wait_for(app, "a1", "completed")
        (app / "broken").unlink()  # the fix is deployed
        retried = ok_json(parkway("retry", "f1", "--app", APP, cwd=app))
        assert (retried["status"], retried["error"]) == ("running", None)
        _wait_for(app, "f1", "completed")
        _start(app, "approval", "a2")
        _wait_for(app, "a2", "parked")
        cancelled = ok_json(parkway("cancel", "a2", "--app", APP, cwd=app))
        assert cancelled["status"] == "cancelled"
    finally:
        worker.stop()
    for command in ("pause", "resume", "retry"):
        failed(parkway(command, "a1", "--app", APP, cwd=app), "cannot", "it is completed")
        failed(
            parkway(command, "nope", "--app", APP, cwd=app),
            "no run with id 'nope'; list runs with `parkway runs`",
        )


def _wait_for(app: Path, run_id: str, status: str, timeout: float = 20) -> None:
    import time

    deadline = time.monotonic() + timeout
    while _status(app, run_id)[0] != status:
        assert time.monotonic() < deadline, f"run {run_id} never became {status}"
        time.sleep(0.1)


def test_bulk_cancel_and_retry_with_filters(app: Path) -> None:
    for i in range(3):
        _start(app, "approval", f"s1-{i}", "--subject", "s1")
    _start(app, "approval", "s2-0", "--subject", "s2")
    failed(parkway("cancel", "--app", APP, cwd=app), "give RUN, or filters", "--all")
    failed(parkway("retry", "--app", APP, cwd=app), "give RUN, or filters", "--all")
    failed(parkway("cancel", "s1-0", "--workflow", "approval", "--app", APP, cwd=app), "not both")
    failed(
        parkway("cancel", "--before", "yesterday", "--app", APP, cwd=app), "not an ISO 8601 time"
    )
    failed(
        parkway("retry", "--status", "parked", "--app", APP, cwd=app),
        "'parked' is not one of 'failed', 'held'",
    )
    assert ok_json(parkway("cancel", "--before", "2000-01-01", "--app", APP, cwd=app)) == {
        "cancelled": 0
    }
    done = ok_json(
        parkway("cancel", "--workflow", "approval", "--subject", "s1", "--app", APP, cwd=app)
    )
    assert done == {"cancelled": 3}
    assert _status(app, "s1-1")[0] == "cancelled" and _status(app, "s2-0")[0] == "pending"
    assert ok_json(parkway("retry", "--all", "--app", APP, cwd=app)) == {"retried": 0}
    assert ok_json(parkway("cancel", "--all", "--app", APP, cwd=app)) == {"cancelled": 1}


def test_the_runs_table_and_json(app: Path) -> None:
    _start(app, "approval", "r1", "--subject", "client:5")
    none = parkway("runs", "--workflow", "fragile", "--app", APP, cwd=app)
    assert none.stdout.strip() == "no runs"
    table = parkway("runs", "--app", APP, cwd=app).stdout.splitlines()
    assert table[1].split()[:4] == ["r1", "approval", "pending", "client:5"]
    listed = ok_json(parkway("runs", "--json", "--app", APP, cwd=app))
    assert [(r["id"], r["paused"]) for r in listed] == [("r1", False)]


def test_publish_and_correlate_refuse_a_database_that_does_not_exist(tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path / 'typo.db'}"
    failed(
        parkway("publish", "order.paid", "{}", "--url", missing, cwd=tmp_path),
        "no parkway database at",
    )
    failed(
        parkway("--url", missing, "correlate", "score", "k", "1", cwd=tmp_path),
        "no parkway database at",
    )
    failed(parkway("pause", "r1", "--url", missing, cwd=tmp_path), "no parkway database at")
    assert not (tmp_path / "typo.db").exists()


def test_start_by_name_refuses_a_workflow_the_store_never_ran(app: Path) -> None:
    url = f"sqlite:///{app / 'ops.db'}"
    _start(app, "approval", "seed")  # (creates the database)
    failed(
        parkway("start", "aproval", "--url", url, cwd=app),
        "no run of workflow 'aproval'",
        "--force",
    )
    assert [r["id"] for r in ok_json(parkway("runs", "--json", "--url", url, cwd=app))] == ["seed"]
    known = ok_json(parkway("start", "approval", "--id", "by-name", "--url", url, cwd=app))
    assert known["id"] == "by-name"
    forced = ok_json(parkway("start", "brand_new", "--force", "--url", url, cwd=app))
    assert forced["workflow"] == "brand_new" and forced["status"] == "pending"
