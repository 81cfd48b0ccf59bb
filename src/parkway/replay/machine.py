"""Deterministic replay, without I/O: a run's code driven against its journal.

A run is advanced by running its workflow function from the top. Each ``ctx``
operation is identified by its branch and its index in that branch (see
:mod:`parkway.replay.branch`): an operation already in the journal gets its
recorded result without doing anything; the first one past the journal is
carried out (a wait checks its input, a step is handed to the worker to run)
and recorded. When every branch waits on an input that has not come, the run
parks; its next wake-up replays it again. Parking therefore costs nothing (no
coroutine, no thread is kept) and the store is the only truth.

Replay applies the journal's entries in the order their results were first
applied (``seq``, else ``pos``), so branches that share the workflow's state
see it change in the same order on every replay, whatever order their steps
finished in.

:class:`Machine` is a pure state machine over what the worker loaded (the run,
its journal, its due tasks, maybe its mailbox): it never touches the store.
Where an operation needs something done or read it says so with a request
(:mod:`parkway.replay.requests`) and a token; the worker's driver
(:mod:`parkway.worker.drive`) does it and resumes the machine with the
answer. Several requests may be out at once (the steps of a gather's
branches). What the run decided accumulates in :attr:`Machine.writes` (see
:mod:`parkway.replay.writes`); how it ended is :attr:`Machine.outcome`.

The machine is a scheduler composed of parts it is given or makes: the state
of the advance (:class:`~parkway.replay.state.MachineState`), which every part
shares, the operations given it (:mod:`parkway.replay.ops`,
:mod:`parkway.replay.waits`, :mod:`parkway.replay.composite`), the updates
(:class:`~parkway.replay.updates.Updates`), the compensations and stopping
(:class:`~parkway.replay.sagas.Sagas`), and what the workflow's ``ctx`` calls
outside an ``await`` (:class:`~parkway.replay.sides.Sides`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from parkway import _json
from parkway.errors import NonDeterminismError, WorkflowUsageError
from parkway.events import Event
from parkway.models import RunStatus
from parkway.registry import Registry, WorkflowDef
from parkway.replay.branch import ROOT, Branch, Pending
from parkway.replay.context import WorkflowContext
from parkway.replay.requests import Request
from parkway.replay.sagas import Sagas, guarded
from parkway.replay.schedule import Scheduler, journal_order
from parkway.replay.sides import Sides
from parkway.replay.state import MachineState, close_branch
from parkway.replay.updates import Updates
from parkway.replay.writes import Outcome, Writes
from parkway.store.base import JournalEntry, RunRecord, SignalRecord, TaskRecord, UpdateRecord

Token = Pending

# How a machine that may be kept and woken ended its advance: parked on its waits,
# or waiting on a step's retry backoff (its run stays ``running`` meanwhile).
PARKED_STATUSES = frozenset({RunStatus.PARKED, RunStatus.RUNNING})
# The journal length past which a run had better continue as new: a cached run's
# resume costs the same at any length, but a replay (a restart, another worker)
# costs more with every entry, reading the journal included.
HISTORY_THRESHOLD = 10_000


class Machine:
    """One advance of one run's code over what the worker loaded; no I/O.

    Args:
        wf: The workflow (its code and input model).
        run: The run's row.
        journal: Its journal (the current generation's).
        tasks: Its tasks due now (deliveries, timers, signals, the start).
        registry: The workflows a child may be started from.
        clock: Engine time (what ``ctx.now()`` records on first execution).
        prepare_event: Validates and routes an event ``ctx.publish`` publishes.
        event_retention: How far back ``since_start`` may look.
        signals: The run's mailbox, if the worker read it with the run.
        updates: The updates sent to the run not handled yet, if any came.
        history_threshold: The journal length past which the run is told it had
            better continue as new (``ctx.continue_as_new_suggested``).
        stop: Why the run must stop (a :class:`RunCancelledError`, a
            :class:`RunTimeoutError`), if it must: its code replays its journal,
            carries out nothing new, and its compensations run (see
            :mod:`parkway.replay.sagas`).

    Call :meth:`start`; then, while :attr:`outcome` is ``None``, do each request
    :meth:`take_requests` hands out and :meth:`resume` with its answer.
    :attr:`writes` holds what is to be committed; :meth:`take_writes` hands it
    over at each commit.

    A machine that parked may be kept (the worker's cache of runs) and, once its
    parking has been committed, woken with the inputs that came since
    (:meth:`wake`) instead of being built and replayed again: it goes on from
    where it parked, exactly as a replay of its journal would have.
    """

    def __init__(
        self,
        wf: WorkflowDef,
        run: RunRecord,
        journal: list[JournalEntry],
        tasks: list[TaskRecord],
        *,
        registry: Registry,
        clock: Callable[[], float],
        prepare_event: Callable[[Event], tuple[Event, bytes]],
        event_retention: float,
        signals: list[SignalRecord] | None = None,
        updates: list[UpdateRecord] | None = None,
        history_threshold: int = HISTORY_THRESHOLD,
        public_url: str | None = None,
        stop: BaseException | None = None,
    ) -> None:
        st = self._st = MachineState(
            wf,
            run,
            journal,
            tasks,
            registry=registry,
            clock=clock,
            prepare_event=prepare_event,
            event_retention=event_retention,
            signals=signals,
            history_threshold=history_threshold,
            public_url=public_url,
        )
        self._sagas = Sagas(st, stop)
        self._updates = Updates(st, updates)
        self._sides = Sides(st, self._updates, self._sagas)
        self._scheduler = Scheduler(st, self._sagas, self._updates)

    # -- what the driver reads ---------------------------------------------------------------

    @property
    def run(self) -> RunRecord:
        """The run's row, as the worker loaded it."""
        return self._st.run

    @property
    def wf(self) -> WorkflowDef:
        """The workflow the run's code is."""
        return self._st.wf

    @property
    def entries(self) -> dict[int, JournalEntry]:
        """The run's journal (this generation's), by position, as the advance left it."""
        return self._st.entries

    @property
    def next_pos(self) -> int:
        """The position the next journal entry takes."""
        return self._st.next_pos

    @property
    def history_threshold(self) -> int:
        """The journal length past which the run is told to continue as new."""
        return self._st.history_threshold

    @property
    def writes(self) -> Writes:
        """What the run decided and is not committed yet."""
        return self._st.writes

    @property
    def outcome(self) -> Outcome | None:
        """How the advance ended (``None``: it has not yet)."""
        return self._st.outcome

    @property
    def held(self) -> NonDeterminismError | None:
        """Why the run's code no longer replays its journal, if it does not."""
        return self._st.held

    @property
    def may_hold_deliveries(self) -> bool:
        """Whether a message may have reached the run that it did not take: one of its
        message waits did not end with a delivery (it is pending, or timed out). A
        wait that took its delivery cannot have another: its subscription went
        with the first."""
        return bool(self._st.holding)

    @property
    def stopping(self) -> bool:
        """Whether the run stops (a cancel, its deadline), now or since an earlier advance."""
        return self._sagas.stopping

    @property
    def deadline_entry(self) -> JournalEntry | None:
        """The journal entry of the run's deadline, if it has one."""
        return self._sagas.deadline_entry

    @property
    def unhandled_updates(self) -> bool:
        """Whether updates were given that the run did not get to (it ended, or went
        on as new, before it was quiet)."""
        return self._updates.unhandled

    @property
    def parked(self) -> bool:
        """Whether the machine parked (it may be kept and woken, see :meth:`wake`)."""
        outcome = self._st.outcome
        return outcome is not None and outcome.status in PARKED_STATUSES

    @property
    def waiting(self) -> list[JournalEntry]:
        """The journal entries of the waits the run parked on, in journal order."""
        entries = [op.entry for op in self._st.parked if op.entry is not None]
        return sorted(entries, key=lambda e: e.pos)

    @property
    def history_crossed(self) -> bool:
        """Whether this advance took the journal past :attr:`history_threshold`."""
        st = self._st
        return st.loaded <= st.history_threshold < len(st.entries)

    # -- the driver's side -------------------------------------------------------------------

    def start(self) -> None:
        """Run the workflow's code from the top until it needs something or ends."""
        st = self._st
        run = st.run
        trigger = _json.loads(run.trigger)
        ctx = WorkflowContext(
            run_id=run.id,
            workflow=run.workflow,
            version=run.version,
            domain=run.domain,
            subject=run.subject,
            trigger=Event.from_dict(trigger) if trigger else None,
            sides=self._sides,
            public_url=st.public_url,
        )
        try:
            arg = st.wf.model_validate(_json.loads(run.input))
            coro = st.wf.fn(ctx, arg)
        except Exception as exc:
            st.outcome = st.failed(exc)
            return
        if not asyncio.iscoroutine(coro):
            st.outcome = st.failed(
                WorkflowUsageError(f"workflow {st.wf.name!r} did not return a coroutine")
            )
            return
        body = guarded(self._sagas, st, coro)
        st.root = Branch(ROOT, body, st.by_branch.get(ROOT, []))
        st.ready.append((st.root, None, None))
        self._scheduler.run()

    def wake(
        self,
        run: RunRecord,
        tasks: list[TaskRecord],
        *,
        signals: list[SignalRecord] | None = None,
        updates: list[UpdateRecord] | None = None,
    ) -> None:
        """Go on from where the run parked, with ``tasks`` (and the mailbox and updates)
        that came since: each parked wait looks for its input again, in the order a
        replay of the journal would reach it.

        Only for a machine whose parked outcome was committed, and whose journal no
        one has advanced since (the worker's cache checks both).
        """
        st = self._st
        assert st.outcome is not None and st.outcome.status in PARKED_STATUSES, st.outcome
        st.run, st.tasks = run, tasks
        st.consumed_tasks, st.delivered = set(), set()
        st.claimed = frozenset(t.id for t in tasks)
        st.writes = st.new_writes()
        st.park_status = RunStatus.PARKED
        st.outcome = None
        st.mailbox = None if signals is None else list(signals)
        self._updates.given(updates)
        st.loaded = len(st.entries)
        # (wait_until's register again as they are examined.)
        st.conditions = []
        parked, st.parked = st.parked, []
        st.live.extend(sorted(parked, key=journal_order))
        self._scheduler.run()

    def take_writes(self) -> Writes:
        """The writes to commit now; the machine buffers anew after them."""
        return self._st.take_writes()

    def take_requests(self) -> list[tuple[Token, Request]]:
        """The requests made since the last call, each with the token to answer it by."""
        st = self._st
        requests, st.requests = st.requests, []
        return requests

    def resume(self, token: Token, answer: Any) -> None:
        """Answer the request of ``token`` and go on."""
        self._st.outstanding -= 1
        token.requested = False
        gen = token.gen
        assert gen is not None, "an answer to no request"
        self._scheduler.pump(token, gen, answer)
        self._scheduler.run()

    def close(self) -> None:
        """Let go of the workflow's coroutines (their ``finally`` blocks run)."""
        for branch in self._st.branches():
            close_branch(branch)
