"""The docs site's shape: a reference entry for every public name, pages within their
length, links that resolve, and no dated benchmark log. (`make docs` and `make test`
build the site with ``mkdocs build --strict``, which fails on a broken link too.)"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

import parkway

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_the_api_reference_has_an_entry_for_every_public_name() -> None:
    api = (DOCS / "reference" / "api.md").read_text("utf-8")
    entries = set(re.findall(r"^::: parkway\.(\S+)$", api, re.M))
    missing = sorted(set(parkway.__all__) - entries)
    assert not missing, f"docs/reference/api.md has no `::: parkway.NAME` for {missing}"


def test_the_cli_reference_is_generated_from_the_commands() -> None:
    cli = (DOCS / "reference" / "cli.md").read_text("utf-8")
    assert "::: mkdocs-click\n    :module: parkway.cli\n    :command: cli" in cli


def test_the_readme_is_short_and_performance_page_condensed() -> None:
    assert len((ROOT / "README.md").read_text("utf-8").splitlines()) <= 200
    assert len((DOCS / "performance.md").read_text("utf-8").splitlines()) <= 300
    assert not (DOCS / "benchmark-results.md").exists()


def test_no_dated_benchmark_log_in_the_readme_or_the_docs() -> None:
    dated = re.compile(r"\b202\d-\d\d-\d\d\b|\bround before\b")
    for page in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        found = dated.search(page.read_text("utf-8"))
        assert found is None, f"{page.relative_to(ROOT)}: {found.group(0)!r}"


def nav_pages(items: list[object]) -> set[str]:
    pages: set[str] = set()
    for item in items:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            pages |= nav_pages(value)
        else:
            pages.add(str(value))
    return pages


def test_every_page_in_the_nav_exists() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text("utf-8"), Loader=yaml.BaseLoader)
    pages = nav_pages(config["nav"])
    assert {"index.md", "tutorial.md", "reference/api.md", "performance.md"} <= pages
    for page in pages:
        assert (DOCS / page).is_file(), page


def test_links_in_the_readme_resolve() -> None:
    # The README is not part of the site, so mkdocs does not check its links.
    readme = (ROOT / "README.md").read_text("utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), target
