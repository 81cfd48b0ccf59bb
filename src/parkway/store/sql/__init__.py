"""SQL kept as SQL: named queries and numbered migrations, loaded from package files."""

from __future__ import annotations

import re
from importlib import resources


def load_queries(filename: str) -> dict[str, str]:
    """Parse ``-- name: x`` sections of a ``.sql`` file into ``{name: query}``."""
    text = resources.files(__package__).joinpath(filename).read_text("utf-8")
    queries: dict[str, str] = {}
    for block in re.split(r"^-- name: ", text, flags=re.M)[1:]:
        name, _, body = block.partition("\n")
        queries[name.strip()] = body.strip()
    return queries


def load_migrations(folder: str) -> list[tuple[int, str]]:
    """The ``NNN_*.sql`` files of ``folder`` as ``[(NNN, script)]`` in order."""
    out = []
    for entry in resources.files(__package__).joinpath(folder).iterdir():
        match = re.match(r"^(\d+)_.*\.sql$", entry.name)
        if match:
            out.append((int(match.group(1)), entry.read_text("utf-8")))
    return sorted(out)
