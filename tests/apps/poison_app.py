"""The app of the poison-step tests: steps that raise what no step should, and one
that sleeps for minutes.

``poison`` runs a step that raises the ``BaseException`` its input names (as a
library calling ``sys.exit()`` would), ``fine`` one that does its job in a thread,
``sleeper`` steps that sleep far longer than any test lasts. Each step appends a
line to the file named by its input's ``log`` (when given), so a test counts the
attempts made in a worker process. A ``parkway worker`` subprocess loads it as
``poison_app:engine`` (store from ``PARKWAY_URL``).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from parkway import Engine, Retry, WorkflowContext

ATTEMPTS = 2


class Unprintable(Exception):
    """An exception that cannot be described: its ``str()`` and ``repr()`` raise."""

    def __str__(self) -> str:
        raise RuntimeError("this exception has no message")

    def __repr__(self) -> str:
        raise RuntimeError("this exception has no repr")


class Custom(BaseException):
    """A ``BaseException`` of a library's own."""


def raise_kind(kind: str) -> None:
    if kind == "SystemExit":
        sys.exit(3)
    if kind == "KeyboardInterrupt":
        raise KeyboardInterrupt
    if kind == "GeneratorExit":
        raise GeneratorExit
    if kind == "Custom":
        raise Custom("a library's own BaseException")
    if kind == "Unprintable":
        raise Unprintable
    raise AssertionError(f"no such kind {kind!r}")


def note(log: str | None, line: str) -> None:
    """Append ``line`` to ``log`` (one write: workers in other processes count too)."""
    if log is None:
        return
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{line}\n".encode())
    finally:
        os.close(fd)


def poison_sync(kind: str, log: str | None) -> None:
    note(log, f"poison {kind}")
    raise_kind(kind)


async def poison_async(kind: str, log: str | None) -> None:
    note(log, f"poison {kind}")
    raise_kind(kind)


def double(x: int, log: str | None) -> int:
    time.sleep(0.01)  # (in its thread while the poison steps fail)
    note(log, f"fine {x}")
    return 2 * x


def nap(seconds: float, log: str | None) -> None:
    note(log, "napping")
    time.sleep(seconds)


def register(engine: Engine) -> Engine:
    """``engine`` with this app's workflows."""

    @engine.workflow(name="poison")
    async def poison(ctx: WorkflowContext, input: dict[str, Any]) -> None:
        step = poison_async if input["async"] else poison_sync
        retry = Retry(max_attempts=ATTEMPTS, backoff=0)
        await ctx.step(step, input["kind"], input.get("log"), name="poison", retry=retry)

    @engine.workflow(name="fine")
    async def fine(ctx: WorkflowContext, input: dict[str, Any]) -> int:
        return int(await ctx.step(double, input["x"], input.get("log"), name="double"))

    @engine.workflow(name="sleeper")
    async def sleeper(ctx: WorkflowContext, input: dict[str, Any]) -> Any:
        seconds, log = input["seconds"], input.get("log")
        if not input.get("gather"):
            return await ctx.step(nap, seconds, log, name="nap")
        # Two at once: steps in flight as a gather's, not awaited alone.
        return await ctx.gather(
            ctx.step(nap, seconds, log, name="nap-a"), ctx.step(nap, seconds, log, name="nap-b")
        )

    return engine


engine = register(Engine())
