"""JSON flows: graphs of nodes (the omega-flow / React Flow shape) run by the durable core.

``engine.add_flow(definition)`` loads and validates a definition
(:mod:`parkway.flows.loader`) and registers one workflow per flow, named by
its id, whose function walks the graph (:mod:`parkway.flows.interpreter`).
Node types are :class:`NodeModel` subclasses (:mod:`parkway.flows.nodes`);
params are resolved with :mod:`parkway.flows.templates`, Condition nodes
evaluate :mod:`parkway.flows.conditions`.
"""

from parkway.flows.interpreter import FlowRun, add_flow, register_action
from parkway.flows.loader import FlowDefinition, load
from parkway.flows.nodes import (
    Action,
    Condition,
    Exit,
    FlowContext,
    LoadChecks,
    NodeModel,
    SubscriptionRequest,
    Trigger,
    TriggerOrTimeout,
    Wait,
    default_node_models,
)

__all__ = [
    "Action",
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
    "default_node_models",
    "load",
    "register_action",
]
