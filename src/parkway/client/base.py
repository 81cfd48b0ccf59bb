"""What every client operation of the engine stands on: its runtime, and edge checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parkway import _json, limits
from parkway.core.runtime import Runtime
from parkway.errors import (
    EngineClosedError,
    InvalidArgumentError,
    InvalidInputError,
    SerializationError,
    shown,
)
from parkway.ids import new_id
from parkway.models import RunStatus
from parkway.registry import WorkflowDef


class Facade:
    """The state the engine's client operations share (see :class:`parkway.Engine`)."""

    _rt: Runtime
    run_worker: bool
    _client: bool

    @property
    def is_open(self) -> bool:
        """Whether the engine is open (between ``open()`` and ``close()``)."""
        raise NotImplementedError

    def _require_open(self) -> None:
        if not self.is_open:
            raise EngineClosedError()


def name_of(workflow: str | Callable[..., Any]) -> str:
    if isinstance(workflow, str):
        return limits.name(workflow, "workflow name", field="workflow")
    name = getattr(workflow, "__parkway_workflow__", None)
    if isinstance(name, str):
        return name
    raise InvalidArgumentError(
        f"{shown(workflow)} is neither a workflow name nor a registered workflow"
    )


def check_id(run_id: str | None) -> str:
    """A run id a caller gives (a new random one for ``None``)."""
    return new_id() if run_id is None else limits.identifier(run_id)


def encode_input(wf: WorkflowDef, value: Any) -> bytes:
    checked = wf.check_input(value)
    try:
        return _json.dumps(checked, f"the input of workflow {shown(wf.name)}")
    except SerializationError as exc:
        raise InvalidInputError(str(exc), workflow=wf.name, field=exc.path) from exc


def status_value(status: RunStatus | str | None) -> str | None:
    if status is None:
        return None
    try:
        return RunStatus(status).value
    except Exception:  # (ValueError; or what a hostile __eq__ or __repr__ raises inside enum)
        valid = ", ".join(s.value for s in RunStatus)
        raise InvalidArgumentError(
            f"unknown run status {shown(status)}; use one of: {valid}"
        ) from None
