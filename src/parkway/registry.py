"""Registered workflows: names, versions, how their input is validated, and the
checks of ``@engine.workflow``'s options (:func:`define`)."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from parkway import limits
from parkway.admission import Concurrency, RateLimit
from parkway.durations import Duration, to_seconds
from parkway.errors import (
    DuplicateWorkflowError,
    InvalidArgumentError,
    InvalidInputError,
    InvalidWorkflowError,
    UnknownWorkflowError,
    shown,
)
from parkway.events import Batch, CancelOn, Debounce
from parkway.matching import check_match
from parkway.settings import retention_seconds

# Internal workflows (accumulators) are named "parkway.<kind>:<workflow>".
INTERNAL_PREFIX = "parkway."

# @engine.workflow(retention=...) not given: the engine's retention applies.
ENGINE_RETENTION: Any = object()

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


def define(
    fn: WorkflowFn,
    *,
    name: str | None = None,
    version: str = "1",
    on_event: Any = None,
    on_message: Any = None,
    debounce: Any = None,
    batch: Any = None,
    validate_input: Any = None,
    unique_per_subject: Any = False,
    cancel_on: Any = None,
    concurrency: Any = None,
    rate_limit: Any = None,
    priority: Any = None,
    retention: Any = ENGINE_RETENTION,
    timeout: Any = None,
) -> WorkflowDef:
    """The workflow ``fn`` as ``@engine.workflow(...)`` registers it, its options
    checked (see :meth:`parkway.Engine.workflow` for what each means).

    Raises:
        InvalidWorkflowError: An option is malformed (``field`` names it).
        InvalidDurationError: A duration is malformed.
        InvalidArgumentError: ``retention`` or ``timeout`` is zero.
        InvalidInputError: The workflow's name is malformed.
    """
    wf_name = limits.name(
        name if name is not None else getattr(fn, "__name__", None), "workflow name", field="name"
    )
    wf_version = _option_name(version, "version", wf_name, "a version string")
    if isinstance(on_event, str):
        events: tuple[str, ...] = (_option_name(on_event, "on_event", wf_name),)
    elif on_event is None or isinstance(on_event, list | tuple):
        events = tuple(_option_name(e, "on_event", wf_name) for e in on_event or ())
    else:
        raise InvalidWorkflowError(
            f"on_event of workflow {shown(wf_name)} must be an event name or a list "
            f"of them, got {type(on_event).__name__} {shown(on_event)}",
            field="on_event",
        )
    message_name = None if on_message is None else _option_name(on_message, "on_message", wf_name)
    if not isinstance(unique_per_subject, bool):
        raise InvalidWorkflowError(
            f"unique_per_subject of workflow {shown(wf_name)} must be True or False, "
            f"got {shown(unique_per_subject)}",
            field="unique_per_subject",
        )
    own_retention = retention is not ENGINE_RETENTION
    kept = retention_seconds(retention, "retention") if own_retention else None
    deb, bat = _accumulation(debounce, batch, wf_name)
    if (deb or bat) and not events:
        raise InvalidWorkflowError(
            f"workflow {shown(wf_name)} has debounce/batch but no on_event to feed it"
        )
    if validate_input is not None and not callable(validate_input):
        raise InvalidWorkflowError(
            f"validate_input of {shown(wf_name)} must be callable", field="validate_input"
        )
    _check_admission(wf_name, concurrency, rate_limit, priority)
    run_timeout = check_timeout(timeout)
    return WorkflowDef(
        name=wf_name,
        version=wf_version,
        fn=fn,
        validate_input=validate_input,
        on_event=events,
        on_message=message_name,
        debounce=deb,
        batch=bat,
        unique_per_subject=unique_per_subject,
        model=input_model(fn) if callable(fn) else None,
        cancel_on=_cancel_conditions(cancel_on, wf_name),
        concurrency=concurrency,
        rate_limit=rate_limit,
        priority=priority,
        retention=kept,
        own_retention=own_retention,
        timeout=run_timeout,
    )


def check_timeout(value: Duration | None, field: str = "timeout") -> float | None:
    """A run timeout in seconds (``None``: none), a workflow's or a start's; it must
    be longer than zero.

    Raises:
        InvalidDurationError: ``value`` is not a duration.
        InvalidArgumentError: It is zero.
    """
    if value is None:
        return None
    seconds = to_seconds(value, field)
    if seconds <= 0:
        raise InvalidArgumentError(
            f"{field} must be longer than zero, got {shown(value)}", field=field
        )
    return seconds


def _option_name(value: Any, option: str, workflow: str, what: str = "a name") -> str:
    """An option of ``@engine.workflow`` that holds a name (an event's, a message's,
    the version): held to the limits of names, the error naming the option."""
    try:
        return limits.name(value, option, field=option)
    except InvalidInputError as exc:
        detail = str(exc).removeprefix("invalid input: ")
        raise InvalidWorkflowError(
            f"{option} of workflow {shown(workflow)} must be {what}: {detail}", field=option
        ) from None


def _accumulation(debounce: Any, batch: Any, name: str) -> tuple[Debounce | None, Batch | None]:
    """The ``debounce``/``batch`` options of workflow ``name``."""
    if debounce is not None and batch is not None:
        raise InvalidWorkflowError(
            f"workflow {shown(name)} declares both debounce and batch; they are mutually exclusive"
        )
    if debounce is not None:
        if not isinstance(debounce, Debounce):
            debounce = Debounce(window=debounce)
        to_seconds(debounce.window, f"debounce window of {shown(name)}")
        if debounce.max_wait is not None:
            to_seconds(debounce.max_wait, f"debounce max_wait of {shown(name)}")
        _check_key(debounce.key, name)
    if batch is not None:
        if not isinstance(batch, Batch):
            raise InvalidWorkflowError(
                f"batch of workflow {shown(name)} must be a parkway.Batch, got {shown(batch)}"
            )
        size = batch.max_size
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise InvalidWorkflowError(
                f"batch max_size of {shown(name)} must be a whole number >= 1, got {shown(size)}"
            )
        to_seconds(batch.within, f"batch within of {shown(name)}")
        _check_key(batch.key, name)
    return debounce, batch


def _check_key(key: Any, name: str) -> None:
    if key is not None and (not isinstance(key, str) or not key):
        raise InvalidWorkflowError(
            f"the key of {shown(name)} must be a payload field name, got {shown(key)}"
        )


def _cancel_conditions(cancel_on: Any, workflow: str) -> tuple[CancelOn, ...]:
    """The ``cancel_on`` option of ``workflow``."""
    if cancel_on is None:
        return ()
    items = [cancel_on] if isinstance(cancel_on, CancelOn) else cancel_on
    if not isinstance(items, list | tuple):
        raise InvalidWorkflowError(
            f"cancel_on of workflow {shown(workflow)} must be a list of parkway.CancelOn, "
            f"got {shown(cancel_on)}",
            field="cancel_on",
        )
    for index, item in enumerate(items):
        where = f"cancel_on[{index}] of workflow {shown(workflow)}"
        if not isinstance(item, CancelOn):
            raise InvalidWorkflowError(
                f"{where} must be a parkway.CancelOn, got {shown(item)}",
                field=f"cancel_on[{index}]",
            )
        if not isinstance(item.event, str) or not item.event.strip():
            raise InvalidWorkflowError(
                f"{where}: the event must be a name, got {shown(item.event)}",
                field=f"cancel_on[{index}].event",
            )
        if not callable(item.match):
            check_match(item.match)
        if item.subject is not None and (not isinstance(item.subject, str) or not item.subject):
            raise InvalidWorkflowError(
                f"{where}: subject must be a subject, '*' or None, got {shown(item.subject)}",
                field=f"cancel_on[{index}].subject",
            )
    return tuple(items)


def _check_admission(name: str, concurrency: Any, rate_limit: Any, priority: Any) -> None:
    """The admission options of ``@engine.workflow``."""
    if concurrency is not None and not isinstance(concurrency, Concurrency):
        raise InvalidWorkflowError(
            f"concurrency of workflow {shown(name)} must be a parkway.Concurrency, got "
            f"{shown(concurrency)}",
            field="concurrency",
        )
    if rate_limit is not None and not isinstance(rate_limit, RateLimit):
        raise InvalidWorkflowError(
            f"rate_limit of workflow {shown(name)} must be a parkway.RateLimit, got "
            f"{shown(rate_limit)}",
            field="rate_limit",
        )
    if priority is not None and not callable(priority):
        raise InvalidWorkflowError(
            f"priority of workflow {shown(name)} must be a callable input -> int, got "
            f"{shown(priority)}",
            field="priority",
        )
