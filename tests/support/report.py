"""The guarantee-campaign report: rows added by campaign tests, plus tallies of the tests marked
``hostile`` (bad input must give a clear error and change nothing) and ``fault`` (injected
metastore faults), printed as one table at the end of the run.

    TABLESWAP_TEST_LOCK_TIMEOUT=10 python3 -m pytest -m "campaign or hostile or fault" -s

(``TABLESWAP_CAMPAIGN_JSON=path`` also writes the rows as JSON.)
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

REPORT: list[dict] = []
TALLIED = {"hostile": "hostile and bad input", "fault": "metastore faults (default suite)"}
TALLY: dict[str, Counter] = {marker: Counter() for marker in TALLIED}
FAILED: dict[str, list[str]] = {marker: [] for marker in TALLIED}


def record(item_report, keywords) -> None:
    """pytest_runtest_logreport: count the call phase of tallied tests."""
    if item_report.when != "call" and not (item_report.when == "setup" and item_report.outcome != "passed"):
        return
    for marker in TALLIED:
        if marker in keywords:
            TALLY[marker][item_report.outcome] += 1
            if item_report.outcome == "failed":
                FAILED[marker].append(item_report.nodeid.split("::")[-1])


def rows() -> list[dict]:
    out = list(REPORT)
    for marker, title in TALLIED.items():
        tally = TALLY[marker]
        total = sum(tally.values())
        if total:
            result = "clear error, nothing changed" if marker == "hostile" else "survived"
            out.append({"campaign": title, "case": f"{total} cases", "trials": total,
                        "result": f"{tally['passed']}/{total} {result}",
                        "details": ", ".join(FAILED[marker][:5]) or ""})
    return out


def asked_for(markexpr: str) -> bool:
    """Whether a ``-m`` expression selects a tallied marker (a whole word, not negated: ``fault`` is not
    asked for by ``default_metastore`` nor by ``not fault``)."""
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", markexpr)
    return any(word in TALLIED and (i == 0 or words[i - 1] != "not") for i, word in enumerate(words))


def print_table(terminalreporter) -> None:
    asked = asked_for(terminalreporter.config.getoption("markexpr", "") or "")
    table = rows()
    if not (REPORT or asked):
        return
    terminalreporter.section("tableswap guarantee campaign")
    if not table:
        terminalreporter.write_line("no campaign, hostile or fault test ran")
        return
    headers = ["campaign", "case", "trials", "result", "details"]
    cells = [[str(r.get(h, "")) for h in headers] for r in table]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]
    line = lambda row: "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |"  # noqa: E731
    terminalreporter.write_line(line(headers))
    terminalreporter.write_line("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        terminalreporter.write_line(line(row))
    out = os.environ.get("TABLESWAP_CAMPAIGN_JSON")
    if out:
        Path(out).write_text(json.dumps(table, indent=2))
