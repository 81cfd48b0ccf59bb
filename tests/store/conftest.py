"""Fixtures of the store suites."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from parkway.store import Store, open_store


@pytest.fixture
async def store(engine_url: str) -> AsyncIterator[Store]:
    """An open, empty store of the backend under test."""
    opened = open_store(engine_url)
    await opened.open()
    yield opened
    await opened.close()
