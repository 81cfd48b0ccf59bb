"""Flows in omega-flow's shape run as omega-flow runs them (docs/guides/flows.md).

Each test's flow is written here from omega-flow's documented node semantics
(its engine tests, guides and builder helpers use the same shapes: numeric node
ids, ``data.label``, Actions without a handler, unprefixed condition facts,
``{"all": [...]}`` conditions); each docstring names the omega-flow behaviour
it reproduces. Everything goes through the public API, on every backend.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from parkway import Engine, FlowDefinitionError, NodeModel, RunStatus, default_node_models

ONBOARDING = Path(__file__).parents[2] / "examples" / "flows" / "onboarding.json"
T0_MS = 1_893_456_000_000  # tests/conftest.py's T0, 2030-01-01 UTC, in epoch milliseconds


def node(node_id: str, node_type: str, **data: Any) -> dict[str, Any]:
    """A node as omega-flow's editor saves it (with the position it ignores)."""
    return {"id": node_id, "type": node_type, "data": data, "position": {"x": 0, "y": 0}}


def edge(source: str, target: str, handle: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": f"e{source}-{target}", "source": source, "target": target}
    if handle is not None:
        out["sourceHandle"] = handle
    return out


def workflow(flow_id: str, nodes: list[Any], edges: list[Any], **options: Any) -> dict[str, Any]:
    return {"id": flow_id, "flow": {"nodes": nodes, "edges": edges}, "options": options}


def rules(*conditions: dict[str, Any], operator: str = "all") -> dict[str, Any]:
    return {"groups": [{"operator": operator, "conditions": list(conditions)}]}


def fact(name: str, operator: str, value: Any) -> dict[str, Any]:
    return {"fact": name, "operator": operator, "value": value}


class Recorder:
    """Named action handlers that record the params they were called with."""

    def __init__(self, engine: Engine, *names: str) -> None:
        self.calls: list[tuple[str, dict[str, Any], Any]] = []
        for name in names:
            engine.action(name)(self._handler(name))

    def _handler(self, name: str) -> Any:
        def handler(params: dict[str, Any], context: Any) -> Any:
            self.calls.append((name, params, context))
            return None

        return handler

    def params(self, name: str) -> list[dict[str, Any]]:
        """The params of each call of ``name``."""
        return [params for called, params, _ in self.calls if called == name]


async def finished(engine: Engine, run_id: str) -> Any:
    await engine.idle()
    info = await engine.get_run(run_id)
    assert info.status == RunStatus.COMPLETED, info
    return info.output


def run_id(flow_id: str, subject: str) -> str:
    return f"flow:{flow_id}:default:{subject}"


# -- Action ------------------------------------------------------------------------------------


def same_event(conditions: dict[str, Any]) -> dict[str, Any]:
    """1 Trigger("start") -> 2 Action -> 3 Condition -> true: 4 Exit / false: 5 Exit."""
    return workflow(
        "dyn-1",
        [
            node("1", "Trigger", params={"event": "start"}),
            node("2", "Action", name="fetch",
                 params={"x": "{{event.x}}", "label": "item-{{event.x}}"}),
            node("3", "Condition", conditions=conditions),
            node("4", "Exit"),
            node("5", "Exit"),
        ],
        [edge("1", "2"), edge("2", "3"), edge("3", "4", "true"), edge("3", "5", "false")],
    )  # fmt: skip


async def test_an_action_without_a_handler_keeps_its_resolved_params(engine: Engine) -> None:
    """omega-flow's Action runs no code: it resolves data.params (typed) into its state's
    resolvedParams, which a Condition later in the same event's chain reads by node id."""
    engine.add_flow(
        same_event(
            rules(
                fact("state.2.resolvedParams.x", "equal", 7),
                fact("state.2.resolvedParams.label", "equal", "item-7"),
            )
        )
    )
    await engine.publish("start", {"x": 7}, subject="a")
    await engine.publish("start", {"x": 8}, subject="b")
    assert (await finished(engine, run_id("dyn-1", "a")))["last_node"] == "4"
    assert (await finished(engine, run_id("dyn-1", "b")))["last_node"] == "5"
    history = await engine.history(run_id("dyn-1", "a"))
    assert [e.kind for e in history] == []  # no step: nothing ran


async def test_node_names_are_not_state_references(engine: Engine) -> None:
    """omega-flow binds state by node id only; data.name ("fetch") is display-only, so
    state.fetch... resolves to nothing there. parkway refuses it at load, naming the field."""
    with pytest.raises(FlowDefinitionError) as caught:
        engine.add_flow(same_event(rules(fact("state.fetch.resolvedParams.x", "equal", 7))))
    message = str(caught.value)
    assert "'3'" in message and "data.conditions.groups[0].conditions[0].fact" in message
    assert "state.fetch names no node" in message


async def test_an_action_without_params_has_no_resolved_params(engine: Engine) -> None:
    """omega-flow sets resolvedParams only when the Action has data.params (an editor Action
    with an empty action name runs nothing either)."""
    seen = Recorder(engine, "inspect")
    engine.add_flow(
        workflow(
            "bare",
            [
                node("1", "Trigger", params={"event": "go"}),
                node("2", "Action", label="Action label"),
                node("3", "Action", action="", params={}),
                node("4", "Action", action="inspect", params={
                    "two": "{{state.2}}", "three": "{{state.3.resolvedParams}}"}),
            ],
            [edge("1", "2"), edge("2", "3"), edge("3", "4")],
        )
    )  # fmt: skip
    await engine.publish("go", {}, subject="s")
    await finished(engine, run_id("bare", "s"))
    assert seen.params("inspect") == [{"two": None, "three": {}}]


@pytest.mark.requires("persistent")
async def test_a_named_action_keeps_its_return_value_and_its_resolved_params(
    make_engine: Any,
) -> None:
    """omega-flow's cross-event dynamic values: state written on the first event (the
    Action's resolvedParams), the trigger's data, the current event with and without
    prefix, and a rule value that is a template, read on the second event after the
    context went through the store. A named Action's state.<id> is its handler's
    return value, and state.<id>.resolvedParams still reaches its resolved params."""

    def definition() -> dict[str, Any]:
        return workflow(
            "dyn-2",
            [
                node("1", "Trigger", params={"event": "start"}),
                node("2", "Action", action="fetchData",
                     params={"sku": "{{event.sku}}", "price": "{{event.price}}"}),
                node("3", "Trigger", name="resume", params={"event": "next"}),
                node("4", "Condition", conditions=rules(
                    fact("state.2.resolvedParams.price", "greaterThan", 40),
                    fact("state.2.stock", "equal", 3),
                    fact("trigger.sku", "equal", "X1"),
                    fact("event.kind", "equal", "gold"),
                    fact("kind", "equal", "gold"),
                    fact("event.price", "equal", "{{state.2.resolvedParams.price}}"),
                )),
                node("5", "Exit"),
                node("6", "Exit"),
            ],
            [edge("1", "2"), edge("2", "3"), edge("3", "4"), edge("4", "5", "true"),
             edge("4", "6", "false")],
        )  # fmt: skip

    def fetch_data(params: dict[str, Any], context: Any) -> dict[str, Any]:
        return {"stock": 3}

    first = await make_engine()
    first.action("fetchData")(fetch_data)
    first.add_flow(definition())
    for subject in ("gold", "silver"):
        await first.publish("start", {"sku": "X1", "price": 42}, subject=subject)
    await first.idle()
    assert (await first.get_run(run_id("dyn-2", "gold"))).status == RunStatus.PARKED
    await first.close()

    second = await make_engine()
    second.action("fetchData")(fetch_data)
    second.add_flow(json.dumps(definition()))
    await second.publish("next", {"kind": "gold", "price": 42}, subject="gold")
    await second.publish("next", {"kind": "silver", "price": 42}, subject="silver")
    gold = await finished(second, run_id("dyn-2", "gold"))
    assert gold == {"last_node": "5", "state": {"2": {"stock": 3}}}
    assert (await finished(second, run_id("dyn-2", "silver")))["last_node"] == "6"


# -- start nodes -------------------------------------------------------------------------------


async def test_a_trigger_without_an_event_starts_on_any_event(engine: Engine) -> None:
    """A start node is the node no edge leads to; a Trigger that names no event starts
    the flow on any event of its domain (once per subject: one_time)."""
    seen = Recorder(engine, "hello")
    engine.add_flow(
        workflow(
            "1",
            [node("1", "Trigger", label="Node 1"), node("2", "Action", action="hello",
                                                         params={"got": "{{trigger.n}}"})],
            [edge("1", "2")],
        )
    )  # fmt: skip
    first = await engine.publish("anything", {"n": 1}, subject="a")
    assert first.started == [run_id("1", "a")]
    assert (await engine.publish("else", {"n": 2}, subject="a")).started == []
    assert (await engine.publish("else", {"n": 3}, subject="b")).started == [run_id("1", "b")]
    assert (await engine.publish("else", {"n": 4}, subject="c", domain="shop")).started == []
    await engine.idle()
    assert sorted(p["got"] for p in seen.params("hello")) == [1, 3]


async def test_a_trigger_or_timeout_starts_the_flow_on_its_event(engine: Engine) -> None:
    """omega-flow's TriggerOrTimeout as the start node: an event that is not its event
    starts nothing; its event starts the flow, which leaves by the trigger handle."""
    seen = Recorder(engine, "on_trigger", "on_timeout")
    engine.add_flow(
        workflow(
            "1",
            [
                node("1", "TriggerOrTimeout", label="Sample Trigger",
                     params={"duration": 10, "event": "sample"}),
                node("2", "Action", action="on_trigger", params={"how": "{{state.1.resolvedBy}}"}),
                node("3", "Exit", label="Trigger Exit"),
                node("4", "Action", action="on_timeout"),
                node("5", "Exit", label="Timeout Exit"),
            ],
            [edge("1", "2", "trigger"), edge("2", "3"), edge("1", "4", "timeout"),
             edge("4", "5")],
        )
    )  # fmt: skip
    assert (await engine.publish("other", {"user_id": 1}, subject="u1")).started == []
    assert (await engine.publish("sample", {}, subject="u1")).started == [run_id("1", "u1")]
    assert (await finished(engine, run_id("1", "u1")))["last_node"] == "3"
    assert seen.params("on_trigger") == [{"how": "trigger"}]
    assert seen.params("on_timeout") == []


class StoreTrigger(NodeModel):
    """A custom start node that names its event in params.action (like omega-flow's
    sample server's StoreTrigger), and may name several, comma-separated."""

    starts_flow = True

    def start_events(self) -> tuple[str, ...] | None:
        return tuple(e.strip() for e in str(self.params.get("action", "")).split(","))


async def test_a_custom_start_node_names_the_events_that_start_the_flow(
    make_engine: Any,
) -> None:
    """omega-flow starts a flow when its start node accepts the event, whatever its type:
    a custom start node says which events with NodeModel.start_events()."""
    engine = await make_engine(node_models={**default_node_models, "StoreTrigger": StoreTrigger})
    seen = Recorder(engine, "greet")
    engine.add_flow(
        workflow(
            "store",
            [node("s", "StoreTrigger", params={"action": "store.opened, store.visited"}),
             node("a", "Action", action="greet", params={"event": "{{trigger.name}}"})],
            [edge("s", "a")],
        )
    )  # fmt: skip
    assert (await engine.publish("order.create", {}, subject="1")).started == []
    assert (await engine.publish("store.visited", {}, subject="1")).started == [
        "flow:store:default:1"
    ]
    assert (await engine.publish("store.opened", {}, subject="2")).started == [
        "flow:store:default:2"
    ]
    await engine.idle()
    assert sorted(p["event"] for p in seen.params("greet")) == ["store.opened", "store.visited"]

    bad = workflow("bad", [node("s", "StoreTrigger", params={"action": ""})], [])
    with pytest.raises(FlowDefinitionError, match=r"'s' \(StoreTrigger\): start_events\(\)"):
        engine.add_flow(bad)  # fmt: skip


# -- node state --------------------------------------------------------------------------------


async def test_a_wait_records_when_it_started_and_ended(engine: Engine, clock: Any) -> None:
    """omega-flow's Wait keeps waitStartsAt (when the run reached it) and waitEndsAt (when
    the wait was over: its timeout event's time), in epoch milliseconds."""
    seen = Recorder(engine, "remind")
    engine.add_flow(
        workflow(
            "reminder",
            [node("start", "Trigger", params={"event": "cart.abandoned"}),
             node("pause", "Wait", params={"duration": 5000}),
             node("remind", "Action", action="remind", params={
                 "from": "{{state.pause.waitStartsAt}}", "to": "{{state.pause.waitEndsAt}}"})],
            [edge("start", "pause"), edge("pause", "remind")],
        )
    )  # fmt: skip
    await clock.advance("1s")
    await engine.publish("cart.abandoned", {}, subject="s")
    await engine.idle()
    await clock.advance("5s")
    await finished(engine, run_id("reminder", "s"))
    start = T0_MS + 1000
    assert seen.params("remind") == [{"from": start, "to": start + 5000}]


async def test_a_wait_without_duration_waits_no_time(engine: Engine) -> None:
    """omega-flow's Wait reads params.duration || 0: a Wait without one goes on at once
    (data.params absent or empty alike); options absent means the defaults."""
    seen = Recorder(engine, "after")
    definition = workflow(
        "nowait",
        [node("1", "Trigger", params={"event": "go"}), node("2", "Wait", params={}),
         node("3", "Wait"), node("4", "Action", action="after", params={
             "same": "{{state.2.waitStartsAt}}-{{state.2.waitEndsAt}}"})],
        [edge("1", "2"), edge("2", "3"), edge("3", "4")],
    )  # fmt: skip
    del definition["options"]
    engine.add_flow(definition)
    await engine.publish("go", {}, subject="s")
    await finished(engine, run_id("nowait", "s"))
    assert seen.params("after") == [{"same": f"{T0_MS}-{T0_MS}"}]
    assert (await engine.publish("go", {}, subject="s")).started == []  # one_time by default


def back_in_stock(**match: Any) -> dict[str, Any]:
    """A cross-subject TriggerOrTimeout whose exits meet at a Condition on resolvedBy."""
    return workflow(
        "bis",
        [
            node("start", "Trigger", params={"event": "order.create"}),
            node("wait", "TriggerOrTimeout", params={
                "event": "product.update", "duration": 60_000,
                "match": {"subjectId": "product:{{trigger.product_id}}", **match}}),
            node("how", "Condition", conditions=rules(
                fact("state.wait.resolvedBy", "equal", "trigger"))),
            node("notify", "Action", action="notify", params={
                "stock": "{{event.stock}}", "from": "{{state.wait.waitStartsAt}}",
                "to": "{{state.wait.waitEndsAt}}", "by": "{{state.wait.resolvedBy}}"}),
            node("gave_up", "Action", action="gave_up", params={
                "to": "{{state.wait.waitEndsAt}}", "by": "{{state.wait.resolvedBy}}"}),
        ],
        [edge("start", "wait"), edge("wait", "how", "trigger"), edge("wait", "how", "timeout"),
         edge("how", "notify", "true"), edge("how", "gave_up", "false")],
    )  # fmt: skip


async def test_a_trigger_or_timeout_records_how_it_was_resolved(engine: Engine, clock: Any) -> None:
    """omega-flow's TriggerOrTimeout (a Wait) keeps waitStartsAt/waitEndsAt and resolvedBy,
    "trigger" or "timeout", which a Condition downstream branches on."""
    seen = Recorder(engine, "notify", "gave_up")
    engine.add_flow(back_in_stock())
    await engine.publish("order.create", {"product_id": 1}, subject="client:1")
    await engine.publish("order.create", {"product_id": 2}, subject="client:2")
    await engine.idle()
    await clock.advance("2s")
    await engine.publish("product.update", {"stock": 4}, subject="product:1")
    await finished(engine, run_id("bis", "client:1"))
    assert seen.params("notify") == [
        {"stock": 4, "from": T0_MS, "to": T0_MS + 2000, "by": "trigger"}
    ]
    await clock.advance("1m")
    await finished(engine, run_id("bis", "client:2"))
    assert seen.params("gave_up") == [{"to": T0_MS + 60_000, "by": "timeout"}]


async def test_a_condition_and_a_later_trigger_record_their_state(engine: Engine) -> None:
    """omega-flow's Condition keeps conditionResult; a trigger that resumed the run keeps
    resolvedBy "trigger" (as TriggerOrTimeout does)."""
    seen = Recorder(engine, "report")
    engine.add_flow(
        workflow(
            "pay",
            [
                node("start", "Trigger", params={"event": "order.create"}),
                node("big", "Condition", conditions=rules(fact("total", "greaterThan", 100))),
                node("paid", "Trigger", params={"event": "payment.received"}),
                node("report", "Action", action="report", params={
                    "big": "{{state.big.conditionResult}}", "paid": "{{state.paid.resolvedBy}}",
                    "text": "big={{state.big.conditionResult}}"}),
            ],
            [edge("start", "big"), edge("big", "paid", "true"), edge("big", "paid", "false"),
             edge("paid", "report")],
        )
    )  # fmt: skip
    await engine.publish("order.create", {"total": 50}, subject="c")
    await engine.idle()
    await engine.publish("payment.received", {}, subject="c")
    await finished(engine, run_id("pay", "c"))
    assert seen.params("report") == [{"big": False, "paid": "trigger", "text": "big=false"}]


# -- conditions --------------------------------------------------------------------------------


async def test_unprefixed_facts_read_the_current_events_data(engine: Engine) -> None:
    """omega-flow's legacy facts: a fact without trigger./event./state. reads the data of the
    event being processed (dotted paths reach nested fields), not the envelope."""
    seen = Recorder(engine, "fallback", "kept")
    engine.add_flow(
        workflow(
            "legacy",
            [
                node("1", "Trigger", label="Sample Trigger", params={"event": "sample"}),
                node("2", "Condition", label="if user_id === 1",
                     conditions=rules(fact("user_id", "equal", 1))),
                node("3", "Action", action="fallback"),
                node("4", "Exit", label="Exit Label"),
            ],
            [edge("1", "2"), edge("2", "4", "true"), edge("2", "3", "false"), edge("3", "4")],
        )
    )  # fmt: skip
    engine.add_flow(
        workflow(
            "current",
            [
                node("1", "Trigger", params={"event": "order.create"}),
                node("2", "Trigger", params={"event": "order.update"}),
                node("3", "Condition", conditions=rules(
                    fact("kind", "equal", "gold"), fact("user.plan", "equal", "pro"),
                    fact("subject", "notEqual", "client:5"),
                    fact("name", "notEqual", "order.update"),
                )),
                node("4", "Action", action="kept"),
            ],
            [edge("1", "2"), edge("2", "3"), edge("3", "4", "true")],
        )
    )  # fmt: skip
    await engine.publish("sample", {"user_id": 1}, subject="one")
    await engine.publish("sample", {"user_id": 2}, subject="two")
    await engine.publish("order.create", {"kind": "silver"}, subject="client:5")
    await engine.idle()
    await engine.publish(
        "order.update", {"kind": "gold", "user": {"plan": "pro"}}, subject="client:5"
    )
    await engine.idle()
    assert [c.subject for name, _, c in seen.calls if name == "fallback"] == ["two"]
    assert len(seen.params("kept")) == 1


async def test_json_rules_engine_conditions(engine: Engine, clock: Any) -> None:
    """omega-flow's guide writes conditions in json-rules-engine's form,
    {"all": [...]} / {"any": [...]}, nested; the onboarding example: sign up, welcome
    e-mail, wait a day, remind those who did not complete their profile."""
    seen = Recorder(engine, "send_welcome_email", "send_reminder_email")
    engine.add_flow(
        workflow(
            "user-onboarding",
            [
                node("trigger-1", "Trigger", params={"event": "user.signup"}),
                node("action-1", "Action", action="send_welcome_email", params={}),
                node("wait-1", "Wait", params={"duration": 86_400_000}),
                node("condition-1", "Condition", conditions={"any": [
                    {"all": [fact("user.completed_profile", "equal", True)]},
                    {"all": [fact("trigger.vip", "equal", True), {"any": []}]},
                ]}),
                node("action-2", "Action", action="send_reminder_email", params={}),
                node("exit-1", "Exit"),
            ],
            [edge("trigger-1", "action-1"), edge("action-1", "wait-1"),
             edge("wait-1", "condition-1"), edge("condition-1", "action-2", "false"),
             edge("condition-1", "exit-1", "true"), edge("action-2", "exit-1")],
            frequency={"type": "one_time"},
        )
    )  # fmt: skip
    await engine.publish("user.signup", {"user": {"completed_profile": True}}, subject="done")
    await engine.publish("user.signup", {"user": {"completed_profile": False}}, subject="todo")
    await engine.publish("user.signup", {"vip": True}, subject="vip")  # any of nothing: false
    await engine.idle()
    assert len(seen.params("send_welcome_email")) == 3
    await clock.advance("1d")
    await engine.idle()
    reminded = sorted(c.subject for name, _, c in seen.calls if name == "send_reminder_email")
    assert reminded == ["todo", "vip"]


async def test_an_empty_all_holds(engine: Engine) -> None:
    """The editor's new Condition is {"all": []}: every rule of none holds, as a group
    {"operator": "all", "conditions": []} does in omega-flow's evaluator."""
    engine.add_flow(
        workflow(
            "empty",
            [node("1", "Trigger", params={"event": "go"}),
             node("2", "Condition", conditions={"all": []}), node("3", "Exit"), node("4", "Exit")],
            [edge("1", "2"), edge("2", "3", "true"), edge("2", "4", "false")],
        )
    )  # fmt: skip
    await engine.publish("go", {}, subject="s")
    assert (await finished(engine, run_id("empty", "s")))["last_node"] == "3"


async def test_equal_and_in_compare_arrays_and_objects_by_value(engine: Engine) -> None:
    """A deliberate difference: omega-flow's equal/in use JavaScript's ===, which compares
    arrays and objects by identity, so two equal arrays never are; parkway compares JSON
    values, so equal arrays and objects are equal (docs/guides/flows.md)."""
    engine.add_flow(
        workflow(
            "arrays",
            [
                node("1", "Trigger", params={"event": "go"}),
                node("2", "Condition", conditions=rules(
                    fact("tags", "equal", ["a", "b"]),
                    fact("tags", "in", [["x"], ["a", "b"]]),
                    fact("address", "equal", {"city": "Berlin"}),
                    fact("pairs", "contains", [1, 2]),
                    fact("tags", "notEqual", ["b", "a"]),
                )),
                node("3", "Exit"), node("4", "Exit"),
            ],
            [edge("1", "2"), edge("2", "3", "true"), edge("2", "4", "false")],
        )
    )  # fmt: skip
    payload = {"tags": ["a", "b"], "address": {"city": "Berlin"}, "pairs": [[1, 2], [3]]}
    await engine.publish("go", payload, subject="s")
    assert (await finished(engine, run_id("arrays", "s")))["last_node"] == "3"


# -- cross-subject waits in the own subject ----------------------------------------------------


async def test_a_cross_subject_wait_is_resumed_from_the_own_subject_too(
    engine: Engine, clock: Any
) -> None:
    """omega-flow routes every event of the instance's subject to its parked node, and a
    match section only adds a subscription: the event arriving in the run's own subject
    resumes a TriggerOrTimeout waiting on another subject, match keys still applying."""
    seen = Recorder(engine, "notify", "gave_up")
    engine.add_flow(back_in_stock(warehouse="{{trigger.warehouse}}"))
    orders = {"client:1": 7, "client:2": 7, "client:3": 8}
    for client, product in orders.items():
        await engine.publish(
            "order.create", {"product_id": product, "warehouse": "north"}, subject=client
        )
    await engine.idle()
    subs = {s.run_id: s.subject for s in await engine.subscriptions()}
    assert subs == {run_id("bis", c): f"product:{p}" for c, p in orders.items()}

    await engine.publish("product.update", {"stock": 1, "warehouse": "south"}, subject="client:1")
    await engine.idle()
    assert (await engine.get_run(run_id("bis", "client:1"))).status == RunStatus.PARKED
    await clock.advance("1s")
    result = await engine.publish(
        "product.update", {"stock": 2, "warehouse": "north"}, subject="client:1"
    )
    assert result.resumed == [run_id("bis", "client:1")]  # reported as any other resume
    await finished(engine, run_id("bis", "client:1"))
    assert [(p["stock"], p["by"], p["to"]) for p in seen.params("notify")] == [
        (2, "trigger", T0_MS + 1000)
    ]
    assert run_id("bis", "client:1") not in {s.run_id for s in await engine.subscriptions()}

    # The other subject still resumes a run waiting on it; a run's own subject only it.
    await engine.publish("product.update", {"stock": 3, "warehouse": "north"}, subject="product:7")
    await finished(engine, run_id("bis", "client:2"))
    assert sorted(p["stock"] for p in seen.params("notify")) == [2, 3]
    await engine.publish("product.update", {"stock": 4, "warehouse": "north"}, subject="client:2")
    await engine.idle()
    assert len(seen.params("notify")) == 2
    await clock.advance("1m")
    await finished(engine, run_id("bis", "client:3"))
    assert [p["by"] for p in seen.params("gave_up")] == ["timeout"]
    late = await engine.publish("product.update", {"warehouse": "north"}, subject="client:3")
    assert late.touched == 0
    await engine.idle()
    assert len(seen.params("notify")) == 2
    assert await engine.subscriptions() == []


async def test_a_wildcard_wait_is_not_taken_twice(engine: Engine) -> None:
    """A match without subjectId listens to every subject of the domain, the own one
    included: the own-subject event resumes the run once."""
    seen = Recorder(engine, "notify", "gave_up")
    definition = back_in_stock()
    definition["flow"]["nodes"][1]["data"]["params"]["match"] = {}
    engine.add_flow(definition)
    await engine.publish("order.create", {"product_id": 7}, subject="client:1")
    await engine.idle()
    result = await engine.publish("product.update", {"stock": 5}, subject="client:1")
    assert result.resumed == [run_id("bis", "client:1")]
    await finished(engine, run_id("bis", "client:1"))
    assert [p["stock"] for p in seen.params("notify")] == [5]


# -- templates ---------------------------------------------------------------------------------


async def test_numbers_interpolate_as_javascript_prints_them(engine: Engine) -> None:
    """omega-flow interpolates with String(value): 42.0 reads "42", 1e21 "1e+21", 1e-7
    "1e-7"; a subject template too ("product:456" from 456.0)."""
    seen = Recorder(engine, "say")
    engine.add_flow(
        workflow(
            "numbers",
            [
                node("1", "Trigger", params={"event": "go"}),
                node("2", "Action", action="say", params={
                    "text": "{{trigger.a}}|{{trigger.b}}|{{trigger.c}}|{{trigger.d}}|{{trigger.e}}",
                    "typed": "{{trigger.a}}"}),
                node("3", "TriggerOrTimeout", params={
                    "event": "product.update", "duration": 1000,
                    "match": {"subjectId": "product:{{trigger.a}}"}}),
                node("4", "Exit"),
            ],
            [edge("1", "2"), edge("2", "3"), edge("3", "4", "trigger"), edge("3", "4", "timeout")],
        )
    )  # fmt: skip
    await engine.publish(
        "go", {"a": 456.0, "b": 1e21, "c": 1e-7, "d": 0.1 + 0.2, "e": -2.5e-3}, subject="s"
    )
    await engine.idle()
    assert seen.params("say") == [
        {"text": "456|1e+21|1e-7|0.30000000000000004|-0.0025", "typed": 456.0}
    ]
    [sub] = await engine.subscriptions()
    assert sub.subject == "product:456"
    assert sub.expires_at == (await engine.get_run(sub.run_id)).created_at + timedelta(
        seconds=1, days=1
    )


# -- the example -------------------------------------------------------------------------------


async def test_the_onboarding_example_runs(engine: Engine, clock: Any) -> None:
    """examples/flows/onboarding.json, saved as omega-flow's editor saves a flow (labels,
    positions, "output" handles, an Action without a handler, an {"all": [...]} condition
    on a legacy fact), runs as omega-flow's guide describes it."""
    seen = Recorder(engine, "send_email")
    engine.add_flow(ONBOARDING)
    await engine.publish("user.signup", {"email": "ann@example.com", "name": "Ann"}, subject="u1")
    await engine.publish("user.signup", {"email": "bo@example.com", "name": "Bo"}, subject="u2")
    await engine.idle()
    assert [p["template"] for p in seen.params("send_email")] == ["welcome", "welcome"]
    await clock.advance("1d")
    await engine.publish("profile.saved", {"completed": False, "percent": 40}, subject="u1")
    await engine.publish("profile.saved", {"completed": True, "percent": 100}, subject="u2")
    output = await finished(engine, "flow:user-onboarding:default:u1")
    assert output == {"last_node": "exit-1", "state": {"action-1": None, "action-2": None}}
    await finished(engine, "flow:user-onboarding:default:u2")
    reminders = [p for p in seen.params("send_email") if p["template"] == "reminder"]
    assert reminders == [
        {
            "template": "reminder",
            "to": "ann@example.com",
            "text": "Hello Ann, your profile is 40% done",
        }
    ]
