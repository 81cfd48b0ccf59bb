"""parkway's pytest plugin (registered as the ``parkway`` pytest11 entry point).

Fixtures, for tests of your own workflows (async ones need pytest-asyncio):

- ``parkway_clock``: a :class:`parkway.testing.ManualClock`, moved only by
  ``await parkway_clock.advance("1d")``.
- ``parkway_engine``: an open ``Engine("memory://")`` on that clock, with its
  worker; register workflows on it in the test.
- ``parkway_app``: your application's own engine (named by the ``parkway_app``
  ini option, ``module:attribute``), with the workflows its modules register,
  opened on an empty ``memory://`` store and that clock for the test (see
  :func:`parkway.testing.isolation.isolated`), given back as it was afterwards.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from parkway.engine import Engine
from parkway.testing import ManualClock
from parkway.testing.isolation import isolated

__all__ = ["parkway_app", "parkway_clock", "parkway_engine"]

APP_OPTION = "parkway_app"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        APP_OPTION,
        "module:attribute naming the application's Engine, for the parkway_app fixture",
        default="",
    )


@pytest.fixture
def parkway_clock() -> ManualClock:
    """Engine time for this test, moved only by ``await parkway_clock.advance(...)``."""
    return ManualClock()


def _async_fixture(fn: Callable[..., Any]) -> Any:
    try:
        import pytest_asyncio
    except ImportError:  # (pytest cannot run an async fixture by itself)

        @pytest.fixture(name=fn.__name__)
        def needs_asyncio() -> None:
            raise pytest.UsageError(
                f"the {fn.__name__} fixture is async: pip install pytest-asyncio"
            )

        needs_asyncio.__doc__ = fn.__doc__
        return needs_asyncio
    return pytest_asyncio.fixture(fn)


@_async_fixture
async def parkway_engine(parkway_clock: ManualClock) -> AsyncIterator[Engine]:
    """An open ``memory://`` engine on ``parkway_clock``, with its worker."""
    engine = Engine("memory://", clock=parkway_clock)
    async with engine:
        yield engine


@_async_fixture
async def parkway_app(
    request: pytest.FixtureRequest, parkway_clock: ManualClock
) -> AsyncIterator[Engine]:
    """The application's engine (ini option ``parkway_app``), isolated for this test."""
    async with isolated(app_engine(request.config), clock=parkway_clock) as engine:
        yield engine


def app_engine(config: pytest.Config) -> Engine:
    """The engine the ``parkway_app`` ini option names.

    Raises:
        pytest.UsageError: It is not set, or names no Engine.
    """
    spec = str(config.getini(APP_OPTION) or "").strip()
    if not spec:
        raise pytest.UsageError(
            "the parkway_app fixture needs `parkway_app = module:engine` in the pytest "
            "configuration ([tool.pytest.ini_options] or pytest.ini)"
        )
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise pytest.UsageError(f"parkway_app = {spec!r}: use module:attribute, e.g. myapp:engine")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise pytest.UsageError(
            f"parkway_app = {spec!r}: cannot import {module_name}: {exc}"
        ) from exc
    engine = getattr(module, attribute, None)
    if not isinstance(engine, Engine):
        raise pytest.UsageError(
            f"parkway_app = {spec!r}: {module_name}.{attribute} is "
            f"{'missing' if engine is None else type(engine).__name__}, not a parkway Engine"
        )
    return engine
