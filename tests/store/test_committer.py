"""Group commit (parkway.committer) on every backend: batching, fencing, failure isolation."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from parkway.core.committer import Committer
from parkway.errors import LeaseLostError, StoreError
from parkway.store import Store
from parkway.store.base import NewTask, Tx

from .conformance.support import NOW, WALL, entry, run


async def leased(store: Store, count: int, owner: str = "w") -> list[str]:
    async with store.transaction() as tx:
        for i in range(count):
            await tx.runs.insert(run(f"r{i}"))
            await tx.tasks.add([NewTask(f"r{i}", NOW, "start")])
    claimed = await store.claim(owner, now=NOW, wall_now=WALL, lease_until=WALL + 60, limit=count)
    assert len(claimed) == count
    return sorted(claimed)


def step_commit(run_id: str, owner: str = "w") -> tuple[str, object]:
    """A worker-like commit: fence on the lease, then journal one step."""

    async def job(tx: Tx) -> str:
        await tx.runs.update_leased(run_id, {"status": "parked"}, owner=owner, release=False)
        await tx.journal.put(run_id, [entry(0)])
        return run_id

    return run_id, job


async def journals(store: Store, run_ids: list[str]) -> dict[str, int]:
    async with store.transaction(readonly=True) as tx:
        return {r: len(await tx.journal.read(r)) for r in run_ids}


async def test_commits_that_queue_up_share_one_transaction(store: Store) -> None:
    run_ids = await leased(store, 8)
    committer = Committer(store)
    results = await asyncio.gather(*(committer.run(job) for _, job in map(step_commit, run_ids)))
    assert results == run_ids
    # The first commit found the queue empty and took everyone queued behind it.
    assert (committer.batches, committer.jobs) == (1, 8)
    assert await journals(store, run_ids) == dict.fromkeys(run_ids, 1)


async def test_a_lone_commit_is_not_held_back(store: Store) -> None:
    (run_id,) = await leased(store, 1)
    committer = Committer(store)
    _, job = step_commit(run_id)
    assert await asyncio.wait_for(committer.run(job), 5) == run_id  # type: ignore[arg-type]
    assert (committer.batches, committer.jobs) == (1, 1)


async def test_a_lost_lease_fails_only_its_own_commit(store: Store) -> None:
    run_ids = await leased(store, 4)
    lost = run_ids[1]
    # Another worker takes one run over.
    async with store.transaction() as tx:
        assert await tx.runs.update(lost, {"updated_at": NOW}, owner="w")  # drops w's lease
    assert await store.claim("other", now=NOW, wall_now=WALL, lease_until=WALL + 60, limit=1) == [
        lost
    ]
    committer = Committer(store)
    outcomes = await asyncio.gather(
        *(committer.run(job) for _, job in map(step_commit, run_ids)),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], LeaseLostError)
    assert [o for i, o in enumerate(outcomes) if i != 1] == [r for r in run_ids if r != lost]
    assert committer.jobs == 3  # the others committed all the same (together, or alone)
    assert await journals(store, run_ids) == {r: int(r != lost) for r in run_ids}


async def test_a_failing_commit_is_retried_alone_and_fails_alone(store: Store) -> None:
    run_ids = await leased(store, 3)
    committer = Committer(store)

    async def broken(tx: Tx) -> None:
        await tx.runs.update_leased(run_ids[0], {"status": "parked"}, owner="w", release=False)
        await tx.journal.put(run_ids[0], [entry(0)])
        raise ValueError("bad commit")

    outcomes = await asyncio.gather(
        committer.run(broken),
        *(committer.run(job) for _, job in map(step_commit, run_ids[1:])),
        return_exceptions=True,
    )
    assert isinstance(outcomes[0], ValueError) and str(outcomes[0]) == "bad commit"
    assert outcomes[1:] == run_ids[1:]
    # The broken job's writes were rolled back with its batch and with its retry.
    assert await journals(store, run_ids) == {run_ids[0]: 0, run_ids[1]: 1, run_ids[2]: 1}


async def test_commits_arriving_during_a_commit_form_the_next_batch(store: Store) -> None:
    run_ids = await leased(store, 6)
    committer = Committer(store)
    jobs = dict(map(step_commit, run_ids))
    first = asyncio.ensure_future(committer.run(jobs[run_ids[0]]))  # type: ignore[arg-type]
    await asyncio.sleep(0)  # the first commit is under way
    rest = [committer.run(jobs[r]) for r in run_ids[1:]]  # type: ignore[arg-type]
    assert await asyncio.gather(first, *rest) == run_ids
    assert committer.jobs == 6 and committer.batches == 2


async def test_a_commit_known_to_be_alone_goes_before_the_loop_turns(store: Store) -> None:
    run_ids = await leased(store, 2)
    committer = Committer(store)
    order: list[str] = []
    jobs = dict(map(step_commit, run_ids))

    def noting(run_id: str) -> Any:
        async def job(tx: Tx) -> Any:
            order.append(run_id)
            return await jobs[run_id](tx)  # type: ignore[operator]

        return job

    loop = asyncio.get_running_loop()
    # Control: a commit that may have company waits one turn of the loop for it.
    loop.call_soon(order.append, "turn")
    await committer.run(noting(run_ids[0]))
    assert order == ["turn", run_ids[0]]
    order.clear()
    loop.call_soon(order.append, "turn")
    await committer.run(noting(run_ids[1]), alone=True)
    assert order[0] == run_ids[1]
    assert (committer.batches, committer.jobs) == (2, 2)
    assert await journals(store, run_ids) == dict.fromkeys(run_ids, 1)


async def test_a_commit_said_alone_still_queues_behind_a_batch(store: Store) -> None:
    run_ids = await leased(store, 4)
    committer = Committer(store)
    jobs = dict(map(step_commit, run_ids))
    results = await asyncio.gather(
        *(committer.run(jobs[r]) for r in run_ids[:3]),  # type: ignore[arg-type]
        committer.run(jobs[run_ids[3]], alone=True),  # type: ignore[arg-type]
    )
    assert results == run_ids
    assert (committer.batches, committer.jobs) == (1, 4)


class CommitLost:
    """A store whose commits go through and then report their outcome unknown, as
    when the reply is lost and the server cannot be asked; once, or always."""

    def __init__(self, store: Store, *, times: int = 1) -> None:
        self._store, self.left = store, times
        self.capabilities = store.capabilities

    @contextlib.asynccontextmanager
    async def transaction(self, *, readonly: bool = False) -> AsyncIterator[Tx]:
        async with self._store.transaction(readonly=readonly) as tx:
            yield tx
        if self.left:
            self.left -= 1
            raise StoreError("the commit may or may not have happened", outcome_unknown=True)


def counted_delivery(run_id: str, calls: dict[str, int]) -> Any:
    """A sender-like job, with no lease to stop a second copy: one signal to ``run_id``."""

    async def job(tx: Tx) -> str:
        calls[run_id] = calls.get(run_id, 0) + 1
        await tx.signals.add(run_id, "go", b"1", NOW)
        return run_id

    return job


async def mailboxes(store: Store, run_ids: list[str]) -> dict[str, int]:
    async with store.transaction(readonly=True) as tx:
        return {r: len(await tx.signals.list(r)) for r in run_ids}


async def test_unfenced_jobs_are_not_retried_after_a_commit_of_unknown_outcome(
    store: Store,
) -> None:
    run_ids = await leased(store, 3)
    calls: dict[str, int] = {}
    committer = Committer(CommitLost(store), fenced=False)  # type: ignore[arg-type]
    outcomes = await asyncio.gather(
        *(committer.run(counted_delivery(r, calls)) for r in run_ids), return_exceptions=True
    )
    # Each job hears of the unknown outcome; none is sent twice (it went through).
    assert all(isinstance(o, StoreError) and o.outcome_unknown for o in outcomes), outcomes
    assert calls == dict.fromkeys(run_ids, 1)
    assert await mailboxes(store, run_ids) == dict.fromkeys(run_ids, 1)


async def test_fenced_jobs_are_retried_alone_after_a_failed_batch(store: Store) -> None:
    # (A worker's job fences on its lease, so a second copy of it is harmless: the
    # same failure sends each again on its own.)
    run_ids = await leased(store, 3)
    calls: dict[str, int] = {}
    committer = Committer(CommitLost(store))  # type: ignore[arg-type]
    outcomes = await asyncio.gather(*(committer.run(counted_delivery(r, calls)) for r in run_ids))
    assert outcomes == run_ids
    assert calls == dict.fromkeys(run_ids, 2)


async def test_unfenced_jobs_are_retried_alone_after_a_batch_known_rolled_back(
    store: Store,
) -> None:
    run_ids = await leased(store, 3)
    calls: dict[str, int] = {}
    committer = Committer(store, fenced=False)

    async def broken(tx: Tx) -> None:
        raise StoreError("rolled back; nothing of the transaction was saved")

    outcomes = await asyncio.gather(
        *(committer.run(counted_delivery(r, calls)) for r in run_ids[1:]),
        committer.run(broken),
        return_exceptions=True,
    )
    assert outcomes[:-1] == run_ids[1:] and isinstance(outcomes[-1], StoreError)
    assert calls == dict.fromkeys(run_ids[1:], 2)  # in the batch, then each alone
    assert await mailboxes(store, run_ids[1:]) == dict.fromkeys(run_ids[1:], 1)


def blocking(release: asyncio.Event, started: asyncio.Event, run_id: str) -> Any:
    """A job that writes a signal to ``run_id`` and then waits for ``release``."""

    async def job(tx: Tx) -> str:
        await tx.signals.add(run_id, "go", b"1", NOW)
        started.set()
        await release.wait()
        return run_id

    return job


async def test_a_job_cancelled_while_queued_is_never_run(store: Store) -> None:
    run_ids = await leased(store, 2)
    calls: dict[str, int] = {}
    committer = Committer(store, fenced=False)
    release, started = asyncio.Event(), asyncio.Event()
    first = asyncio.ensure_future(committer.run(blocking(release, started, run_ids[0])))
    await started.wait()  # its batch is under way; the next job queues behind it
    queued = asyncio.ensure_future(committer.run(counted_delivery(run_ids[1], calls)))
    await asyncio.sleep(0)
    queued.cancel()
    release.set()
    assert await first == run_ids[0]
    with contextlib.suppress(asyncio.CancelledError):
        await queued
    assert queued.cancelled() and calls == {}
    assert await mailboxes(store, run_ids) == {run_ids[0]: 1, run_ids[1]: 0}


async def test_a_job_cancelled_in_its_transaction_is_settled_before_the_cancel(
    store: Store,
) -> None:
    # (A delivery's caller must learn which run it leased before it gives up.)
    (run_id,) = await leased(store, 1)
    committer = Committer(store, fenced=False)
    release, started = asyncio.Event(), asyncio.Event()
    caller = asyncio.ensure_future(committer.run(blocking(release, started, run_id)))
    await started.wait()
    caller.cancel()
    await asyncio.sleep(0.01)
    assert not caller.done()  # waiting for its transaction's end
    release.set()
    with contextlib.suppress(asyncio.CancelledError):
        await caller
    assert caller.cancelled()
    assert await mailboxes(store, [run_id]) == {run_id: 1}  # committed all the same


async def test_the_jobs_of_a_batch_run_in_their_order(store: Store) -> None:
    run_ids = await leased(store, 4)
    committer = Committer(store, fenced=False)
    release, started = asyncio.Event(), asyncio.Event()
    order: list[str] = []

    def noting(run_id: str) -> Any:
        async def job(tx: Tx) -> None:
            order.append(run_id)
            await tx.signals.add(run_id, "go", b"1", NOW)

        return job

    first = asyncio.ensure_future(committer.run(blocking(release, started, run_ids[0])))
    await started.wait()
    rest = [
        asyncio.ensure_future(committer.run(noting(r), order=key))
        for r, key in zip(run_ids[1:], ["b", "a", "c"], strict=True)
    ]
    await asyncio.sleep(0)
    release.set()
    await asyncio.gather(first, *rest)
    assert order == [run_ids[2], run_ids[1], run_ids[3]]  # a, b, c
