"""A shared PostgreSQL journal end to end: swaps by the library, then history, show, rollback,
recover and janitor run through the CLI, against the real metastore and Spark, all journaled in a
fresh PostgreSQL schema. Plus: journal connection problems reach the CLI user as one-line errors.

(Any other integration file runs against PostgreSQL too with TABLESWAP_TEST_JOURNAL=postgresql.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from tableswap.core import locations as loc
from tableswap import swap_partitions
from tableswap.cli import main
from tableswap.journal import Journal

from ..support.helpers import SRC, batch_df, create_events, reader_view, today


@pytest.fixture
def journal_url(pg_journal_url: str) -> str:
    """Every journal of this module is PostgreSQL (ts_env exports it as TABLESWAP_JOURNAL_URL)."""
    return pg_journal_url


def cli_json(*args: str, expect: int = 0):
    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == expect, f"exit {result.exit_code}: {result.output}"
    return json.loads(result.stdout)


@pytest.mark.integration
@pytest.mark.release_independent  # the journal's dialect is the subject, not the metastore
def test_swap_history_show_rollback_recover_janitor_on_a_postgres_journal(spark, db, tmp_path, hms, ts_env):
    assert ts_env["TABLESWAP_JOURNAL_URL"].startswith("postgresql://")
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(i),): 5 for i in range(3)}, "good").write.insertInto(table)
    bad = swap_partitions(batch_df(spark, {(today(1),): 2, (today(3),): 1}, "bad"), table)
    again = swap_partitions(batch_df(spark, {(today(1),): 2, (today(3),): 1}, "bad"), table)  # a rerun
    good_day1 = loc.normalize(bad.replaced[0].old_location)

    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    assert journal.dialect == "postgresql"
    queued = {(d.swap_id, loc.normalize(d.location)): d.state for d in journal.deletions_of(db, "events")}
    assert queued[(bad.swap_id, good_day1)] == "pending"
    # bad displaced the good day 1; the rerun displaced bad's day 1 and day 3: each queued once.
    assert len(queued) == 3 and len({location for _, location in queued}) == 3
    assert {swap_id for swap_id, _ in queued} == {bad.swap_id, again.swap_id}

    history = cli_json("history", table)
    assert [s["swap_id"] for s in history["swaps"]] == [again.swap_id, bad.swap_id]
    shown = cli_json("show", table)
    assert shown  # the current partitions with the swap that set each
    assert again.swap_id in json.dumps(shown)

    rollback = cli_json("rollback", table, "--to", bad.swap_id, "--yes")
    assert rollback["kind"] == "rollback"
    good = {(today(i),): (5, ("good",)) for i in range(3)}
    assert reader_view(spark, table) == good
    states = {(d.swap_id, loc.normalize(d.location)): d.state for d in journal.deletions_of(db, "events")}
    assert states[(bad.swap_id, good_day1)] == "restored"  # live again: never deleted

    assert cli_json("recover")["resolutions"] == []
    report = cli_json("janitor", "run", "--table", table, "--grace", "0", "--force-short-grace")
    assert report["ok"] and report["counts"].get("deleted", 0) >= 1
    assert reader_view(spark, table) == good  # the janitor freed only unreferenced data
    assert Path(loc.to_local_path(good_day1)).is_dir()
    after = {(d.swap_id, loc.normalize(d.location)): d.state for d in journal.deletions_of(db, "events")}
    assert after[(bad.swap_id, good_day1)] == "restored"
    assert "pending" not in set(after.values())
    for (_, location), state in after.items():
        assert (state == "deleted") == (not Path(loc.to_local_path(location)).exists()), (location, state)
    with journal.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM tableswap_janitor_claims")).scalar() == 0
        assert conn.execute(sa.text("SELECT count(*) FROM tableswap_janitor_runs")).scalar() == 1
    assert [s["swap_id"] for s in cli_json("history", table)["swaps"]][0] == rollback["swap_id"]
    journal.close()


@pytest.mark.parametrize("args", [
    ["history", "db.t"],
    ["recover"],
    ["janitor", "run", "--dry-run"],
])
def test_unreachable_postgres_journal_is_a_one_line_cli_error(pg_server, args):
    url = sa.engine.make_url(pg_server.url).set(port=1, password="s3cret").render_as_string(hide_password=False)
    env = {**os.environ, "PYTHONPATH": SRC, "TABLESWAP_JOURNAL_URL": url,
           "TABLESWAP_METASTORE_URI": "thrift://127.0.0.1:1"}
    proc = subprocess.run([sys.executable, "-m", "tableswap", *args], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "sqlalchemy" not in proc.stderr.lower()
    assert proc.stderr.startswith("error: ") and "cannot reach the PostgreSQL journal" in proc.stderr
    assert "s3cret" not in proc.stderr
