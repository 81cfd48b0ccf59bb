"""OpenTelemetry spans for parkway (the ``tracing`` extra: ``opentelemetry-api``).

Imported only when tracing is on (see :func:`tracing_for`). Spans:

- ``parkway.start``, ``parkway.publish``, ``parkway.correlate``, ``parkway.signal``,
  ``parkway.update`` (kind ``PRODUCER``): a client call; what it stores carries its context (W3C
  trace context, through the global propagator);
- ``parkway.advance <workflow>`` (``CONSUMER``): one advance of one run. Woken by
  one sender, it is that sender's span's child (in its trace, in any process);
  it is linked to every sender whose input it took;
- ``parkway.step <name>`` (``INTERNAL``): one attempt of a step, the advance's
  child, current while the step runs, so the spans a step makes are its children.

Under a parent that is not sampled (a sender's trace the application's sampler
dropped), no span is made at all: the parent's context stays current (a
non-recording span carrying it), so what the run sends goes on in the same
trace, dropped with it. The SDK's ``ParentBased`` samplers would drop such a
span anyway, after paying for making it; a sampler that samples children of
unsampled parents does not get them.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import orjson
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode

from parkway.errors import InvalidArgumentError
from parkway.models import RunStatus
from parkway.replay.requests import RunStep
from parkway.store.base import RunRecord, TaskRecord, Tx

T = TypeVar("T")

_TRACE_KEY = b'"trace"'


class Tracing:
    """The spans of one engine, made by ``provider``'s tracer (the global one if ``None``)."""

    def __init__(self, provider: trace.TracerProvider | None = None) -> None:
        source = provider if provider is not None else trace.get_tracer_provider()
        self.tracer = source.get_tracer("parkway", _version())

    # -- senders -----------------------------------------------------------------------------

    # Spans are started and made current by hand, not with start_as_current_span (its
    # two context managers cost as much again as the span), and carry few attributes
    # (the SDK checks each one's type on every span): what the span's name does not say.

    def begin_client(self, kind: str, attrs: dict[str, Any]) -> tuple[Span, object]:
        """Start the span of a client call and make it current; returns it and its token.

        ``attrs``: ``name`` (of the event, message, signal) or ``workflow`` name it;
        ``run_id`` is its attribute."""
        skipped = _unsampled_parent(otel_context.get_current())
        if skipped is not None:
            return skipped, None
        name = attrs.get("name") or attrs.get("workflow")
        run_id = attrs.get("run_id")
        span = self.tracer.start_span(
            f"parkway.{kind} {name}" if name else f"parkway.{kind}",
            kind=SpanKind.PRODUCER,
            attributes={"parkway.run_id": run_id} if run_id else None,
        )
        return span, otel_context.attach(trace.set_span_in_context(span))

    def end(self, span: Span, token: object, error: BaseException | None = None) -> None:
        """End a span :meth:`begin_client` or :meth:`begin_step` made current (``token``
        ``None``: one they skipped, under an unsampled parent)."""
        if token is None:
            return
        otel_context.detach(token)  # type: ignore[arg-type]
        if error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        span.end()

    def carrier(self) -> dict[str, str]:
        """The current trace context, as the propagator writes it (empty: none)."""
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return carrier

    def bind(self, job: Callable[[Tx], Awaitable[T]]) -> Callable[[Tx], Awaitable[T]]:
        """``job``, run in the trace context current now."""
        context = otel_context.get_current()

        async def bound(tx: Tx) -> T:
            if otel_context.get_current() is context:  # (run by its own caller: most are)
                return await job(tx)
            token = otel_context.attach(context)
            try:
                return await job(tx)
            finally:
                otel_context.detach(token)

        return bound

    # -- the advance of a run ----------------------------------------------------------------

    def begin_advance(self, run: RunRecord, tasks: list[TaskRecord]) -> tuple[Span, object]:
        """Start the span of an advance of ``run`` (for its due ``tasks``), under the sender
        that woke it, linked to each sender; it is current until :meth:`end_advance`.
        Returns it and the token of its context."""
        found = list(carriers(tasks))
        if len(found) == 1:
            quick = _unsampled_sender(found[0])
            if quick is not None:
                return quick, otel_context.attach(trace.set_span_in_context(quick))
        senders: list[otel_context.Context] = []
        seen: set[tuple[int, int]] = set()
        for carrier in found:
            context = propagate.extract(carrier)
            span_context = trace.get_current_span(context).get_span_context()
            key = (span_context.trace_id, span_context.span_id)
            if span_context.is_valid and key not in seen:
                seen.add(key)
                senders.append(context)
        links = [Link(trace.get_current_span(c).get_span_context()) for c in senders]
        # One sender: its child. None (a timer) or several: a trace of its own (with links).
        parent = senders[0] if len(senders) == 1 else otel_context.Context()
        skipped = _unsampled_parent(parent) if senders else None
        if skipped is not None:
            # Current all the same: the steps see it (and skip theirs), and what the
            # run sends carries the sender's trace on.
            return skipped, otel_context.attach(trace.set_span_in_context(skipped))
        span = self.tracer.start_span(
            f"parkway.advance {run.workflow}",
            context=parent,
            kind=SpanKind.CONSUMER,
            links=links,
            attributes={
                "parkway.run_id": run.id,
                "parkway.version": run.version,
                "parkway.woken_by": ",".join(sorted({t.kind for t in tasks})),
            },
        )
        return span, otel_context.attach(trace.set_span_in_context(span))

    def outcome(self, advance: Any, status: str, error: dict[str, Any] | None) -> None:
        """What the advance (a :class:`parkway.core.telemetry.Advance`) committed."""
        span = advance.span
        if span is None:
            return
        span.set_attribute("parkway.outcome", status)
        if status == RunStatus.FAILED:
            error = error or {}
            span.set_status(
                Status(StatusCode.ERROR, f"{error.get('type')}: {error.get('message')}")
            )

    def end_advance(self, span: Span, token: object) -> None:
        otel_context.detach(token)  # type: ignore[arg-type]
        span.end()

    # -- steps -------------------------------------------------------------------------------

    def begin_step(self, request: RunStep) -> tuple[Span, object]:
        """Start the span of a step's attempt and make it current (end it with :meth:`end`)."""
        skipped = _unsampled_parent(otel_context.get_current())
        if skipped is not None:
            return skipped, None
        span = self.tracer.start_span(
            f"parkway.step {request.cmd.name}", attributes={"parkway.attempt": request.attempt}
        )
        return span, otel_context.attach(trace.set_span_in_context(span))


