"""Human tasks: ``ctx.human_task``, ``engine.tasks``, ``engine.complete_task``.

Every test runs on every backend (the ``engine`` fixture), through the public API.
The HTTP routes are at the end; the CLI's are in ``test_cli.py``, the dashboard's
inbox in ``test_dashboard_browser.py``.
"""

from __future__ import annotations

import asyncio
import enum
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, Field

from parkway import (
    Engine,
    HumanTask,
    InvalidArgumentError,
    InvalidInputError,
    RunStateError,
    RunStatus,
    TaskAssignmentError,
    WaitTimeoutError,
)
from parkway.errors import TaskNotFoundError
from parkway.http import create_app
from parkway.http.responses import HumanTaskOut
from parkway.testing import ManualClock


class Decision(enum.StrEnum):
    APPROVE = "approve"
    REJECT = "reject"


class Approval(BaseModel):
    decision: Decision
    amount: int = Field(ge=0, description="The amount to refund, in cents")
    note: str | None = None


REFUND_FORM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean", "description": "Refund the customer?"},
        "amount": {"type": "number", "minimum": 0},
        "reason": {"type": "string", "enum": ["damaged", "late", "other"]},
        "comment": {"type": "string"},
    },
    "required": ["approved", "reason"],
}


async def open_task(engine: Engine, handle: Any) -> HumanTask:
    await engine.idle()
    [task] = [t for t in await engine.tasks() if t.run_id == handle.id]
    return task


@pytest.mark.replays
async def test_a_pydantic_form_gives_the_run_an_instance_of_the_model(engine: Engine) -> None:
    @engine.workflow()
    async def refund(ctx, order):
        approval = await ctx.human_task(
            "approve-refund",
            title=f"Refund order {order}?",
            form=Approval,
            data={"order": order, "total": 1250},
            assignees=("ana", "ben"),
        )
        await ctx.sleep(0)  # (one more commit: the result is rebuilt on the replay)
        return [type(approval).__name__, approval.decision.value, approval.amount]

    handle = await engine.start("refund", "A-7")
    task = await open_task(engine, handle)
    assert (task.name, task.title, task.workflow, task.status) == (
        "approve-refund",
        "Refund order A-7?",
        "refund",
        "open",
    )
    assert task.data == {"order": "A-7", "total": 1250}
    assert task.assignees == ("ana", "ben")
    assert task.form_schema is not None and "decision" in task.form_schema["properties"]
    assert task.due_at is None and task.completed_at is None

    done = await engine.complete_task(task.id, {"decision": "approve", "amount": 500}, by="ben")

    assert (done.status, done.completed_by) == ("completed", "ben")
    assert done.result == {"decision": "approve", "amount": 500, "note": None}
    assert await handle.result(timeout=10) == ["Approval", "approve", 500]
    assert (await engine.get_task(task.id)).status == "completed"


async def test_a_pydantic_form_refuses_a_result_naming_the_field(engine: Engine) -> None:
    @engine.workflow()
    async def refund(ctx, _input):
        return (await ctx.human_task("approve", form=Approval)).amount

    handle = await engine.start("refund")
    task = await open_task(engine, handle)
    for bad, field in (
        ({"amount": 5}, "decision"),
        ({"decision": "maybe", "amount": 5}, "decision"),
        ({"decision": "approve", "amount": -1}, "amount"),
        ({"decision": "approve", "amount": "lots"}, "amount"),
    ):
        with pytest.raises(InvalidInputError) as caught:
            await engine.complete_task(task.id, bad)
        assert caught.value.field == field, bad
        assert field in str(caught.value)
    assert (await engine.get_task(task.id)).status == "open"
    await engine.complete_task(task.id, {"decision": "reject", "amount": 0})
    assert await handle.result(timeout=10) == 0


async def test_a_json_schema_form_gives_the_run_the_checked_dict(engine: Engine) -> None:
    @engine.workflow()
    async def refund(ctx, _input):
        return await ctx.human_task("refund", form=REFUND_FORM)

    handle = await engine.start("refund")
    task = await open_task(engine, handle)
    assert task.form_schema == REFUND_FORM
    for bad, field in (
        ({"reason": "late"}, "approved"),
        ({"approved": "yes", "reason": "late"}, "approved"),
        ({"approved": True, "reason": "bored"}, "reason"),
        ({"approved": True, "reason": "late", "amount": -3}, "amount"),
        ({"approved": True, "reason": "late", "amount": True}, "amount"),
        ([1, 2], None),
    ):
        with pytest.raises(InvalidInputError) as caught:
            await engine.complete_task(task.id, bad)
        assert caught.value.field == field, bad
    result = {"approved": True, "reason": "late", "amount": 12.5}
    await engine.complete_task(task.id, result)
    assert await handle.result(timeout=10) == result


