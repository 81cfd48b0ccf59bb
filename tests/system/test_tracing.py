"""OpenTelemetry spans, read with the SDK's in-memory exporter: the sender's context travels
through the store to the advance it wakes, across engines (processes).

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/acceptance/test_tracing.py.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the SDK is in the dev extra")


def test_an_sdk_the_application_configured_is_used_without_asking() -> None:
    """``tracing=None`` (the default): on once a tracer provider is set, when the engine
    opens. In a process of its own: the global provider can be set once only."""
    code = textwrap.dedent(
        """
        import asyncio
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from parkway import Engine

        exporter = InMemorySpanExporter()
        engine = Engine("memory://")

        @engine.workflow()
        async def hello(ctx, input):
            return await ctx.step(lambda: "hi", name="greet")

        async def main():
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)  # after the engine was made, before it opens
            async with engine:
                await (await engine.start("hello")).result(timeout=10)
            print(sorted(s.name for s in exporter.get_finished_spans()))

        asyncio.run(main())
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        "['parkway.advance hello', 'parkway.start hello', 'parkway.step greet']"
    )