def _unsampled_parent(context: otel_context.Context) -> Span | None:
    """A non-recording span standing for the parent in ``context`` when that parent is
    not sampled (``None``: no parent, or a sampled one: make the span)."""
    parent = trace.get_current_span(context).get_span_context()
    if parent.is_valid and not parent.trace_flags.sampled:
        return trace.NonRecordingSpan(parent)
    return None


def _unsampled_sender(carrier: dict[str, str]) -> Span | None:
    """The sender of a W3C ``traceparent`` alone (no ``tracestate``) whose flags say it
    is not sampled, read without the propagator (which costs as much as a span); else
    ``None``, for the propagator to read."""
    header = carrier.get("traceparent")
    if header is None or len(carrier) != 1 or len(header) != 55:
        return None
    version, trace_id, span_id, flags = header[:2], header[3:35], header[36:52], header[53:]
    if version != "00" or header[2] != "-" or header[35] != "-" or header[52] != "-":
        return None
    try:
        sampled = int(flags, 16) & 1
        context = trace.SpanContext(
            int(trace_id, 16), int(span_id, 16), is_remote=True, trace_flags=trace.TraceFlags(0)
        )
    except ValueError:
        return None
    if sampled or not context.is_valid:
        return None
    return trace.NonRecordingSpan(context)


def _version() -> str | None:
    try:
        return importlib.metadata.version("parkway")
    except importlib.metadata.PackageNotFoundError:  # (run from a source tree)
        return None


def carriers(tasks: list[TaskRecord]) -> Iterator[dict[str, str]]:
    """The trace contexts the senders of ``tasks`` stored with them."""
    for task in tasks:
        payload = task.payload
        if payload is None or _TRACE_KEY not in payload:  # (most payloads: no parse)
            continue
        try:
            data = orjson.loads(payload)
        except orjson.JSONDecodeError:
            continue
        carrier = data.get("trace") if isinstance(data, dict) else None
        if isinstance(carrier, dict):
            yield {str(k): str(v) for k, v in carrier.items()}


def tracing_for(option: Any) -> Tracing | None:
    """The tracing an engine's ``tracing=`` option asks for.

    ``None``: on when the application configured an OpenTelemetry SDK (its tracer
    provider is set), else off. ``True``: on, with the global provider. ``False``:
    off. A ``TracerProvider``: on, with that one.

    Raises:
        InvalidArgumentError: The option is none of these.
    """
    if option is None:
        return Tracing() if configured() else None
    if option is False:
        return None
    if option is True:
        return Tracing()
    if isinstance(option, trace.TracerProvider):
        return Tracing(option)
    raise InvalidArgumentError(
        f"tracing must be True, False, None or an OpenTelemetry TracerProvider, got {option!r}",
        field="tracing",
    )


def configured() -> bool:
    """Whether the application set an OpenTelemetry tracer provider of its own."""
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
