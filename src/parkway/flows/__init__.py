"""JSON flows: graphs of nodes (the omega-flow / React Flow shape) run by the durable core.

``engine.add_flow(definition)`` loads and validates a definition
(:mod:`parkway.flows.loader`) and registers one workflow per flow, named by
its id, whose function walks the graph (:mod:`parkway.flows.interpreter`).
Node types are :class:`NodeModel` subclasses (:mod:`parkway.flows.nodes`; the
built-in ones are in :mod:`parkway.flows.builtin`); params are resolved with
:mod:`parkway.flows.templates`, Condition nodes evaluate
:mod:`parkway.flows.conditions`; which events start or resume a flow is
decided by :mod:`parkway.flows.starting`. ``docs/guides/flows.md`` describes it all,
with every known difference from omega-flow.
"""

from parkway.flows.builtin import (
    Action,
    Condition,
    Exit,
    Trigger,
    TriggerOrTimeout,
    Wait,
    default_node_models,
)
from parkway.flows.interpreter import FlowRun, add_flow, register_action
from parkway.flows.loader import Checked, FlowDefinition, check, load
from parkway.flows.nodes import FlowContext, LoadChecks, NodeModel, SubscriptionRequest

__all__ = [
    "Action",
    "Checked",
    "Condition",
    "Exit",
    "FlowContext",
    "FlowDefinition",
    "FlowRun",
    "LoadChecks",
    "NodeModel",
    "SubscriptionRequest",
    "Trigger",
    "TriggerOrTimeout",
    "Wait",
    "add_flow",
    "check",
    "default_node_models",
    "load",
    "register_action",
]
