"""The CLI's structured log: JSON lines when stderr is not a terminal (or --log-format json), readable
text with --log-format text; swap events carry swap_id and table."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tableswap import swap_partitions
from tableswap.cli import main

from ..support.helpers import batch_df, create_events, today

# The log format is the subject, not the metastore: the runs against further releases leave it out.
pytestmark = [pytest.mark.integration, pytest.mark.release_independent]


def json_lines(stderr: str) -> list[dict]:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines, "no log output"
    return [json.loads(line) for line in lines]  # every line is one JSON object


@pytest.fixture
def swapped(spark, db, tmp_path, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "a").write.insertInto(table)
    result = swap_partitions(batch_df(spark, {(today(0),): 1}, "b"), table)
    return table, result


def test_rollback_without_terminal_logs_json_lines_with_swap_id_and_table(swapped):
    table, _ = swapped
    result = CliRunner().invoke(main, ["--log-level", "info", "rollback", table, "--yes", "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    rollback_id = json.loads(result.stdout)["swap_id"]
    records = json_lines(result.stderr)
    for record in records:
        assert {"timestamp", "level", "event"} <= set(record)
    acquired = [r for r in records if r["event"] == "lock.acquired"]
    assert acquired and acquired[0]["swap_id"] == rollback_id and acquired[0]["table"] == table
    assert acquired[0]["level"] == "info" and acquired[0]["timestamp"].endswith("Z")


def test_log_format_text_and_env_and_config_file(swapped, monkeypatch, tmp_path):
    table, _ = swapped
    text = CliRunner().invoke(main, ["--log-level", "info", "--log-format", "text", "rollback", table, "--yes"],
                              catch_exceptions=False)
    assert text.exit_code == 0
    lines = [line for line in text.stderr.splitlines() if line.strip()]
    assert any("lock.acquired" in line for line in lines)
    assert not any(line.lstrip().startswith("{") for line in lines)

    # [log] in the config file, then the environment over it.
    config = tmp_path / "config.toml"
    config.write_text('[log]\nformat = "text"\nlevel = "info"\n')
    monkeypatch.setenv("TABLESWAP_CONFIG", str(config))
    from_file = CliRunner().invoke(main, ["rollback", table, "--yes"], catch_exceptions=False)
    assert from_file.exit_code == 0 and "lock.acquired" in from_file.stderr
    assert not from_file.stderr.lstrip().startswith("{")
    monkeypatch.setenv("TABLESWAP_LOG_FORMAT", "json")
    from_env = CliRunner().invoke(main, ["rollback", table, "--yes"], catch_exceptions=False)
    assert from_env.exit_code == 0
    assert any(r["event"] == "lock.acquired" and r["table"] == table for r in json_lines(from_env.stderr))


def test_other_libraries_log_records_are_json_lines_too(ts_env):
    """Thrift logs a failed connect through the standard logging module: it becomes a JSON line (from
    --log-level info on; at the default level the command's own error says it once)."""
    result = CliRunner().invoke(main, ["doctor", "--metastore-uri", "thrift://127.0.0.1:1", "--log-level", "info"],
                                catch_exceptions=False)
    assert result.exit_code == 1
    records = json_lines(result.stderr)
    assert any(r.get("logger", "").startswith("thrift") and r["level"] == "error" for r in records)
    quiet = CliRunner().invoke(main, ["doctor", "--metastore-uri", "thrift://127.0.0.1:1"], catch_exceptions=False)
    assert '"logger": "thrift' not in quiet.stderr
