"""Named fault-injection points for the guarantee campaigns and crash tests.

``TABLESWAP_CRASH_AT=after_intent`` makes the process kill itself (SIGKILL, no cleanup, like a
lost container) when it reaches that point. With ``TABLESWAP_CRASH_JITTER_MS=N`` the kill comes
at a random moment up to N ms *after* the point, while the process goes on into the next step
(a metastore call in flight, a journal transaction half done...), or not at all if it finishes
first. ``TABLESWAP_CRASH_DELAY_MS=N`` sets that moment instead: exactly N ms after the point (a test that
draws N from a seed it prints can rerun the same trial). ``TABLESWAP_CRASH_NTH=N`` (default 1) crashes the
Nth time the process reaches the point, not before: the second swap of a SQL script, say.

``TABLESWAP_PAUSE_AT=after_add`` with ``TABLESWAP_PAUSE_FILE=/some/path`` makes the process create
``/some/path.reached`` at that point and wait until ``/some/path.go`` exists, so that a test can do
something (stop the metastore, say) between two steps.

Unset in production: a dictionary lookup per step.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

ENV = "TABLESWAP_CRASH_AT"
JITTER_ENV = "TABLESWAP_CRASH_JITTER_MS"
DELAY_ENV = "TABLESWAP_CRASH_DELAY_MS"
NTH_ENV = "TABLESWAP_CRASH_NTH"
PAUSE_ENV = "TABLESWAP_PAUSE_AT"
PAUSE_FILE_ENV = "TABLESWAP_PAUSE_FILE"
PAUSE_LIMIT_S = 900

POINTS = (
    "after_staging_write",
    "after_lock",
    "after_intent",
    "after_add",
    "after_alter",
    "after_commit",
    "during_temp_drop",
    "janitor_mid_batch",  # the janitor deleted a batch but has not recorded it yet
    "group_after_lock",  # a swap group took one more of its tables' locks
    "group_after_intent",  # a swap group recorded its one intent, before its first flip
    "group_between_flips",  # a swap group flipped some of its tables, not the next one yet
    "group_after_commit",
)


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


_reached: dict[str, int] = {}


def crash_point(name: str) -> None:
    if os.environ.get(ENV) == name and _nth_time(name):
        delay_ms = _kill_delay_ms()
        if delay_ms <= 0:
            _kill()
        else:
            timer = threading.Timer(delay_ms / 1000, _kill)
            timer.daemon = True
            timer.start()
    if os.environ.get(PAUSE_ENV) == name:
        _pause(name, os.environ[PAUSE_FILE_ENV])


def _nth_time(name: str) -> bool:
    """Whether this is the ``NTH_ENV``-th time the process reaches the point ``name`` (the first by default)."""
    _reached[name] = _reached.get(name, 0) + 1
    return _reached[name] == int(os.environ.get(NTH_ENV) or 1)


def _kill_delay_ms() -> float:
    """How long after the point the kill comes: ``DELAY_ENV`` exactly, else a random moment up to ``JITTER_ENV``."""
    if os.environ.get(DELAY_ENV):
        return float(os.environ[DELAY_ENV])
    jitter_ms = float(os.environ.get(JITTER_ENV) or 0)
    return random.uniform(0, jitter_ms) if jitter_ms > 0 else 0.0


def _pause(name: str, base: str) -> None:
    Path(f"{base}.reached").write_text(name)
    deadline = time.monotonic() + PAUSE_LIMIT_S
    while not Path(f"{base}.go").exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"fault point {name}: nobody released the pause within {PAUSE_LIMIT_S}s")
        time.sleep(0.05)
