"""OpenTelemetry spans, read with the SDK's in-memory exporter: the sender's context
travels through the store to the advance it wakes, across engines (processes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the SDK is in the dev extra")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    ParentBased,
    Sampler,
    SamplingResult,
)
from opentelemetry.trace import SpanKind, StatusCode

from parkway import Engine, WorkflowFailedError
from parkway.errors import InvalidArgumentError


def traced() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def child_of(spans: Sequence[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def register(engine: Engine) -> None:
    @engine.workflow()
    async def order(ctx, input):
        await ctx.wait_for_event("paid", match={"order": ctx.run_id})
        await ctx.wait_for_signal("ship")
        await ctx.wait_for_message("receipt", ctx.run_id)
        return await ctx.step(lambda: "done", name="close")


def resumed_by(advances: Sequence[ReadableSpan], sender: ReadableSpan) -> ReadableSpan:
    """The one advance that is ``sender``'s child, and linked to it."""
    assert sender.context is not None
    [advance] = [
        a
        for a in advances
        if a.parent is not None
        and (a.parent.trace_id, a.parent.span_id)
        == (sender.context.trace_id, sender.context.span_id)
    ]
    assert [(link.context.trace_id, link.context.span_id) for link in advance.links] == [
        (sender.context.trace_id, sender.context.span_id)
    ]
    return advance


@pytest.mark.requires("shared")
async def test_each_sender_s_span_is_the_parent_of_the_advance_it_woke_in_another_engine(
    make_engine: Any,
) -> None:
    sender_provider, sent = traced()
    worker_provider, worked = traced()
    # Two engines on one store, as two processes would be: one sends, the other works.
    sender = await make_engine(worker=False, tracing=sender_provider)
    worker = await make_engine(tracing=worker_provider)
    register(worker)

    await sender.start("order", id="o1")
    await worker.idle()
    await sender.publish("paid", {"order": "o1"})
    await worker.idle()
    await sender.signal("o1", "ship")
    await worker.idle()
    await sender.correlate("receipt", "o1", {"total": 9})
    assert await worker.handle("o1").result(timeout=10) == "done"

    senders = sent.get_finished_spans()
    spans = worked.get_finished_spans()
    advances = named(spans, "parkway.advance order")
    assert len(advances) == 4
    assert all(a.kind == SpanKind.CONSUMER for a in advances)
    assert {a.attributes["parkway.run_id"] for a in advances} == {"o1"}  # type: ignore[index]
    [start] = named(senders, "parkway.start order")
    [publish] = named(senders, "parkway.publish paid")
    [signal] = named(senders, "parkway.signal ship")
    [correlate] = named(senders, "parkway.correlate receipt")
    assert {s.kind for s in (start, publish, signal, correlate)} == {SpanKind.PRODUCER}
    first = resumed_by(advances, start)
    resumed_by(advances, publish)
    resumed_by(advances, signal)
    last = resumed_by(advances, correlate)
    assert first.attributes["parkway.outcome"] == "parked"  # type: ignore[index]
    assert last.attributes["parkway.outcome"] == "completed"  # type: ignore[index]
    assert last.attributes["parkway.woken_by"] == "message"  # type: ignore[index]
    # The step ran inside the advance that took the message: its child, in its trace.
    [close] = named(spans, "parkway.step close")
    assert child_of(spans, last) == [close]
    assert close.attributes["parkway.attempt"] == 1  # type: ignore[index]
    # Each advance ended before the next began (none left open).
    assert all(a.end_time is not None for a in advances)


async def test_steps_are_spans_under_their_advance_and_a_failure_is_recorded(
    make_engine: Any,
) -> None:
    provider, exporter = traced()
    engine = await make_engine(tracing=provider)

    def broken() -> int:
        raise TypeError("no price")

    @engine.workflow()
    async def checkout(ctx, input):
        await ctx.step(lambda: 1, name="reserve")
        return await ctx.step(broken, name="charge")

    handle = await engine.start("checkout", id="c1")
    with pytest.raises(WorkflowFailedError):
        await handle.result(timeout=10)
    spans = exporter.get_finished_spans()
    [start] = named(spans, "parkway.start checkout")
    [advance] = named(spans, "parkway.advance checkout")
    assert advance.parent is not None and advance.parent.span_id == start.context.span_id  # type: ignore[union-attr]
    assert advance.status.status_code == StatusCode.ERROR
    assert advance.attributes["parkway.outcome"] == "failed"  # type: ignore[index]
    reserve, charge = child_of(spans, advance)
    assert (reserve.name, charge.name) == ("parkway.step reserve", "parkway.step charge")
    assert reserve.status.status_code == StatusCode.UNSET
    assert charge.status.status_code == StatusCode.ERROR
    [event] = charge.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "TypeError"  # type: ignore[index]


async def test_an_update_s_span_is_the_parent_of_the_advance_that_applied_it(
    make_engine: Any,
) -> None:
    provider, exporter = traced()
    engine = await make_engine(tracing=provider)

    @engine.workflow()
    async def counter(ctx, input):
        state = {"total": 0}

        def add(amount: int) -> int:
            state["total"] += amount
            return state["total"]

        ctx.on_update("add", add)
        await ctx.wait_until(lambda: state["total"] >= 3)
        return state["total"]

    handle = await engine.start("counter", id="n1")
    await engine.idle()
    assert await engine.update("n1", "add", 3) == 3
    assert await handle.result(timeout=10) == 3
    spans = exporter.get_finished_spans()
    [update] = named(spans, "parkway.update add")
    assert update.kind == SpanKind.PRODUCER
    assert update.attributes["parkway.run_id"] == "n1"  # type: ignore[index]
    advance = resumed_by(named(spans, "parkway.advance counter"), update)
    assert advance.attributes["parkway.woken_by"] == "update"  # type: ignore[index]


