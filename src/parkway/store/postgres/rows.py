"""The rows of the claims and of runs.start, made into records.

Apart from the statements because both the store (its claim) and a transaction
(a lease in the sender's transaction, a start leased at once) read them.
"""

from __future__ import annotations

import operator
from typing import Any

from parkway.store.base import (
    JournalEntry,
    LoadedRun,
    RunRecord,
    SignalRecord,
    TaskRecord,
    holds_journal,
    reads_mailbox,
)
from parkway.store.postgres.wire import Result

Row = tuple[Any, ...]

_first = operator.itemgetter(0)


def run_row(run: RunRecord, lease: tuple[str, float] | None = None) -> tuple[Any, ...]:
    """A run's 16 columns, in the order of ``runs`` (runs.insert, runs.start); with
    ``lease`` (owner, until), those of the run leased to that owner, running."""
    status, owner, until = (
        (run.status, run.lease_owner, run.lease_until) if lease is None else ("running", *lease)
    )
    return (
        run.id,
        run.workflow,
        run.version,
        status,
        run.input,
        run.output,
        run.error,
        run.domain,
        run.subject,
        run.parent_id,
        run.trigger,
        run.generation,
        run.created_at,
        run.updated_at,
        owner,
        until,
    )


def started_run(row: Row) -> LoadedRun:
    """A row of runs.start: the run's 16 columns, then its start task's id, due time
    and payload."""
    run = RunRecord(*row[:16])
    return LoadedRun(run, [TaskRecord(row[16], run.id, row[17], "start", None, row[18])], [])


def claimed_run(row: Row, owner: str) -> LoadedRun:
    """A row of the claim query for ``owner``: the run's 17 columns, then its tasks,
    journal and mailbox as arrays of columns (``None`` when it has none), each in no
    particular order: put in order here (tasks and signals by id, the journal by
    position). The journal is ``None`` where the claim did not read it (see
    ``Store.load_run``)."""
    run = RunRecord(*row[:17])
    t_ids, t_dues, t_kinds, t_poss, t_payloads = row[17:22]
    j_poss, j_kinds, j_names, j_states, j_values, j_deadlines, j_ats = row[22:29]
    j_branches, j_seqs = row[29:31]
    m_ids, m_names, m_payloads, m_ats = row[31:35]
    tasks = [
        TaskRecord(*task)
        for task in sorted(
            zip(
                t_ids or (),
                [run.id] * len(t_ids or ()),
                t_dues or (),
                t_kinds or (),
                t_poss or (),
                t_payloads or (),
                strict=True,
            ),
            key=_first,
        )
    ]
    journal: list[JournalEntry] | None = (
        None
        if holds_journal(run, owner)
        else [
            JournalEntry(*entry)
            for entry in sorted(
                zip(
                    j_poss or (),
                    j_kinds or (),
                    j_names or (),
                    j_states or (),
                    j_values or (),
                    j_deadlines or (),
                    j_ats or (),
                    j_branches or (),
                    j_seqs or (),
                    strict=True,
                ),
                key=_first,
            )
        ]
    )
    signals = None
    if reads_mailbox(run, tasks):
        signals = [
            SignalRecord(*signal)
            for signal in sorted(
                zip(
                    m_ids or (),
                    [run.id] * len(m_ids or ()),
                    m_names or (),
                    m_payloads or (),
                    m_ats or (),
                    strict=True,
                ),
                key=_first,
            )
        ]
    return LoadedRun(run, tasks, journal, signals)


def leased_run(result: Result, owner: str) -> LoadedRun | None:
    """What a lease in the sender's transaction returned (see lease_from): its one
    row, whose run is null when it leased nothing."""
    rows = result.rows
    return claimed_run(rows[0], owner) if rows and rows[0][0] is not None else None
