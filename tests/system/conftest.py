"""Fixtures of the system tests (processes, servers, browsers)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import Served, served_app

CHROMIUM = os.environ.get("PARKWAY_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium driven by Playwright, or a skip that says what is missing."""
    if not (os.path.isfile(CHROMIUM) or shutil.which(CHROMIUM)):
        pytest.skip(
            f"no Chromium at {CHROMIUM} (apt-get install chromium, or set PARKWAY_TEST_CHROMIUM)"
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed: pip install playwright"
    )
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[Any]:
    started: list[Served] = []
    served_app(tmp_path)

    def start(*args: str, env: dict[str, str] | None = None) -> Served:
        server = Served(tmp_path, "approvals:engine", *args, env=env)
        started.append(server)
        server.wait_ready()
        return server

    yield start
    for server in started:
        assert server.stop() == 0, server.stderr
        assert "Traceback" not in server.stderr, server.stderr
