"""A poison step stops only its own run: not its worker, nor the other runs.

A step that raises ``SystemExit`` (a library calling ``sys.exit()``),
``KeyboardInterrupt``, another ``BaseException``, or an exception that cannot be
described fails its attempt like any exception: retried under its ``Retry``,
then a ``StepFailedError`` into the workflow. The worker goes on, in this process
(the ``engine`` fixture, every backend) and as a ``parkway worker`` subprocess
(``tests/apps/poison_app.py``, on the stores processes share: in
tests/system/test_poison_steps.py). A step whose result the
store refuses fails its run with a ``StoreError`` after a few tries of the
commit, its side effect done once; and a worker whose ``def`` steps sleep for
minutes stops on SIGTERM within its grace period.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import sqlite3
from pathlib import Path
from types import ModuleType

import pytest

from parkway import Engine, RunStatus, StoreError, WorkflowFailedError
from parkway.errors import StoreFailedError
from tests.helpers import APPS

KINDS = ["SystemExit", "KeyboardInterrupt", "GeneratorExit", "Custom", "Unprintable"]


def _load_app() -> ModuleType:
    # By path, so the test does not depend on pytest's import mode.
    spec = importlib.util.spec_from_file_location("parkway_poison_app", APPS / "poison_app.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


poison_app = _load_app()


def attempts(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


async def poison_fails(engine: Engine, run_id: str, kind: str) -> WorkflowFailedError:
    """The poison run's failure, which must name the step and what it raised."""
    with pytest.raises(WorkflowFailedError) as failed:
        await engine.handle(run_id).result(timeout=30)
    error = failed.value
    assert error.type == "StepFailedError", error
    assert f"failed after {poison_app.ATTEMPTS} attempt(s): {kind}" in error.error_message
    return error


# -- in this process, every backend ------------------------------------------------------------


@pytest.mark.parametrize("is_async", [False, True], ids=["def", "async"])
@pytest.mark.parametrize("kind", KINDS)
async def test_a_step_raising_a_base_exception_fails_its_run_and_the_worker_goes_on(
    engine: Engine, tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str, is_async: bool
) -> None:
    caplog.set_level(logging.INFO)
    poison_app.register(engine)
    log = tmp_path / "steps.log"
    poison = await engine.start(
        "poison", {"kind": kind, "async": is_async, "log": str(log)}, id="poison"
    )
    fine = [await engine.start("fine", {"x": x, "log": str(log)}) for x in range(3)]

    await poison_fails(engine, poison.id, kind)
    assert [await h.result(timeout=30) for h in fine] == [0, 2, 4]
    assert attempts(log).count(f"poison {kind}") == poison_app.ATTEMPTS  # retried, then no more
    # The worker lives: a run started now completes too.
    later = await engine.start("fine", {"x": 5})
    assert await later.result(timeout=30) == 10
    assert (await poison.info()).status == RunStatus.FAILED
    # Every log line could be made (an exception whose str() raises included).
    for record in caplog.records:
        record.getMessage()
    failed_lines = [r.getMessage() for r in caplog.records if "attempt 2 failed" in r.getMessage()]
    assert failed_lines and kind in failed_lines[0]


async def test_an_exception_that_cannot_be_described_is_recorded_by_its_type(
    engine: Engine,
) -> None:
    poison_app.register(engine)
    handle = await engine.start("poison", {"kind": "Unprintable", "async": False})
    error = await poison_fails(engine, handle.id, "Unprintable")
    assert error.error_message.endswith("Unprintable: Unprintable")
    # (Its failed attempts stand before it, as entries of kind "attempt".)
    [entry] = [e for e in await engine.history(handle.id) if e.kind != "attempt"]
    assert (entry.kind, entry.status) == ("step", "error")
    assert entry.error is not None and entry.error.message.endswith("Unprintable: Unprintable")


async def test_an_error_message_no_store_can_encode_is_recorded_escaped(engine: Engine) -> None:
    def garbled() -> None:
        raise ValueError("bad byte \udcff from a decoder")

    @engine.workflow()
    async def decodes(ctx, _input):
        await ctx.step(garbled)

    handle = await engine.start("decodes")
    with pytest.raises(WorkflowFailedError) as failed:
        await handle.result(timeout=30)
    assert failed.value.error_message.endswith("ValueError: bad byte \\udcff from a decoder")
    [entry] = [e for e in await engine.history(handle.id) if e.kind != "attempt"]
    assert entry.status == "error"


# -- a worker process -----------------------------------------------------------------------------


# -- results the store refuses -------------------------------------------------------------------


def refuse_journal_entries(url: str, name: str) -> None:
    """Make the store refuse, every time, the journal entry of an operation named
    ``name``: a trigger of the test's database, as a column refuses a value that does
    not fit it (which values reach the store at all is the edge's business)."""
    if url.startswith("sqlite:"):
        with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as db:
            db.execute(
                f"CREATE TRIGGER refuse_{name} BEFORE INSERT ON journal "
                f"WHEN NEW.name = '{name}' BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
            db.commit()
        return
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute(
            "CREATE FUNCTION parkway.refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'refused %', NEW.name; END $$"
        )
        db.execute(
            "CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON parkway.journal FOR EACH ROW "
            f"WHEN (NEW.name = '{name}') EXECUTE FUNCTION parkway.refuse()"
        )


@pytest.mark.requires("persistent")
@pytest.mark.parametrize("then", ["ends", "steps again"])
async def test_a_step_whose_result_the_store_refuses_fails_its_run_once(
    engine: Engine, engine_url: str, clock, then: str
) -> None:
    effects: list[str] = []
    after: list[str] = []

    def charge() -> str:
        effects.append("charged")
        return "receipt"

    def ship() -> str:
        after.append("shipped")
        return "shipped"

    @engine.workflow()
    async def order(ctx, _input):
        receipt = await ctx.step(charge, name="unstorable")
        if then == "ends":  # (refused in the final commit)
            return receipt
        return await ctx.step(ship)  # (refused in the commit before this step)

    refuse_journal_entries(engine_url, "unstorable")
    handle = await engine.start("order")
    with pytest.raises(WorkflowFailedError) as failed:
        await handle.result(timeout=30)
    assert failed.value.type == "StoreFailedError"
    assert issubclass(StoreFailedError, StoreError)
    assert "refused to save what the run decided, 3 times" in failed.value.error_message
    # Its side effect ran once: the commit was tried again, never the step.
    assert (effects, after) == (["charged"], [])
    # And it stays failed: nothing retries it later.
    await clock.advance(60)
    await engine.idle()
    assert (await handle.info()).status == RunStatus.FAILED
    assert effects == ["charged"]
    assert [e.kind for e in await engine.history(handle.id)] == []