async def test_without_a_form_any_json_is_taken(engine: Engine) -> None:
    @engine.workflow()
    async def note(ctx, _input):
        return await ctx.human_task("note")

    handle = await engine.start("note")
    task = await open_task(engine, handle)
    assert task.form_schema is None and task.assignees == ()
    await engine.complete_task(task.id, ["anything", 1, None])
    assert await handle.result(timeout=10) == ["anything", 1, None]


async def test_an_assignee_must_complete_an_assigned_task(engine: Engine) -> None:
    @engine.workflow()
    async def assigned(ctx, _input):
        return await ctx.human_task("review", assignees=["ana"])

    handle = await engine.start("assigned")
    task = await open_task(engine, handle)
    for by in ("zoe", None):
        with pytest.raises(TaskAssignmentError) as caught:
            await engine.complete_task(task.id, "ok", by=by)
        assert caught.value.assignees == ("ana",)
    assert (await engine.get_task(task.id)).status == "open"
    await engine.complete_task(task.id, "ok", by="ana")
    assert await handle.result(timeout=10) == "ok"


async def test_a_task_that_is_not_open_cannot_be_completed(engine: Engine) -> None:
    @engine.workflow()
    async def once(ctx, _input):
        return await ctx.human_task("once")

    handle = await engine.start("once")
    task = await open_task(engine, handle)
    await engine.complete_task(task.id, 1)
    with pytest.raises(RunStateError, match="completed"):
        await engine.complete_task(task.id, 2)
    assert await handle.result(timeout=10) == 1
    assert (await engine.get_task(task.id)).result == 1


async def test_cancelling_the_run_cancels_its_open_tasks(engine: Engine) -> None:
    @engine.workflow()
    async def two_tasks(ctx, _input):
        return await ctx.gather(ctx.human_task("a"), ctx.human_task("b"))

    handle = await engine.start("two_tasks")
    await engine.idle()
    assert len(await engine.tasks()) == 2
    await handle.cancel()
    await engine.idle()
    assert await engine.tasks() == []
    cancelled = await engine.tasks(status="cancelled")
    assert sorted(t.name for t in cancelled) == ["a", "b"]
    with pytest.raises(RunStateError, match="cancelled"):
        await engine.complete_task(cancelled[0].id, 1)


async def test_a_timeout_expires_the_task_and_raises_in_the_run(
    engine: Engine, clock: ManualClock
) -> None:
    @engine.workflow()
    async def quick(ctx, _input):
        try:
            return await ctx.human_task("quick", timeout="1h")
        except WaitTimeoutError:
            return "expired"

    handle = await engine.start("quick")
    task = await open_task(engine, handle)
    assert task.due_at is not None
    assert (task.due_at - task.created_at).total_seconds() == 3600
    await clock.advance("2h")
    assert await handle.result(timeout=10) == "expired"
    assert (await engine.get_task(task.id)).status == "expired"
    assert [t.id for t in await engine.tasks(status="expired")] == [task.id]
    with pytest.raises(RunStateError, match="expired"):
        await engine.complete_task(task.id, 1)


async def test_a_task_past_its_due_time_is_refused_before_its_timer_is_handled(
    engine: Engine, clock: ManualClock
) -> None:
    @engine.workflow()
    async def quick(ctx, _input):
        return await ctx.human_task("quick", timeout="1h")

    handle = await engine.start("quick")
    task = await open_task(engine, handle)
    await engine.pause(handle.id)  # (its timer waits: the task is still open in the store)
    await clock.advance("2h")
    with pytest.raises(RunStateError, match="expired"):
        await engine.complete_task(task.id, 1)


