"""The PostgreSQL store's schema: its numbered migrations (``migrations/NNN_*.sql``),
applied once by whichever process opens the store first, and the check that the
connecting role may use what they made.

Apart from the store because it runs once per open, on a connection of its own
outside the pool, with its own failures (a schema newer than this parkway, a
role that may not create it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from parkway.errors import ParkwayError
from parkway.store.postgres.failures import privilege_error
from parkway.store.postgres.statements import Q, lock_key
from parkway.store.postgres.wire import Conn
from parkway.store.sqltext import load_migrations

log = logging.getLogger("parkway.store.postgres")

MIGRATIONS = load_migrations(__package__, "migrations")
MIGRATION_LOCK = lock_key("parkway-migrations")


async def migrate(conn: Conn, display: str, params: Mapping[str, Any]) -> None:
    """Bring the schema up to the latest migration (nothing to do: no lock, no DDL)."""
    latest = MIGRATIONS[-1][0]
    if await _version(conn, display, params) == latest:
        return  # the common case: no lock, no DDL, no CREATE privilege needed
    # Processes starting together queue here; each re-reads the version once it
    # holds the lock, so the migrations run once. Session-level: DDL commits.
    await conn.execute(Q["lock_migrations"], (MIGRATION_LOCK,))
    try:
        await conn.execute("SET statement_timeout = 0")
        current = await _version(conn, display, params)
        if current > latest:
            raise ParkwayError(
                f"the parkway schema in {display} is at version {current}, newer "
                f"than this parkway knows (up to {latest}); upgrade parkway"
            )
        if current < latest:
            async with conn.transaction():
                exists = await conn.execute(Q["schema_exists"])
                row = await exists.fetchone()
                if not (row and row[0]):
                    await conn.execute(Q["create_schema"])
                await conn.execute(Q["create_schema_version"])
        for version, script in MIGRATIONS:
            if version > current:
                async with conn.transaction():
                    # No parameters: sent as one simple query, several statements.
                    await conn.execute(script.encode())
                    await conn.execute(Q["record_version"], (version, time.time()))
                log.info("applied parkway schema migration %03d to %s", version, display)
    finally:
        if not conn.broken:
            await conn.execute(Q["unlock_migrations"], (MIGRATION_LOCK,))
            await conn.execute("RESET statement_timeout")


async def _version(conn: Conn, display: str, params: Mapping[str, Any]) -> int:
    latest = MIGRATIONS[-1][0]
    cursor = await conn.execute(Q["schema_usage"])
    row = await cursor.fetchone()
    if row is None:
        return 0  # no schema yet
    if not row[0]:
        raise privilege_error(params, None, "USAGE on schema parkway")
    cursor = await conn.execute(Q["schema_version_exists"])
    row = await cursor.fetchone()
    if not (row and row[0]):
        return 0
    cursor = await conn.execute(Q["schema_version"])
    row = await cursor.fetchone()
    version = int(row[0]) if row else 0
    if version > latest:
        raise ParkwayError(
            f"the parkway schema in {display} is at version {version}, newer than "
            f"this parkway knows (up to {latest}); upgrade parkway"
        )
    return version


async def check_privileges(conn: Conn, params: Mapping[str, Any]) -> None:
    """Fail at open with the fix, not at the first write with a bare error."""
    cursor = await conn.execute(Q["missing_privileges"])
    missing = [r[0] for r in await cursor.fetchall()]
    if missing:
        raise privilege_error(
            params,
            None,
            f"SELECT, INSERT, UPDATE or DELETE on parkway.{', parkway.'.join(missing)}",
        )
