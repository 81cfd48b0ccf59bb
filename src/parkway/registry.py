"""Registered workflows: names, versions, and how their input is validated."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from parkway import limits
from parkway.errors import (
    DuplicateWorkflowError,
    InvalidInputError,
    InvalidWorkflowError,
    UnknownWorkflowError,
    shown,
)

# Internal workflows (accumulators) are named "parkway.<kind>:<workflow>".
INTERNAL_PREFIX = "parkway."

if TYPE_CHECKING:
    from parkway.events import Event
    from parkway.store.base import Tx

WorkflowFn = Callable[..., typing.Awaitable[Any]]
# Decides in the publish transaction whether an event starts a run: returns the
# run id to use, or None to start nothing (JSON flows: one run per subject).
StartRule = Callable[["Tx", "Event", float], typing.Awaitable[str | None]]
# Takes, in the publish transaction, waits of the workflow's runs that the event
# resumes although the subscription index does not list them there (JSON flows:
# a wait on another subject also hears its own subject); returns each taken
# wait's (run id, wait), as the publish reports it.
ResumeRule = Callable[["Tx", "Event", float], typing.Awaitable[list[tuple[str, str]]]]


@dataclass
class WorkflowDef:
    """One registered workflow version."""

    name: str
    version: str
    fn: WorkflowFn
    validate_input: Callable[[Any], Any] | None = None
    on_event: tuple[str, ...] = ()
    # Started by every event (a JSON flow whose start trigger names no event).
    on_any_event: bool = False
    on_message: str | None = None
    debounce: Any = None
    batch: Any = None
    unique_per_subject: bool = False
    internal: bool = False
    model: Any = field(default=None, repr=False)
    start_rule: StartRule | None = field(default=None, repr=False)
    # Events that cancel a run while it is active (parkway.CancelOn).
    cancel_on: tuple[Any, ...] = ()
    resume_rule: ResumeRule | None = field(default=None, repr=False)
    # Admission (parkway.admission.Concurrency / RateLimit), and the priority of
    # the runs an event or a message starts (a callable input -> int; None: 0).
    concurrency: Any = None
    rate_limit: Any = None
    priority: Callable[[Any], int] | None = field(default=None, repr=False)
    # ``@engine.workflow(retention=...)``: how long its finished runs are kept, in
    # seconds (``None``: for ever), when ``own_retention``; else the engine's.
    retention: float | None = None
    own_retention: bool = False
    # ``@engine.workflow(timeout=...)``: a run still active this long (seconds) after
    # its start fails with RunTimeoutError (``engine.start(timeout=)`` overrides it).
    timeout: float | None = None

    def check_input(self, value: Any) -> Any:
        """Validate ``value`` for a new run; return what is stored as the run's input.

        Raises:
            InvalidInputError: The validator or the annotated model rejected it.
        """
        if self.validate_input is not None:
            try:
                value = self.validate_input(value)
            except InvalidInputError:
                raise
            except Exception as exc:
                raise InvalidInputError(
                    _describe(exc), workflow=self.name, field=_field_of(exc)
                ) from exc
        if self.model is not None:
            value = _dump(self.model_validate(value))
        return _dump(value)

    def model_validate(self, value: Any) -> Any:
        """Turn stored input into what the workflow function expects."""
        if self.model is None:
            return value
        model: Any = self.model
        try:
            if hasattr(model, "model_validate"):
                return model.model_validate(value)
            if isinstance(model, type) and dataclasses.is_dataclass(model):
                if isinstance(value, model):
                    return value
                if not isinstance(value, dict):
                    raise TypeError(f"expected an object with fields of {model.__name__}")
                return model(**value)
        except InvalidInputError:
            raise
        except Exception as exc:
            raise InvalidInputError(
                _describe(exc), workflow=self.name, field=_field_of(exc)
            ) from exc
        return value


def _dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _describe(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):  # pydantic.ValidationError: name each field at fault
        try:
            parts = [
                f"{'.'.join(str(p) for p in e.get('loc', ())) or '$'}: {e.get('msg')}"
                for e in errors()
            ]
            return "; ".join(parts)
        except Exception:  # pragma: no cover - defensive, fall back to str()
            pass
    return str(exc) or type(exc).__name__


def _field_of(exc: Exception) -> str | None:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            first = errors()[0]
            return ".".join(str(p) for p in first.get("loc", ())) or None
        except Exception:  # pragma: no cover
            return None
    return None


def input_model(fn: WorkflowFn) -> Any:
    """The pydantic model or dataclass annotated on the workflow's input parameter."""
    params = list(inspect.signature(fn).parameters.values())
    if len(params) < 2:
        return None
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        return None
    hint = hints.get(params[1].name)
    if isinstance(hint, type) and (
        hasattr(hint, "model_validate") or dataclasses.is_dataclass(hint)
    ):
        return hint
    return None


