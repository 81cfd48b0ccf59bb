"""Errors of what is sent to runs or found by id: events, messages, callbacks,
human tasks and schedules."""

from __future__ import annotations

from parkway.errors.base import ParkwayError
from parkway.errors.text import shown


class CorrelationError(ParkwayError):
    """A message could not be correlated to any receiver."""


class DuplicateSubscriptionError(ParkwayError):
    """Another run is already waiting for this message name and key."""

    def __init__(self, name: str, key: str, holder: str) -> None:
        super().__init__(
            f"run {holder} already waits for message {shown(name)} with key {shown(key)}; "
            "correlation would be ambiguous"
        )
        self.name, self.key, self.holder = name, key, holder


class RoutingError(ParkwayError):
    """An event could not be routed to a domain and subject."""


class MessageNotFoundError(ParkwayError, LookupError):
    """No buffered message or dead letter has this id."""

    def __init__(self, message_id: object) -> None:
        super().__init__(
            f"no buffered message or dead letter with id {shown(message_id)}; "
            "list them with engine.messages()"
        )
        self.message_id = message_id


class ScheduleNotFoundError(ParkwayError, LookupError):
    """No schedule exists with this id."""

    def __init__(self, schedule_id: str) -> None:
        super().__init__(
            f"no schedule with id {shown(schedule_id)}; list them with engine.schedules() "
            "or `parkway schedules`"
        )
        self.schedule_id = schedule_id


class CallbackFailedError(ParkwayError):
    """The callback was failed (``engine.fail_callback``); raised by ``cb.wait()``.

    Attributes:
        message: The message the failing party gave.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CallbackNotFoundError(ParkwayError, LookupError):
    """No callback has this token (it was never made, or its run was deleted)."""

    def __init__(self) -> None:
        # (The token is a capability: it is never repeated back, not even in an error.)
        super().__init__("no callback has this token; check that the whole token or URL was used")


class TaskNotFoundError(ParkwayError, LookupError):
    """No human task has this id."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"no human task with id {task_id!r}; list them with engine.tasks()")
        self.task_id = task_id


class TaskAssignmentError(ParkwayError):
    """The task is assigned to others than the one completing it.

    Attributes:
        task_id: The task.
        by: Who tried to complete it (``None``: nobody was named).
        assignees: Who may.
    """

    def __init__(self, task_id: str, by: str | None, assignees: tuple[str, ...]) -> None:
        who = "no one named (pass by=)" if by is None else repr(by)
        super().__init__(
            f"human task {task_id!r} is assigned to {', '.join(map(repr, assignees))}; "
            f"{who} may not complete it"
        )
        self.task_id, self.by, self.assignees = task_id, by, assignees
