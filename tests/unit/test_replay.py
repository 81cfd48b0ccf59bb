"""The replay machine on hand-written journals: no store, no worker, no event loop work.

The machine is driven here the way the worker's driver does it: each request
it makes is answered at once (steps are plain functions), and what it decided
is read from its writes and its outcome.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from parkway.errors import (
    RunCancelledError,
    RunTimeoutError,
    StepFailedError,
    WorkflowUsageError,
)
from parkway.events import Event
from parkway.registry import Registry, WorkflowDef
from parkway.replay.machine import Machine
from parkway.replay.requests import (
    Flush,
    ReadMailbox,
    ReadRun,
    Request,
    RunStep,
    StepResult,
)
from parkway.replay.writes import Outcome
from parkway.store.base import JournalEntry, RunRecord, SignalRecord, TaskRecord

T0 = 1_000_000.0


def run(**fields: Any) -> RunRecord:
    values: dict[str, Any] = dict(
        id="r",
        workflow="wf",
        version="1",
        status="running",
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
    values.update(fields)
    return RunRecord(**values)


def entry(pos: int, kind: str, name: str, value: Any, **fields: Any) -> JournalEntry:
    values: dict[str, Any] = dict(
        pos=pos,
        kind=kind,
        name=name,
        state="done",
        value=orjson.dumps(value),
        deadline=None,
        at=T0,
    )
    values.update(fields)
    return JournalEntry(**values)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def machine(
    fn: Any,
    journal: list[JournalEntry] | None = None,
    *,
    tasks: list[TaskRecord] | None = None,
    signals: list[SignalRecord] | None = None,
    clock: Clock | None = None,
    registry: Registry | None = None,
) -> Machine:
    def prepare(event: Event) -> tuple[Event, bytes]:
        return event, orjson.dumps(event.payload)

    return Machine(
        WorkflowDef("wf", "1", fn),
        run(),
        list(journal or []),
        list(tasks or []),
        registry=registry or Registry(),
        clock=clock or Clock(),
        prepare_event=prepare,
        event_retention=86400.0,
        signals=signals,
    )


def answer(request: Request) -> Any:
    """What the driver would answer (steps run at once, reads find nothing)."""
    if isinstance(request, RunStep):
        cmd = request.cmd
        try:
            return StepResult(value=cmd.fn(*cmd.args, **cmd.kwargs))
        except Exception as exc:
            return StepResult(error=exc)
    if isinstance(request, ReadMailbox):
        return []
    if isinstance(request, Flush):
        return {}
    return None


def drive(m: Machine, *, order: str = "asked") -> tuple[Outcome, list[Request]]:
    """Run ``m`` to its outcome, answering every request; the requests it made.

    ``order="reversed"``: requests out at the same time are answered last first
    (branches whose steps finish in the other order).
    """
    asked: list[Request] = []
    m.start()
    while m.outcome is None:
        requests = m.take_requests()
        assert requests, "the machine waits on nothing"
        asked.extend(request for _, request in requests)
        if order == "reversed":
            requests.reverse()
        for token, request in requests:
            m.resume(token, answer(request))
    return m.outcome, asked


def steps_of(asked: list[Request]) -> list[str]:
    return [r.cmd.name for r in asked if isinstance(r, RunStep)]


def one(x: int) -> int:
    return x + 1


def two(x: int) -> int:
    return x * 2


async def two_steps(ctx: Any, _input: Any) -> int:
    a = await ctx.step(one, 1, name="one")
    return int(await ctx.step(two, a, name="two"))


# -- steps and the journal ---------------------------------------------------------------------


def test_a_fresh_run_asks_for_each_step_and_journals_its_result() -> None:
    m = machine(two_steps)
    outcome, asked = drive(m)
    assert (outcome.status, outcome.output) == ("completed", b"4")
    assert steps_of(asked) == ["one", "two"]
    journal = m.take_writes().journal
    assert [(e.pos, e.kind, e.name, e.state, e.value) for e in journal.values()] == [
        (0, "step", "one", "done", b"2"),
        (1, "step", "two", "done", b"4"),
    ]


def test_a_journaled_step_is_not_asked_for_again() -> None:
    m = machine(two_steps, [entry(0, "step", "one", 2)])
    outcome, asked = drive(m)
    assert outcome.output == b"4"
    assert steps_of(asked) == ["two"]


def test_a_step_the_journal_has_as_failed_raises_again_on_replay() -> None:
    error = {"type": "StepFailedError", "message": "x", "args": ["one", 1, "ValueError", "no"]}
    journal = [entry(0, "step", "one", error, state="error")]

    async def catches(ctx: Any, _input: Any) -> str:
        try:
            await ctx.step(one, 1, name="one")
        except StepFailedError as exc:
            return f"{exc.step}:{exc.error_type}"
        return "no"

    outcome, asked = drive(machine(catches, journal))
    assert (outcome.output, asked) == (b'"one:ValueError"', [])


def test_a_different_operation_at_a_position_holds_the_run() -> None:
    m = machine(two_steps, [entry(0, "step", "other", 2)])
    outcome, asked = drive(m)
    assert outcome.status == "held" and asked == []
    assert outcome.error is not None and outcome.error["args"][1] == 0
    assert not m.take_writes()


def test_a_journal_longer_than_the_code_holds_the_run() -> None:
    journal = [
        entry(0, "step", "one", 2),
        entry(1, "step", "two", 4),
        entry(2, "sleep", "sleep", None),
    ]
    outcome, _ = drive(machine(two_steps, journal))
    assert outcome.status == "held"
    assert outcome.error is not None and outcome.error["args"][1:] == [
        2,
        "sleep 'sleep'",
        "the workflow returning",
    ]


# -- waits -------------------------------------------------------------------------------------


async def waits_for_go(ctx: Any, _input: Any) -> Any:
    return await ctx.wait_for_signal("go")


def test_a_signal_wait_reads_the_mailbox_only_when_it_was_not_given() -> None:
    outcome, asked = drive(machine(waits_for_go))
    assert outcome.status == "parked" and asked == [ReadMailbox()]
    outcome, asked = drive(machine(waits_for_go, signals=[]))
    assert outcome.status == "parked" and asked == []


def test_a_parked_signal_wait_takes_its_signal_when_it_came() -> None:
    m = machine(waits_for_go, signals=[])
    drive(m)
    [pending] = m.take_writes().journal.values()
    assert (pending.kind, pending.state) == ("signal", "pending")
    signal = SignalRecord(7, "r", "go", b'{"v": 1}', T0)
    m = machine(waits_for_go, [pending], signals=[signal])
    outcome, _ = drive(m)
    assert outcome.output == b'{"v":1}'
    writes = m.take_writes()
    assert writes.consumed_signals == [7]
    assert writes.journal[0].state == "done"


def test_a_sleep_parks_with_a_timer_and_ends_once_its_time_came() -> None:
    async def sleeps(ctx: Any, _input: Any) -> str:
        await ctx.sleep(60)
        return "woke"

    clock = Clock()
    m = machine(sleeps, clock=clock)
    outcome, _ = drive(m)
    writes = m.take_writes()
    assert outcome.status == "parked"
    assert [(t.kind, t.due_at, t.pos) for t in writes.tasks] == [("timer", T0 + 60, 0)]
    clock.now = T0 + 60
    outcome, _ = drive(machine(sleeps, list(writes.journal.values()), clock=clock))
    assert outcome.output == b'"woke"'


def test_a_publish_asks_for_a_commit_and_returns_what_it_recorded() -> None:
    async def publishes(ctx: Any, _input: Any) -> Any:
        result = await ctx.publish("order.paid", {"id": 1})
        return result.event_id

    m = machine(publishes)
    m.start()
    [(token, request)] = m.take_requests()
    assert isinstance(request, Flush)
    [(pos, event, _payload, branch)] = m.take_writes().publishes
    assert (pos, event.name, event.id, branch) == (0, "order.paid", "r:0:0", None)
    recorded = {
        "started": [],
        "resumed": [],
        "deliveries": [],
        "duplicate": False,
        "touched": 0,
        "event_id": "r:0:0",
    }
    m.resume(token, {0: entry(0, "publish", "order.paid", recorded)})
    assert m.outcome is not None and m.outcome.output == b'"r:0:0"'


def test_a_child_result_reads_the_child_row() -> None:
    async def awaits_child(ctx: Any, _input: Any) -> Any:
        return await ctx.child("kid", 1)

    registry = Registry()
    registry.add(WorkflowDef("kid", "1", awaits_child))
    m = machine(awaits_child, registry=registry)
    outcome, asked = drive(m)  # (the child started in this advance is read from the writes)
    assert outcome.status == "parked" and asked == []
    writes = m.take_writes()
    [child] = writes.runs
    assert child.id == "r/0"
    again = machine(awaits_child, list(writes.journal.values()))
    again.start()
    [(token, request)] = again.take_requests()
    assert request == ReadRun("r/0")
    again.resume(token, child)  # still pending: the parent parks again
    assert again.outcome is not None and again.outcome.status == "parked"


def test_asyncio_gather_over_ctx_operations_names_ctx_gather() -> None:
    async def wrong(ctx: Any, _input: Any) -> Any:
        return await asyncio.gather(ctx.step(one, 1), ctx.step(two, 1))

    with pytest.raises(WorkflowUsageError, match=r"ctx\.gather"):
        asyncio.run(_await_in_tasks(wrong))


async def _await_in_tasks(fn: Any) -> Any:
    # The machine hands the asyncio future to its driver: await it as the driver would.
    m = machine(fn)
    m.start()
    while m.outcome is None:
        for token, request in m.take_requests():
            await asyncio.wait([request.future])  # type: ignore[union-attr]
            m.resume(token, None)
    assert m.outcome.error is not None
    raise WorkflowUsageError(m.outcome.error["message"])


# -- gather ------------------------------------------------------------------------------------


async def fetch_three(ctx: Any, _input: Any) -> list[int]:
    async def branch(x: int) -> int:
        first = await ctx.step(one, x, name=f"one-{x}")
        return int(await ctx.step(two, first, name=f"two-{x}"))

    return list(await ctx.gather(branch(1), ctx.step(one, 10, name="one-10"), branch(3)))


def test_gather_asks_for_every_branch_step_at_once_and_answers_in_argument_order() -> None:
    m = machine(fetch_three)
    m.start()
    first = [r.cmd.name for _, r in m.take_requests() if isinstance(r, RunStep)]
    assert first == ["one-1", "one-10", "one-3"]


@pytest.mark.parametrize("order", ["asked", "reversed"])
def test_gather_replays_the_same_whatever_order_its_branches_finished(order: str) -> None:
    m = machine(fetch_three)
    outcome, asked = drive(m, order=order)
    assert outcome.output == b"[4,11,8]"
    journal = list(m.take_writes().journal.values())
    branches = {(e.branch, e.name) for e in journal if e.kind == "step"}
    assert branches == {
        ("0.0", "one-1"),
        ("0.0", "two-1"),
        ("0.1", "one-10"),
        ("0.2", "one-3"),
        ("0.2", "two-3"),
    }
    # Replay: nothing is asked again, the same result comes out.
    again, asked = drive(machine(fetch_three, journal))
    assert (again.output, steps_of(asked)) == (b"[4,11,8]", [])


def test_a_gather_parked_on_a_wait_replays_its_done_steps_without_running_them() -> None:
    async def step_and_wait(ctx: Any, _input: Any) -> list[Any]:
        return list(await ctx.gather(ctx.step(one, 1, name="one"), ctx.wait_for_signal("go")))

    m = machine(step_and_wait, signals=[])
    outcome, asked = drive(m)
    assert outcome.status == "parked" and steps_of(asked) == ["one"]
    journal = list(m.take_writes().journal.values())
    signal = SignalRecord(1, "r", "go", b'"yes"', T0)
    outcome, asked = drive(machine(step_and_wait, journal, signals=[signal]))
    assert (outcome.output, steps_of(asked)) == (b'[2,"yes"]', [])


def test_the_first_exception_of_a_gather_withdraws_the_waiting_branches() -> None:
    def fails() -> None:
        raise ValueError("boom")

    async def one_fails(ctx: Any, _input: Any) -> str:
        try:
            await ctx.gather(ctx.wait_for_signal("never"), ctx.step(fails, name="fails"))
        except StepFailedError as exc:
            return exc.error_message
        return "no"

    m = machine(one_fails, signals=[])
    outcome, _ = drive(m)
    assert outcome.output == b'"boom"'
    journal = m.take_writes().journal
    states = {e.kind: e.state for e in journal.values()}
    assert states == {"gather": "done", "signal": "withdrawn", "step": "error"}


def test_return_exceptions_returns_them_in_place() -> None:
    def fails() -> None:
        raise ValueError("boom")

    async def keeps_going(ctx: Any, _input: Any) -> list[str]:
        results = await ctx.gather(
            ctx.step(one, 1, name="one"), ctx.step(fails, name="fails"), return_exceptions=True
        )
        return [type(r).__name__ for r in results]

    outcome, _ = drive(machine(keeps_going))
    assert outcome.output == b'["int","StepFailedError"]'


def ok() -> int:
    return 1


def boom() -> None:
    raise ValueError("boom")


async def gather_with_a_failure(ctx: Any, _input: Any) -> list[Any]:
    try:
        await ctx.gather(ctx.step(ok, name="ok"), ctx.step(boom, name="boom"))
    except StepFailedError:
        caught = "failed"
    mixed = await ctx.gather(
        ctx.step(ok, name="ok"), ctx.step(boom, name="boom"), return_exceptions=True
    )
    return [caught, mixed[0], type(mixed[1]).__name__]


@pytest.mark.parametrize("order", ["asked", "reversed"])
def test_a_gather_ends_whichever_of_a_success_and_a_failure_comes_first(order: str) -> None:
    # "reversed": the failing step's result comes first, which withdraws the branch
    # whose step is still in flight; that step's result, coming next, must still
    # settle the gather (it once parked the run on nothing).
    m = machine(gather_with_a_failure)
    outcome, asked = drive(m, order=order)
    assert outcome.status == "completed", outcome
    assert outcome.output == b'["failed",1,"StepFailedError"]'
    assert steps_of(asked) == ["ok", "boom", "ok", "boom"]
    # A replay of what was journaled, in either order, ends the same and runs nothing.
    journal = list(m.take_writes().journal.values())
    again, asked = drive(machine(gather_with_a_failure, journal), order=order)
    assert (again.output, steps_of(asked)) == (b'["failed",1,"StepFailedError"]', [])


@pytest.mark.parametrize("raised", [SystemExit(3), KeyboardInterrupt()], ids=["exit", "interrupt"])
def test_a_base_exception_from_the_workflow_s_own_code_fails_its_run(
    raised: BaseException,
) -> None:
    async def exits(ctx: Any, _input: Any) -> None:
        await ctx.step(one, 1, name="one")
        raise raised

    outcome, _ = drive(machine(exits))
    assert outcome.status == "failed"
    assert outcome.error is not None and outcome.error["type"] == type(raised).__name__


# -- first -------------------------------------------------------------------------------------


async def pay_or_give_up(ctx: Any, _input: Any) -> Any:
    return list(await ctx.first(paid=ctx.wait_for_signal("paid"), late=ctx.sleep(60)))


def test_first_takes_an_input_already_there_and_registers_nothing() -> None:
    m = machine(pay_or_give_up, signals=[SignalRecord(3, "r", "paid", b"5", T0)])
    outcome, _ = drive(m)
    assert outcome.output == b'["paid",5]'
    writes = m.take_writes()
    assert writes.consumed_signals == [3] and writes.tasks == []


def test_first_parks_on_all_its_waits_then_the_earliest_wins() -> None:
    clock = Clock()
    m = machine(pay_or_give_up, signals=[], clock=clock)
    outcome, _ = drive(m)
    writes = m.take_writes()
    assert outcome.status == "parked"
    [first] = writes.journal.values()
    assert (first.kind, first.name, first.state) == ("first", "paid,late", "pending")
    [timer] = writes.tasks
    assert (timer.kind, timer.due_at) == ("timer", T0 + 60)
    # The timer and a signal both there: the one that came first wins; the signal stays.
    clock.now = T0 + 61
    late_signal = SignalRecord(4, "r", "paid", b"5", T0 + 61)
    m = machine(pay_or_give_up, [first], signals=[late_signal], clock=clock)
    outcome, _ = drive(m)
    assert outcome.output == b'["late",null]'
    writes = m.take_writes()
    assert writes.consumed_signals == []
    assert sorted(writes.finished_waits) == sorted(
        member["pos"] for member in orjson.loads(first.value)["members"]
    )


@pytest.mark.parametrize(
    ("waits", "match"),
    [({}, "at least one wait"), ({"x": 1}, "unawaited wait"), ({"s": "step"}, "must be a wait")],
)
def test_first_refuses_what_is_not_a_wait(waits: dict[str, Any], match: str) -> None:
    async def wrong(ctx: Any, _input: Any) -> Any:
        given = {k: (ctx.step(one, 1) if v == "step" else v) for k, v in waits.items()}
        try:
            await ctx.first(**given)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return "no"

    outcome, asked = drive(machine(wrong))
    assert asked == [] and outcome.output is not None
    assert orjson.loads(outcome.output).startswith("InvalidArgumentError") and match in str(
        outcome.output
    )


def test_a_long_journal_replays_without_recursion() -> None:
    async def counts(ctx: Any, _input: Any) -> None:
        total = 0
        while True:
            total += await ctx.wait_for_signal("add")

    journal = [entry(pos, "signal", "add", 1) for pos in range(5000)]
    m = machine(counts, journal, signals=[])
    outcome, asked = drive(m)
    assert outcome.status == "parked" and asked == []
    [pending] = m.take_writes().journal.values()
    assert (pending.pos, pending.state) == (5000, "pending")


def test_steps_replay_in_journal_order_among_other_entries() -> None:
    # Most of a long replay is done steps answered straight from the journal; in
    # between, a side value, a failed step and a signal take the general path, and
    # a gather's branches keep the order their steps finished in the first time
    # (answered last first here). A replay of what the first run journaled sees
    # the same values and asks for nothing.
    async def mixed(ctx: Any, _input: Any) -> list[Any]:
        seen: list[Any] = [await ctx.step(one, 1, name="a")]
        seen.append(ctx.now().timestamp())
        try:
            await ctx.step(fails, 2, name="bad")
        except StepFailedError as exc:
            seen.append(exc.step)
        seen.append(await ctx.step(one, 3, name="b"))
        seen.append(await ctx.wait_for_signal("go"))
        seen.extend(await ctx.gather(pair(ctx, 4), pair(ctx, 5)))
        seen.append(await ctx.step(two, 6, name="c"))
        return seen

    async def pair(ctx: Any, x: int) -> int:
        return int(await ctx.step(two, await ctx.step(one, x, name=f"one-{x}"), name=f"two-{x}"))

    def fails(x: int) -> int:
        raise ValueError(x)

    signal = SignalRecord(1, "r", "go", b'"sig"', T0)
    first = machine(mixed, signals=[signal])
    outcome, asked = drive(first, order="reversed")
    assert outcome.status == "completed" and len(steps_of(asked)) == 8
    journal = list(first.take_writes().journal.values())
    # (the branches' steps interleaved in the journal, the second's first)
    assert [e.name for e in journal if e.branch] == ["one-5", "one-4", "two-4", "two-5"]

    replay = machine(mixed, journal, signals=[])
    again, asked = drive(replay)
    assert asked == [] and again == outcome
    assert orjson.loads(again.output or b"") == [2, T0, "bad", 4, "sig", 10, 12, 12]
    assert not replay.take_writes()


def test_a_journal_in_no_particular_order_replays_as_in_position_order() -> None:
    journal = [entry(1, "step", "two", 4), entry(0, "step", "one", 2)]
    m = machine(two_steps, journal)
    outcome, asked = drive(m)
    assert (outcome.output, asked) == (b"4", [])
    assert m.next_pos == 2


def test_a_journaled_step_under_another_name_still_holds_the_run_midway() -> None:
    journal = [entry(0, "step", "one", 2), entry(1, "step", "renamed", 4)]
    outcome, asked = drive(machine(two_steps, journal))
    assert outcome.status == "held" and asked == []
    assert outcome.error is not None and outcome.error["args"][1:3] == [1, "step 'renamed'"]


# -- patch markers and wait_until --------------------------------------------------------------


async def patched_flow(ctx: Any, _input: Any) -> list[str]:
    done = [str(await ctx.step(one, 1, name="one"))]
    if ctx.patched("extra"):
        done.append(str(await ctx.step(two, 1, name="extra")))
    done.append(str(await ctx.step(two, 5, name="two")))
    return done


def test_a_patch_runs_the_new_branch_for_a_new_run_and_journals_its_marker() -> None:
    m = machine(patched_flow)
    outcome, asked = drive(m)
    assert outcome.output == b'["2","2","10"]' and steps_of(asked) == ["one", "extra", "two"]
    kinds = [(e.kind, e.name) for e in m.take_writes().journal.values()]
    assert kinds == [("step", "one"), ("patch", "extra"), ("step", "extra"), ("step", "two")]


def test_a_run_past_the_patch_point_without_its_marker_replays_the_old_branch() -> None:
    old = [entry(0, "step", "one", 2), entry(1, "step", "two", 10)]
    outcome, asked = drive(machine(patched_flow, old))
    assert (outcome.output, asked) == (b'["2","10"]', [])


def test_a_run_that_stopped_at_the_patch_point_takes_the_new_branch() -> None:
    outcome, asked = drive(machine(patched_flow, [entry(0, "step", "one", 2)]))
    assert outcome.output == b'["2","2","10"]' and steps_of(asked) == ["extra", "two"]


def test_a_deprecated_patch_still_replays_runs_that_journaled_its_marker() -> None:
    async def deprecated(ctx: Any, _input: Any) -> int:
        await ctx.step(one, 1, name="one")
        ctx.deprecate_patch("extra")
        await ctx.step(two, 1, name="extra")
        return int(await ctx.step(two, 5, name="two"))

    marked = [entry(0, "step", "one", 2), entry(1, "patch", "extra", True)]
    outcome, asked = drive(machine(deprecated, marked))
    assert outcome.output == b"10" and steps_of(asked) == ["extra", "two"]
    m = machine(deprecated)
    drive(m)
    assert "patch" not in {e.kind for e in m.take_writes().journal.values()}


def test_wait_until_waits_for_another_branch_to_change_the_state() -> None:
    async def waits_for_flag(ctx: Any, _input: Any) -> list[Any]:
        state = {"ready": False}

        async def setter() -> str:
            await ctx.step(one, 1, name="work")
            state["ready"] = True
            return "set"

        async def waiter() -> str:
            await ctx.wait_until(lambda: state["ready"])
            return "saw it"

        return list(await ctx.gather(waiter(), setter()))

    m = machine(waits_for_flag)
    outcome, _ = drive(m)
    assert outcome.output == b'["saw it","set"]'
    journal = list(m.take_writes().journal.values())
    again, asked = drive(machine(waits_for_flag, journal))
    assert (again.output, asked) == (b'["saw it","set"]', [])


def test_wait_until_times_out() -> None:
    async def never(ctx: Any, _input: Any) -> str:
        try:
            await ctx.wait_until(lambda: False, timeout=5)
        except Exception as exc:
            return type(exc).__name__
        return "no"

    clock = Clock()
    m = machine(never, clock=clock)
    outcome, _ = drive(m)
    writes = m.take_writes()
    assert outcome.status == "parked" and [t.due_at for t in writes.tasks] == [T0 + 5]
    clock.now = T0 + 5
    outcome, _ = drive(machine(never, list(writes.journal.values()), clock=clock))
    assert outcome.output == b'"WaitTimeoutError"'


# -- sagas: compensations and a stopping run ---------------------------------------------------


def _stopping(fn: Any, journal: list[JournalEntry], stop: BaseException | None) -> Machine:
    def prepare(event: Event) -> tuple[Event, bytes]:
        return event, orjson.dumps(event.payload)

    return Machine(
        WorkflowDef("wf", "1", fn),
        run(),
        list(journal),
        [],
        registry=Registry(),
        clock=Clock(),
        prepare_event=prepare,
        event_retention=86400.0,
        signals=[],
        stop=stop,
    )


def test_a_stop_replays_carries_out_nothing_new_and_compensates_newest_first() -> None:
    undone: list[str] = []

    async def wf(ctx: Any, _: Any) -> None:
        await ctx.step(lambda: "a", name="a", compensate=lambda v: undone.append(v) or v)
        await ctx.step(lambda: "b", name="b", compensate=lambda v: undone.append(v) or v)
        await ctx.wait_for_signal("go")
        await ctx.step(lambda: "never", name="c")

    journal = [
        entry(1, "step", "a", "a"),
        entry(2, "compensation.registered", "a", None),
        entry(3, "step", "b", "b"),
        entry(4, "compensation.registered", "b", None),
        entry(5, "signal", "go", {}, state="pending"),
    ]
    m = _stopping(wf, journal, RunCancelledError("r"))
    outcome, asked = drive(m)
    assert outcome.status == "cancelled"
    assert steps_of(asked) == ["b", "a"] and undone == ["b", "a"]
    written = sorted(m.writes.journal.values(), key=lambda e: e.pos)
    assert [(e.kind, e.name, e.branch) for e in written] == [
        ("stop", "cancel", "!stop"),
        ("compensation", "b", None),
        ("compensation", "a", None),
    ]

    # A replay (another worker, no stop asked now) stops at the same place and runs
    # only the compensation the journal does not hold.
    undone.clear()
    replayed = _stopping(wf, [*journal, *written[:2]], None)
    outcome, asked = drive(replayed)
    assert outcome.status == "cancelled"
    assert steps_of(asked) == ["a"] and undone == ["a"]


def test_a_stop_without_compensations_left_ends_with_its_reason() -> None:
    async def wf(ctx: Any, _: Any) -> None:
        await ctx.step(lambda: 1, name="a", compensate=lambda v: v)
        await ctx.compensate()
        await ctx.sleep(60)

    journal = [
        entry(1, "step", "a", 1),
        entry(2, "compensation.registered", "a", None),
        entry(3, "compensation", "a", 1),
        entry(4, "sleep", "sleep", None, state="pending", deadline=T0 + 60),
    ]
    outcome, asked = drive(_stopping(wf, journal, RunTimeoutError("r", 30)))
    assert outcome.status == "failed" and outcome.error is not None
    assert outcome.error["type"] == "RunTimeoutError"
    assert steps_of(asked) == []


def test_code_that_no_longer_registers_a_compensation_is_held() -> None:
    async def wf(ctx: Any, _: Any) -> None:
        await ctx.step(lambda: 1, name="a")
        await ctx.step(lambda: 2, name="b")

    journal = [entry(1, "step", "a", 1), entry(2, "compensation.registered", "a", None)]
    outcome, _ = drive(_stopping(wf, journal, None))
    assert outcome.status == "held"


# -- streams ----------------------------------------------------------------------------------


async def streaming(ctx: Any, _input: Any) -> str:
    await ctx.write_stream("out", "a")
    await ctx.write_stream("out", {"b": 1})
    await ctx.close_stream("out")
    await ctx.close_stream("out")  # (journals nothing more)
    try:
        await ctx.write_stream("out", "late")
    except Exception as exc:
        return type(exc).__name__
    return "written"


def test_stream_writes_are_journaled_and_written_once_in_order() -> None:
    m = machine(streaming)
    outcome, _ = drive(m)
    assert outcome.output == b'"InvalidArgumentError"'
    writes = m.take_writes()
    assert writes.streams == [("out", b'"a"'), ("out", b'{"b":1}'), ("out", None)]
    assert [(e.kind, e.name) for e in writes.journal.values()] == [
        ("stream.write", "out"),
        ("stream.write", "out"),
        ("stream.close", "out"),
    ]
    # Replayed from that journal, the run writes nothing again and is refused the same.
    journal = list(writes.journal.values())
    again = machine(streaming, journal)
    outcome, _ = drive(again)
    assert outcome.output == b'"InvalidArgumentError"'
    assert again.take_writes().streams == []


def test_a_stream_write_where_the_journal_has_another_operation_holds_the_run() -> None:
    m = machine(streaming, [entry(0, "value.set", "out", None)])
    outcome, _ = drive(m)
    assert outcome.status == "held"
