"""A client's start, signal, publish or correlate that the store rolls back for a
conflict (a deadlock, on PostgreSQL) is done again, once in effect; any other store
error reaches the caller at once."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from parkway import Engine, RunStatus
from parkway.core import conflicts
from parkway.errors import StoreError


def failing_writes(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, errors: list[StoreError]
) -> list[int]:
    """The engine's write transactions fail with ``errors``, one each, then succeed."""
    store = engine._rt.store
    real = store.transaction
    calls = [0]

    @contextlib.asynccontextmanager
    async def transaction(*, readonly: bool = False) -> AsyncIterator[Any]:
        if not readonly:
            calls[0] += 1
            if errors:
                raise errors.pop(0)
        async with real(readonly=readonly) as tx:
            yield tx

    monkeypatch.setattr(store, "transaction", transaction)
    return calls


@pytest.fixture(autouse=True)
def _no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(conflicts, "FIRST_PAUSE", 0.0)


def register_hello(engine: Engine) -> None:
    @engine.workflow()
    async def hello(ctx: Any, name: str) -> str:
        return f"hi {name}"


async def test_a_start_rolled_back_for_a_conflict_is_done_again(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    register_hello(engine)
    calls = failing_writes(
        engine,
        monkeypatch,
        [StoreError("deadlock", conflict=True), StoreError("again", conflict=True)],
    )
    handle = await engine.start("hello", "ada", id="h1")
    assert calls[0] >= 3  # two rolled back, the third committed
    assert await handle.result(timeout=10) == "hi ada"
    assert (await engine.get_run("h1")).status is RunStatus.COMPLETED


async def test_other_store_errors_and_a_lasting_conflict_reach_the_caller(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    register_hello(engine)
    calls = failing_writes(engine, monkeypatch, [StoreError("the server is gone")])
    with pytest.raises(StoreError, match="the server is gone"):
        await engine.start("hello", "ada", id="h1")
    assert calls[0] == 1  # (not a conflict: not done again)

    lasting = [StoreError("deadlock", conflict=True) for _ in range(conflicts.ATTEMPTS)]
    calls = failing_writes(engine, monkeypatch, lasting)
    with pytest.raises(StoreError, match="deadlock"):
        await engine.start("hello", "ada", id="h2")
    assert calls[0] == conflicts.ATTEMPTS


def test_postgres_deadlocks_and_serialization_failures_are_conflicts() -> None:
    psycopg = pytest.importorskip("psycopg")
    from parkway.store.postgres.failures import failed

    for exc in (
        psycopg.errors.DeadlockDetected("deadlock detected"),
        psycopg.errors.SerializationFailure("could not serialize"),
    ):
        error = failed({}, "db", exc)
        assert isinstance(error, StoreError) and error.conflict and not error.outcome_unknown
    other = failed({}, "db", psycopg.errors.UniqueViolation("duplicate key"))
    assert isinstance(other, StoreError) and not other.conflict


async def test_a_signal_rolled_back_for_a_conflict_is_sent_again_once(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    @engine.workflow()
    async def waiter(ctx: Any, _: Any) -> list[Any]:
        return [await ctx.wait_for_signal("go"), await ctx.wait_for_signal("go")]

    handle = await engine.start("waiter", None, id="w1")
    await engine.idle()
    calls = failing_writes(engine, monkeypatch, [StoreError("deadlock", conflict=True)])
    await engine.signal("w1", "go", 7)
    assert calls[0] >= 2
    await engine.signal("w1", "go", 8)
    # Buffered once: a second copy of the first would have been the second wait's.
    assert await handle.result(timeout=10) == [7, 8]


async def test_a_publish_rolled_back_for_a_conflict_is_done_again_once(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    @engine.workflow()
    async def payer(ctx: Any, _: Any) -> Any:
        return await ctx.wait_for_event("paid", match={"order": 1})

    @engine.workflow(on_event="shipped")
    async def shipper(ctx: Any, payload: Any) -> Any:
        return payload

    handle = await engine.start("payer", None, id="p1")
    await engine.idle()
    # The delivery alone (no subscriber) and the whole transaction (a subscriber).
    calls = failing_writes(engine, monkeypatch, [StoreError("deadlock", conflict=True)])
    paid = await engine.publish("paid", {"order": 1}, id="e1")
    assert calls[0] >= 2 and paid.resumed == ["p1"]
    calls = failing_writes(engine, monkeypatch, [StoreError("deadlock", conflict=True)])
    shipped = await engine.publish("shipped", {"box": 3}, id="e2")
    assert calls[0] >= 2 and len(shipped.started) == 1
    assert await handle.result(timeout=10) == {"order": 1}
    await engine.idle()
    runs = await engine.list_runs(workflow="shipper")
    assert [r.id for r in runs] == shipped.started  # started once
    assert await engine.handle(shipped.started[0]).result(timeout=10) == {"box": 3}


async def test_a_correlate_rolled_back_for_a_conflict_is_done_again_once(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    @engine.workflow()
    async def receiver(ctx: Any, _: Any) -> list[Any]:
        return [await ctx.wait_for_message("score", "k1") for _ in range(2)]

    handle = await engine.start("receiver", None, id="r1")
    await engine.idle()
    calls = failing_writes(engine, monkeypatch, [StoreError("deadlock", conflict=True)])
    delivered = await engine.correlate("score", "k1", 7)
    assert calls[0] >= 2 and (delivered.outcome, delivered.run_id) == ("delivered", "r1")
    await engine.idle()
    # Nobody waits for "k2": buffered, once.
    calls = failing_writes(engine, monkeypatch, [StoreError("deadlock", conflict=True)])
    buffered = await engine.correlate("score", "k2", 1)
    assert calls[0] >= 2 and buffered.outcome == "buffered"
    assert [m.key for m in await engine.messages()] == ["k2"]
    await engine.correlate("score", "k1", 8)
    # Delivered once: a second copy of the first would have been the second wait's.
    assert await handle.result(timeout=10) == [7, 8]
