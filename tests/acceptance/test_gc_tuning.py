"""While a worker runs, the garbage collector's youngest generation is collected
after 10,000 allocations (not CPython's 700), unless the application tuned the
thresholds itself or said no; the last worker to stop puts back what it found."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from parkway import Engine
from parkway.errors import InvalidArgumentError

DEFAULT = (700, 10, 10)
TUNED = (10_000, 10, 10)


@pytest.fixture(autouse=True)
def _thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(*DEFAULT)
    yield
    gc.set_threshold(*before)


def hello(engine: Engine) -> Engine:
    @engine.workflow()
    async def greet(ctx, name):
        return await ctx.step(lambda: f"hi {name}", name="say")

    return engine


async def test_a_worker_tunes_the_default_thresholds_and_puts_them_back() -> None:
    async with hello(Engine("memory://")) as engine:
        assert gc.get_threshold() == TUNED
        assert await (await engine.start("greet", "ada")).result(timeout=10) == "hi ada"
    assert gc.get_threshold() == DEFAULT


async def test_thresholds_an_application_chose_are_its_own() -> None:
    gc.set_threshold(2000, 5, 5)
    async with Engine("memory://"):
        assert gc.get_threshold() == (2000, 5, 5)
    async with Engine("memory://", tune_gc=True):
        assert gc.get_threshold() == TUNED  # (asked for: tuned anyway)
    assert gc.get_threshold() == (2000, 5, 5)


async def test_tune_gc_false_and_a_client_engine_leave_them_alone() -> None:
    async with Engine("memory://", tune_gc=False):
        assert gc.get_threshold() == DEFAULT
    async with Engine("memory://", worker=False):
        assert gc.get_threshold() == DEFAULT


async def test_the_last_worker_to_stop_puts_them_back() -> None:
    first, second = Engine("memory://"), Engine("memory://")
    await first.open()
    await second.open()
    assert gc.get_threshold() == TUNED
    await first.close()
    assert gc.get_threshold() == TUNED  # (the second still runs)
    await second.close()
    assert gc.get_threshold() == DEFAULT


async def test_thresholds_changed_while_it_ran_are_not_undone() -> None:
    async with Engine("memory://"):
        gc.set_threshold(5000, 10, 10)
    assert gc.get_threshold() == (5000, 10, 10)


@pytest.mark.parametrize("bad", ["yes", 1, 0.5])
def test_a_bad_tune_gc_is_refused(bad: object) -> None:
    with pytest.raises(InvalidArgumentError, match="tune_gc must be True, False or None") as info:
        Engine("memory://", tune_gc=bad)  # type: ignore[arg-type]
    assert info.value.field == "tune_gc"
