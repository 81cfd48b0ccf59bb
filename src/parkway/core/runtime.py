"""The runtime: what the core acts with, and the hooks that tie it to this process.

One :class:`Runtime` per engine holds the store, the clock, the registry and
the settings; publishing, messages, accumulators, the worker, replay's driver and
flows all take it instead of the engine, so nothing below the engine imports
it. The hooks (this process's worker, callers awaiting results) are set by the
engine when it opens; the core calls them without knowing who is behind them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar

from parkway.clock import Clock
from parkway.core.committer import Committer
from parkway.core.results import Results, StreamReaders
from parkway.core.telemetry import Telemetry
from parkway.registry import Registry
from parkway.settings import Settings
from parkway.store.base import REPORTS_OWN, Lease, Store, Tx
from parkway.store.vocabulary import Capability

T = TypeVar("T")


class LocalWorker(Protocol):
    """What the core asks of the worker running in this process, if one does."""

    @property
    def inflight(self) -> Mapping[str, object]:
        """The runs it is advancing now, by id."""
        ...

    @property
    def busy(self) -> bool:
        """Whether it is advancing any run."""
        ...

    def poke(self) -> None:
        """Something was committed in this process: look for work now."""
        ...

    def reserve(self) -> str | None:
        """A place for a run about to be leased to it in a sender's transaction."""
        ...

    def adopt(self, lease: Lease | None) -> None:
        """Advance the run leased in the transaction :meth:`reserve` was for."""
        ...

    async def wait_progress(self, timeout: float) -> None:
        """Return when a run finished an advance, or after ``timeout`` seconds."""
        ...


class Runtime:
    """The store, clock, registry and settings of one engine, and its process hooks.

    Attributes:
        store: The storage backend.
        clock: Engine time.
        registry: Registered workflows.
        settings: TTLs, retention, lease and concurrency.
        event_extractor: ``event -> (domain, subject)`` for events without routing.
        paused: Workflows added disabled (JSON flows with ``enabled: false``):
            publishes in this process do not resume their runs.
        actions: Handlers of JSON flows' Action nodes, by name.
        worker: This process's worker, while one runs.
        results: Callers awaiting runs' ends in this process.
        streams: Readers following runs' streams in this process.
        telemetry: Where the core reports what runs do (logs, metrics, traces).
    """

    def __init__(
        self,
        store: Store,
        clock: Clock,
        registry: Registry,
        settings: Settings,
        *,
        event_extractor: Callable[[Any], tuple[str | None, str | None]] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.registry = registry
        self.settings = settings
        self.event_extractor = event_extractor
        self.paused: set[str] = set()
        self.actions: dict[str, Callable[..., Any]] = {}
        self.worker: LocalWorker | None = None
        self.results = Results()
        self.streams = StreamReaders()
        self.results.listeners.append(self.streams.notify)
        self.telemetry = Telemetry()  # logs, and metrics and traces when configured
        self._sends: Committer | None = None
        self._sending = 0  # a sender's jobs in flight (see send)
        self.last_sweep: float | None = None
        # State that a part of the core keeps per engine, by that part's name
        # (parkway.core.schedules: when the worker came up, the next tick).
        self.extensions: dict[str, Any] = {}

    @property
    def capabilities(self) -> frozenset[str]:
        return self.store.capabilities

    def now(self) -> float:
        """Engine time."""
        return self.clock.now()

    def opened(self) -> None:
        """The store is open: set up what depends on what it can do."""
        # Messages and events this process sends at once share a transaction (see
        # parkway.core.committer): one sender with many in flight pays one commit
        # for them, not one each.
        capable = Capability.GROUP_COMMIT in self.store.capabilities
        self._sends = Committer(self.store, fenced=False) if capable else None

    def poke(self) -> None:
        """Wake this process's worker, if any: something was committed here."""
        if self.worker is not None:
            self.worker.poke()

    def after_commit(self) -> None:
        """A commit of this process may have added tasks: wake the local worker.

        A store that reports this process's commits (``"push"``, ``"reports_own"``)
        does it itself, for exactly the commits that added tasks: a poke after every
        commit would cost a look (a claim, or the reads before one) that finds
        nothing.
        """
        if not self.store.capabilities & REPORTS_OWN:
            self.poke()

    async def send(self, job: Callable[[Tx], Awaitable[T]], *, order: str) -> T:
        """Run a sender's ``job`` (a publish, a correlate) in a transaction: through
        the senders' committer, where the jobs of this process in flight share one."""
        self._sending += 1
        try:
            if self._sends is not None:
                # Alone: no other job of this process could share the commit. In a
                # batch, by ``order``: two batches take the keys' locks in one order.
                done: T = await self._sends.run(job, alone=self._sending == 1, order=order)
                return done
            async with self.store.transaction() as tx:
                return await job(tx)
        finally:
            self._sending -= 1

    @property
    def sends(self) -> Committer | None:
        """The senders' committer (``None`` on stores without group commit)."""
        return self._sends

    async def next_due(self, *, after: float | None = None) -> float | None:
        """The earliest task due time (strictly after ``after``), for a manual clock."""
        return await self.store.next_due(after=after)
