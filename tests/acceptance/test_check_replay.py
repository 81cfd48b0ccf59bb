"""Checking code against stored runs on every backend: ``engine.check_replay`` finds
exactly the runs the registered code no longer replays and writes nothing;
``export_run`` and ``parkway.testing.check_replay`` check one run in a test;
``parkway check`` exits 1, then 0 once the code is fixed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from parkway import (
    Engine,
    InvalidArgumentError,
    NonDeterminismError,
    ParkwayError,
    ReplayDivergence,
    ReplayReport,
    RunNotFoundError,
    UnknownWorkflowError,
)
from parkway.testing import check_replay

STEPS = ("reserve", "charge", "ship")


def _register(engine: Engine, steps: tuple[str, ...], calls: list[str]) -> None:
    """``order``: its steps in turn, then a wait for the signal ``done``."""

    @engine.workflow(name="order")
    async def order(ctx: Any, input: Any) -> Any:
        for step in steps:
            await ctx.step(lambda s=step: calls.append(s) or s, name=step)
        return await ctx.wait_for_signal("done")

    @engine.workflow(name="other")
    async def other(ctx: Any, input: Any) -> Any:
        await ctx.step(lambda: calls.append("other") or 1, name="other")
        return await ctx.wait_for_signal("done")


async def _snapshot(engine: Engine) -> Any:
    """What the store holds, as the public API reads it."""
    runs = await engine.list_runs(limit=1000)
    return (
        sorted((r.id, r.status, r.updated_at, r.error) for r in runs),
        {r.id: [e.to_dict() for e in await engine.history(r.id)] for r in runs},
    )


@pytest.mark.requires("persistent")
async def test_check_replay_finds_exactly_the_diverging_runs_and_writes_nothing(
    make_engine: Any,
) -> None:
    calls: list[str] = []
    old = await make_engine(open=False)
    _register(old, STEPS, calls)
    await old.open()
    for i in range(4):
        await old.start("order", id=f"o{i}")
    await old.start("other", id="x0")
    await old.idle()
    finished = await old.start("order", id="done0")
    await old.idle()
    await old.signal("done0", "done", 1)
    await old.result("done0", timeout=10)
    await old.close()

    # The new code renames the second step: every parked "order" run diverges there.
    new = await make_engine(worker=False, open=False)
    _register(new, ("reserve", "pay", "ship"), calls)
    await new.open()
    before = await _snapshot(new)
    calls.clear()
    report = await new.check_replay()
    assert isinstance(report, ReplayReport)
    assert report.checked == 5 and not report.ok
    assert sorted(d.run_id for d in report.diverged) == [f"o{i}" for i in range(4)]
    first = sorted(report.diverged, key=lambda d: d.run_id)[0]
    assert first == ReplayDivergence("o0", "order", "1", 1, "step 'charge'", "step 'pay'")
    assert calls == [] and await _snapshot(new) == before  # no step ran, nothing written
    # Filters: a workflow, ids (any status, the completed one too), a limit.
    assert (await new.check_replay(workflow="other")).to_dict() == {"checked": 1, "diverged": []}
    by_id = await new.check_replay(run_ids=["o2", finished.id])
    assert by_id.checked == 2 and [d.run_id for d in by_id.diverged] == ["o2", "done0"]
    assert (await new.check_replay(limit=2)).checked == 2
    await new.close()

    fixed = await make_engine(worker=False, open=False)
    _register(fixed, STEPS, calls)
    await fixed.open()
    assert (await fixed.check_replay()).to_dict() == {"checked": 5, "diverged": []}


async def test_check_replay_of_runs_that_replay_and_bad_arguments(engine: Engine) -> None:
    calls: list[str] = []
    _register(engine, STEPS, calls)
    handle = await engine.start("order")
    await engine.idle()
    report = await engine.check_replay()
    assert (report.checked, report.diverged, report.ok) == (1, [], True)
    assert report["checked"] == 1
    with pytest.raises(UnknownWorkflowError):
        await engine.check_replay(workflow="nope")
    with pytest.raises(RunNotFoundError):
        await engine.check_replay(run_ids=[handle.id, "no-such-run"])
    with pytest.raises(InvalidArgumentError) as caught:
        await engine.check_replay(run_ids=handle.id)  # type: ignore[arg-type]
    assert caught.value.field == "run_ids"
    for bad in (0, -1, "3", 1.5):
        with pytest.raises(ParkwayError) as failed:
            await engine.check_replay(limit=bad)  # type: ignore[arg-type]
        assert getattr(failed.value, "field", None) == "limit"


async def test_an_exported_run_is_checked_in_a_test(engine: Engine) -> None:
    calls: list[str] = []
    _register(engine, STEPS, calls)
    handle = await engine.start("order", {"id": 7}, id="exp")
    await engine.idle()
    await handle.pause()
    await handle.signal("done", "early")  # an input waiting for the run (paused)
    exported = await engine.export_run(handle.id)
    text = json.dumps(exported)  # JSON-able, as `parkway export` prints it
    exported = json.loads(text)
    assert exported["run"]["id"] == "exp" and exported["run"]["input"] == {"id": 7}
    assert [e["name"] for e in exported["journal"]] == [*STEPS, "done"]
    assert exported["journal"][-1]["state"] == "pending"
    assert [(s["name"], s["payload"]) for s in exported["inputs"]["signals"]] == [("done", "early")]
    assert [t["kind"] for t in exported["inputs"]["tasks"]] == ["signal"]

    same = Engine("memory://", worker=False)  # never opened: no store is used
    _register(same, STEPS, [])
    check_replay(same, exported)  # replays: returns
    await check_replay(same, exported)  # and may be awaited

    changed = Engine("memory://", worker=False)
    _register(changed, ("reserve", "ship"), [])
    with pytest.raises(NonDeterminismError) as caught:
        check_replay(changed, exported)
    assert (caught.value.position, caught.value.got) == (1, "step 'ship'")
    with pytest.raises(InvalidArgumentError):
        check_replay(same, {"run": {}})
    with pytest.raises(RunNotFoundError):
        await engine.export_run("no-such-run")


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
        cwd=cwd, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


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
        [sys.executable, "-c", textwrap.dedent(f"""
            import asyncio, sys
            sys.path.insert(0, {str(tmp_path)!r})
            import shop
            async def main():
                shop.engine.run_worker = True
                async with shop.engine:
                    await shop.engine.idle()
            asyncio.run(main())
        """)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
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
