"""Prometheus metrics for parkway (the ``metrics`` extra: ``prometheus_client``).

Imported only when an engine is given ``metrics=``. Counters and histograms are
this process's (what its worker and its client calls did); the gauges describe
the store, read with one cheap :meth:`Store.stats` when metrics are scraped, so
every process that serves ``/metrics`` reports the same backlog.

Engines of one process that share a registry share its counters; the store's
gauges are those of the engine scraped last.
"""

from __future__ import annotations

import weakref
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from parkway.errors import InvalidArgumentError
from parkway.models import RunStatus
from parkway.store.base import Store, StoreStats

# Seconds: a step that takes a millisecond to one that takes minutes.
STEP_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
# Seconds from an input's commit (or a timer's due time) to the advance that takes it.
WAKE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

_BY_REGISTRY: weakref.WeakKeyDictionary[CollectorRegistry, Metrics] = weakref.WeakKeyDictionary()


def metrics_for(option: Any) -> Metrics:
    """The metrics an engine's ``metrics=`` option asks for: ``True`` (the default
    registry) or a ``CollectorRegistry``; one :class:`Metrics` per registry.

    Raises:
        InvalidArgumentError: The option is neither.
    """
    if option is True:
        registry = REGISTRY
    elif isinstance(option, CollectorRegistry):
        registry = option
    else:
        raise InvalidArgumentError(
            f"metrics must be True, False, None or a prometheus_client CollectorRegistry, "
            f"got {option!r}",
            field="metrics",
        )
    metrics = _BY_REGISTRY.get(registry)
    if metrics is None:
        metrics = _BY_REGISTRY[registry] = Metrics(registry)
    return metrics


class Metrics:
    """parkway's metrics in one registry (see the README's "Operating parkway")."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

        def counter(name: str, doc: str, labels: tuple[str, ...]) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        self._started = counter(
            "parkway_runs_started", "Runs that began their first advance.", ("workflow",)
        )
        self._ended: dict[str, Counter] = {
            status: counter(f"parkway_runs_{status}", f"Runs {status}.", ("workflow",))
            for status in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)
        }
        self._steps = counter(
            "parkway_steps",
            "Step attempts, by outcome (ok, error).",
            ("workflow", "step", "outcome"),
        )
        self._step_seconds = Histogram(
            "parkway_step_duration_seconds",
            "How long a step attempt took.",
            ("workflow", "step"),
            buckets=STEP_BUCKETS,
            registry=registry,
        )
        self._wakes = counter(
            "parkway_wakes",
            "Runs woken, by what woke them (delivery, message, signal, timer, child, wake).",
            ("workflow", "kind"),
        )
        self._wake_seconds = Histogram(
            "parkway_wake_latency_seconds",
            "From the commit that sent a run its input (a timer: its due time) to the "
            "advance that took it.",
            ("workflow", "kind"),
            buckets=WAKE_BUCKETS,
            registry=registry,
        )
        self._calls = {
            "publish": counter(
                "parkway_publishes",
                "Events published, by outcome (delivered, unmatched, duplicate, invalid, error).",
                ("outcome",),
            ),
            "correlate": counter(
                "parkway_correlations",
                "Messages correlated, by outcome (delivered, started, buffered, duplicate, "
                "refused, invalid, error).",
                ("outcome",),
            ),
        }
        self.store = StoreGauges()
        registry.register(self.store)
        # Each labelled child, once: .labels() costs three times the increment.
        self._children: dict[tuple[object, ...], Any] = {}

    def _child(self, metric: Counter | Histogram, *labels: str) -> Any:
        key = (id(metric), *labels)  # (the metrics live as long as this object)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    # -- what happened -----------------------------------------------------------------------

    def run_started(self, workflow: str) -> None:
        self._child(self._started, workflow).inc()

    def run_ended(self, workflow: str, status: str) -> None:
        ended = self._ended.get(status)
        if ended is not None:
            self._child(ended, workflow).inc()

    def step(self, workflow: str, step: str, ok: bool, seconds: float) -> None:
        self._child(self._steps, workflow, step, "ok" if ok else "error").inc()
        self._child(self._step_seconds, workflow, step).observe(seconds)

    def woke(self, workflow: str, kind: str, latency: float) -> None:
        self._child(self._wakes, workflow, kind).inc()
        self._child(self._wake_seconds, workflow, kind).observe(latency)

    def called(self, kind: str, outcome: str) -> None:
        calls = self._calls.get(kind)
        if calls is not None:
            calls.labels(outcome).inc()

    # -- the exposition ----------------------------------------------------------------------

    async def render(
        self, store: Store, now: float, *, unserved: int | None = None
    ) -> tuple[bytes, str]:
        """The text exposition (and its content type), the store's gauges read now
        (``unserved``: the runs no live worker serves, counted by the caller)."""
        self.store.update(await store.stats(now), now, unserved)
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class StoreGauges(Collector):
    """The store's gauges, as :meth:`Store.stats` read them last."""

    def __init__(self) -> None:
        self.stats: StoreStats | None = None
        self.at = 0.0
        self.unserved: int | None = None

    def update(self, stats: StoreStats, now: float, unserved: int | None = None) -> None:
        self.stats, self.at, self.unserved = stats, now, unserved

    def collect(self) -> list[Metric]:
        stats = self.stats
        if stats is None:  # (never scraped through render: nothing read yet)
            return []
        parked = GaugeMetricFamily(
            "parkway_runs_parked", "Runs parked, waiting for an input.", labels=["workflow"]
        )
        for workflow, count in sorted(stats.parked.items()):
            parked.add_metric([workflow], count)
        # Runs by status, of the statuses an operator must see at once: a held run's
        # code no longer replays its journal (it waits for a fix and a retry).
        runs = GaugeMetricFamily(
            "parkway_runs", "Runs parked or held now, by status.", labels=["status"]
        )
        runs.add_metric(["parked"], sum(stats.parked.values()))
        runs.add_metric(["held"], sum(stats.held.values()))
        oldest = stats.oldest_due_at
        unserved = []
        if self.unserved is not None:
            unserved.append(
                GaugeMetricFamily(
                    "parkway_runs_unserved",
                    "Runs due whose workflow and version no live worker serves: nothing "
                    "advances them until a worker that serves them starts.",
                    self.unserved,
                )
            )
        return [
            *unserved,
            parked,
            runs,
            GaugeMetricFamily(
                "parkway_tasks_due", "Tasks due now and not yet taken (the backlog).", stats.due
            ),
            GaugeMetricFamily(
                "parkway_oldest_due_task_age_seconds",
                "How long the oldest task due has waited (0: none): the lag to alert on.",
                0.0 if oldest is None else max(0.0, self.at - oldest),
            ),
            GaugeMetricFamily(
                "parkway_dead_letters",
                "Messages that expired unconsumed, kept as dead letters.",
                stats.dead_letters,
            ),
            CounterMetricFamily(
                "parkway_lease_takeovers",
                "Runs this process's worker took over from an expired lease (a worker that "
                "died or stalled).",
                stats.takeovers,
            ),
        ]
