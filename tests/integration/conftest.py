"""Fixtures that tests of several files share and whose home is one test file (they are defined once, there):
made visible to every file here instead of each importing them from that file."""

from __future__ import annotations

from .test_glue_swaps import gdb, glue, glue_env, root
from .test_openlineage import ol_env
from .test_s3a_swaps import s3root

__all__ = ["gdb", "glue", "glue_env", "ol_env", "root", "s3root"]
