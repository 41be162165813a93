"""``tableswap janitor status`` on a real journal (SQLite and PostgreSQL): recent runs, pending count (size
unknown), the oldest pending entry, the backlog past grace (``--grace``, ``[janitor] grace``, 24h), refusals
with their reasons, ``--table``; it reads the journal only (no metastore) and never creates one."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from tableswap.cli import main
from tableswap.journal import Journal
from tableswap.journal.queue import JanitorQueue
from tableswap.journal.store import STAGING, SwapItem, SwapRecord, utcnow


def ago(hours: float) -> str:
    return (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=hours)).isoformat(timespec="microseconds")


def committed(journal: Journal, swap_id: str, table: str, displaced: list[tuple[str, str]], queued_hours_ago: float):
    journal.begin_swap(SwapRecord(swap_id=swap_id, db_name="db", table_name=table, kind="partitions", state=STAGING,
                                  table_root=f"file:/w/{table}", started_at=utcnow(), user_name="me", host_name="h"))
    journal.record_intent(swap_id, [SwapItem(p, "replace", old, f"{old}_new") for p, old in displaced])
    journal.commit(swap_id, displaced)
    with journal.engine.begin() as conn:
        conn.execute(sa.text("UPDATE tableswap_deletions SET queued_at = :t WHERE swap_id = :s"),
                     {"t": ago(queued_hours_ago), "s": swap_id})


@pytest.fixture
def journal_env(any_journal_url, monkeypatch, tmp_path):
    for key in list(os.environ):
        if key.startswith("TABLESWAP_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("TABLESWAP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no config file
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", any_journal_url)
    journal = Journal(any_journal_url)
    committed(journal, "s_old", "events", [("dt=1", "file:/w/events/a"), ("dt=2", "file:/w/events/b")], 50)
    committed(journal, "s_new", "events", [("dt=3", "file:/w/events/c")], 2)
    committed(journal, "s_dim", "dim", [("", "file:/w/dim/v1")], 30)
    queue = JanitorQueue(journal)
    queue.record([("s_old", "file:/w/events/b", "refused", "referenced by db.other partition dt=2")], None)
    queue.record_run({"run_id": "j1", "started_at": ago(3), "finished_at": ago(3), "host_name": "cron1",
                      "table_filter": None, "grace_seconds": 86400, "keep_count": 0, "deleted": 4,
                      "bytes_freed": 2048, "refused": 1, "errors": 0})
    queue.record_run({"run_id": "j2", "started_at": ago(1), "finished_at": ago(1), "host_name": "cron1",
                      "table_filter": "db.dim", "grace_seconds": 86400, "keep_count": 0, "deleted": 0,
                      "bytes_freed": 0, "refused": 0, "errors": 0})
    journal.close()
    return any_journal_url


def status(*args: str) -> dict:
    result = CliRunner().invoke(main, ["janitor", "status", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_status_of_every_table(journal_env):
    got = status()
    assert got["grace_seconds"] == 86400 and got["grace_source"] == "default"
    assert [r["run_id"] for r in got["runs"]] == ["j2", "j1"] and got["last_run"]["run_id"] == "j2"
    assert 3000 < got["last_run_age_seconds"] < 4000
    assert got["pending"]["count"] == 4 and got["pending"]["bytes"] is None and got["pending"]["bytes_known"] is False
    oldest = got["pending"]["oldest"]
    assert oldest["swap_id"] == "s_old" and oldest["table"] == "db.events" and oldest["age_seconds"] > 49 * 3600
    # Past 24h: the two entries of s_old (50h) and dim's (30h); s_new's (2h) is within its grace.
    assert got["past_grace"]["count"] == 3 and got["past_grace"]["oldest_age_seconds"] > 49 * 3600
    [refused] = got["refused"]["entries"]
    assert got["refused"]["count"] == 1 and refused["location"] == "file:/w/events/b"
    assert refused["reason"] == "referenced by db.other partition dt=2" and refused["attempts"] == 1
    assert got["journal"]["url"].split("@")[-1] == journal_env.split("@")[-1] and got["metastore"] is None


def test_grace_from_option_and_config_file(journal_env, tmp_path, monkeypatch):
    assert status("--grace", "40h")["past_grace"]["count"] == 2
    assert status("--grace", "1h")["past_grace"]["count"] == 4
    config = tmp_path / "config.toml"
    config.write_text('[janitor]\ngrace = "72h"\n')
    monkeypatch.setenv("TABLESWAP_CONFIG", str(config))
    got = status()
    assert got["past_grace"]["count"] == 0 and got["grace_seconds"] == 72 * 3600
    assert str(config) in got["grace_source"]


def test_one_table(journal_env):
    got = status("--table", "db.dim")
    assert got["table"] == "db.dim" and got["pending"]["count"] == 1 and got["past_grace"]["count"] == 1
    assert got["refused"]["count"] == 0
    assert [r["run_id"] for r in got["runs"]] == ["j2", "j1"]  # its own run and the run of every table
    events = status("--table", "db.events")
    assert [r["run_id"] for r in events["runs"]] == ["j1"] and events["pending"]["count"] == 3


def test_text_output(journal_env):
    result = CliRunner().invoke(main, ["janitor", "status"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("journal: ") and "metastore: none configured" in out
    assert "last run: j2" in out and "pending: 4 location(s), size unknown" in out
    assert "oldest pending: queued" in out and "s_old" in out
    assert "past grace: 3 pending for longer than 1d" in out
    assert "refused: 1" in out and "referenced by db.other partition dt=2" in out
    assert "freed 2.0 KiB" in out or "2.0 KiB" in out


def test_no_journal_is_an_error_and_nothing_is_created(clean_env, tmp_path):
    result = CliRunner().invoke(main, ["janitor", "status", "--json"], catch_exceptions=False)
    assert result.exit_code == 1 and json.loads(result.stdout)["error_type"] == "JournalNotFoundError"
    assert not (tmp_path / "state").exists()
