"""mkdocs hook: the HTTP reference's route table, made from the routes the server serves.

A page holding the line ``<!-- routes -->`` gets, in its place, one row per route of
``parkway.http.routes.ROUTES`` (its method, path, summary, body and answers), so the
reference cannot drift from the code.
"""

from __future__ import annotations

from typing import Any

MARK = "<!-- routes -->"


def _table() -> str:
    from parkway.http.routes import ROUTES

    rows = ["| method | path | what | body | answers |", "|---|---|---|---|---|"]
    for route in ROUTES:
        body = route.body.__name__.removesuffix("In") if route.body else ""
        if route.raw_body:
            body = "any JSON value"
        answers = ", ".join(str(code) for code in [*route.responses, *route.errors])
        summary = route.summary.replace("|", "\\|")
        rows.append(f"| `{route.method}` | `{route.path}` | {summary} | {body} | {answers} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, **_: Any) -> str:
    return markdown.replace(MARK, _table()) if MARK in markdown else markdown
