"""The README's first command: the end-to-end demo runs and shows the expected reader views."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.default_metastore]


def test_demo_runs_end_to_end(tmp_path):
    # The demo starts its own 2.3 metastore: not the Hive client settings of the suite's release.
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}
    proc = subprocess.run([sys.executable, "-m", "tableswap.demo", "--dir", str(tmp_path / "demo")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    step2 = out[out.index("2. after the backfill"):out.index("3. after rerunning")]
    step3 = out[out.index("3. after rerunning"):]
    for step in (step2, step3):
        rows = {m.group(1): (int(m.group(2)), m.group(3)) for m in re.finditer(r"dt=(\S+)\s+(\d+)\s+(\w+)", step)}
        assert rows == {"2026-06-01": (100, "original"), "2026-06-02": (250, "backfill"),
                        "2026-06-03": (100, "original"), "2026-06-04": (80, "backfill")}
    assert "1 added, 1 replaced" in out and "0 added, 2 replaced" in out
    assert "(exists: False)" not in out
    assert "metastore stopped" in out
    # A quiet terminal: Spark's and Java's start-up lines and the progress bar go to the demo's log file.
    for noise in ("WARN", "incubator", "log4j", "[Stage"):
        assert noise not in proc.stderr and noise not in out, (noise, proc.stderr[-2000:])
    assert "Setting default log level" in (tmp_path / "demo" / "spark.log").read_text()
    assert list(tmp_path.iterdir()) == [tmp_path / "demo"]  # nothing written into the working directory
