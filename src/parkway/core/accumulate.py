"""Debounce and batch, built on the core's own primitives.

A debounced or batched workflow gets an internal *accumulator* workflow. Each
published event is sent to the accumulator for its (workflow, domain, subject,
key value) as a signal, with ``signal_with_start`` semantics inside the
publish transaction, so no event is lost to a race with the accumulator's
start. The accumulator waits on its mailbox with timeouts (durable timers),
starts the real run when the window closes or the batch fills, and then
``continue_as_new``s: signals that arrived meanwhile carry over to the next
window. Everything is therefore as durable, ordered and crash-safe as any
other run, at the cost of one small parked run per active key.
"""

from __future__ import annotations

import logging
from typing import Any

from parkway import _json
from parkway.core.runs import insert_run
from parkway.core.runtime import Runtime
from parkway.durations import to_seconds
from parkway.errors import InvalidInputError, WaitTimeoutError
from parkway.events import Batch, Debounce, Event
from parkway.registry import WorkflowDef
from parkway.replay.context import WorkflowContext
from parkway.store.base import NewTask, Tx
from parkway.store.vocabulary import TaskKind

log = logging.getLogger("parkway.accumulate")

SIGNAL = "parkway.event"


def accumulator_name(wf: WorkflowDef) -> str:
    kind = "debounce" if wf.debounce is not None else "batch"
    return f"parkway.{kind}:{wf.name}"


def accumulator_for(wf: WorkflowDef) -> WorkflowDef:
    """The internal workflow that collects ``wf``'s events."""
    run = _debounce if wf.debounce is not None else _batch
    return WorkflowDef(name=accumulator_name(wf), version="1", fn=run, internal=True)


async def accumulate(
    rt: Runtime, tx: Tx, wf: WorkflowDef, event: Event, envelope: bytes, now: float
) -> None:
    """Hand ``event`` to the accumulator of ``wf`` for its key, starting it if needed."""
    option = wf.debounce if wf.debounce is not None else wf.batch
    key = getattr(option, "key", None)
    key_value = None
    if key is not None and isinstance(event.payload, dict):
        key_value = event.payload.get(key)
    run_id = (
        f"{accumulator_name(wf)}:{event.domain}:{event.subject or ''}:"
        f"{_json.dumps(key_value).decode()}"
    )
    run = await tx.runs.get(run_id)
    if run is None:
        acc = rt.registry.latest(accumulator_name(wf))
        config: dict[str, Any] = {"workflow": wf.name}
        if isinstance(option, Debounce):
            config["window"] = to_seconds(option.window)
            config["max_wait"] = None if option.max_wait is None else to_seconds(option.max_wait)
        elif isinstance(option, Batch):
            config["max_size"] = option.max_size
            config["within"] = to_seconds(option.within)
        await insert_run(
            rt,
            tx,
            acc.name,
            acc.version,
            run_id,
            _json.dumps(config),
            domain=event.domain,
            subject=event.subject,
        )
    await tx.signals.add(run_id, SIGNAL, envelope, now)
    await tx.tasks.add([NewTask(run_id, now, TaskKind.SIGNAL)])


async def _fire(ctx: WorkflowContext, config: dict[str, Any], last: dict[str, Any], value: Any):  # type: ignore[no-untyped-def]
    try:
        await ctx._start_run(config["workflow"], value, trigger=last)
    except InvalidInputError as exc:
        log.warning("%s: %s rejected its input: %s", ctx.run_id, config["workflow"], exc)


async def _debounce(ctx: WorkflowContext, config: dict[str, Any]) -> None:
    last = await ctx.wait_for_signal(SIGNAL)
    first_at = ctx.now()
    max_wait = config.get("max_wait")
    while True:
        timeout = config["window"]
        if max_wait is not None:
            remaining = max_wait - (ctx.now() - first_at).total_seconds()
            if remaining <= 0:
                break
            timeout = min(timeout, remaining)
        try:
            last = await ctx.wait_for_signal(SIGNAL, timeout=timeout)
        except WaitTimeoutError:
            break
    await _fire(ctx, config, last, last["payload"])
    ctx.continue_as_new(config)


async def _batch(ctx: WorkflowContext, config: dict[str, Any]) -> None:
    events = [await ctx.wait_for_signal(SIGNAL)]
    started = ctx.now()
    while len(events) < config["max_size"]:
        remaining = config["within"] - (ctx.now() - started).total_seconds()
        if remaining <= 0:
            break
        try:
            events.append(await ctx.wait_for_signal(SIGNAL, timeout=remaining))
        except WaitTimeoutError:
            break
    await _fire(ctx, config, events[-1], {"events": [e["payload"] for e in events]})
    ctx.continue_as_new(config)
