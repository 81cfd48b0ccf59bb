"""An engine's settings, validated in one place.

:class:`parkway.Engine` takes its settings as keyword arguments (durations as
strings, seconds or ``timedelta``) and builds one :class:`Settings` from them
with :meth:`Settings.of`; :meth:`parkway.Engine.configure` changes a few of
them with :meth:`Settings.changed`. Whatever is malformed is refused here, with
an error naming the setting; what the engine hands on (the runtime carries the
settings to the core and the worker) is then known to be well formed.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

from parkway import limits
from parkway.durations import Duration, to_seconds
from parkway.errors import InvalidArgumentError, shown

# The store an engine opens when neither ``url`` nor ``PARKWAY_URL`` names one.
DEFAULT_URL = "sqlite:///parkway.db"


@dataclass(frozen=True)
class Settings:
    """An engine's settings, validated (durations in seconds).

    Attributes:
        url: The store's URL.
        message_ttl: How long an unmatched message stays buffered.
        event_retention: How long event and message ids are remembered.
        lease: How long a worker owns a run it advances.
        concurrency: Runs the in-process worker advances at once.
        cached_runs: Parked runs a worker keeps in memory to resume without a replay.
        history_threshold: The journal length past which a run is told to continue
            as new.
        retention: How long a finished run is kept (``None``: for ever).
        tune_gc: The garbage collector's thresholds while a worker runs
            (:mod:`parkway.worker.gc_thresholds`): ``None``, tuned if they are CPython's
            defaults; ``True``, tuned; ``False``, left alone.
        busy_claim_interval: How often at most a worker whose event loop is busy
            claims runs, which it then takes in batches (:mod:`parkway.worker.load`);
            ``0``: never (every run at once).
        public_url: Where the engine's HTTP API is reached from outside (no
            trailing slash): the base of callbacks' URLs.
    """

    url: str = DEFAULT_URL
    message_ttl: float = 3600.0
    event_retention: float = 86400.0
    lease: float = 30.0
    concurrency: int = 100
    cached_runs: int = 1000
    history_threshold: int = 10_000
    retention: float | None = 30 * 86400.0
    tune_gc: bool | None = None
    busy_claim_interval: float = 0.002
    public_url: str | None = None

    @classmethod
    def of(
        cls,
        *,
        url: str | None = None,
        message_ttl: Duration = "1h",
        event_retention: Duration = "24h",
        lease: Duration = "30s",
        concurrency: int = 100,
        cached_runs: int = 1000,
        history_threshold: int = 10_000,
        retention: Duration | None = "30d",
        tune_gc: bool | None = None,
        busy_claim_interval: Duration = "2ms",
        public_url: str | None = None,
    ) -> Settings:
        """The settings :class:`parkway.Engine`'s keyword arguments of those names give.

        ``url=None`` reads ``PARKWAY_URL``, else :data:`DEFAULT_URL`;
        ``public_url=None`` reads ``PARKWAY_PUBLIC_URL``, else none.

        Raises:
            InvalidArgumentError: A setting is malformed (``field`` names it).
            InvalidDurationError: A duration is not one.
        """
        resolved = url if url is not None else os.environ.get("PARKWAY_URL") or DEFAULT_URL
        return cls(
            url=store_url(resolved),
            concurrency=count(concurrency, "concurrency", least=1),
            message_ttl=to_seconds(message_ttl, "message_ttl"),
            event_retention=to_seconds(event_retention, "event_retention"),
            lease=_lease(lease),
            cached_runs=count(cached_runs, "cached_runs", least=0),
            history_threshold=count(history_threshold, "history_threshold", least=1),
            retention=retention_seconds(retention, "retention"),
            tune_gc=_optional_flag(tune_gc, "tune_gc"),
            busy_claim_interval=_busy_claim_interval(busy_claim_interval),
            public_url=_public_url(public_url),
        )

    def changed(
        self,
        *,
        url: str | None = None,
        concurrency: int | None = None,
        lease: Duration | None = None,
        cached_runs: int | None = None,
    ) -> Settings:
        """These settings with those given (not ``None``) replaced, validated as by
        :meth:`of` (what :meth:`parkway.Engine.configure` changes).

        Raises:
            InvalidArgumentError: A setting is malformed (``field`` names it).
            InvalidDurationError: ``lease`` is not a duration.
        """
        changes: dict[str, Any] = {}
        if concurrency is not None:
            changes["concurrency"] = count(concurrency, "concurrency", least=1)
        if lease is not None:
            changes["lease"] = _lease(lease)
        if cached_runs is not None:
            changes["cached_runs"] = count(cached_runs, "cached_runs", least=0)
        if url is not None:
            changes["url"] = store_url(url)
        return dataclasses.replace(self, **changes)


def count(value: Any, name: str, *, least: int) -> int:
    """A whole-number setting, at least ``least``.

    Raises:
        InvalidArgumentError: It is not (``field`` is ``name``).
    """
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise InvalidArgumentError(
            f"{name} must be a whole number >= {least}, got {shown(value)}", field=name
        )
    return value


def retention_seconds(value: Duration | None, name: str) -> float | None:
    """A retention in seconds (``None``: keep for ever), the engine's or a workflow's.

    Raises:
        InvalidDurationError: It is not a duration.
        InvalidArgumentError: It is zero (``field`` is ``name``).
    """
    if value is None:
        return None
    seconds = to_seconds(value, name)
    if seconds <= 0:
        raise InvalidArgumentError(
            f"{name} must be longer than zero (None keeps finished runs for ever)", field=name
        )
    return seconds


def store_url(url: Any) -> str:
    """A store URL: a string without control characters (a NUL is no file name,
    nor any server's), at most :data:`parkway.limits.MAX_URL_LENGTH` characters.

    Raises:
        InvalidArgumentError: It is not (``field`` is ``url``).
    """
    if not isinstance(url, str):
        raise InvalidArgumentError(
            f"url must be a string such as 'sqlite:///app.db', got {shown(url)}", field="url"
        )
    # (The URL itself is not shown: it may hold a password.)
    bad = limits.bad_character(url)
    if bad is not None:
        raise InvalidArgumentError(f"the store url holds {bad}", field="url")
    if len(url) > limits.MAX_URL_LENGTH:
        raise InvalidArgumentError(
            f"the store url is {len(url)} characters long; "
            f"at most {limits.MAX_URL_LENGTH} are allowed",
            field="url",
        )
    return url


def _lease(value: Duration) -> float:
    seconds = to_seconds(value, "lease")
    if seconds <= 0:
        raise InvalidArgumentError("lease must be longer than zero", field="lease")
    return seconds


def _busy_claim_interval(value: Duration) -> float:
    seconds = to_seconds(value, "busy_claim_interval")
    if seconds > 1.0:
        # Runs wait up to this long under load: more than a second is a mistake.
        raise InvalidArgumentError(
            f"busy_claim_interval must be at most 1s, got {shown(value)}",
            field="busy_claim_interval",
        )
    return seconds


def _optional_flag(value: Any, name: str) -> bool | None:
    """``True``, ``False`` or ``None``."""
    if value is not None and not isinstance(value, bool):
        raise InvalidArgumentError(
            f"{name} must be True, False or None, got {shown(value)}", field=name
        )
    return value


def _public_url(value: Any) -> str | None:
    """The base of callbacks' URLs: ``value``, else ``PARKWAY_PUBLIC_URL``, else ``None``."""
    found = value if value is not None else os.environ.get("PARKWAY_PUBLIC_URL") or None
    if found is None:
        return None
    where = "public_url" if value is not None else "PARKWAY_PUBLIC_URL"
    if not isinstance(found, str) or not found.startswith(("http://", "https://")):
        raise InvalidArgumentError(
            f"{where} must be an http:// or https:// URL such as "
            f"'https://flows.example.com', got {found!r:.80}",
            field="public_url",
        )
    limits.text(found, where, field="public_url", max_length=2000)
    return found.rstrip("/")
