"""The house's size limits: no module over 500 lines, no class over 400 lines
(docstrings included), no store protocol over 15 methods, no mixin in the
engine, the replay machine or the stores' transactions."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import parkway
from parkway.engine import Engine
from parkway.replay.machine import Machine
from parkway.store import base

SRC = Path(parkway.__file__).parent
MODULES = sorted(SRC.rglob("*.py"))
MAX_MODULE_LINES = 500
MAX_CLASS_LINES = 400
MAX_PROTOCOL_METHODS = 15


def _name(path: Path) -> str:
    return str(path.relative_to(SRC.parent))


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_module_is_over_500_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{_name(path)} has {lines} lines"


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_class_is_over_400_lines(path: Path) -> None:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            size = (node.end_lineno or node.lineno) - start + 1
            assert size <= MAX_CLASS_LINES, f"{_name(path)}: {node.name} has {size} lines"


def test_every_part_of_a_transaction_is_a_small_protocol() -> None:
    parts = inspect.get_annotations(base.Tx.runs.fget, eval_str=True)  # type: ignore[attr-defined]
    assert parts  # (the property is typed)
    protocols = [
        inspect.get_annotations(getattr(base.Tx, name).fget, eval_str=True)["return"]
        for name, member in vars(base.Tx).items()
        if isinstance(member, property)
    ]
    assert len(protocols) >= 10
    for protocol in [*protocols, base.Store]:
        methods = [
            name
            for name, member in vars(protocol).items()
            if callable(member) and not name.startswith("_")
        ]
        assert len(methods) <= MAX_PROTOCOL_METHODS, f"{protocol.__name__}: {methods}"


@pytest.mark.parametrize("cls", [Engine, Machine], ids=lambda c: c.__name__)
def test_the_engine_and_the_machine_are_composed_not_mixed_in(cls: type) -> None:
    assert cls.__bases__ == (object,), f"{cls.__name__} inherits {cls.__bases__}"


def test_the_stores_transactions_are_composed_not_mixed_in() -> None:
    from parkway.store.memory import tx as memory_tx
    from parkway.store.sqlite import tx as sqlite_tx

    classes = [memory_tx.MemoryTx, sqlite_tx.SQLiteTx]
    try:
        from parkway.store.postgres import tx as postgres_tx
    except ImportError:  # (the postgres extra)
        pass
    else:
        classes.append(postgres_tx.PostgresTx)
    for cls in classes:
        assert cls.__bases__ == (object,), f"{cls.__name__} inherits {cls.__bases__}"
