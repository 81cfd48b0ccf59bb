"""Errors in what a caller gave parkway: arguments, inputs, definitions, and
using an engine in a way it cannot serve."""

from __future__ import annotations

from parkway.errors.base import ParkwayError
from parkway.errors.text import shown


class InvalidDurationError(ParkwayError, ValueError):
    """A duration could not be understood."""

    def __init__(
        self, value: object, field: str = "duration", *, detail: str | None = None
    ) -> None:
        text = shown(value)
        super().__init__(
            f"{field}: {text} {detail}"
            if detail
            else f"{field}: {text} is not a duration; use a timedelta, a number of seconds, "
            'or a string such as "250ms", "10s", "1m", "2h", "1d" or "1w"'
        )
        self.value, self.field = value, field


class InvalidInputError(ParkwayError, ValueError):
    """The input given to a workflow was rejected."""

    def __init__(self, message: str, *, workflow: str | None = None, field: str | None = None):
        prefix = (
            f"invalid input for workflow {shown(workflow)}: " if workflow else "invalid input: "
        )
        super().__init__(prefix + message)
        self.workflow, self.field = workflow, field


class InvalidArgumentError(InvalidInputError):
    """An argument of a parkway call is malformed (the message names it).

    Attributes:
        field: The argument or field at fault, when one is named.
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        ParkwayError.__init__(self, message)
        self.workflow, self.field = None, field


class InvalidEventError(InvalidArgumentError):
    """An event's name, id, domain or subject is malformed."""


class InvalidMessageError(InvalidArgumentError):
    """A message's name, key or message id is malformed."""


class InvalidWorkflowError(InvalidArgumentError):
    """A workflow's registration options are malformed (``@engine.workflow(...)``)."""


class EngineClosedError(ParkwayError):
    """The engine is not open: it was never opened, or it was closed."""

    def __init__(self) -> None:
        super().__init__(
            "the engine is not open; use `async with engine:` or `await engine.open()` first"
        )


class WorkflowUsageError(ParkwayError):
    """A workflow used ``ctx`` in a way replay cannot follow (the message says how to mend it)."""


class SerializationError(ParkwayError, TypeError):
    """A value that must be stored is not JSON-serialisable."""

    def __init__(self, what: str, path: str, detail: str) -> None:
        super().__init__(
            f"{what} is not JSON-serialisable at {path}: {detail}; "
            "pass plain dicts, lists, strings, numbers, booleans or None"
        )
        self.what, self.path = what, path


class UnknownWorkflowError(ParkwayError, LookupError):
    """No workflow is registered under this name."""

    def __init__(self, name: str, known: list[str]) -> None:
        hint = ", ".join(sorted(known)) or "none"
        super().__init__(
            f"no workflow named {shown(name)} is registered (registered: {hint}); "
            "decorate it with @engine.workflow() before starting it"
        )
        self.name = name


class DuplicateWorkflowError(ParkwayError, ValueError):
    """A workflow with this name and version is already registered."""

    def __init__(self, name: str, version: str) -> None:
        super().__init__(
            f"workflow {shown(name)} version {shown(version)} is already registered; "
            "give the new one another name, or another version= to run both side by side"
        )
        self.name, self.version = name, version


class FlowDefinitionError(ParkwayError, ValueError):
    """A JSON flow definition is malformed."""


class MissingExtraError(ParkwayError, ImportError):
    """A feature needs an optional extra of parkway that is not installed.

    Also an :class:`ImportError`, so that ``except ImportError`` around an
    optional import keeps working.

    Attributes:
        extra: The extra to install (``pip install 'parkway[<extra>]'``).
        feature: What needs it (``"the PostgreSQL store"``, ``"parkway.http"``).
        missing: The module that could not be imported.
    """

    def __init__(self, extra: str, feature: str, missing: str) -> None:
        ParkwayError.__init__(
            self,
            f"{feature} needs the {shown(extra)} extra ({missing} is not installed): "
            f"pip install 'parkway[{extra}]'",
        )
        self.extra, self.feature, self.missing = extra, feature, missing
        self.name = missing


class MetricsDisabledError(ParkwayError):
    """This engine does not count metrics: give it ``metrics=True`` (or a
    prometheus_client ``CollectorRegistry``), with the ``metrics`` extra installed
    (pip install 'parkway[metrics]')."""


class InvalidScheduleError(InvalidArgumentError):
    """A schedule is malformed: its cron expression, time zone, catch-up, input, or
    the workflow it names (``field`` says which); nothing was written.

    Attributes:
        field: ``"cron"``, ``"timezone"``, ``"catch_up"``, ``"input"``, ``"workflow"``
            or ``"id"``.
    """

    def __init__(self, message: str, field: str) -> None:
        super().__init__(f"invalid schedule: {message}", field=field)
