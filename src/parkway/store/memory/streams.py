"""The memory store's run streams (``tx.streams``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from parkway.store.memory.state import _Part, _State, _Stream
from parkway.store.records import StreamRecord


def drop_streams(state: _State, undo: list[Callable[[], object]], run_id: str) -> None:
    """The run's streams go with it (see ``tx.runs.delete``)."""
    streams = state.streams.pop(run_id, None)
    if streams is not None:
        undo.append(lambda: state.streams.__setitem__(run_id, streams))


class MemoryStreams(_Part):
    """Run streams by run, then key; one process, so no one to tell."""

    def _stream(self, run_id: str, key: str) -> _Stream:
        streams = self._s.streams.setdefault(run_id, {})
        stream = streams.get(key)
        if stream is None:
            stream = streams[key] = _Stream()
            self._undo.append(lambda: streams.pop(key, None))
        return stream

    async def append(
        self, run_id: str, key: str, items: Sequence[tuple[bytes, int | None]], at: float
    ) -> int | None:
        stream = self._stream(run_id, key)
        if stream.closed:
            return None
        first = len(stream.items)
        stream.items.extend(
            StreamRecord(first + i, value, attempt, at) for i, (value, attempt) in enumerate(items)
        )
        self._undo.append(lambda: stream.items.__delitem__(slice(first, None)))
        return first

    async def close(self, run_id: str, key: str) -> None:
        stream = self._stream(run_id, key)
        if not stream.closed:
            stream.closed = True
            self._undo.append(lambda: setattr(stream, "closed", False))

    async def end_run(self, run_id: str) -> None:
        pass  # (no other process to tell)

    async def read(
        self, run_id: str, key: str, offset: int, limit: int
    ) -> tuple[list[StreamRecord], bool]:
        stream = self._s.streams.get(run_id, {}).get(key)
        if stream is None:
            return [], False
        return stream.items[offset : offset + limit], stream.closed
