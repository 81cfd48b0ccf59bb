"""Replay: drive a workflow's code against its journal (see :mod:`parkway.replay.machine`)."""
