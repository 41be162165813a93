"""Campaign report: each campaign test adds rows; the table prints at the end of the run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

REPORT: list[dict] = []


@pytest.fixture
def report():
    return REPORT


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not REPORT:
        return
    terminalreporter.section("tableswap guarantee campaign")
    headers = ["campaign", "case", "trials", "result", "details"]
    rows = [[str(r.get(h, "")) for h in headers] for r in REPORT]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    terminalreporter.write_line(line(headers))
    terminalreporter.write_line("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        terminalreporter.write_line(line(row))
    out = os.environ.get("TABLESWAP_CAMPAIGN_JSON")
    if out:
        Path(out).write_text(json.dumps(REPORT, indent=2))
