"""Who did what to a run: an operator's action (a pause, a resume, a cancel, a
retry, an update, a fork) recorded in the run's history as an entry of kind
``operator`` (``action``, ``by``, ``at``) and logged at INFO.

Every control records its entry with :func:`record` in the transaction that acts
on the run, so an entry is there exactly when the action took effect. ``by`` is
free-form: the HTTP API passes the name its API token was configured with, the
command line the OS user. An action nobody put a name to (``by=None``: a call
of the Python API without it, a server that requires no token) is logged, but
leaves the run's history as it was: the journal's entries alone.
"""

from __future__ import annotations

import logging

from parkway import limits
from parkway.core.runtime import Runtime
from parkway.store.base import Tx
from parkway.store.fleet import OperatorRecord

log = logging.getLogger("parkway.operators")

# The history entries' kind.
OPERATOR = "operator"


def checked_by(by: object) -> str | None:
    """``by`` as given, checked at the edge: ``None`` or a short text.

    Raises:
        InvalidInputError: It is not a string, is blank, or is too long (field ``by``).
    """
    if by is None:
        return None
    return limits.name(by, "by (who asked)", field="by")


async def record(rt: Runtime, tx: Tx, run_id: str, action: str, by: str | None) -> None:
    """Record operator ``action`` on run ``run_id`` by ``by`` (unless ``None``), in
    ``tx``, and log it."""
    if by is not None:
        await tx.operators.add(OperatorRecord(run_id, action, by, rt.now()))
    log.info(
        "run %s: %s by %s",
        run_id,
        action,
        by or "(not said)",
        extra={"run_id": run_id, "action": action, "by": by},
    )
