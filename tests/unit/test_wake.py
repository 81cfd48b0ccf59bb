"""A kept machine woken with new inputs decides exactly what a replay would.

The worker keeps a parked run's machine and wakes it (``Machine.wake``) instead
of replaying the journal. Each scenario here is played twice, on a simulated
store: once by one machine woken again and again, once by a new machine replayed
from the journal at every input; each advance must write the same journal
entries, tasks and answers, and end the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from parkway.events import Event
from parkway.registry import Registry, WorkflowDef
from parkway.replay.machine import Machine
from parkway.replay.requests import Flush, ReadMailbox, ReadRun, RunStep, StepResult
from parkway.replay.writes import Outcome, Writes
from parkway.store.base import JournalEntry, RunRecord, SignalRecord, TaskRecord, UpdateRecord

Input = Callable[["Store"], None]
T0 = 1_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def run(status: str) -> RunRecord:
    return RunRecord(
        id="r",
        workflow="wf",
        version="1",
        status=status,
        input=b"null",
        output=None,
        error=None,
        domain="default",
        subject=None,
        parent_id=None,
        trigger=None,
        generation=0,
        created_at=T0,
        updated_at=T0,
    )


@dataclass
class Store:
    """What a run's advances read and write, kept as a store would."""

    clock: Clock
    journal: dict[int, JournalEntry] = field(default_factory=dict)
    mailbox: list[SignalRecord] = field(default_factory=list)
    tasks: list[TaskRecord] = field(default_factory=list)
    updates: list[UpdateRecord] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    ids: int = 0

    def next_id(self) -> int:
        self.ids += 1
        return self.ids

    def signal(self, name: str, payload: Any = None) -> None:
        sid = self.next_id()
        data = orjson.dumps(payload)
        self.mailbox.append(SignalRecord(sid, "r", name, data, self.clock.now))
        self.tasks.append(TaskRecord(sid, "r", self.clock.now, "signal", None, None))

    def update(self, name: str, payload: Any) -> None:
        uid = self.next_id()
        self.updates.append(
            UpdateRecord("r", f"u{uid}", name, orjson.dumps(payload), "pending", None, 0.0)
        )
        self.tasks.append(TaskRecord(uid, "r", self.clock.now, "update", None, None))

    def due(self) -> list[TaskRecord]:
        return [t for t in self.tasks if t.due_at <= self.clock.now]

    def answer(self, request: Any) -> Any:
        if isinstance(request, RunStep):
            cmd = request.cmd
            self.steps.append(cmd.name)
            try:
                return StepResult(value=cmd.fn(*cmd.args, **cmd.kwargs))
            except Exception as exc:
                return StepResult(error=exc)
        if isinstance(request, ReadMailbox):
            return list(self.mailbox)
        if isinstance(request, Flush):
            return {}
        if isinstance(request, ReadRun):
            return None
        raise AssertionError(f"unexpected request {request!r}")

    def commit(self, writes: Writes, claimed: list[TaskRecord]) -> None:
        self.journal.update(writes.journal)
        self.mailbox = [s for s in self.mailbox if s.id not in writes.consumed_signals]
        gone = {t.id for t in claimed}
        finished = set(writes.finished_waits)
        self.tasks = [
            t
            for t in self.tasks
            if t.id not in gone and not (t.kind == "timer" and t.pos in finished)
        ]
        for task in writes.tasks:
            self.tasks.append(
                TaskRecord(self.next_id(), "r", task.due_at, task.kind, task.pos, task.payload)
            )
        answered = {uid for uid, _, _ in writes.updates}
        self.updates = [u for u in self.updates if u.id not in answered]


def drive(m: Machine, store: Store) -> Outcome:
    while m.outcome is None:
        requests = m.take_requests()
        assert requests, "the machine waits on nothing"
        for token, request in requests:
            m.resume(token, store.answer(request))
    return m.outcome


def new_machine(fn: Any, store: Store, tasks: list[TaskRecord], status: str) -> Machine:
    def prepare(event: Event) -> tuple[Event, bytes]:
        return event, orjson.dumps(event.payload)

    return Machine(
        WorkflowDef("wf", "1", fn),
        run(status=status),
        list(store.journal.values()),
        tasks,
        registry=Registry(),
        clock=store.clock,
        prepare_event=prepare,
        event_retention=86400.0,
        updates=list(store.updates) or None,
    )


Advance = tuple[str, list[tuple[int, str, str, str, bytes | None]], list[Any], list[Any]]


def advance_record(outcome: Outcome, writes: Writes) -> Advance:
    journal = [(e.pos, e.kind, e.name, e.state, e.value) for e in writes.journal.values()]
    tasks = [(t.kind, t.pos, t.due_at) for t in writes.tasks]
    return outcome.status, sorted(journal), tasks, sorted(writes.updates)


