"""Storage backends behind one protocol, chosen by URL scheme and imported lazily."""

from __future__ import annotations

from parkway.errors import shown
from parkway.store.base import Store


def open_store(url: str) -> Store:
    """Create (but do not open) the store for ``url``.

    ``memory://`` keeps everything in this process; ``sqlite:///path`` is the
    embedded default; ``postgresql://`` is for many workers on many machines.
    """
    from parkway.errors import MissingExtraError, ParkwayError

    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "memory":
        from parkway.store.memory import MemoryStore

        return MemoryStore()
    if scheme == "sqlite":
        from parkway.store.sqlite import SQLiteStore

        return SQLiteStore.from_url(url)
    if scheme in ("postgres", "postgresql"):
        try:
            from parkway.store.postgres import PostgresStore
        except ImportError as exc:  # the driver is the postgres extra's
            missing = exc.name or ""
            if missing.startswith("parkway"):
                raise
            if isinstance(exc, ModuleNotFoundError):
                raise MissingExtraError("postgres", "the PostgreSQL store", missing) from exc
            raise ParkwayError(  # installed, but it does not load (no libpq, say)
                f"the PostgreSQL store cannot load its driver ({exc}); "
                "pip install --force-reinstall 'parkway[postgres]'"
            ) from exc

        return PostgresStore.from_url(url)
    raise ParkwayError(
        f"unsupported store url {shown(url)}: use memory://, sqlite:///path/to.db "
        "or postgresql://user@host/db"
    )


__all__ = ["Store", "open_store"]
