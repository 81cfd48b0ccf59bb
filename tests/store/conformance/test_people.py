"""Callbacks and human tasks (``tx.callbacks``, ``tx.human_tasks``)."""

from __future__ import annotations

from typing import Any

from parkway.store import Store
from parkway.store.people import CallbackRecord, HumanTaskFilter, token_digest
from tests.store.conformance.support import NOW, human_task, one, run


async def test_a_callback_is_found_by_its_hash_and_keeps_its_outcome(store: Store) -> None:
    record = CallbackRecord(token_digest("secret"), "r1", "\x1fcallback:1", NOW)
    async with store.transaction() as tx:
        await tx.runs.insert(run("r1"))
        await tx.callbacks.add(record)
        await tx.callbacks.add(CallbackRecord(token_digest("secret"), "r2", "other", NOW + 1))
    found = await one(store, lambda tx: tx.callbacks.get(token_digest("secret")), readonly=True)
    assert found == record  # (the second add of one hash changed nothing)
    assert await one(store, lambda tx: tx.callbacks.get("secret")) is None
    await one(store, lambda tx: tx.callbacks.finish(record.token_hash, "failed", b'"no"', NOW + 5))
    done = await one(store, lambda tx: tx.callbacks.get(record.token_hash))
    assert (done.status, done.outcome, done.completed_at) == ("failed", b'"no"', NOW + 5)


async def test_a_human_task_round_trips_every_field_and_finishes_once(store: Store) -> None:
    full = human_task("t1")
    bare = human_task(
        "t2",
        title=None,
        form_schema=None,
        form_model=None,
        data=None,
        assignees="[]",
        due_at=None,
        created_at=NOW + 1,
    )
    await one(store, lambda tx: tx.human_tasks.add([full, bare]))
    await one(store, lambda tx: tx.human_tasks.add([human_task("t1", name="again")]))
    assert await one(store, lambda tx: tx.human_tasks.get("t1"), readonly=True) == full
    assert await one(store, lambda tx: tx.human_tasks.get("t2")) == bare
    assert await one(store, lambda tx: tx.human_tasks.get("t3")) is None

    finish = lambda tx: tx.human_tasks.finish("t1", "completed", NOW + 9, by="ana", result=b"1")  # noqa: E731
    assert await one(store, finish) is True
    assert await one(store, finish) is False  # (no longer open)
    done = await one(store, lambda tx: tx.human_tasks.get("t1"))
    assert (done.status, done.completed_by, done.completed_at, done.result) == (
        "completed",
        "ana",
        NOW + 9,
        b"1",
    )


async def test_human_tasks_are_listed_oldest_first_by_status_assignee_and_workflow(
    store: Store,
) -> None:
    await one(
        store,
        lambda tx: tx.human_tasks.add(
            [
                human_task("a", created_at=NOW, assignees='["ana"]'),
                human_task("b", created_at=NOW + 1, assignees="[]", workflow="other"),
                human_task("c", created_at=NOW + 2, assignees='["ben", "cy"]'),
                human_task("d", created_at=NOW + 3, status="completed"),
            ]
        ),
    )

    async def listed(**options: Any) -> list[str]:
        query = {"status": "open", "assignee": None, "workflow": None, "limit": 10, **options}
        found = await one(
            store, lambda tx: tx.human_tasks.list(HumanTaskFilter(**query)), readonly=True
        )
        return [t.id for t in found]

    assert await listed() == ["a", "b", "c"]
    assert await listed(status=None) == ["a", "b", "c", "d"]
    assert await listed(status="completed") == ["d"]
    assert await listed(assignee="ana") == ["a", "b"]
    assert await listed(assignee="cy") == ["b", "c"]
    assert await listed(assignee="an") == ["b"]  # (a name, not a prefix)
    assert await listed(workflow="other") == ["b"]
    assert await listed(limit=2) == ["a", "b"]


async def test_a_runs_end_cancels_only_its_open_tasks_and_deletion_removes_all(
    store: Store,
) -> None:
    async with store.transaction() as tx:
        for run_id in ("r1", "r2"):
            await tx.runs.insert(run(run_id))
        await tx.human_tasks.add(
            [
                human_task("open1"),
                human_task("done1", status="completed"),
                human_task("other", run_id="r2"),
            ]
        )
        await tx.callbacks.add(CallbackRecord(token_digest("t"), "r1", "s", NOW))
    await one(store, lambda tx: tx.human_tasks.close_run("r1", NOW + 5))
    async with store.transaction(readonly=True) as tx:
        closed = await tx.human_tasks.get("open1")
        assert closed is not None and (closed.status, closed.completed_at) == ("cancelled", NOW + 5)
        assert (await tx.human_tasks.get("done1")).status == "completed"  # type: ignore[union-attr]
        assert (await tx.human_tasks.get("other")).status == "open"  # type: ignore[union-attr]
    await one(store, lambda tx: tx.runs.delete(["r1"]))
    async with store.transaction(readonly=True) as tx:
        assert await tx.human_tasks.get("open1") is None
        assert await tx.human_tasks.get("done1") is None
        assert await tx.callbacks.get(token_digest("t")) is None
        assert await tx.human_tasks.get("other") is not None