async def test_a_task_in_first_the_person_wins(engine: Engine, clock: ManualClock) -> None:
    @engine.workflow()
    async def approve_or_late(ctx, _input):
        which, value = await ctx.first(
            approved=ctx.human_task("approve", form=Approval),
            late=ctx.sleep("1d"),
            cancelled=ctx.wait_for_signal("cancel"),
        )
        return [which, value.decision.value if which == "approved" else value]

    handle = await engine.start("approve_or_late")
    task = await open_task(engine, handle)
    await engine.complete_task(task.id, {"decision": "approve", "amount": 1})
    assert await handle.result(timeout=10) == ["approved", "approve"]
    await clock.advance("2d")
    assert (await engine.get_task(task.id)).status == "completed"


async def test_a_task_in_first_the_timer_wins_and_the_task_is_cancelled(
    engine: Engine, clock: ManualClock
) -> None:
    @engine.workflow()
    async def approve_or_late(ctx, _input):
        which, _ = await ctx.first(approved=ctx.human_task("approve"), late=ctx.sleep("1d"))
        await ctx.wait_for_signal("done")  # (the run goes on: the task must not wait for it)
        return which

    handle = await engine.start("approve_or_late")
    task = await open_task(engine, handle)
    await clock.advance("1d")
    await engine.idle()
    assert (await engine.get_task(task.id)).status == "cancelled"
    assert await engine.tasks() == []
    await handle.signal("done")
    assert await handle.result(timeout=10) == "late"


async def test_a_task_in_first_its_timeout_expires_it(engine: Engine, clock: ManualClock) -> None:
    @engine.workflow()
    async def approve_or_cancel(ctx, _input):
        try:
            await ctx.first(
                approved=ctx.human_task("approve", timeout="1h"),
                cancelled=ctx.wait_for_signal("cancel"),
            )
        except WaitTimeoutError:
            return "expired"
        return "no"

    handle = await engine.start("approve_or_cancel")
    task = await open_task(engine, handle)
    await clock.advance("1h")
    assert await handle.result(timeout=10) == "expired"
    assert (await engine.get_task(task.id)).status == "expired"


async def test_tasks_are_listed_by_status_assignee_and_workflow(
    engine: Engine, clock: ManualClock
) -> None:
    @engine.workflow()
    async def for_ana(ctx, _input):
        return await ctx.human_task("a", assignees=("ana",))

    @engine.workflow()
    async def for_anyone(ctx, _input):
        return await ctx.human_task("b")

    @engine.workflow()
    async def for_ben(ctx, _input):
        return await ctx.human_task("c", assignees=("ben", "cy"))

    for name in ("for_ana", "for_anyone", "for_ben"):
        await engine.start(name)
        await engine.idle()
        await clock.advance("1s")  # (oldest first)
    assert [t.name for t in await engine.tasks()] == ["a", "b", "c"]
    assert [t.name for t in await engine.tasks(assignee="ana")] == ["a", "b"]
    assert [t.name for t in await engine.tasks(assignee="cy")] == ["b", "c"]
    assert [t.name for t in await engine.tasks(workflow="for_ben")] == ["c"]
    assert [t.name for t in await engine.tasks(limit=1)] == ["a"]
    assert await engine.tasks(status="completed") == []
    assert len(await engine.tasks(status=None)) == 3


async def test_bad_arguments_are_refused_naming_the_field(engine: Engine) -> None:
    for kwargs, field in (
        ({"status": "done"}, "status"),
        ({"limit": 0}, "limit"),
        ({"limit": "5"}, "limit"),
        ({"assignee": ""}, "assignee"),
    ):
        with pytest.raises(InvalidInputError) as caught:
            await engine.tasks(**kwargs)
        assert caught.value.field == field
    with pytest.raises(TaskNotFoundError):
        await engine.get_task("nope")
    with pytest.raises(TaskNotFoundError):
        await engine.complete_task("nope", 1)

    @engine.workflow()
    async def bad(ctx, kind):
        arguments: dict[str, Any] = {
            "form": {"form": "not a schema"},
            "assignees": {"assignees": "ana"},
            "data": {"data": object()},
            "title": {"title": 5},
        }[kind]
        try:
            await ctx.human_task("x", **arguments)
        except InvalidArgumentError as exc:
            return exc.field
        except Exception as exc:
            return type(exc).__name__
        return "no"

    for kind, expected in (
        ("form", "form"),
        ("assignees", "assignees"),
        ("data", "SerializationError"),
        ("title", "InvalidInputError"),
    ):
        assert await (await engine.start("bad", kind)).result(timeout=10) == expected
    assert await engine.tasks() == []