def play(fn: Any, inputs: list[Input], *, woken: bool) -> tuple[list[Advance], Any, list[str]]:
    """Play ``inputs`` (one advance after each) against ``fn``: by one woken machine,
    or by a machine replayed anew each time."""
    store = Store(Clock())
    kept: Machine | None = None
    status = "pending"
    advances: list[Advance] = []
    for index in range(len(inputs) + 1):
        if index:
            inputs[index - 1](store)
        tasks = store.due()
        if kept is not None:
            kept.wake(run(status=status), tasks, updates=list(store.updates) or None)
            m = kept
        else:
            m = new_machine(fn, store, tasks, status)
            m.start()
        outcome = drive(m, store)
        writes = m.take_writes()
        advances.append(advance_record(outcome, writes))
        store.commit(writes, tasks)
        status = outcome.status
        if woken and m.parked:
            kept = m
        else:
            m.close()
            kept = None
        if not m.parked:
            return advances, outcome.output, store.steps
    raise AssertionError("the run did not end")


def one(x: int) -> int:
    return x + 1


async def branch(ctx: Any, name: str) -> int:
    got = await ctx.wait_for_signal(name)
    return int(await ctx.step(one, got, name=f"one-{name}"))


async def everything(ctx: Any, _: Any) -> Any:
    seen: list[int] = []

    def add(x: int) -> int:
        seen.append(x)
        return len(seen)

    def positive(x: int) -> None:
        if x <= 0:
            raise ValueError("positive only")

    ctx.on_update("add", add, validate=positive)
    a, b = await ctx.gather(branch(ctx, "a"), branch(ctx, "b"))
    name, value = await ctx.first(go=ctx.wait_for_signal("go"), late=ctx.sleep(3600))
    await ctx.wait_until(lambda: sum(seen) >= 3)
    ctx.set_value("seen", seen)
    tail = await ctx.wait_for_signal("tail", timeout=60)
    return [a, b, name, value, seen, tail, ctx.now().isoformat()]


def later(seconds: float) -> Input:
    def move(store: Store) -> None:
        store.clock.now += seconds

    return move


def signal(name: str, payload: Any = None) -> Input:
    return lambda store: store.signal(name, payload)


def update(name: str, payload: Any) -> Input:
    return lambda store: store.update(name, payload)


SCENARIOS: dict[str, list[Input]] = {
    # branches answered in the other order, a sleep that wins its first, updates
    # (one refused) until wait_until holds, a signal before its wait's timeout
    "late": [
        signal("b", 20),
        signal("a", 10),
        later(3600),
        update("add", 1),
        update("add", -4),
        update("add", 2),
        signal("tail", "t"),
    ],
    # both branches' signals at once, the first's signal, an update that does it at
    # once, a timeout
    "prompt": [
        lambda s: (s.signal("a", 1), s.signal("b", 2)),
        signal("go", "now"),
        update("add", 5),
        later(61),
    ],
    # a signal nobody waits for yet stays in the mailbox for its wait
    "early": [
        signal("go", "early"),
        signal("a", 1),
        update("add", 3),
        signal("b", 2),
        signal("tail"),
    ],
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_woken_machine_decides_what_a_replay_decides(name: str) -> None:
    inputs = SCENARIOS[name]
    replayed = play(everything, inputs, woken=False)
    woken = play(everything, inputs, woken=True)
    assert woken[0] == replayed[0]  # every advance wrote the same, and ended the same way
    assert woken[1] == replayed[1]  # the output
    assert woken[2] == replayed[2]  # the steps run, each once


def test_a_woken_machine_keeps_the_state_of_the_workflow() -> None:
    calls: list[str] = []

    async def counter(ctx: Any, _: Any) -> int:
        calls.append("top")  # a replay runs the code from the top again
        total = 0
        while True:
            n = await ctx.wait_for_signal("add")
            if n is None:
                return total
            total += n

    inputs = [signal("add", 1), signal("add", 2), signal("add", None)]
    _, output, _ = play(counter, inputs, woken=True)
    assert output == b"3"
    assert calls == ["top"]
    calls.clear()
    _, output, _ = play(counter, inputs, woken=False)
    assert output == b"3"
    assert calls == ["top"] * 4


def test_history_length_is_the_same_on_a_wake_and_a_replay() -> None:
    lengths: list[int] = []

    async def long(ctx: Any, _: Any) -> list[bool]:
        suggested = []
        for _i in range(3):
            await ctx.wait_for_signal("tick")
            ctx.now()
            lengths.append(ctx.history_length)
            suggested.append(ctx.continue_as_new_suggested)
        return suggested

    inputs = [signal("tick"), signal("tick"), signal("tick")]
    play(long, inputs, woken=True)
    woken, lengths[:] = list(lengths), []
    play(long, inputs, woken=False)
    # (A replay goes through the earlier waits again: their lengths come first.)
    assert woken == [2, 4, 6]
    assert lengths[-3:] == woken
