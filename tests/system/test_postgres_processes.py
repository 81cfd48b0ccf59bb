"""What only the PostgreSQL store has to get right: connecting, schema, privileges, outages.

The tests of it that start processes, servers or browsers; the in-process ones
are in tests/store/test_postgres.py.
"""

from __future__ import annotations

import asyncio
import sys
import textwrap

import pytest

from parkway.store.postgres import MIGRATIONS
from tests.store import test_postgres as postgres_tests
from tests.store.test_postgres import ADMIN_URL, admin_sql, with_path

pytestmark = pytest.mark.parametrize("backend", ["postgres"], indirect=True)

# The fixture, from the module of the in-process PostgreSQL tests.
empty_database = postgres_tests.empty_database


async def test_a_fresh_database_gets_the_schema_once_from_racing_processes(
    empty_database: str,
) -> None:
    url = with_path(ADMIN_URL, empty_database)
    script = textwrap.dedent(
        f"""
        import asyncio
        from parkway.store import open_store
        async def main():
            store = open_store({url!r})
            await store.open()
            async with store.transaction() as tx:
                await tx.signals.add("r", "ok", None, 0.0)
            await store.close()
        asyncio.run(main())
        """
    )
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, stderr=asyncio.subprocess.PIPE
        )
        for _ in range(6)
    ]
    errors = [(await p.communicate())[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, errors
    versions = admin_sql("SELECT version FROM parkway.schema_version ORDER BY 1", empty_database)
    assert versions == [(v,) for v, _ in MIGRATIONS]
    assert admin_sql("SELECT count(*) FROM parkway.mailbox", empty_database) == [(6,)]
