"""The store conformance suite: the spec of the ``Store`` / ``Tx`` protocol.

Every test runs on every backend (memory, SQLite, PostgreSQL), against the
protocol alone, the way the engine calls it. Tests that need two processes on
one store are marked ``requires("shared")``; the races among them run the second
party on its own store instance, in its own thread and event loop, started while
the first party's transaction is still open: a backend passes only if the second
party sees the world as if the two had run one after the other (SQLite makes it
wait for the write lock; PostgreSQL must make it wait on the right lock).
"""
