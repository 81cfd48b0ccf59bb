"""The rows of the runner's SQLite table: which shape's figure, its label, its target.

(``benchmarks.run`` prints them; ``benchmarks.tables`` has the PostgreSQL tables.)
"""

from __future__ import annotations

from dataclasses import dataclass

# --quick: the deep run's journal (resume), seconds at each rate (openloop), updates
# published (subjects); see QUICK_ARGS in benchmarks.tables.
QUICK_DEPTH = 50
QUICK_SECONDS = 0.5
QUICK_EVENTS = 1000


@dataclass
class Row:
    shape: str
    label: str
    key: str
    target: str
    better: str = "lower"  # "higher" or "lower": how the ratio is read
    # The DBOS figure the row compares with: its key (default: ``key``), and the key
    # naming the variant it came from, printed next to it.
    peer_key: str | None = None
    peer_variant: str | None = None
    peer_shape: str | None = None


# N per table key: (full, --quick). The quick N is a smoke run's (seconds, for CI):
# every shape runs its code end to end; its figures mean nothing.
SIZES: dict[str, tuple[int, int]] = {
    "steps3": (1000, 20),
    "steps3sync": (1000, 20),
    "park": (10000, 50),
    "parkevent": (10000, 50),
    "wake": (1000, 10),
    "xwake": (1000, 10),
    "xpublish": (1000, 10),
    "xcorrelate": (1000, 10),
    "publish": (100000, 200),
    "subjects": (10000, 50),
    "correlate": (10000, 40),
    "resume": (200, 5),
    "openloop": (10000, 100),
    "gather": (50, 3),
    "update": (1000, 10),
    "xupdate": (1000, 10),
    "schedules": (1000, 5),
}


def rows(n: dict[str, int], quick: bool) -> list[Row]:
    steps = f"{n['steps3']:,} workflows × 3 steps"
    depth = QUICK_DEPTH if quick else 5000
    updates = f"{QUICK_EVENTS:,}" if quick else "100k"
    return [
        Row(
            "steps3sync",
            f"{steps}, `def` steps: wf/s, against DBOS's best with sync steps",
            "wf_per_s",
            "≥ 10× DBOS's best",
            "higher",
            "sync_wf_per_s",
            "sync_variant",
            "steps3",
        ),
        Row(
            "steps3sync",
            "the same, against DBOS's best overall",
            "wf_per_s",
            "≥ 10× DBOS's best",
            "higher",
            "wf_per_s",
            "variant",
            "steps3",
        ),
        Row(
            "steps3",
            f"{steps}, `async def` steps: wf/s, against DBOS's best with async steps",
            "wf_per_s",
            "",
            "higher",
            "async_wf_per_s",
            "async_variant",
        ),
        Row(
            "steps3",
            "the same, against DBOS's best overall",
            "wf_per_s",
            "≥ 15× DBOS's best",
            "higher",
            "wf_per_s",
            "variant",
        ),
        Row("park", f"park {n['park']:,} runs on a wait", "runs_per_s", "≥ 20× DBOS", "higher"),
        Row("park", "peak RSS, MB (whole process)", "peak_rss_mb", "≤ 150", "lower"),
        Row("park", "threads while parked", "threads", "no thread per run", "lower"),
        Row("park", "bytes on disk per parked run", "bytes_per_run", "≤ 500", "lower"),
        Row(
            "parkevent",
            "bytes on disk per parked run, an event wait with a match",
            "bytes_per_run",
            "≤ 500",
        ),
        Row("wake", "signal → resumed, p50 ms", "p50_ms", "≤ 5 (≤ 1.5)", "lower"),
        Row("wake", "signal → resumed, p99 ms", "p99_ms", "≤ 50 (≤ 10)", "lower"),
        Row("xwake", "across processes: signal → resumed, p50 ms", "p50_ms", "≤ 1.5", "lower"),
        Row("xwake", "across processes: signal → resumed, p99 ms", "p99_ms", "≤ 10", "lower"),
        Row("xpublish", "across processes: publish → resumed, p50 ms", "p50_ms", "≤ 1.5", "lower"),
        Row("xpublish", "across processes: publish → resumed, p99 ms", "p99_ms", "≤ 10", "lower"),
        Row(
            "xcorrelate",
            "across processes: correlate → resumed, p50 ms",
            "p50_ms",
            "≤ 1.5",
            "lower",
        ),
        Row(
            "xcorrelate", "across processes: correlate → resumed, p99 ms", "p99_ms", "≤ 10", "lower"
        ),
        Row("publish", "publish, µs, no waiters", "publish_empty_us", "", "lower"),
        Row(
            "publish",
            f"publish, µs, {n['publish']:,} non-matching waiters",
            "publish_loaded_us",
            "",
            "lower",
        ),
        Row("publish", "publish cost ratio (loaded / empty)", "ratio", "≤ 1.5", "lower"),
        Row("publish", "publish → resumed, p50 ms", "wake_p50_ms", "≤ 1.5", "lower"),
        Row("publish", "publish → resumed, p99 ms", "wake_p99_ms", "≤ 10", "lower"),
        Row(
            "subjects",
            f"{n['subjects']:,} cross-subject subscribers, {updates} updates (1% hit): events/s",
            "events_per_s",
            "",
            "higher",
        ),
        Row("subjects", "publish µs with subscribers / without", "ratio", "", "lower"),
        Row(
            "correlate",
            f"correlate {n['correlate']:,} parked runs, one sender, one at a time: msgs/s",
            "msgs_per_s",
            "≥ 2,000",
            "higher",
        ),
        Row(
            "correlate",
            "the same, one sender with 16 messages in flight: msgs/s",
            "msgs_per_s_inflight",
            "≥ 2,000",
            "higher",
        ),
        Row("correlate", "correlate → resumed, p50 ms", "p50_ms", "≤ 1.5", "lower"),
        Row("correlate", "correlate → resumed, p99 ms", "p99_ms", "≤ 10", "lower"),
        *resume_rows(depth),
        *openloop_rows(n["openloop"], quick),
        *inside_rows("≤ 2"),
        *schedule_rows(n["schedules"]),
    ]


