"""Listing runs as an operator does (the dashboard's run list): pages by keyset, search by
id or subject prefix, filters by parent and creation time, counts by status, the journal's
deadlines and retries; through the Python API and over HTTP, on every backend."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import unquote

import pytest

from parkway import Engine, InvalidArgumentError, InvalidInputError, Retry
from parkway.testing import ManualClock

pytest.importorskip("starlette", reason="the http extra is not installed: pip install -e '.[http]'")
import httpx

from parkway.http import responses as s
from parkway.http.requests import NEXT_PAGE_HEADER

from .test_http import client, conform, ok, register  # noqa: F401  (client: the fixture)

NEXT = NEXT_PAGE_HEADER


async def _start_orders(engine: Engine, clock: ManualClock, n: int, *, every: str = "1s") -> None:
    for i in range(n):
        await engine.start("approval", {"n": i}, id=f"order-{i}", subject=f"client:{i % 3}")
        if every:
            await clock.advance(every)
    await engine.idle()


# -- the Python API --------------------------------------------------------------------------


async def test_list_runs_pages_with_before_and_a_page_never_repeats_or_skips(
    engine: Engine, clock: ManualClock
) -> None:
    register(engine)
    # Three runs per instant: the id breaks the tie between runs created at once.
    for i in range(8):
        await engine.start("approval", id=f"r{i}")
        if i % 3 == 2:
            await clock.advance("1s")
    await engine.idle()
    newest_first = [r.id for r in await engine.list_runs()]
    seen: list[str] = []
    cursor: str | None = None
    while page := await engine.list_runs(limit=3, before=cursor):
        seen += [r.id for r in page]
        cursor = page[-1].id
    assert seen == newest_first and len(seen) == 8
    # A run started between two page reads lands on the first page, not in the next one.
    first = await engine.list_runs(limit=3)
    await engine.start("approval", id="late")
    rest = await engine.list_runs(before=first[-1].id)
    assert [r.id for r in first + rest] == newest_first
    with pytest.raises(InvalidArgumentError, match="before") as caught:
        await engine.list_runs(before="no-such-run")
    assert caught.value.field == "before"


async def test_list_runs_searches_filters_by_time_and_parent(
    engine: Engine, clock: ManualClock, t0: datetime
) -> None:
    register(engine)

    @engine.workflow()
    async def parent(ctx, _input):
        await ctx.start_child("approval", id="kid-1")
        await ctx.start_child("approval", id="kid-2")
        return await ctx.wait_for_signal("go")

    await _start_orders(engine, clock, 5)
    await engine.start(parent, id="mother")
    await engine.idle()

    async def ids(**filters: Any) -> list[str]:
        return [r.id for r in await engine.list_runs(**filters)]

    assert await ids(search="order-") == [f"order-{i}" for i in (4, 3, 2, 1, 0)]
    assert await ids(search="order-3") == ["order-3"]
    assert await ids(search="client:1") == ["order-4", "order-1"]
    assert await ids(search="client:1", workflow="approval", limit=1) == ["order-4"]
    assert await ids(parent_id="mother") == ["kid-2", "kid-1"]
    assert await ids(created_after=t0 + timedelta(seconds=3), search="order") == [
        "order-4",
        "order-3",
    ]
    assert await ids(created_before=t0 + timedelta(seconds=1)) == ["order-0"]
    window = dict(created_after=t0 + timedelta(seconds=1), created_before=t0 + timedelta(seconds=3))
    assert await ids(**window) == ["order-2", "order-1"]
    for bad, field in [
        ({"created_after": datetime(2026, 1, 1)}, "created_after"),  # naive
        ({"created_before": "yesterday"}, "created_before"),
        ({"search": ""}, "search"),
        ({"parent_id": "a\nb"}, "parent_id"),
    ]:
        with pytest.raises(InvalidInputError) as caught:
            await engine.list_runs(**bad)
        assert caught.value.field == field, bad


async def test_run_counts_by_workflow_and_status(engine: Engine) -> None:
    register(engine)
    assert await engine.run_counts() == {}
    for i in range(3):
        await engine.start("approval", id=f"a{i}")
    await engine.start("onboarding", {"who": "ann"}, id="o1")
    await engine.idle()
    await engine.signal("a0", "approve", True)
    await engine.cancel("a1")
    await engine.idle()
    assert await engine.run_counts() == {
        "approval": {"completed": 1, "cancelled": 1, "parked": 1},
        "onboarding": {"completed": 1},
    }


async def test_history_shows_a_wait_s_deadline_and_a_step_s_failed_attempt(
    engine: Engine, clock: ManualClock, t0: datetime
) -> None:
    calls = 0

    def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("card service down")
        return "charged"

    @engine.workflow()
    async def pay(ctx, _input):
        charged = await ctx.step(flaky, retry=Retry(max_attempts=3, backoff="10s"))
        await ctx.wait_for_signal("confirm", timeout="1h")
        return charged

    await engine.start(pay, id="p1")
    await engine.idle()
    failed, retrying = await engine.history("p1")
    assert (failed.kind, failed.attempt, failed.status) == ("attempt", 1, "error")
    assert (retrying.kind, retrying.status, retrying.attempt) == ("step", "pending", 1)
    assert retrying.deadline == t0 + timedelta(seconds=10)
    assert retrying.error is not None and retrying.error.message == "card service down"
    await clock.advance("10s")
    await engine.idle()
    failed_then, step, wait = await engine.history("p1")
    assert failed_then == failed  # (the failed attempt stays, after the step's success)
    assert (step.status, step.result, step.attempt, step.deadline) == (
        "done",
        "charged",
        None,
        None,
    )
    assert (wait.kind, wait.status) == ("signal", "pending")
    assert wait.deadline == t0 + timedelta(seconds=10, hours=1)
    assert wait.to_dict()["deadline"] == wait.deadline.isoformat()


# -- over HTTP -------------------------------------------------------------------------------


async def test_get_runs_pages_with_the_next_page_header(
    client: httpx.AsyncClient,  # noqa: F811
    engine: Engine,
    clock: ManualClock,
) -> None:
    await _start_orders(engine, clock, 5, every="")  # (all at one instant)
    await engine.start("approval", id="a/b c")  # (an id that must be encoded in the header)
    await engine.idle()
    pages: list[list[str]] = []
    query: dict[str, Any] = {"limit": 2}
    while True:
        answer = await client.get("/runs", params=query)
        pages.append([r["id"] for r in conform(s.RunInfoOut, ok(answer), many=True)])
        if NEXT not in answer.headers:
            break
        query["before"] = unquote(answer.headers[NEXT])
    assert pages == [
        ["order-4", "order-3"],
        ["order-2", "order-1"],
        ["order-0", "a/b c"],
    ]
    exact = await client.get("/runs", params={"limit": 6})
    assert NEXT not in exact.headers and len(exact.json()) == 6
    last = await client.get("/runs", params={"limit": 1, "search": "a/b"})
    assert NEXT not in last.headers and [r["id"] for r in last.json()] == ["a/b c"]


async def test_get_runs_searches_and_filters_by_time_and_parent(
    client: httpx.AsyncClient,  # noqa: F811
    engine: Engine,
    clock: ManualClock,
    t0: datetime,
) -> None:
    await _start_orders(engine, clock, 4)

    async def ids(**query: Any) -> list[str]:
        runs = conform(s.RunInfoOut, ok(await client.get("/runs", params=query)), many=True)
        return [r["id"] for r in runs]

    assert await ids(search="order-2") == ["order-2"]
    assert await ids(search="client:0") == ["order-3", "order-0"]
    assert await ids(created_after=(t0 + timedelta(seconds=2)).isoformat()) == [
        "order-3",
        "order-2",
    ]
    assert await ids(created_before="2000-01-01T00:00:00Z") == []
    assert await ids(parent_id="order-1") == []
    assert await ids(before="order-1") == ["order-0"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"before": "nobody"}, "before"),
        ({"created_after": "2026-01-01T00:00:00"}, "created_after"),  # no zone
        ({"created_before": "soon"}, "created_before"),
        ({"search": ""}, "search"),
        ({"parent_id": "a\x00"}, "parent_id"),
        ({"limit": "0"}, "limit"),
    ],
)
async def test_get_runs_refuses_a_bad_filter_naming_it(
    client: httpx.AsyncClient,  # noqa: F811
    query: dict[str, str],
    field: str,
) -> None:
    answer = await client.get("/runs", params=query)
    assert answer.status_code == 422, answer.text
    [error] = conform(s.ValidationErrorOut, answer.json())["detail"]
    assert error["loc"][:2] == ["query", field]


async def test_get_runs_counts(
    client: httpx.AsyncClient,  # noqa: F811
    engine: Engine,
) -> None:
    assert ok(await client.get("/runs/counts")) == {}
    ok(await client.post("/runs", json={"workflow": "approval", "id": "c1"}), 201)
    ok(await client.post("/runs", json={"workflow": "approval", "id": "counts"}), 201)
    ok(await client.post("/messages", json={"name": "signup", "key": "k1", "payload": 1}))
    await engine.idle()
    counts = conform(s.RunCountsOut, ok(await client.get("/runs/counts")))
    assert counts == {"approval": {"parked": 2}, "onboarding": {"completed": 1}}
    # A run named "counts" is still reachable, percent-encoded.
    assert ok(await client.get("/runs/%63ounts"))["id"] == "counts"
    refused = await client.get("/runs/counts", params={"workflow": "approval"})
    assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == [
        "query",
        "workflow",
    ]
    document = ok(await client.get("/openapi.json"))
    assert "/runs/counts" in document["paths"]
    listed = {p["name"] for p in document["paths"]["/runs"]["get"]["parameters"]}
    assert {"search", "parent_id", "created_after", "created_before", "before"} <= listed