# The version of a run started by a client that does not register its workflow
# (``parkway start`` without ``--app``): the worker that first runs it pins the
# latest version it has. Registered versions are never empty.
LATEST = ""


class Registry:
    """Workflows by name and version; the last registered version is the one started."""

    def __init__(self) -> None:
        self._by_name: dict[str, dict[str, WorkflowDef]] = {}
        self._latest: dict[str, str] = {}
        self._subscribers: dict[str, list[str]] = {}
        self._any_event: list[str] = []  # names of workflows with on_any_event
        self._rank: dict[str, int] = {}  # registration order of names
        self.changes = 0  # registrations so far: what a worker serves changed

    def add(self, wf: WorkflowDef) -> None:
        if not isinstance(wf.name, str) or not wf.name:
            raise InvalidWorkflowError(
                f"workflow name must be a non-empty string, got {shown(wf.name)}"
            )
        if wf.name.startswith(INTERNAL_PREFIX) and not wf.internal:
            raise InvalidWorkflowError(
                f"workflow name {shown(wf.name)}: names starting with {shown(INTERNAL_PREFIX)} are "
                "reserved for parkway's own runs"
            )
        try:  # (a NUL fits SQLite's text, not PostgreSQL's: refused here, on every store)
            limits.name(wf.version, "workflow version", field="version")
        except InvalidInputError as exc:
            raise InvalidWorkflowError(
                str(exc).removeprefix("invalid input: "), field="version"
            ) from None
        if not inspect.iscoroutinefunction(wf.fn):
            raise InvalidWorkflowError(
                f"workflow {shown(wf.name)} must be an `async def` function taking (ctx, input); "
                "plain functions are welcome as steps"
            )
        versions = self._by_name.setdefault(wf.name, {})
        if wf.version in versions:
            raise DuplicateWorkflowError(wf.name, wf.version)
        versions[wf.version] = wf
        self._latest[wf.name] = wf.version
        self.changes += 1
        self._rank.setdefault(wf.name, len(self._rank))
        if wf.on_any_event and wf.name not in self._any_event:
            self._any_event.append(wf.name)
        for event_name in wf.on_event:
            names = self._subscribers.setdefault(event_name, [])
            if wf.name not in names:
                names.append(wf.name)

    def message_starter(self, message_name: str) -> WorkflowDef | None:
        """The workflow started by messages called ``message_name`` (first registered)."""
        for name in self._latest:
            wf = self.latest(name)
            if wf.on_message == message_name:
                return wf
        return None

    def subscribers(self, event_name: str) -> list[WorkflowDef]:
        """Latest versions of the workflows started by ``event_name``, in registration order."""
        names = self._subscribers.get(event_name, [])
        if self._any_event:
            names = sorted({*names, *self._any_event}, key=self._rank.__getitem__)
        out = []
        for name in names:
            wf = self.latest(name)
            if event_name in wf.on_event or wf.on_any_event:
                out.append(wf)
        return out

    def latest(self, name: str) -> WorkflowDef:
        if name not in self._latest:
            raise UnknownWorkflowError(name, self.names())
        return self._by_name[name][self._latest[name]]

    def get(self, name: str, version: str) -> WorkflowDef | None:
        """That version, or (``LATEST``) the latest registered; ``None`` if unknown."""
        if version == LATEST:
            return self.latest(name) if name in self._latest else None
        return self._by_name.get(name, {}).get(version)

    def served(self) -> dict[str, list[str]]:
        """Every registered workflow's versions, ``{name: [versions]}`` (what a worker
        of this registry serves; parkway's own workflows included)."""
        return {name: sorted(versions) for name, versions in self._by_name.items()}

    def names(self, *, internal: bool = False) -> list[str]:
        return [n for n in self._latest if internal or not self.latest(n).internal]

    def all(self) -> list[WorkflowDef]:
        return [wf for versions in self._by_name.values() for wf in versions.values()]
