"""The ``ctx``'s callbacks for third parties and tasks for people."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from parkway import _json, forms, limits
from parkway.durations import Duration, to_seconds
from parkway.errors import CallbackFailedError, InvalidArgumentError, shown
from parkway.replay.commands import PersonCmd
from parkway.replay.context_base import ContextBase, SideValues


class Callback:
    """A callback made by ``ctx.callback()``: hand ``token`` or ``url`` to a third
    party (in a step), then ``await cb.wait()``.

    Attributes:
        token: The capability that completes it: 256 random bits, URL-safe. Whoever
            holds it can complete or fail the callback, once; keep it out of logs.
        url: ``{public_url}/callbacks/{token}`` when the engine has a public URL
            (``Engine(public_url=...)`` or ``PARKWAY_PUBLIC_URL``), else ``None``.
    """

    def __init__(
        self, token: str, url: str | None, signal: str, deadline: float | None, sides: SideValues
    ) -> None:
        self.token, self.url = token, url
        self._signal, self._deadline, self._sides = signal, deadline, sides

    async def wait(self) -> Any:
        """Park until the callback is completed; return its value.

        A completion that came before the wait is kept, and taken at once. Usable
        inside ``ctx.first`` (say, the callback or a day passes). A callback is
        completed once: wait for it once (keep the value).

        Raises:
            CallbackFailedError: It was failed (``engine.fail_callback``).
            WaitTimeoutError: ``ctx.callback``'s ``timeout`` passed first.
        """
        timeout = None
        if self._deadline is not None:
            # (Live, the time left now; on replay the wait's journaled deadline rules.)
            timeout = max(0.0, self._deadline - self._sides.clock_now())
        command = PersonCmd(self._signal, timeout, what="cb.wait()", convert=_callback_value)
        return _callback_value(await command)

    def __repr__(self) -> str:
        # (The token is a capability: not in a repr that may reach a log.)
        return "Callback(token=<hidden>, url=<hidden>)" if self.url else "Callback(token=<hidden>)"


def _callback_value(payload: Any) -> Any:
    """The value a callback's signal carries, or its failure raised."""
    if isinstance(payload, dict) and "error" in payload:
        raise CallbackFailedError(str(payload["error"]))
    return payload.get("value") if isinstance(payload, dict) else payload


class People(ContextBase):
    """``ctx.callback`` and ``ctx.human_task``."""

    def callback(self, *, timeout: Duration | None = None) -> Callback:
        """A callback for a third party (a payment provider, a webhook) to complete.

        The token is made once and journaled: the same on every replay. Hand
        ``cb.url`` or ``cb.token`` over in a step (its row is committed before any
        step runs), then ``value = await cb.wait()``. Completed by
        ``engine.complete_callback(token, value)`` or ``POST /callbacks/{token}``
        (no API token needed: the token is the capability), failed by
        ``engine.fail_callback`` or ``POST /callbacks/{token}/fail``.

        Args:
            timeout: How long the callback may take from now; ``cb.wait()`` raises
                :class:`WaitTimeoutError` once it has passed.
        """
        seconds = None if timeout is None else to_seconds(timeout, "timeout")
        made = self._sides.open_callback(seconds)
        url = None if self._public_url is None else f"{self._public_url}/callbacks/{made['token']}"
        return Callback(made["token"], url, made["signal"], made["deadline"], self._sides)

    async def human_task(
        self,
        name: str,
        *,
        title: str | None = None,
        form: Any = None,
        data: Any = None,
        assignees: Any = (),
        timeout: Duration | None = None,
    ) -> Any:
        """Park until a person completes a task; return what they submitted.

        The task is listed by ``engine.tasks()``, ``GET /tasks`` and the dashboard's
        inbox, and completed by ``engine.complete_task``. Usable inside ``ctx.first``.

        Args:
            name: What the task is, for lists and filters (``"approve-refund"``).
            title: A line for the person (``None``: lists show the name).
            form: A pydantic model class (the result is an instance of it, rebuilt
                on replay from the journaled data), a JSON Schema of an object (the
                result is the checked dict), or ``None`` (any JSON).
            data: JSON shown to the person with the form.
            assignees: Who may complete it (names, as ``by=`` gives them); empty:
                anyone.
            timeout: How long the task stays open; then it expires and this raises.

        Raises:
            WaitTimeoutError: ``timeout`` passed first (the task is ``expired``).
            InvalidArgumentError: A malformed argument (the message names it).
        """
        name = limits.name(name, "human task name")
        if title is not None:
            title = limits.text(title, "human task title", field="title", max_length=1000)
        schema, model = forms.schema_of(form)
        people = _assignees(assignees)
        _json.dumps(data, "the data of a human task")
        seconds = None if timeout is None else to_seconds(timeout, "timeout")
        spec = {
            "name": name,
            "title": title,
            "form_schema": schema,
            "form_model": model,
            "data": data,
            "assignees": people,
            "timeout": seconds,
        }
        made = self._sides.open_task(spec)
        convert = _task_result(form if forms.is_model(form) else None)
        command = PersonCmd(
            made["signal"],
            seconds,
            what=f"human_task({shown(name)})",
            task=made["id"],
            convert=convert,
        )
        return convert(await command)


def _assignees(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        raise InvalidArgumentError(
            f"assignees must be a list or tuple of names, got {type(value).__name__} "
            f"{shown(value)}; one assignee is assignees=({shown(value)},)",
            field="assignees",
        )
    return tuple(
        limits.name(person, "assignee", field=f"assignees[{index}]")
        for index, person in enumerate(value)
    )


def _task_result(model: Any) -> Callable[[Any], Any]:
    """What a task's signal carries, made the task's result."""

    def convert(payload: Any) -> Any:
        result = payload.get("result") if isinstance(payload, dict) else payload
        return result if model is None else model.model_validate(result)

    return convert
