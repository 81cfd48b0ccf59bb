"""The ``ctx`` object a workflow receives: every durable operation goes through it.

:class:`WorkflowContext` is composed of one part a job, each in a module of its
own: steps and compensations (:mod:`parkway.replay.context_steps`), engine time
(:mod:`~parkway.replay.context_time`), callbacks and human tasks
(:mod:`~parkway.replay.context_people`), values, streams, updates and patches
(:mod:`~parkway.replay.context_values`), waits (:mod:`~parkway.replay.context_waits`),
publishes and children (:mod:`~parkway.replay.context_runs`), and gather, first
and continue-as-new (:mod:`~parkway.replay.context_concurrency`). What they ask
of the replay machine is :class:`~parkway.replay.context_base.SideValues`.
"""

from __future__ import annotations

from parkway.events import Event
from parkway.replay.context_base import SideValues
from parkway.replay.context_concurrency import Concurrency
from parkway.replay.context_people import Callback, People
from parkway.replay.context_runs import ChildHandle, Runs
from parkway.replay.context_steps import Steps
from parkway.replay.context_time import Time
from parkway.replay.context_values import RunValues
from parkway.replay.context_waits import Waits

__all__ = ["Callback", "ChildHandle", "SideValues", "WorkflowContext"]

# (The parts are listed last first: the reference lists inherited members from the
# last base to the first, which keeps ctx's methods in the order they are read.)


class WorkflowContext(Concurrency, Runs, Waits, RunValues, People, Time, Steps):
    """What a workflow run can do durably. Each operation is journaled by position.

    Attributes:
        run_id: This run's id.
        workflow: The workflow's registered name.
        domain: The run's domain (``"default"`` unless set).
        subject: The business entity the run is about, or ``None``.
        trigger: The :class:`Event` that started the run, or ``None``.
    """

    def __init__(
        self,
        *,
        run_id: str,
        workflow: str,
        version: str,
        domain: str,
        subject: str | None,
        trigger: Event | None,
        sides: SideValues,
        public_url: str | None = None,
    ) -> None:
        self.run_id = run_id
        self.workflow = workflow
        self.version = version
        self.domain = domain
        self.subject = subject
        self.trigger = trigger
        self._sides = sides
        self._public_url = public_url
