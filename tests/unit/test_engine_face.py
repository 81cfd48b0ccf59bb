"""The engine's face: a class of its own (no mixins) listing the client calls of
parkway.client as methods, and its settings validated in one place."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import parkway
from parkway import Engine, InvalidArgumentError
from parkway.client import base
from parkway.settings import Settings

SRC = Path(parkway.__file__).parent
FACE = [SRC / "engine.py", SRC / "registry.py", SRC / "settings.py", *(SRC / "client").glob("*.py")]


def test_the_engine_inherits_nothing() -> None:
    assert Engine.__bases__ == (object,)


def delegated() -> list[str]:
    return sorted(n for n, m in vars(Engine).items() if hasattr(m, "__wrapped__"))


def test_a_delegated_method_is_the_client_call_less_its_state() -> None:
    engine = Engine("memory://")
    names = delegated()
    assert {"start", "publish", "workflow", "cancel_runs", "events"} <= set(names)
    for name in names:
        call = vars(Engine)[name].__wrapped__
        method = getattr(engine, name)
        first, *rest = inspect.signature(call).parameters.values()
        assert first.annotation == "State", name
        assert list(inspect.signature(method).parameters.values()) == rest, name
        assert inspect.iscoroutinefunction(method) == inspect.iscoroutinefunction(call), name
        assert method.__doc__ == call.__doc__ and method.__name__ == name


def test_a_delegated_method_passes_the_engines_state() -> None:
    seen: list[object] = []

    def call(state: base.State, value: int, *, twice: bool = False) -> int:
        seen.append(state)
        return value * (2 if twice else 1)

    class Face:
        triple = base.delegate(call)

        def __init__(self) -> None:
            self._state = object()

    face = Face()
    assert face.triple(3, twice=True) == 6 and seen == [face._state]


def test_settings_are_checked_as_the_engine_takes_them() -> None:
    assert Settings.of(url="memory://", lease="1m").lease == 60.0
    with pytest.raises(InvalidArgumentError, match="lease must be longer than zero") as info:
        Settings.of(url="memory://", lease=0)
    assert info.value.field == "lease"
    settings = Settings.of(url="memory://")
    with pytest.raises(InvalidArgumentError, match="cached_runs must be a whole number >= 0"):
        settings.changed(cached_runs=-1)
    assert settings.changed(concurrency=3).concurrency == 3 and settings.concurrency == 100


def test_a_url_set_on_the_engine_is_checked() -> None:
    engine = Engine("memory://")
    engine.url = "sqlite:///other.db"
    assert engine.url == "sqlite:///other.db"
    with pytest.raises(InvalidArgumentError, match="url must be a string"):
        engine.url = 42  # type: ignore[assignment]


@pytest.mark.parametrize("path", FACE, ids=lambda p: p.name)
def test_no_face_module_over_500_lines_nor_class_over_400(path: Path) -> None:
    text = path.read_text()
    assert len(text.splitlines()) <= 500
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            assert node.end_lineno is not None
            assert node.end_lineno - node.lineno + 1 <= 400, node.name
