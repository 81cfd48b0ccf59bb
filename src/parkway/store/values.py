"""A transaction's run values (``ctx.set_value``; ``tx.values``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol


class Values(Protocol):
    """Run values inside one transaction."""

    async def put(self, run_id: str, values: Mapping[str, bytes], at: float) -> None:
        """Set the run's values (``ctx.set_value``), replacing those of the same keys."""
        ...

    async def of_runs(self, run_ids: Sequence[str]) -> dict[str, dict[str, bytes]]:
        """The values of each of ``run_ids`` that has any, by key."""
        ...
