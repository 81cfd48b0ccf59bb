"""Forking runs on every backend: a fork replays the copied prefix of its source's
journal without calling those steps again, goes on live with the code registered
now, records where it came from, and refuses bad arguments at the edge."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from parkway import (
    UNSET,
    Engine,
    InvalidArgumentError,
    InvalidInputError,
    ParkwayError,
    RunNotFoundError,
    RunStatus,
)


class Order(BaseModel):
    a: int


def _pipeline(calls: list[str], broken: dict[str, bool]) -> Any:
    """Three steps; the third fails while ``broken["yes"]``."""

    async def pipeline(ctx: Any, input: Any) -> Any:
        def fetch() -> int:
            calls.append("fetch")
            return input["n"]

        def double(n: int) -> int:
            calls.append("double")
            return n * 2

        def store(n: int) -> str:
            calls.append("store")
            if broken["yes"]:
                raise RuntimeError("the disk is full")
            return f"stored {n}"

        n = await ctx.step(fetch, name="fetch")
        doubled = await ctx.step(double, n, name="double")
        return await ctx.step(store, doubled, name="store")

    return pipeline


async def test_a_fork_of_a_failed_run_replays_its_prefix_and_goes_on_with_new_code(
    engine: Engine,
) -> None:
    calls: list[str] = []
    broken = {"yes": True}
    engine.workflow(name="pipeline")(_pipeline(calls, broken))
    source = await engine.start("pipeline", {"n": 21}, id="src")
    await engine.idle()
    assert (await source.info()).status is RunStatus.FAILED
    assert calls == ["fetch", "double", "store"]

    broken["yes"] = False  # the fix
    calls.clear()
    fork = await engine.fork(source.id, id="fix-1", by="alice")
    assert fork.id == "fix-1"
    assert await fork.result(timeout=10) == "stored 42"
    assert calls == ["store"]  # the copied steps were replayed, not called
    info = await fork.info()
    assert info.forked_from == {"run_id": "src", "at": 2}
    assert (await source.info()).status is RunStatus.FAILED  # the source is left as it is
    assert (await source.info()).forked_from is None
    history = await engine.history(fork.id)
    assert [(e.name, e.status) for e in history] == [
        ("fetch", "done"),
        ("double", "done"),
        ("store", "done"),
    ]
    # The same fork asked for again (a client's retry) is that fork.
    assert (await engine.fork(source.id, id="fix-1")).id == "fix-1"


async def test_fork_at_a_position_with_a_new_input(engine: Engine) -> None:
    calls: list[str] = []
    broken = {"yes": False}
    engine.workflow(name="pipeline")(_pipeline(calls, broken))
    source = await engine.start("pipeline", {"n": 1})
    assert await source.result(timeout=10) == "stored 2"
    calls.clear()
    # From the top (nothing copied), with a new input: every step runs.
    fresh = await engine.fork(source.id, at=0, input={"n": 5})
    assert await fresh.result(timeout=10) == "stored 10"
    assert calls == ["fetch", "double", "store"]
    calls.clear()
    # After the first step: its result (1) is replayed; the input only reaches code
    # that runs live.
    partial = await engine.fork(source.id, at=1, input={"n": 100})
    assert await partial.result(timeout=10) == "stored 2"
    assert calls == ["double", "store"]
    assert (await partial.info()).input == {"n": 100}
    # All of a completed run's entries: it completes again without a step.
    calls.clear()
    whole = await engine.fork(source.id)
    assert await whole.result(timeout=10) == "stored 2"
    assert calls == [] and (await whole.info()).forked_from == {"run_id": source.id, "at": 3}
    # input=None is a value, not "the source's": the workflow then fails on it.
    nothing = await engine.fork(source.id, at=0, input=None)
    with pytest.raises(ParkwayError):
        await nothing.result(timeout=10)
    assert UNSET is not None


async def test_fork_of_a_parked_run_waits_again_where_the_source_waits(engine: Engine) -> None:
    calls: list[str] = []

    @engine.workflow()
    async def approval(ctx: Any, input: Any) -> Any:
        await ctx.step(lambda: calls.append("prepare") or 1, name="prepare")
        decision = await ctx.wait_for_signal("approve")
        return ["approved", decision]

    source = await engine.start("approval")
    await engine.idle()
    fork = await engine.fork(source.id)  # an active run may be forked
    await engine.idle()
    assert (await fork.info()).status is RunStatus.PARKED
    assert (await fork.info()).forked_from == {"run_id": source.id, "at": 2}
    assert calls == ["prepare"]
    await fork.signal("approve", "yes")
    assert await fork.result(timeout=10) == ["approved", "yes"]
    assert (await source.info()).status is RunStatus.PARKED  # untouched


async def test_fork_runs_forks_each_failed_run(engine: Engine) -> None:
    calls: list[str] = []
    broken = {"yes": True}
    engine.workflow(name="pipeline")(_pipeline(calls, broken))
    for i in range(3):
        await engine.start("pipeline", {"n": i}, id=f"f{i}")
    await engine.idle()
    broken["yes"] = False
    calls.clear()
    assert await engine.fork_runs(workflow="pipeline", by="ops") == 3
    await engine.idle()
    forks = [r for r in await engine.list_runs() if r.forked_from is not None]
    assert sorted(r.forked_from["run_id"] for r in forks) == ["f0", "f1", "f2"]  # type: ignore[index]
    assert sorted(r.output for r in forks) == ["stored 0", "stored 2", "stored 4"]
    assert calls == ["store"] * 3
    # Other filters: the forks completed, and no failed run is about that subject.
    assert await engine.fork_runs(workflow="pipeline", subject="nobody") == 0


async def test_fork_refuses_bad_arguments(engine: Engine) -> None:
    calls: list[str] = []
    broken = {"yes": False}
    engine.workflow(name="pipeline")(_pipeline(calls, broken))

    @engine.workflow()
    async def typed(ctx: Any, input: Order) -> Any:
        return input.a

    source = await engine.start("pipeline", {"n": 1}, id="s1")
    await source.result(timeout=10)
    with pytest.raises(RunNotFoundError):
        await engine.fork("no-such-run")
    for at in (-1, 4, 1.5, "2", True):
        with pytest.raises(InvalidArgumentError) as caught:
            await engine.fork(source.id, at=at)  # type: ignore[arg-type]
        assert caught.value.field == "at"
    with pytest.raises(InvalidArgumentError) as caught:
        await engine.fork(source.id, id="s1")  # another run's id
    assert caught.value.field == "id"
    typed_run = await engine.start("typed", {"a": 1})
    await typed_run.result(timeout=10)
    with pytest.raises(InvalidInputError):
        await engine.fork(typed_run.id, input={"a": "not a number"})
    with pytest.raises(ParkwayError):
        await engine.fork(source.id, input={"n": {1, 2}})  # not JSON
    with pytest.raises(InvalidArgumentError) as caught:
        await engine.fork_runs(status="pending")
    assert caught.value.field == "status"
    assert await engine.list_runs(limit=100) and len(await engine.list_runs(limit=100)) == 2


async def test_fork_over_http(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("starlette", reason="the http extra is not installed")
    import httpx

    from parkway.http import create_app
    from parkway.http import responses as s

    from .test_http import conform, ok

    monkeypatch.delenv("PARKWAY_API_TOKEN", raising=False)
    calls: list[str] = []
    broken = {"yes": True}
    engine.workflow(name="pipeline")(_pipeline(calls, broken))
    source = await engine.start("pipeline", {"n": 3}, id="h1")
    await engine.idle()
    broken["yes"] = False
    calls.clear()
    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://parkway.test") as http:
        made = conform(s.RunInfoOut, ok(await http.post(f"/runs/{source.id}/fork"), 201))
        assert made["forked_from"] == {"run_id": "h1", "at": 2}
        assert await engine.result(made["id"], timeout=10) == "stored 6"
        assert calls == ["store"]
        given = ok(
            await http.post(
                f"/runs/{source.id}/fork", json={"at": 0, "input": {"n": 4}, "id": "h2"}
            ),
            201,
        )
        assert given["id"] == "h2" and given["input"] == {"n": 4}
        assert await engine.result("h2", timeout=10) == "stored 8"
        listed = ok(await http.get("/runs/h2"))
        assert conform(s.RunInfoOut, listed)["forked_from"] == {"run_id": "h1", "at": 0}
        # Bad input at the edge: 404 for an unknown run, 422 naming the field.
        assert (await http.post("/runs/nope/fork")).status_code == 404
        for body, field in (
            ({"at": -1}, "at"),
            ({"at": "2"}, "at"),
            ({"at": 9}, "at"),
            ({"colour": "red"}, "colour"),
            ({"id": ""}, "id"),
        ):
            answer = await http.post(f"/runs/{source.id}/fork", json=body)
            assert answer.status_code == 422, (body, answer.text)
            assert field in str(answer.json()["detail"]), answer.text
        bad_json = await http.post(
            f"/runs/{source.id}/fork",
            content=b"{not json",
            headers={"Content-Type": "application/json"},
        )
        assert bad_json.status_code in (400, 422), bad_json.text


# A worker of the app, until nothing is left to do.
