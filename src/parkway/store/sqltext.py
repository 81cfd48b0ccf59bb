"""SQL kept as SQL: named statements and fragments, and numbered migrations, read
from the ``.sql`` files beside each backend's package.

Each backend reads its files once, at import, and builds from them every
statement it sends (see ``parkway.store.postgres.statements`` and
``parkway.store.sqlite.statements``): no statement's text is edited after that.
"""

from __future__ import annotations

import re
from importlib import resources


def load_queries(package: str, filename: str) -> dict[str, str]:
    """Parse the ``-- name: x`` sections of ``package``'s file ``filename`` into
    ``{name: text}`` (each text with its leading comment, stripped)."""
    text = resources.files(package).joinpath(filename).read_text("utf-8")
    queries: dict[str, str] = {}
    for block in re.split(r"^-- name: ", text, flags=re.M)[1:]:
        name, _, body = block.partition("\n")
        name = name.strip()
        if name in queries:
            raise ValueError(f"{package}/{filename}: {name!r} is defined twice")
        queries[name] = body.strip()
    return queries


def load_migrations(package: str, folder: str) -> list[tuple[int, str]]:
    """The ``NNN_*.sql`` files of ``package``'s folder ``folder`` as ``[(NNN, script)]``,
    in order."""
    out = []
    for entry in resources.files(package).joinpath(folder).iterdir():
        match = re.match(r"^(\d+)_.*\.sql$", entry.name)
        if match:
            out.append((int(match.group(1)), entry.read_text("utf-8")))
    return sorted(out)


def run_conditions(
    search: str | None,
    created_after: float | None,
    created_before: float | None,
    before: str | None,
) -> tuple[tuple[str, ...], list[object]]:
    """The named conditions of a run listing's optional filters (``runs_search``,
    ``runs_created_after``, ``runs_created_before``, ``runs_before`` in each
    backend's queries.sql) and their parameters, in order."""
    names: list[str] = []
    params: list[object] = []
    if search is not None:
        names.append("runs_search")
        params += [search, search]
    if created_after is not None:
        names.append("runs_created_after")
        params.append(created_after)
    if created_before is not None:
        names.append("runs_created_before")
        params.append(created_before)
    if before is not None:
        names.append("runs_before")
        params.append(before)
    return tuple(names), params
