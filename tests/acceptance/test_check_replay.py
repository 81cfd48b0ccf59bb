"""Checking code against stored runs on every backend: ``engine.check_replay`` finds
exactly the runs the registered code no longer replays and writes nothing;
``export_run`` and ``parkway.testing.check_replay`` check one run in a test;
``parkway check`` exits 1, then 0 once the code is fixed."""

from __future__ import annotations

import json
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
