"""Shared fixtures: every acceptance test runs once per storage backend.

Backends are described by what they can do (``capabilities``), never tested by
name. A test that needs a capability says so with
``@pytest.mark.requires("persistent")``; on a backend without it, the test is
skipped. Adding PostgreSQL later is one more ``Backend`` entry in ``BACKENDS``
(its ``url`` factory can ``pytest.skip`` when no server is configured).

Capabilities used by the suite:

- ``persistent``: data survives closing the engine and opening a new one on the
  same URL (engine restart).
- ``shared``: several engines (processes) may open the same URL at once and see
  each other's writes (a client-only engine plus a worker engine).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import pytest
from hypothesis import settings

from parkway import Engine
from parkway.testing import ManualClock

# `pytest --hypothesis-profile quick` (make check): property tests run a fifth of their
# examples (Hypothesis's default is 100; tests.helpers.examples scales explicit counts).
settings.register_profile("quick", max_examples=20)

# A fixed, round start time makes engine timestamps easy to reason about.
T0 = datetime(2030, 1, 1, tzinfo=UTC)

# The session's temporary files, the worker processes' too (they inherit TMPDIR),
# in a folder of its own removed at the end: the tests kill workers, whose
# wake-up sockets (parkway.store.wakeup) would otherwise stay behind in /tmp.
_SESSION_TMP = tempfile.mkdtemp(prefix="parkway-tests-")
os.environ["TMPDIR"] = _SESSION_TMP
tempfile.tempdir = None  # gettempdir() reads TMPDIR again
atexit.register(shutil.rmtree, _SESSION_TMP, True)


@dataclass(frozen=True)
class Backend:
    """A storage backend under test: how to get a URL for it, and what it can do."""

    name: str
    capabilities: frozenset[str]
    make_url: Callable[[Path], str]

    def supports(self, capability: str) -> bool:
        return capability in self.capabilities


def _memory_url(_tmp: Path) -> str:
    return "memory://"


def _sqlite_url(tmp: Path) -> str:
    return f"sqlite:///{tmp / 'parkway.db'}"


def postgres_harness() -> ModuleType:
    """The module that makes the tests' PostgreSQL databases (tests/store/postgres_db.py),
    loaded once, by path: independent of pytest's import mode and sys.path."""
    import importlib.util
    import sys

    helper = sys.modules.get("parkway_test_postgres_db")
    if helper is None:
        spec = importlib.util.spec_from_file_location(
            "parkway_test_postgres_db", Path(__file__).parent / "store" / "postgres_db.py"
        )
        assert spec is not None and spec.loader is not None
        helper = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(helper)
    return helper


def _postgres_url(_tmp: Path) -> str:
    """A fresh database per test, cloned from a template that holds the schema.

    Server: ``PARKWAY_TEST_POSTGRES_URL`` (default postgres@127.0.0.1:5432/postgres;
    see docs/contributing.md); skips when unreachable, fails instead when ``CI`` is set.
    """
    url: str = postgres_harness().new_database()
    return url


BACKENDS: dict[str, Backend] = {
    "memory": Backend("memory", frozenset(), _memory_url),
    "sqlite": Backend(
        "sqlite",
        frozenset({"persistent", "shared", "group_commit", "reports_own", "loop_bound"}),
        _sqlite_url,
    ),
    "postgres": Backend(
        "postgres",
        frozenset({"persistent", "shared", "push", "cheap_claim", "group_commit", "fused"}),
        _postgres_url,
    ),
}
BACKEND_PARAMS = ["memory", "sqlite", "postgres"]


def selected_backends() -> list[str]:
    """The backends this session runs on: ``PARKWAY_TEST_BACKENDS`` (comma-separated,
    e.g. ``memory,sqlite`` for ``make check``), else every one of ``BACKENDS``."""
    raw = os.environ.get("PARKWAY_TEST_BACKENDS", "")
    names = [name.strip() for name in raw.split(",") if name.strip()]
    unknown = [name for name in names if name not in BACKENDS]
    if unknown:
        raise pytest.UsageError(
            f"PARKWAY_TEST_BACKENDS: no backend {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(BACKENDS)})"
        )
    return names or list(BACKENDS)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "requires(*capabilities): skip unless the backend has every listed capability "
        "(persistent, shared, push, cheap_claim, group_commit, fused, loop_bound)",
    )
    config.addinivalue_line(
        "markers",
        "backends(*names): the test needs one of these backends without taking the "
        "``backend`` fixture (a PostgreSQL-only harness test, say)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the tests of backends ``PARKWAY_TEST_BACKENDS`` leaves out: those
    parametrized with one (``backend``, by default or ``indirect``) and those marked
    ``backends(...)`` with none of the selected ones."""
    selected = set(selected_backends())
    if selected == set(BACKENDS):
        return
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        param = callspec.params.get("backend") if callspec is not None else None
        marker = item.get_closest_marker("backends")
        if (param is not None and param not in selected) or (
            marker is not None and not selected.intersection(marker.args)
        ):
            dropped.append(item)
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(params=BACKEND_PARAMS)
def backend(request: pytest.FixtureRequest) -> Backend:
    """The backend under test; skips the test if it lacks a required capability."""
    spec = BACKENDS[request.param]
    for marker in request.node.iter_markers("requires"):
        missing = [c for c in marker.args if not spec.supports(c)]
        if missing:
            pytest.skip(f"backend {spec.name!r} lacks capability {', '.join(missing)}")
    return spec


@pytest.fixture
def engine_url(backend: Backend, tmp_path: Path) -> str:
    """The store URL of this test. Engines made on it share data if the backend is shared."""
    return backend.make_url(tmp_path)


@pytest.fixture
def t0() -> datetime:
    """Where the test's ManualClock starts."""
    return T0


@pytest.fixture
def clock() -> ManualClock:
    """The engine time of this test, moved only by ``await clock.advance(...)``."""
    return ManualClock(start=T0)


class MakeEngine(Protocol):
    def __call__(
        self,
        *,
        url: str | None = None,
        clock: ManualClock | None = None,
        worker: bool = True,
        open: bool = True,
        **kwargs: Any,
    ) -> Awaitable[Engine]: ...


@pytest.fixture
async def make_engine(
    engine_url: str, clock: ManualClock, request: pytest.FixtureRequest
) -> AsyncIterator[MakeEngine]:
    """Build an Engine on this test's URL with the test's ManualClock, opened by default.

    Every engine made is closed at teardown (closing an already closed engine is
    a no-op), newest first. A test marked ``replays`` gets engines that keep no
    parked run in memory: each resume replays the journal.
    """
    made: list[Engine] = []
    if request.node.get_closest_marker("replays") is not None:
        defaults: dict[str, Any] = {"cached_runs": 0}
    else:
        defaults = {}

    async def factory(
        *,
        url: str | None = None,
        clock: ManualClock | None = clock,
        worker: bool = True,
        open: bool = True,
        **kwargs: Any,
    ) -> Engine:
        engine = Engine(url or engine_url, clock=clock, worker=worker, **{**defaults, **kwargs})
        made.append(engine)
        if open:
            await engine.open()
        return engine

    yield factory
    for engine in reversed(made):
        await engine.close(grace=5)


@pytest.fixture
async def engine(make_engine: MakeEngine) -> Engine:
    """An open engine with an in-process worker and the test's ManualClock."""
    return await make_engine()
