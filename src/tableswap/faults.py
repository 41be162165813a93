"""Named crash points for fault-injection tests.

``TABLESWAP_CRASH_AT=after_intent`` makes the process kill itself (SIGKILL, no cleanup, like a
lost container) when it reaches that point. Unset in production: a dictionary lookup per step.
"""

from __future__ import annotations

import os
import signal

ENV = "TABLESWAP_CRASH_AT"

POINTS = (
    "after_staging_write",
    "after_lock",
    "after_intent",
    "after_add",
    "after_alter",
    "after_commit",
    "during_temp_drop",
    "janitor_mid_batch",  # the janitor deleted a batch but has not recorded it yet
)


def crash_point(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