async def test_a_run_that_ends_leaves_no_open_task(engine: Engine) -> None:
    @engine.workflow()
    async def gives_up(ctx, _input):
        name, _ = await ctx.first(task=ctx.human_task("t"), stop=ctx.wait_for_signal("stop"))
        return name

    handle = await engine.start("gives_up")
    task = await open_task(engine, handle)
    await handle.signal("stop")
    assert await handle.result(timeout=10) == "stop"
    assert (await engine.get_task(task.id)).status == "cancelled"
    assert (await handle.info()).status == RunStatus.COMPLETED


# -- over HTTP ---------------------------------------------------------------------------------


async def test_tasks_are_listed_read_and_completed_over_http(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PARKWAY_API_TOKEN", raising=False)

    @engine.workflow()
    async def refund(ctx, _input):
        return await ctx.human_task(
            "refund", title="Refund?", form=REFUND_FORM, data={"order": 7}, assignees=["ana"]
        )

    handle = await engine.start("refund")
    await engine.idle()
    transport = httpx.ASGITransport(app=create_app(engine))
    async with httpx.AsyncClient(transport=transport, base_url="http://parkway.test") as client:
        listed = (await client.get("/tasks")).json()
        assert [t["name"] for t in listed] == ["refund"]
        for item in listed:
            HumanTaskOut.model_validate(item)
        task_id = listed[0]["id"]
        assert (await client.get("/tasks", params={"assignee": "zoe"})).json() == []
        assert (await client.get("/tasks", params={"status": "completed"})).json() == []
        assert len((await client.get("/tasks", params={"status": "all"})).json()) == 1
        bad_query = await client.get("/tasks", params={"status": "done"})
        assert bad_query.status_code == 422

        one = (await client.get(f"/tasks/{task_id}")).json()
        assert (one["form_schema"], one["data"], one["assignees"]) == (
            REFUND_FORM,
            {"order": 7},
            ["ana"],
        )
        missing = await client.get("/tasks/nope")
        assert missing.status_code == 404 and missing.json()["error"] == "TaskNotFoundError"

        path = f"/tasks/{task_id}/complete"
        good = {"approved": True, "reason": "late"}
        wrong = await client.post(path, json={"result": good, "by": "zoe"})
        assert wrong.status_code == 403 and wrong.json()["error"] == "TaskAssignmentError"
        invalid = await client.post(
            path, json={"result": {"approved": 1, "reason": "late"}, "by": "ana"}
        )
        assert invalid.status_code == 422
        [error] = invalid.json()["detail"]
        assert error["loc"] == ["body", "result", "approved"]
        assert "approved" in error["msg"]
        missing_field = await client.post(path, json={"result": {"approved": True}, "by": "ana"})
        assert missing_field.json()["detail"][0]["loc"] == ["body", "result", "reason"]
        typo = await client.post(path, json={"reslut": good})
        assert typo.status_code == 422

        done = await client.post(path, json={"result": good, "by": "ana"})
        assert done.status_code == 200, done.text
        assert (done.json()["status"], done.json()["completed_by"]) == ("completed", "ana")
        HumanTaskOut.model_validate(done.json())
        again = await client.post(path, json={"result": good, "by": "ana"})
        assert again.status_code == 409 and again.json()["error"] == "RunStateError"
    assert await handle.result(timeout=10) == good


# -- from the command line -------------------------------------------------------------------


async def test_race_two_completions_of_one_task_complete_it_once(engine: Engine) -> None:
    @engine.workflow()
    async def once(ctx, _input):
        return await ctx.human_task("once")

    handle = await engine.start("once")
    task = await open_task(engine, handle)
    results = await asyncio.gather(
        engine.complete_task(task.id, "a"),
        engine.complete_task(task.id, "b"),
        return_exceptions=True,
    )
    done = [r for r in results if isinstance(r, HumanTask)]
    refused = [r for r in results if isinstance(r, RunStateError)]
    assert len(done) == 1 and len(refused) == 1, results
    assert await handle.result(timeout=10) == done[0].result


async def test_the_history_and_the_log_name_a_task_wait_as_such(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="parkway")

    @engine.workflow()
    async def named(ctx, _input):
        return await ctx.human_task("review")

    handle = await engine.start("named")
    task = await open_task(engine, handle)
    waits = [(e.kind, e.name, e.status) for e in await engine.history(handle.id)]
    assert ("task", task.id, "pending") in waits
    assert f"parked on task '{task.id}'" in caplog.text