async def test_a_span_a_step_makes_is_the_step_s_child(make_engine: Any) -> None:
    provider, exporter = traced()
    engine = await make_engine(tracing=provider)
    tracer = provider.get_tracer("the app")

    async def call_the_bank() -> str:
        with tracer.start_as_current_span("bank.charge"):
            return "ok"

    def sync_call() -> str:
        with tracer.start_as_current_span("bank.sync"):
            return "ok"

    @engine.workflow()
    async def pay(ctx, input):
        return [await ctx.step(call_the_bank), await ctx.step(sync_call)]

    assert await (await engine.start("pay")).result(timeout=10) == ["ok", "ok"]
    spans = exporter.get_finished_spans()
    [bank] = named(spans, "bank.charge")
    [sync] = named(spans, "bank.sync")
    for inner in (bank, sync):
        [step] = [s for s in spans if s.context.span_id == inner.parent.span_id]  # type: ignore[union-attr]
        assert step.name.startswith("parkway.step ")


class Asked(Sampler):
    """A parent-based sampler that drops every trace, and notes which spans it was
    asked about."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._inner = ParentBased(ALWAYS_OFF)

    def should_sample(
        self, parent_context: Any, trace_id: int, name: str, *args: Any, **kw: Any
    ) -> SamplingResult:
        self.names.append(name)
        return self._inner.should_sample(parent_context, trace_id, name, *args, **kw)

    def get_description(self) -> str:
        return "Asked"


async def test_under_an_advance_the_sampler_dropped_no_step_span_is_made(
    make_engine: Any,
) -> None:
    sampler = Asked()
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    engine = await make_engine(tracing=provider)
    tracer = provider.get_tracer("the app")
    seen: list[Any] = []

    async def charge() -> str:
        # The step runs in its advance's (unsampled) context: the app's span is in
        # the run's trace, and dropped with it.
        with tracer.start_as_current_span("bank.charge") as span:
            seen.append(span.get_span_context())
        return "ok"

    @engine.workflow()
    async def pay(ctx, input):
        return [await ctx.step(charge), await ctx.step(lambda: 2, name="two")]

    assert await (await engine.start("pay")).result(timeout=10) == ["ok", 2]
    assert exporter.get_finished_spans() == ()
    # Under the unsampled start, no advance or step span is even offered to the sampler.
    assert sorted(set(sampler.names)) == ["bank.charge", "parkway.start pay"]
    [context] = seen
    assert context.is_valid and not context.trace_flags.sampled


class ByName(Sampler):
    """Samples the traces whose root span is named in ``roots`` (children follow their
    parent, as ``ParentBased`` does), and notes which spans it was asked about."""

    def __init__(self, roots: set[str]) -> None:
        self.names: list[str] = []
        self._roots = roots
        self._on, self._off = ParentBased(ALWAYS_ON), ParentBased(ALWAYS_OFF)

    def should_sample(
        self, parent_context: Any, trace_id: int, name: str, *args: Any, **kw: Any
    ) -> SamplingResult:
        self.names.append(name)
        inner = self._on if name in self._roots else self._off
        return inner.should_sample(parent_context, trace_id, name, *args, **kw)

    def get_description(self) -> str:
        return "ByName"


async def test_unsampled_traces_make_no_child_spans_and_sampled_ones_do(
    make_engine: Any,
) -> None:
    sampler = ByName({"request kept"})
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    engine = await make_engine(tracing=provider)
    tracer = provider.get_tracer("the app")

    async def steps(ctx: Any, input: Any) -> list[int]:
        return [await ctx.step(lambda: 1, name="one"), await ctx.step(lambda: 2, name="two")]

    engine.workflow(name="kept")(steps)
    engine.workflow(name="dropped")(steps)
    for name in ("kept", "dropped"):
        with tracer.start_as_current_span(f"request {name}"):  # the app's root span
            handle = await engine.start(name, id=name)
        assert await handle.result(timeout=10) == [1, 2]

    spans = exporter.get_finished_spans()
    [request] = named(spans, "request kept")
    [start] = named(spans, "parkway.start kept")
    [advance] = named(spans, "parkway.advance kept")
    assert [s.name for s in child_of(spans, request)] == ["parkway.start kept"]
    assert [s.name for s in child_of(spans, start)] == ["parkway.advance kept"]
    assert sorted(s.name for s in child_of(spans, advance)) == [
        "parkway.step one",
        "parkway.step two",
    ]
    assert not [s for s in spans if "dropped" in s.name]
    # Under the unsampled root no parkway span was made at all: the sampler was asked
    # about the root only, and about every span of the sampled trace.
    assert [n for n in sampler.names if "dropped" in n] == ["request dropped"]
    assert sorted(n for n in sampler.names if "dropped" not in n) == [
        "parkway.advance kept",
        "parkway.start kept",
        "parkway.step one",
        "parkway.step two",
        "request kept",
    ]


async def test_tracing_off_makes_no_span(make_engine: Any) -> None:
    provider, exporter = traced()
    engine = await make_engine(tracing=False)
    tracer = provider.get_tracer("the app")

    @engine.workflow()
    async def quiet(ctx, input):
        return await ctx.step(lambda: 1, name="one")

    with tracer.start_as_current_span("request"):
        assert await (await engine.start("quiet")).result(timeout=10) == 1
    assert [s.name for s in exporter.get_finished_spans()] == ["request"]


def test_a_bad_tracing_option_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="tracing must be True, False, None or an"):
        Engine("memory://", tracing="yes")
