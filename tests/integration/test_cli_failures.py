"""One line per failure (issue 31): no Python traceback by default, retries summarised in the error, tracebacks
only at ``--log-level debug``, the Thrift library's loggers following ``--log-level``, a config error printed
once, and ``--log-level`` / ``--json`` / ``--metastore-uri`` / ``--journal-url`` before or after the command.
Through the real program in a subprocess (real stderr, no terminal)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tableswap.journal import Journal

from ..support.helpers import SRC

NOHOST = "thrift://nohost.invalid:9083"


@pytest.fixture
def failing_env(tmp_path):
    journal = f"sqlite:///{tmp_path}/j.db"
    Journal(journal).close()
    config = tmp_path / "config.toml"
    config.write_text("[swap]\nconnect_attempts = 2\n")  # two attempts: a short test, still a retry
    return {**{k: v for k, v in os.environ.items() if not k.startswith("TABLESWAP_")}, "PYTHONPATH": SRC,
            "TABLESWAP_STATE_DIR": str(tmp_path / "state"), "TABLESWAP_CONFIG": str(config),
            "TABLESWAP_JOURNAL_URL": journal}


def run(failing_env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tableswap", *args], env=failing_env, capture_output=True, text=True,
                          timeout=120)


def test_an_unreachable_metastore_is_one_error_line_by_default(failing_env):
    proc = run(failing_env, "show", "db.t", "--metastore-uri", NOHOST)
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: cannot reach the Hive Metastore at thrift://nohost.invalid:9083")
    assert "2 attempts" in lines[0]  # the retries, summarised
    assert "Traceback" not in proc.stdout + proc.stderr


def test_log_level_error_before_or_after_the_command_leaves_only_the_error(failing_env):
    for args in (["--log-level", "error", "show", "db.t", "--metastore-uri", NOHOST],
                 ["show", "db.t", "--metastore-uri", NOHOST, "--log-level", "error"],
                 ["--metastore-uri", NOHOST, "show", "db.t", "--log-level=error"]):
        proc = run(failing_env, *args)
        assert proc.returncode == 1, proc.stderr
        assert [ln for ln in proc.stderr.splitlines() if not ln.startswith("error: ")] == [], (args, proc.stderr)


def test_info_shows_each_retry_and_thrift_lines_without_tracebacks(failing_env):
    proc = run(failing_env, "show", "db.t", "--metastore-uri", NOHOST, "--log-level", "info")
    records = [json.loads(ln) for ln in proc.stderr.splitlines() if ln.startswith("{")]
    assert [r["attempt"] for r in records if r["event"] == "metastore.retry"] == [1]
    assert any(r.get("logger", "").startswith("thrift") for r in records)  # thrift follows --log-level
    assert not any("exception" in r for r in records) and "Traceback" not in proc.stderr


def test_debug_shows_tracebacks(failing_env):
    proc = run(failing_env, "show", "db.t", "--log-level", "debug", "--metastore-uri", NOHOST)
    records = [json.loads(ln) for ln in proc.stderr.splitlines() if ln.startswith("{")]
    assert any("Traceback" in r.get("exception", "") for r in records if r.get("logger", "").startswith("thrift"))
    assert proc.stderr.splitlines()[-1].startswith("error: cannot reach the Hive Metastore")


def test_a_config_error_is_printed_once(failing_env, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("bogus = 1\n")
    failing_env = {**failing_env, "TABLESWAP_CONFIG": str(bad)}
    for args in (["history", "db.t"], ["metastore", "status", "--state-dir", str(tmp_path / "hms")]):
        proc = run(failing_env, *args)
        assert proc.returncode == 1
        assert (proc.stdout + proc.stderr).count("unknown key 'bogus'") == 1, (args, proc.stderr)


def test_command_options_before_the_command(failing_env, tmp_path):
    other = f"sqlite:///{tmp_path}/other.db"
    Journal(other).close()
    proc = run(failing_env, "--json", "--journal-url", other, "backfill", "list")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["journal"]["url"] == other
    proc = run(failing_env, "--journal-url=" + other, "--log-level", "debug", "backfill", "list", "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["journal"]["source"] == "command line"