def schedule_rows(count: int) -> list[Row]:
    return [
        Row(
            "schedules",
            f"{count:,} schedules in one minute: fired on time (≤ 1 s late)",
            "on_time",
            f"all {count:,}",
            "higher",
        ),
        Row("schedules", "the same: tick → run's code starts, p50 ms", "p50_ms", ""),
        Row("schedules", "the same, p99 ms", "p99_ms", "≤ 1,000"),
    ]


def inside_rows(update_target: str) -> list[Row]:
    return [
        Row("gather", "gather of 10 async steps of 20 ms: wall, p50 ms", "wall_p50_ms", ""),
        Row("gather", "the same / one step's time (p50)", "ratio_p50", "≈ 1"),
        Row("update", "update → answer, in one process, p50 ms", "p50_ms", update_target),
        Row("update", "the same, p99 ms", "p99_ms", ""),
        Row("xupdate", "update → answer, across processes, p50 ms", "p50_ms", update_target),
        Row("xupdate", "the same, p99 ms", "p99_ms", ""),
    ]


def resume_rows(depth: int) -> list[Row]:
    return [
        Row(
            "resume",
            "resume at journal depth 0 (signal → parked again), p50 ms",
            "shallow_p50_ms",
            "",
        ),
        Row("resume", "the same, p99 ms", "shallow_p99_ms", ""),
        Row("resume", f"resume at journal depth {depth:,}, p50 ms", "deep_p50_ms", ""),
        Row("resume", "the same, p99 ms", "deep_p99_ms", ""),
        Row("resume", f"resume at depth {depth:,} / at depth 0 (p50)", "ratio_p50", "≤ 1.5"),
        Row(
            "resume",
            f"first resume at depth {depth:,} after a restart, p50 ms",
            "restart_p50_ms",
            "≤ today's (no cache)",
        ),
    ]


def openloop_rows(background: int, quick: bool) -> list[Row]:
    seconds = QUICK_SECONDS if quick else 10
    return [
        Row(
            "openloop",
            f"open loop, {background:,} runs parked: capacity, 4 senders: msgs/s",
            "capacity_per_s",
            "",
        ),
        Row("openloop", f"at 50 % of it for {seconds} s: msgs/s offered", "r50_offered_per_s", ""),
        Row("openloop", "the same, scheduled send → resume committed, p50 ms", "r50_p50_ms", ""),
        Row("openloop", "the same, p99 ms", "r50_p99_ms", "≤ 10"),
        Row("openloop", "the same, p99.9 ms", "r50_p999_ms", ""),
        Row("openloop", "at 80 %: msgs/s offered", "r80_offered_per_s", ""),
        Row("openloop", "the same, p50 ms", "r80_p50_ms", ""),
        Row("openloop", "the same, p99 ms", "r80_p99_ms", "≤ 50"),
        Row("openloop", "the same, p99.9 ms", "r80_p999_ms", ""),
        Row(
            "openloop",
            "paced at 100 % of the capacity: msgs/s completed (the rate it sustains paced)",
            "sustained_per_s",
            "",
        ),
        Row("openloop", "at 80 % of that sustained rate: msgs/s offered", "s80_offered_per_s", ""),
        Row("openloop", "the same, p50 ms", "s80_p50_ms", ""),
        Row("openloop", "the same, p99 ms", "s80_p99_ms", ""),
        Row("openloop", "the same, p99.9 ms", "s80_p999_ms", ""),
    ]
