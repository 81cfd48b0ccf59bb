"""New ids for runs and events: time-ordered (UUIDv7's layout, as 32 hex digits).

Why not ``uuid4``: a run's id is the key of its row, of its journal's rows and of
its tasks' index entries. Random keys land each new run on a random page of each
of those b-trees, so a commit of a few runs writes a page per run and per tree,
and a table of millions of runs keeps all its pages hot. Ids that grow with time
put the runs of the same moment on the same pages (the trees' right edges).
The first 12 digits are the creation time in milliseconds: an id tells when its
run was made, as a ULID or a UUIDv7 does; the other 74 bits are random.
"""

from __future__ import annotations

import os
import random
import time

_VERSION = 0x7 << 76  # (UUIDv7: version 7 in bits 48-51, variant 0b10 in bits 64-65)
_VARIANT = 0x2 << 62
_RANDOM = ((1 << 80) - 1) & ~(0xF << 76) & ~(0x3 << 62)


def new_id() -> str:
    """A fresh id: 32 lowercase hex digits, ordered by creation time (to the ms)."""
    ms = time.time_ns() // 1_000_000
    random = int.from_bytes(os.urandom(10), "big") & _RANDOM
    return f"{(ms & 0xFFFF_FFFF_FFFF) << 80 | _VERSION | _VARIANT | random:032x}"


# Commit tokens and marks: unique, not secret. A generator of parkway's own
# (seeded from os.urandom) spares a system call per commit, and, unlike the
# random module's, no caller re-seeds it (random.seed(0) in an app, a test
# framework replaying examples), which would repeat the marks of another
# transaction. A forked child seeds its own afresh.
_marks = random.Random()
os.register_at_fork(after_in_child=_marks.seed)


def new_mark() -> int:
    """A fresh 63-bit number that no other transaction uses (a commit mark, a token)."""
    return _marks.getrandbits(63)
