"""Storage backends behind one protocol, chosen by URL scheme and imported lazily."""

from __future__ import annotations

from parkway.store.base import Store


def open_store(url: str) -> Store:
    """Create (but do not open) the store for ``url``.

    ``memory://`` keeps everything in this process; ``sqlite:///path`` is the
    embedded default; ``postgresql://`` is for many workers on many machines.
    """
    from parkway.errors import ParkwayError

    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "memory":
        from parkway.store.memory import MemoryStore

        return MemoryStore()
    if scheme == "sqlite":
        from parkway.store.sqlite import SQLiteStore

        return SQLiteStore.from_url(url)
    if scheme in ("postgres", "postgresql"):
        raise ParkwayError(
            f"the PostgreSQL backend is not available yet in this release (url {url!r}); "
            "use sqlite:///path/to.db or memory://"
        )
    raise ParkwayError(
        f"unsupported store url {url!r}: use memory://, sqlite:///path/to.db "
        "or postgresql://user@host/db"
    )


__all__ = ["Store", "open_store"]
