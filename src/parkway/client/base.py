"""What every client operation of the engine stands on: its runtime, and edge checks."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from parkway import _json
from parkway.core.runtime import Runtime
from parkway.errors import (
    EngineClosedError,
    InvalidArgumentError,
    InvalidInputError,
    SerializationError,
)
from parkway.models import RunStatus
from parkway.registry import WorkflowDef


class Facade:
    """The state the engine's client operations share (see :class:`parkway.Engine`)."""

    _rt: Runtime
    run_worker: bool

    @property
    def is_open(self) -> bool:
        """Whether the engine is open (between ``open()`` and ``close()``)."""
        raise NotImplementedError

    def _require_open(self) -> None:
        if not self.is_open:
            raise EngineClosedError()


def name_of(workflow: str | Callable[..., Any]) -> str:
    if isinstance(workflow, str):
        if not workflow:
            raise InvalidArgumentError("workflow name must not be empty")
        return workflow
    name = getattr(workflow, "__parkway_workflow__", None)
    if isinstance(name, str):
        return name
    raise InvalidArgumentError(f"{workflow!r} is neither a workflow name nor a registered workflow")


def check_id(run_id: str | None) -> str:
    if run_id is None:
        return uuid.uuid4().hex
    if not isinstance(run_id, str) or not run_id:
        raise InvalidArgumentError(f"run id must be a non-empty string, got {run_id!r}")
    return run_id


def check_name(name: object, what: str) -> None:
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"{what} must be a non-empty string, got {name!r}")


def check_optional_str(value: object, what: str) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise InvalidArgumentError(f"{what} must be a non-empty string or None, got {value!r}")


def encode_input(wf: WorkflowDef, value: Any) -> bytes:
    checked = wf.check_input(value)
    try:
        return _json.dumps(checked, f"the input of workflow {wf.name!r}")
    except SerializationError as exc:
        raise InvalidInputError(str(exc), workflow=wf.name, field=exc.path) from exc


def status_value(status: RunStatus | str | None) -> str | None:
    if status is None:
        return None
    try:
        return RunStatus(status).value
    except ValueError:
        valid = ", ".join(s.value for s in RunStatus)
        raise InvalidArgumentError(f"unknown run status {status!r}; use one of: {valid}") from None
