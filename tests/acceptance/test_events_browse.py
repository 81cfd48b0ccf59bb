"""Events, browsable, on every backend: ``engine.events()`` lists the events kept
for de-duplication, newest first, filtered by name, subject and time, each with the
runs it started and the parked runs it resumed (recorded in the publish's own
transaction, on the fast path too); over HTTP (``GET /events``) and the command
line (``parkway events``); and bad filters are refused, naming the field."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner

from parkway import Engine, Event, EventInfo, InvalidArgumentError, InvalidInputError
from parkway.cli import cli


def _register(engine: Engine) -> None:
    @engine.workflow(on_event="order.created")
    async def fulfil(ctx: Any, input: Any) -> Any:
        return await ctx.wait_for_event("order.paid", match={"order": input["order"]})

    @engine.workflow()
    async def watcher(ctx: Any, input: Any) -> Any:
        return await ctx.wait_for_event("order.paid", match={"order": input["order"]})


async def test_events_list_what_each_started_and_resumed(engine: Engine, t0: Any) -> None:
    _register(engine)
    created = await engine.publish(Event("order.created", {"order": 1}, id="e1", subject="o1"))
    await engine.idle()
    (started,) = created.started
    watcher = await engine.start("watcher", {"order": 1}, id="w1")
    await engine.idle()
    # Resumes two waits (one of a run it did not start), starts nothing.
    paid = await engine.publish(Event("order.paid", {"order": 1}, id="e2", subject="o1"))
    await engine.idle()
    assert sorted(paid.resumed) == sorted([started, watcher.id])
    # Resumes one wait and nothing else: the publish's fast path where there is one.
    late = await engine.start("watcher", {"order": 2}, id="w2")
    await engine.idle()
    alone = await engine.publish(Event("order.paid", {"order": 2}, id="e3", subject="o2"))
    assert alone.resumed == [late.id]
    await engine.publish(Event("order.paid", {"order": 9}, id="e4"))  # (matches nothing)
    dup = await engine.publish(Event("order.paid", {"order": 2}, id="e3", subject="o2"))
    assert dup.duplicate
    await engine.idle()

    found = await engine.events()
    assert [e.id for e in found] == ["e4", "e3", "e2", "e1"]
    by_id = {e.id: e for e in found}
    assert isinstance(by_id["e1"], EventInfo)
    assert (by_id["e1"].started, by_id["e1"].resumed) == ([started], [])
    assert by_id["e2"].started == [] and sorted(by_id["e2"].resumed) == sorted(paid.resumed)
    assert (by_id["e3"].started, by_id["e3"].resumed) == ([], [late.id])  # once: dup added none
    assert (by_id["e4"].started, by_id["e4"].resumed) == ([], [])
    e1 = by_id["e1"]
    assert (e1.name, e1.domain, e1.subject, e1.payload) == (
        "order.created",
        "default",
        "o1",
        {"order": 1},
    )
    assert e1.published_at == t0
    assert e1.to_dict()["published_at"] == t0.isoformat()

    assert [e.id for e in await engine.events(name="order.paid")] == ["e4", "e3", "e2"]
    assert [e.id for e in await engine.events(subject="o1")] == ["e2", "e1"]
    assert [e.id for e in await engine.events(name="order.paid", subject="o2")] == ["e3"]
    assert [e.id for e in await engine.events(limit=2)] == ["e4", "e3"]
    assert await engine.events(since=t0 + timedelta(seconds=1)) == []
    assert len(await engine.events(since=t0.isoformat())) == 4
    assert await engine.events(name="nothing.like.it") == []


async def test_events_past_retention_go_with_their_links(make_engine: Any, clock: Any) -> None:
    engine = await make_engine(event_retention="1h")
    _register(engine)
    await engine.publish(Event("order.created", {"order": 1}, id="old"))
    await engine.idle()
    await clock.advance("2h")
    await engine.idle()  # (sweeps)
    await engine.publish(Event("order.created", {"order": 2}, id="new"))
    await engine.idle()
    assert [e.id for e in await engine.events()] == ["new"]
    # The old id is free again: published anew (its run, whose id comes from the
    # event's, exists already: nothing starts), it has its own links, none of the old.
    again = await engine.publish(Event("order.created", {"order": 3}, id="old"))
    await engine.idle()
    (event,) = [e for e in await engine.events() if e.id == "old"]
    assert event.started == again.started == []


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"limit": 0}, InvalidArgumentError, "limit"),
        ({"limit": 1001}, InvalidArgumentError, "limit"),
        ({"limit": True}, InvalidArgumentError, "limit"),
        ({"limit": "10"}, InvalidArgumentError, "limit"),
        ({"since": "yesterday"}, InvalidArgumentError, "since"),
        ({"since": 5}, InvalidArgumentError, "since"),
        ({"name": ""}, InvalidInputError, "name"),
        ({"name": 7}, InvalidInputError, "name"),
        ({"subject": "a\x00b"}, InvalidInputError, "subject"),
    ],
)
async def test_bad_filters_are_refused_naming_the_field(
    engine: Engine, kwargs: dict[str, Any], error: type[Exception], field: str
) -> None:
    with pytest.raises(error) as caught:
        await engine.events(**kwargs)
    assert caught.value.field == field  # type: ignore[attr-defined]


@pytest.mark.requires("shared")
async def test_the_command_line_lists_events(make_engine: Any, engine_url: str) -> None:
    engine = await make_engine(clock=None)
    _register(engine)
    created = await engine.publish(Event("order.created", {"order": 1}, id="e1", subject="o1"))

    async def parkway(*args: str) -> Any:
        result = await asyncio.to_thread(CliRunner().invoke, cli, [*args, "--url", engine_url])
        return result

    listed = await parkway("events", "--json")
    assert listed.exit_code == 0, listed.output
    (event,) = json.loads(listed.output)
    assert (event["id"], event["started"], event["resumed"]) == ("e1", created.started, [])
    table = await parkway("events", "--name", "order.created")
    assert table.exit_code == 0, table.output
    assert table.output.splitlines()[0].split() == [
        "ID",
        "NAME",
        "SUBJECT",
        "PUBLISHED",
        "STARTED",
        "RESUMED",
    ]
    assert created.started[0] in table.output
    assert (await parkway("events", "--name", "other")).output.strip() == "no events kept"
    refused = await parkway("events", "--limit", "0")
    assert refused.exit_code != 0 and "limit" in refused.output
    refused = await parkway("events", "--since", "yesterday")
    assert refused.exit_code != 0 and "ISO 8601" in refused.output


async def test_http_lists_events(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("starlette")
    import httpx

    from parkway.http import create_app
    from parkway.http import responses as s

    from .test_http import conform

    monkeypatch.delenv("PARKWAY_API_TOKEN", raising=False)
    monkeypatch.delenv("PARKWAY_API_TOKENS", raising=False)
    _register(engine)
    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://parkway.test") as http:
        published = await http.post(
            "/events", json={"name": "order.created", "payload": {"order": 1}, "id": "e1"}
        )
        assert published.status_code == 200, published.text
        await engine.idle()
        listed = await http.get("/events", params={"name": "order.created"})
        assert listed.status_code == 200, listed.text
        (event,) = listed.json()
        conform(s.EventInfoOut, event)
        assert (event["id"], event["started"]) == ("e1", published.json()["started"])
        assert (await http.get("/events", params={"name": "other"})).json() == []
        for bad in (
            {"limit": "0"},
            {"limit": "x"},
            {"since": "yesterday"},
            {"name": ""},
            {"what": "1"},
        ):
            refused = await http.get("/events", params=bad)
            assert refused.status_code == 422, (bad, refused.text)
        workers = await http.get("/workers")
        assert workers.status_code == 200, workers.text
        for worker in workers.json():
            conform(s.WorkerInfoOut, worker)
        runs = (await http.get("/runs")).json()
        assert all(run["unserved"] is False for run in runs)
