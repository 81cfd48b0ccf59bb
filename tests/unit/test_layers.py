"""The layers of parkway's code, and the imports between them (docs/ARCHITECTURE.md).

Each module may import only modules of its own layer or of the layers below
it, and no module imports itself back through others (no import cycle). Every
import counts: at the top, inside functions, and under ``TYPE_CHECKING``.

And every dotted path ``parkway.x.y`` the code's docstrings and comments, the
docs and the README name is a module, or an attribute of one: a renamed module
leaves no pointer to where it was.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import parkway

SRC = Path(parkway.__file__).parent

# Lowest first. A module's layer is that of the longest prefix naming it.
LAYERS: list[tuple[str, list[str]]] = [
    (
        "ground",
        [
            "parkway._json",
            "parkway.errors",
            "parkway.durations",
            "parkway.models",
            "parkway.events",
            "parkway.matching",
            "parkway.limits",
            "parkway.ids",
            "parkway.schedules",
            "parkway.admission",
            "parkway.forms",
            "parkway.settings",
        ],
    ),
    ("store", ["parkway.store"]),
    ("definitions", ["parkway.registry", "parkway.clock"]),
    ("replay", ["parkway.replay"]),
    ("core", ["parkway.core"]),
    ("worker", ["parkway.worker"]),
    ("flows", ["parkway.flows"]),
    ("face", ["parkway.client", "parkway.handle", "parkway.engine", "parkway.testing"]),
    ("package", ["parkway"]),
    (
        "tools",
        ["parkway.cli", "parkway.http", "parkway.demo", "parkway.__main__", "parkway.integrations"],
    ),
]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in SRC.rglob("*.py")}


def layer_of(module: str) -> int:
    best, rank = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), index
    assert rank >= 0, f"{module} is in no layer: add it to LAYERS"
    return rank


def imports_of(module: str) -> set[str]:
    """The parkway modules ``module`` imports, wherever the import statement is."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # (``from x import y``: module x.y, or attribute y of x.)
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name.startswith("parkway") and name != module:
                found.add(name)
    return found


GRAPH = {module: imports_of(module) for module in MODULES}


def test_every_module_is_in_a_layer() -> None:
    for module in MODULES:
        layer_of(module)


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = [
        f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
        for module, targets in GRAPH.items()
        for target in sorted(targets)
        if layer_of(target) > layer_of(module)
    ]
    assert upward == []


def test_there_is_no_import_cycle() -> None:
    # Tarjan's strongly connected components: any of more than one module is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in GRAPH[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    assert cycles == []


def test_the_command_line_and_http_api_never_reach_the_store() -> None:
    tools = [m for m in MODULES if layer_of(m) == len(LAYERS) - 1]
    reaching = {
        module: sorted(t for t in GRAPH[module] if t.startswith("parkway.store"))
        for module in tools
    }
    assert {m: t for m, t in reaching.items() if t} == {}


def test_the_check_sees_imports_under_type_checking_and_in_functions() -> None:
    # (The check itself: parkway.flows.interpreter imports the runtime only for types.)
    assert "parkway.core.runtime" in GRAPH["parkway.flows.interpreter"]
    assert "parkway.models" in GRAPH["parkway.store.records"]


# -- dotted paths named in prose ---------------------------------------------------------

ROOT = SRC.parent.parent
# ``parkway.`` then names: not after a word, a dot, a slash or a dash (a URL, a file),
# nor ending in ``*`` (``parkway.replay.context_*`` names a family of modules).
DOTTED = re.compile(r"(?<![\w./-])parkway(?:\.[A-Za-z_]\w*)+(?![\w*]|\.[\w*])")
# Names that look like module paths and are not: loggers, trace spans, objects of
# PostgreSQL's ``parkway`` schema, and the SQLite file the command line defaults to.
NOT_MODULES = {
    "parkway.runs",
    "parkway.access",
    "parkway.operators",
    "parkway.advance",
    "parkway.step",
    "parkway.start",
    "parkway.signal",
    "parkway.publish",
    "parkway.correlate",
    "parkway.update",
    "parkway.commit_marks",
    "parkway.lease_held",
    "parkway.delivered",
    "parkway.db",
}


def prose_of(path: Path) -> Iterator[tuple[int, str]]:
    """A source file's comments and docstrings (every string that is a statement)."""
    text = path.read_text()
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(text, str(path))):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            yield node.lineno, node.value.value


def names_something(dotted: str) -> bool:
    """Whether ``dotted`` is a module, or a module's attribute (what follows that
    attribute, a method or a field, is not looked for)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        name = ".".join(parts[:end])
        try:
            # (Found, not imported: a module behind a missing extra still exists.)
            spec = importlib.util.find_spec(name)
        except ImportError:  # (its parent is no package)
            continue
        if spec is not None:
            return end == len(parts) or hasattr(importlib.import_module(name), parts[end])
    return False


def dangling(texts: Iterator[tuple[str, str]]) -> list[str]:
    return sorted(
        f"{where}: {found}"
        for where, text in texts
        for found in dict.fromkeys(m.group(0) for m in DOTTED.finditer(text))
        if found not in NOT_MODULES and not names_something(found)
    )


def test_module_paths_named_in_docstrings_and_comments_exist() -> None:
    texts = (
        (f"{path.relative_to(ROOT)}:{line}", text)
        for path in sorted(SRC.rglob("*.py"))
        for line, text in prose_of(path)
    )
    assert dangling(texts) == []


def test_module_paths_named_in_the_docs_exist() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    texts = (
        (f"{page.relative_to(ROOT)}:{number}", line)
        for page in pages
        for number, line in enumerate(page.read_text().splitlines(), 1)
    )
    assert dangling(texts) == []


def test_the_path_check_finds_a_module_that_is_gone() -> None:
    found = dangling(iter([("here", "see parkway.core.flow and parkway.errors.Nothing")]))
    assert found == ["here: parkway.core.flow", "here: parkway.errors.Nothing"]
    assert dangling(iter([("here", "parkway.core.admission.admit, parkway.errors.shown")])) == []
    assert dangling(iter([("here", "the parts (parkway.replay.context_*)")])) == []
    assert dangling(iter([("here", "at the end: parkway.core.flow.")])) == [
        "here: parkway.core.flow"
    ]
