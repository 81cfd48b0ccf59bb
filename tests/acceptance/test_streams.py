"""A run's streams, through the public API on every backend: written from the
workflow's body (journaled, exactly once, also across a worker's SIGKILL) and
from a step (at once, at least once, with its attempt), read without waiting or
followed live, over HTTP as Server-Sent Events (against a real ``parkway
serve`` too) or JSON, and refused at the edge when malformed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from parkway import (
    Engine,
    InvalidArgumentError,
    InvalidInputError,
    Retry,
    RunNotFoundError,
    RunStatus,
    SerializationError,
    StepFailedError,
    StreamItem,
    WorkflowFailedError,
    WorkflowUsageError,
    step_context,
)


async def collect(items: AsyncIterator[StreamItem], timeout: float = 10) -> list[StreamItem]:
    async def all_of() -> list[StreamItem]:
        return [item async for item in items]

    return await asyncio.wait_for(all_of(), timeout)


# -- written from the workflow's body ------------------------------------------------------------


async def test_body_writes_are_read_in_order_and_the_runs_end_closes_the_stream(
    engine: Engine,
) -> None:
    @engine.workflow()
    async def tokens(ctx, words):
        for word in words:
            await ctx.write_stream("answer", word)
        await ctx.write_stream("meta", {"count": len(words)})
        return "done"

    h = await engine.start("tokens", ["durable", "streams", None, 4.5])
    assert await h.result(timeout=10) == "done"
    items = await collect(h.stream("answer"))
    assert [(i.offset, i.value, i.attempt) for i in items] == [
        (0, "durable", None),
        (1, "streams", None),
        (2, None, None),
        (3, 4.5, None),
    ]
    assert all(i.written_at.tzinfo is not None for i in items)
    assert [i.value for i in await collect(h.stream("answer", offset=2))] == [None, 4.5]
    assert [i.value for i in await collect(h.stream("meta"))] == [{"count": 4}]
    # A key never written: the run has ended, so its stream is empty and ended.
    assert await collect(h.stream("never")) == []
    assert await h.read_stream("never") == []

    assert [i.offset for i in await h.read_stream("answer")] == [0, 1, 2, 3]
    assert [i.value for i in await h.read_stream("answer", offset=1, limit=2)] == [
        "streams",
        None,
    ]
    assert await h.read_stream("answer", offset=4) == []
    assert await h.read_stream("answer", offset=10**12) == []
    assert (await h.read_stream("answer", limit=1))[0] == items[0]
    assert items[0]["value"] == "durable"  # (read as a record too)
    assert items[0].to_dict()["offset"] == 0


async def test_a_live_reader_sees_item_k_before_the_run_writes_item_k_plus_1(
    engine: Engine,
) -> None:
    @engine.workflow()
    async def paced(ctx, count):
        for k in range(count):
            await ctx.write_stream("out", k)
            await ctx.wait_for_signal("next")  # sent by the reader once it saw item k
        return count

    h = await engine.start("paced", 5)
    seen: list[int] = []
    async for item in h.stream("out"):
        seen.append(item.value)
        # Item k+1 is only written after this signal: a reader that did not see
        # item k before it would wait here forever (the timeout below fails it).
        assert await h.read_stream("out", offset=item.offset + 1) == []
        await h.signal("next")
        if len(seen) == 5:
            break
    assert seen == [0, 1, 2, 3, 4]
    assert await h.result(timeout=10) == 5


async def test_a_reader_that_starts_before_the_first_write_follows_until_the_close(
    engine: Engine,
) -> None:
    @engine.workflow()
    async def closes(ctx, _):
        await ctx.wait_for_signal("go")
        await ctx.write_stream("out", "a")
        await ctx.close_stream("out")
        await ctx.close_stream("out")  # (closing twice changes nothing)
        try:
            await ctx.write_stream("out", "late")
        except InvalidArgumentError as exc:
            refused = exc.field
        await ctx.wait_for_signal("end")  # the run goes on: the close alone ends the readers
        return refused

    h = await engine.start("closes")
    reader = asyncio.ensure_future(collect(h.stream("out")))
    await asyncio.sleep(0.05)
    assert not reader.done()  # nothing yet, and the stream is open: it waits
    await h.signal("go")
    assert [i.value for i in await reader] == ["a"]
    assert (await h.info()).status is RunStatus.PARKED
    await h.signal("end")
    assert await h.result(timeout=10) == "key"


async def test_a_reader_of_a_key_never_written_ends_when_the_run_ends(engine: Engine) -> None:
    @engine.workflow()
    async def quiet(ctx, _):
        return await ctx.wait_for_signal("go")

    h = await engine.start("quiet")
    reader = asyncio.ensure_future(collect(h.stream("out")))
    await asyncio.sleep(0.05)
    assert not reader.done()
    await h.cancel()
    assert await reader == []


async def test_streams_are_deleted_with_their_run(make_engine: Any, clock: Any) -> None:
    engine = await make_engine(retention="1d")

    @engine.workflow()
    async def writes(ctx, n):
        for i in range(n):
            await ctx.write_stream("out", i)
        return n

    h = await engine.start("writes", 3, id="kept-id")
    assert await h.result(timeout=10) == 3
    await clock.advance("2d")
    await engine.idle()
    with pytest.raises(RunNotFoundError):
        await h.read_stream("out")
    # The same id again: a new run, whose stream starts empty (nothing of the old one's).
    h = await engine.start("writes", 0, id="kept-id")
    await engine.idle()
    assert (await h.info()).status is RunStatus.COMPLETED
    assert await h.read_stream("out") == []


# -- written from a step ---------------------------------------------------------------------


async def test_step_writes_are_visible_at_once_and_carry_their_attempt(engine: Engine) -> None:
    seen_ready = asyncio.Event()

    async def answer() -> str:
        ctx = step_context()
        await ctx.write_stream("tokens", f"first of attempt {ctx.attempt}")
        if ctx.attempt == 1:
            ctx.write_stream("tokens", "unawaited")  # committed before the failure is recorded
            raise RuntimeError("model timed out")
        await ctx.write_stream("tokens", "ready")
        # Visible at once, while the step still runs: the reader sets this.
        await asyncio.wait_for(seen_ready.wait(), 10)
        return "answered"

    @engine.workflow()
    async def chat(ctx, _):
        return await ctx.step(answer, retry=Retry(max_attempts=3, backoff=0))

    h = await engine.start("chat")
    items = []
    async for item in h.stream("tokens"):
        items.append(item)
        if item.value == "ready":
            assert (await h.info()).status is RunStatus.RUNNING  # the step has not ended
            seen_ready.set()
    assert [(i.offset, i.value, i.attempt) for i in items] == [
        (0, "first of attempt 1", 1),
        (1, "unawaited", 1),
        (2, "first of attempt 2", 2),
        (3, "ready", 2),
    ]
    assert await h.result(timeout=10) == "answered"


async def test_a_def_step_writes_from_its_thread_blocking_until_committed(
    engine: Engine,
) -> None:
    def progress(total: int) -> int:
        ctx = step_context()
        for done in range(1, total + 1):
            result = ctx.write_stream("progress", {"done": done, "of": total})
            assert result is not None  # (an awaitable, already committed)
        return total

    @engine.workflow()
    async def job(ctx, total):
        return await ctx.step(progress, total)

    h = await engine.start("job", 4)
    assert await h.result(timeout=10) == 4
    items = await h.read_stream("progress")
    assert [(i.value["done"], i.attempt) for i in items] == [(1, 1), (2, 1), (3, 1), (4, 1)]


async def test_unawaited_writes_of_an_async_step_keep_their_order(engine: Engine) -> None:
    async def burst() -> int:
        ctx = step_context()
        for i in range(300):
            ctx.write_stream("burst", i)  # none awaited: all commit before the result
            if i % 50 == 0:
                await asyncio.sleep(0)
        return 300

    @engine.workflow()
    async def bursty(ctx, _):
        n = await ctx.step(burst)
        await ctx.write_stream("burst", "after the step")
        return n

    h = await engine.start("bursty")
    items = await collect(h.stream("burst"))
    assert [i.offset for i in items] == list(range(301))
    assert [i.value for i in items] == [*range(300), "after the step"]
    assert [i.attempt for i in items] == [1] * 300 + [None]
    assert await h.result(timeout=10) == 300


async def test_a_step_writing_to_a_stream_the_workflow_closed_fails(engine: Engine) -> None:
    async def late() -> None:
        await step_context().write_stream("out", "too late")

    @engine.workflow()
    async def closed(ctx, _):
        await ctx.close_stream("out")
        await ctx.step(late)

    h = await engine.start("closed")
    with pytest.raises(WorkflowFailedError) as failed:
        await h.result(timeout=10)
    assert "is closed" in str(failed.value)
    assert await h.read_stream("out") == []


async def test_a_failed_run_retried_writes_on_to_its_streams(engine: Engine) -> None:
    failing = {"now": True}

    async def flaky() -> str:
        await step_context().write_stream("out", "tried")
        if failing["now"]:
            raise RuntimeError("down")
        return "ok"

    @engine.workflow()
    async def retried(ctx, _):
        await ctx.write_stream("out", "began")
        return await ctx.step(flaky)

    h = await engine.start("retried")
    with pytest.raises(WorkflowFailedError):
        await h.result(timeout=10)
    # The run's end ends its readers...
    assert [i.value for i in await collect(h.stream("out"))] == ["began", "tried"]
    failing["now"] = False
    await h.retry()
    # ...and its retry goes on writing after what the failed run wrote.
    items = await collect(h.stream("out", offset=2))
    assert [(i.offset, i.value) for i in items] == [(2, "tried")]
    assert await h.result(timeout=10) == "ok"


# -- bad input ----------------------------------------------------------------------------------


async def test_bad_writes_are_refused_and_write_nothing(engine: Engine) -> None:
    async def bad_step() -> None:
        await step_context().write_stream("out", {"when": object()})

    @engine.workflow()
    async def bad(ctx, _):
        refused = []
        for key, value in [("", 1), (5, 1), ("k" * 200, 1), ("out", {1j}), ("out", object())]:
            try:
                await ctx.write_stream(key, value)
            except (InvalidInputError, SerializationError) as exc:
                refused.append(type(exc).__name__)
        try:
            await ctx.close_stream(None)
        except InvalidInputError as exc:
            refused.append(exc.field)
        try:
            await ctx.step(bad_step)
        except StepFailedError as exc:
            refused.append(str(exc))
        return refused

    h = await engine.start("bad")
    refused = await h.result(timeout=10)
    assert refused[:6] == [
        "InvalidInputError",
        "InvalidInputError",
        "InvalidInputError",
        "SerializationError",
        "SerializationError",
        "key",
    ]
    assert "SerializationError" in refused[6]
    assert await h.read_stream("out") == []
    with pytest.raises(WorkflowUsageError):
        step_context()


async def test_bad_reads_are_refused_at_the_edge(engine: Engine) -> None:
    @engine.workflow()
    async def one(ctx, _):
        await ctx.write_stream("out", 1)

    h = await engine.start("one")
    await h.result(timeout=10)
    with pytest.raises(RunNotFoundError):
        await engine.read_stream("no-such-run", "out")
    with pytest.raises(RunNotFoundError):
        await collect(engine.stream("no-such-run", "out"))
    for offset in (-1, 1.5, True, "0", None):
        with pytest.raises(InvalidArgumentError) as bad:
            await h.read_stream("out", offset=offset)  # type: ignore[arg-type]
        assert bad.value.field == "offset"
        with pytest.raises(InvalidArgumentError) as bad:
            h.stream("out", offset=offset)  # type: ignore[arg-type]  # (at once, not on iteration)
        assert bad.value.field == "offset"
    for limit in (0, -5, 1001, 2.0, False):
        with pytest.raises(InvalidArgumentError) as bad:
            await h.read_stream("out", limit=limit)  # type: ignore[arg-type]
        assert bad.value.field == "limit"
    for key in ("", None, 3, "x" * 129):
        with pytest.raises(InvalidInputError) as bad:
            await h.read_stream(key)  # type: ignore[arg-type]
        assert bad.value.field == "key"
        with pytest.raises(InvalidInputError):
            h.stream(key)  # type: ignore[arg-type]


# -- HTTP (in process) ----------------------------------------------------------------------------


def sse_events(text: str) -> list[dict[str, str]]:
    """The events of a Server-Sent Events body (comments kept as ``{"comment": ...}``)."""
    events, fields = [], {}
    for line in text.splitlines():
        if not line:
            if fields:
                events.append(fields)
            fields = {}
        elif line.startswith(":"):
            events.append({"comment": line[1:].strip()})
        else:
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")
    if fields:
        events.append(fields)
    return events


async def test_http_stream_as_events_and_as_json(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("sse_starlette", reason="the http extra is not installed")
    import httpx

    from parkway.http import create_app
    from parkway.http.handlers import runs as http_app

    monkeypatch.setattr(http_app, "SSE_KEEPALIVE", 0.02)

    @engine.workflow()
    async def paced(ctx, _):
        await ctx.write_stream("out", "a")
        await ctx.write_stream("out", {"b": [1, 2]})
        await ctx.wait_for_signal("next")
        await ctx.write_stream("out", "c")
        return "done"

    h = await engine.start("paced")
    async for item in h.stream("out"):
        if item.offset == 1:
            break  # both items before the signal are in
    transport = httpx.ASGITransport(app=create_app(engine, api_token=""))
    async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=10) as http:

        async def later() -> None:
            await asyncio.sleep(0.2)  # keep-alives are sent meanwhile
            await h.signal("next")

        signalled = asyncio.ensure_future(later())
        r = await http.get(f"/runs/{h.id}/streams/out")
        await signalled
        assert r.status_code == 200, r.text
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r.text)
        assert any("comment" in e for e in events)  # keep-alive comments
        data = [e for e in events if "comment" not in e]
        assert [e.get("id") for e in data] == ["0", "1", "2", None]
        assert [json.loads(e["data"])["value"] for e in data[:3]] == ["a", {"b": [1, 2]}, "c"]
        assert json.loads(data[0]["data"])["attempt"] is None
        assert data[3]["event"] == "end" and json.loads(data[3]["data"]) == {"offset": 3}

        # Resumed after the last id seen (it wins over ?offset=), or from ?offset=.
        r = await http.get(f"/runs/{h.id}/streams/out?offset=0", headers={"Last-Event-ID": "1"})
        assert [e.get("id") for e in sse_events(r.text) if "comment" not in e] == ["2", None]
        r = await http.get(f"/runs/{h.id}/streams/out?offset=1")
        assert [e.get("id") for e in sse_events(r.text) if "comment" not in e] == ["1", "2", None]
        # Past the end of a run that ended: 204, so an EventSource stops reconnecting.
        r = await http.get(f"/runs/{h.id}/streams/out", headers={"Last-Event-ID": "2"})
        assert r.status_code == 204

        r = await http.get(
            f"/runs/{h.id}/streams/out?offset=1&limit=1", headers={"Accept": "application/json"}
        )
        assert r.status_code == 200
        assert [(i["offset"], i["value"], i["attempt"]) for i in r.json()] == [
            (1, {"b": [1, 2]}, None)
        ]
        r = await http.get(f"/runs/{h.id}/streams/none", headers={"Accept": "application/json"})
        assert r.json() == []

        r = await http.get("/runs/no-such-run/streams/out")
        assert r.status_code == 404 and r.json()["error"] == "RunNotFoundError"
        r = await http.get("/runs/no-such-run/streams/out", headers={"Accept": "application/json"})
        assert r.status_code == 404
        for query, where in [
            ("offset=-1", "offset"),
            ("limit=0", "limit"),
            ("limit=5000", "limit"),
            ("offset=x", "offset"),
            ("since=1", "since"),
        ]:
            r = await http.get(f"/runs/{h.id}/streams/out?{query}")
            assert r.status_code == 422, (query, r.text)
            assert r.json()["detail"][0]["loc"] == ["query", where]
        for last in ("x", "-1", "1.5", "9" * 40):
            r = await http.get(f"/runs/{h.id}/streams/out", headers={"Last-Event-ID": last})
            assert r.status_code == 422, (last, r.text)
            assert r.json()["detail"][0]["loc"] == ["header", "Last-Event-ID"]
        r = await http.get(f"/runs/{h.id}/streams/{'k' * 200}")
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["path", "key"]
        spec = (await http.get("/openapi.json")).json()
        op = spec["paths"]["/runs/{id}/streams/{key}"]["get"]
        assert set(op["responses"]["200"]["content"]) == {"application/json", "text/event-stream"}
        assert "Last-Event-ID" in [p["name"] for p in op["parameters"]]


# -- across processes ------------------------------------------------------------------------------
