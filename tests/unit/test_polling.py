"""The intervals a caller reads again at, for another process's commits."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from parkway.core import polling
from parkway.core.polling import Polls


def store(*capabilities: str) -> Any:
    return SimpleNamespace(capabilities=frozenset(capabilities))


def test_a_shared_store_is_read_again_soon_then_less_often() -> None:
    polls = Polls(store("shared"))
    waits = [polls.next() for _ in range(15)]
    assert waits[0] == polling.FIRST == 0.0005
    assert waits[1] == pytest.approx(0.00075)
    growing = waits[:11]
    assert all(b > a for a, b in itertools.pairwise(growing))
    assert waits[-1] == polling.LAST == 0.05
    # Most answers come within a few milliseconds: four reads in the first 5 ms.
    elapsed, reads = 0.0, 0
    for wait in waits:
        elapsed += wait
        if elapsed > 0.005:
            break
        reads += 1
    assert reads == 4


def test_a_store_that_announces_every_commit_is_read_again_only_as_a_net() -> None:
    polls = Polls(store())
    assert [polls.next() for _ in range(3)] == [0.05, 0.05, 0.05]


def test_the_wait_never_passes_what_remains() -> None:
    polls = Polls(store("shared"))
    assert polls.next(0.0001) == 0.0001
    assert polls.next(1.0) == pytest.approx(0.00075)
