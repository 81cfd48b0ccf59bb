"""The built-in node types, with omega-flow's semantics and node state.

Each node writes its state (read as ``state.<node id>.<field>``) under
omega-flow's field names:

- ``Trigger``: ``resolvedBy: "trigger"`` once its event arrived (or started the run).
- ``TriggerOrTimeout``: ``waitStartsAt``, ``waitEndsAt`` (epoch milliseconds) and
  ``resolvedBy``, ``"trigger"`` or ``"timeout"``.
- ``Wait``: ``waitStartsAt``, ``waitEndsAt``.
- ``Action``: ``resolvedParams``, its params resolved (when it has ``data.params``).
  A named Action's ``state.<node id>`` is its handler's return value; paths past
  it that the return value lacks (``resolvedParams``) read the node state.
- ``Condition``: ``conditionResult``, ``true`` or ``false``.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator
from typing import Any

from parkway.errors import WaitTimeoutError
from parkway.flows import conditions, templates
from parkway.flows.nodes import FlowContext, LoadChecks, NodeModel, NodeRun, SubscriptionRequest

log = logging.getLogger("parkway.flows")

DAY = 86400.0
# A subscription's safety-net lifetime when its wait has no timeout (the engine's default too).
NO_TIMEOUT_TTL = 90 * DAY


def _duration_ms(node: NodeModel, checks: LoadChecks, name: str) -> None:
    value = node.params.get(name)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        problem = f"must be a number of milliseconds >= 0, got {value!r}"
        checks.report(node.fail(f"data.params.{name}", problem))


def _ms(node: NodeModel, name: str) -> float:
    value = node.params.get(name)
    return 0.0 if value is None else float(value)


class Trigger(NodeModel):
    """Start node: the flow starts on ``params.event`` (on any event without one).
    Later in a flow: park until ``params.event`` arrives.

    Later in a flow the event is awaited in the run's own subject, unless
    ``params.match`` is given: ``match.subjectId`` (a template, resolved once,
    when the run parks) names another subject, and a ``match`` without it
    listens to any subject of the domain. With ``match.subjectId`` the event
    arriving in the run's own subject resumes it too, as omega-flow's routing
    offers every event of the subject to the parked node. Other ``match`` keys
    are payload fields the event must equal (templates too).
    """

    starts_flow = True

    def validate(self, checks: LoadChecks) -> None:
        super().validate(checks)
        event = self.params.get("event")
        if event is None:
            if checks.start != self.id:
                checks.report(
                    self.fail(
                        "data.params.event",
                        "is required: the event this node waits for (only a start trigger "
                        "may leave it out, to start on any event)",
                    )
                )
        elif not isinstance(event, str) or not event.strip():
            checks.report(self.fail("data.params.event", f"must be an event name, got {event!r}"))
        self._validate_match(checks)

    def _validate_match(self, checks: LoadChecks) -> None:
        match = self.params.get("match")
        if match is None:
            return
        if not isinstance(match, dict):
            checks.report(
                self.fail("data.params.match", 'must be an object such as {"subjectId": "..."}')
            )
            return
        if checks.start == self.id:
            checks.report(
                self.fail(
                    "data.params.match",
                    "a start trigger cannot subscribe (it has no run yet); use match on a later "
                    "node",
                )
            )
        subject = match.get("subjectId")
        if subject is not None and (not isinstance(subject, str) or not subject):
            checks.report(
                self.fail("data.params.match.subjectId", f"must be a subject, got {subject!r}")
            )

    def own_subject_too(self) -> bool:
        """Whether the event also resumes the run from its own subject: ``match.subjectId``
        names another subject (a wildcard ``match`` covers the own subject already)."""
        match = self.params.get("match")
        return isinstance(match, dict) and match.get("subjectId") is not None

    def timeout(self) -> float | None:
        """Seconds to wait at most (``None``: no timeout)."""
        return None

    def get_subscription(self, context: FlowContext) -> SubscriptionRequest | None:
        """Resolve the subscription. When a template of ``match`` cannot be resolved: the
        event in the run's own subject (with a warning naming the template)."""
        timeout = self.timeout()
        ttl = NO_TIMEOUT_TTL if timeout is None else timeout + DAY
        event: str = self.params["event"]
        match = self.params.get("match")
        if match is None:
            return SubscriptionRequest(event, None, ttl)
        raw_subject = match.get("subjectId")
        extra = {k: v for k, v in match.items() if k != "subjectId"}
        missing = templates.unresolved([raw_subject, extra], context.scope)
        subject = (
            "*" if raw_subject is None else templates.scalar_text(context.resolve(raw_subject))
        )
        if missing or not subject:
            # As omega-flow, which offers every event of the run's own subject to the
            # node it is parked on: those still resume it (by name: the payload fields
            # to match may be what could not be resolved), and its timeout still fires.
            log.warning(
                "flow %r run %s node %r: cannot resolve %s in params.match; waiting for %r "
                "in the run's own subject only%s",
                context.flow_id,
                context.run_id,
                self.id,
                ", ".join(missing) or repr(raw_subject),
                event,
                "" if timeout is None else ", or its timeout",
            )
            return SubscriptionRequest(event, None, ttl)
        return SubscriptionRequest(event, subject, ttl, match=context.resolve(extra) or None)

    async def start(self, run: NodeRun) -> str | None:
        run.update_state(self.id, {"resolvedBy": "trigger"})
        return None

    async def execute(self, run: NodeRun) -> str | None:
        request = self.get_subscription(run.context(self.id))
        if request is None:
            await run.park(self.id, self.timeout())
        else:
            await run.wait_for(request, timeout=self.timeout())
        run.update_state(self.id, {"resolvedBy": "trigger"})
        return None


