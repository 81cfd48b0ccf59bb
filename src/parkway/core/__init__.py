"""The core: what the engine's client operations and the worker do with the store.

Every module takes a :class:`parkway.core.runtime.Runtime` (store, clock,
registry, settings); none imports the engine.
"""
