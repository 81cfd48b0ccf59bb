"""An application's own engine, run in a test on a store of its own."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from parkway.clock import Clock
from parkway.engine import Engine
from parkway.errors import InvalidArgumentError


@contextlib.asynccontextmanager
async def isolated(
    engine: Engine, *, clock: Clock | None = None, url: str = "memory://"
) -> AsyncIterator[Engine]:
    """Open ``engine`` (an application's module-level one, with the workflows its
    modules registered) on a fresh ``url`` store (by default an empty
    ``memory://``) with its worker and ``clock`` (a :class:`ManualClock`, say),
    then close it and give it back its own URL, clock and worker setting.

    The application's code keeps calling the very engine it imported, so a test
    drives it as production does, without a database or real time::

        from myapp import engine

        async with isolated(engine, clock=ManualClock()) as engine:
            handle = await engine.start("reminder")

    Raises:
        InvalidArgumentError: ``engine`` is open (its owner must close it first).
    """
    if engine.is_open:
        raise InvalidArgumentError(
            "isolated() needs the engine closed: it opens it on a store of its own"
        )
    url_before, clock_before, worker_before = engine.url, engine.clock, engine.run_worker
    engine.configure(url=url, worker=True, clock=clock)
    try:
        await engine.open()
        yield engine
    finally:
        try:
            await engine.close(grace=5)
        finally:
            engine.configure(url=url_before, worker=worker_before, clock=clock_before)