class TriggerOrTimeout(Trigger):
    """Park until ``params.event`` arrives (leave by ``trigger``) or ``params.duration`` ms
    pass (leave by ``timeout``). ``params.match`` as for :class:`Trigger`. As a start
    node its event starts the flow, which leaves by ``trigger``."""

    required_params = ("event", "duration")
    handles = ("trigger", "timeout")

    def validate(self, checks: LoadChecks) -> None:
        super().validate(checks)
        _duration_ms(self, checks, "duration")

    def timeout(self) -> float | None:
        return _ms(self, "duration") / 1000.0

    async def start(self, run: NodeRun) -> str | None:
        run.update_state(self.id, {"waitEndsAt": run.now_ms(), "resolvedBy": "trigger"})
        return "trigger"

    async def execute(self, run: NodeRun) -> str | None:
        started = run.now_ms()
        run.update_state(self.id, {"waitStartsAt": started})
        try:
            await super().execute(run)
        except WaitTimeoutError:
            # As omega-flow's scheduled timeout event, which carries the wait's due time.
            ended = started + round(_ms(self, "duration"))
            run.update_state(self.id, {"waitEndsAt": ended, "resolvedBy": "timeout"})
            return "timeout"
        run.update_state(self.id, {"waitEndsAt": run.now_ms(), "resolvedBy": "trigger"})
        return "trigger"


class Wait(NodeModel):
    """Park for ``params.duration`` milliseconds (none given: 0, no parking)."""

    def validate(self, checks: LoadChecks) -> None:
        super().validate(checks)
        _duration_ms(self, checks, "duration")

    async def execute(self, run: NodeRun) -> str | None:
        duration = _ms(self, "duration")
        started = run.now_ms()
        run.update_state(self.id, {"waitStartsAt": started})
        await run.ctx.sleep(duration / 1000.0)
        run.update_state(self.id, {"waitEndsAt": started + round(duration)})
        return None


class Action(NodeModel):
    """Resolve ``data.params`` into ``state.<node id>.resolvedParams``; when the node
    names a handler, also call it as a durable step.

    The handler registered with ``@engine.action(name)`` is named by
    ``data.action`` or ``params.action``; it is called as
    ``handler(params, context)`` with the resolved params and a
    :class:`FlowContext`, and its return value becomes ``state.<node id>``. An
    Action naming no handler (neither given, or empty) runs no code, as
    omega-flow's Action.
    """

    def action_field(self) -> tuple[str, Any]:
        """``(field, value)`` of the handler's name (``value`` ``None`` when there is none)."""
        named = self.data.get("action")
        if named is not None and named != "":
            return "data.action", named
        named = self.params.get("action")
        if named is not None and named != "":
            return "data.params.action", named
        return "data.params.action", None

    @property
    def action(self) -> str | None:
        """The handler's name, or ``None``."""
        name: str | None = self.action_field()[1]
        return name

    def validate(self, checks: LoadChecks) -> None:
        super().validate(checks)
        where, name = self.action_field()
        if name is None:
            return
        if not isinstance(name, str):
            checks.report(self.fail(where, f"must name an action handler, got {name!r}"))
        elif checks.actions is not None and name not in checks.actions:
            known = ", ".join(sorted(checks.actions)) or "none"
            checks.report(
                self.fail(
                    where,
                    f"no action handler named {name!r} is registered (registered: {known}); "
                    f"register it with @engine.action({name!r}) before adding the flow",
                )
            )

    async def execute(self, run: NodeRun) -> str | None:
        params = run.resolve(self.params)
        if self.data.get("params") is not None:  # omega-flow: only an Action with params
            run.update_state(self.id, {"resolvedParams": copy.deepcopy(params)})
        name = self.action
        if name is not None:
            run.state[self.id] = await run.call_action(self.id, name, params)
        return None


class Condition(NodeModel):
    """Leave by ``true`` when ``data.conditions`` holds, else by ``false``."""

    handles = ("true", "false")
    groups: tuple[conditions.Group, ...] = ()

    def conditions_field(self) -> tuple[str, Any]:
        """``(field, value)`` of ``data.conditions`` (else of ``params.conditions``)."""
        if "conditions" not in self.data and "conditions" in self.params:
            return "data.params.conditions", self.params["conditions"]
        return "data.conditions", self.data.get("conditions")

    def validate(self, checks: LoadChecks) -> None:
        super().validate(checks)
        where, raw = self.conditions_field()
        if raw is None:
            raise self.fail(where, 'is required: {"groups": [{"operator": "all", ...}]}')
        try:
            self.groups = conditions.parse(raw, where)
        except conditions.ConditionError as exc:
            raise self.fail(exc.field, exc.problem) from None

    def templates(self) -> Iterator[tuple[str, str]]:
        for rule in conditions.rules(self.groups):
            if not rule.legacy:
                yield f"{rule.field}.fact", rule.fact
            yield from templates.walk(rule.value, f"{rule.field}.value")

    async def execute(self, run: NodeRun) -> str | None:
        result = conditions.evaluate(self.groups, run.scope())
        run.update_state(self.id, {"conditionResult": result})
        return "true" if result else "false"


class Exit(NodeModel):
    """End the run."""

    ends_flow = True

    async def execute(self, run: NodeRun) -> str | None:
        return None


default_node_models: dict[str, type[NodeModel]] = {
    "Trigger": Trigger,
    "TriggerOrTimeout": TriggerOrTimeout,
    "Wait": Wait,
    "Action": Action,
    "Condition": Condition,
    "Exit": Exit,
}
"""The built-in node types by name; extend a copy for custom ones."""

__all__ = [
    "Action",
    "Condition",
    "Exit",
    "Trigger",
    "TriggerOrTimeout",
    "Wait",
    "default_node_models",
]
