"""No secret in any output: journal and metastore URLs with passwords (also with an unescaped ``@``) and
secret parameters, through the real CLI in a subprocess (errors, ``--json``, ``doctor``, logs). The
journal URLs point at the PostgreSQL test server with a role that does not exist, a closed port and a
host name that does not resolve, so that each of the journal's error paths runs; nothing is changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import sqlalchemy as sa

from ..support.helpers import SRC

pytestmark = pytest.mark.hostile

SECRETS = ("s3cretpw", "tail9x", "tok3nvalue", "ms-s3cret", "AWSs3cretKEY")


def run_all(commands: list[tuple[list[str], dict[str, str]]], tmp_path) -> list[subprocess.CompletedProcess]:
    """Each ``(args, env)`` as a CLI process, all started at once (each is mostly Python's start-up), in order."""
    started = [_start(args, tmp_path, env) for args, env in commands]
    done = []
    for proc in started:
        try:
            out, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            for other in started:
                other.kill()
            raise
        done.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def _start(args: list[str], tmp_path, env: dict[str, str]) -> subprocess.Popen:
    full = {**{k: v for k, v in os.environ.items() if not k.startswith("TABLESWAP_")}, "PYTHONPATH": SRC,
            "TABLESWAP_STATE_DIR": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "TABLESWAP_LOG_LEVEL": "info",
            "TABLESWAP_METASTORE_URI": "thrift://hmsuser:ms-s3cret@127.0.0.1:1?token=tok3nvalue",
            "AWS_SECRET_ACCESS_KEY": "AWSs3cretKEY", **env}
    return subprocess.Popen([sys.executable, "-m", "tableswap", *args], env=full, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def assert_clean(proc: subprocess.CompletedProcess, host: str) -> None:
    out = proc.stdout + proc.stderr
    # Tracebacks only in log lines (the info log records the Thrift library's connection failures).
    assert not [ln for ln in out.splitlines() if "Traceback" in ln and '"exception"' not in ln], out
    for secret in SECRETS:
        assert secret not in out, f"{secret!r} shown:\n{out}"
    assert host in out, out  # the error still says where


def journal_urls(pg_server) -> list[tuple[str, str]]:
    base = sa.engine.make_url(pg_server.url)
    host, port = base.host or "127.0.0.1", base.port or 5432
    return [
        (f"postgresql://nosuchrole:s3cretpw@{host}:{port}/test", host),               # login refused
        (f"postgresql://nosuchrole:s3cretpw@tail9x@{host}:{port}/test", host),        # unescaped @
        (f"postgresql://nosuchrole@{host}:{port}/test?password=s3cretpw&sslpassword=tok3nvalue", host),
        ("postgresql://u:s3cretpw@127.0.0.1:1/db?sslpassword=tok3nvalue", "127.0.0.1:1"),  # refused
        ("postgresql://u:s3cretpw@nohost.invalid:5432/db", "nohost.invalid"),        # unresolvable
        ("postgresql://u:s3cretpw@[::1/db?key=tok3nvalue", "postgresql://u:***@"),   # unparsable
    ]


@pytest.mark.parametrize("case", range(6))
def test_history_error_text_and_json_show_no_secret(pg_server, tmp_path, case):
    url, host = journal_urls(pg_server)[case]
    # The journal URL from the environment (text and --json), and given as an option.
    text, as_json, option = run_all([(["history", "db.t"], {"TABLESWAP_JOURNAL_URL": url}),
                                     (["history", "db.t", "--json"], {"TABLESWAP_JOURNAL_URL": url}),
                                     (["history", "db.t", "--journal-url", url], {})], tmp_path)
    for proc in (text, as_json):
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert_clean(proc, host)
    payload = json.loads(as_json.stdout)
    assert payload["ok"] is False and payload["error_type"] == "JournalError"
    assert option.returncode == 1 and "error: " in option.stderr
    assert_clean(option, host)


@pytest.mark.parametrize("case", [1, 2, 4])
def test_doctor_text_and_json_show_no_secret(pg_server, tmp_path, case):
    url, host = journal_urls(pg_server)[case]
    text, proc = run_all([(["doctor"], {"TABLESWAP_JOURNAL_URL": url}),
                          (["doctor", "--json"], {"TABLESWAP_JOURNAL_URL": url})], tmp_path)
    assert text.returncode == 1
    assert_clean(text, host)
    assert "thrift://hmsuser:***@127.0.0.1:1?token=***" in text.stdout
    assert proc.returncode == 1
    assert_clean(proc, host)
    payload = json.loads(proc.stdout)
    config = {e["key"]: e["value"] for e in payload["config"]}
    assert config["metastore_uri"] == "thrift://hmsuser:***@127.0.0.1:1?token=***"
    assert "***" in config["journal_url"]
    assert {c["name"]: c["status"] for c in payload["checks"]}["journal"] == "fail"


def test_metastore_errors_and_logs_show_no_secret(tmp_path):
    # A reachable journal, an unreachable metastore with credentials in its URI: the error and the
    # log (JSON lines on stderr, level info) name the host, never the password or the token.
    from tableswap.journal import Journal

    Journal(f"sqlite:///{tmp_path / 'j.db'}").close()  # an existing journal: read-only commands never create one
    env = {"TABLESWAP_JOURNAL_URL": f"sqlite:///{tmp_path / 'j.db'}", "TABLESWAP_LOG_FORMAT": "json"}
    args = ["rollback", "db.t", "--dry-run", "--json"]
    refused, proc = run_all([(args, env), (args, {**env, "TABLESWAP_METASTORE_URI": "thrift://127.0.0.1:1"})],
                            tmp_path)
    assert refused.returncode != 0
    assert_clean(refused, "127.0.0.1:1")
    # A thrift:// URI takes no user-info or query (refused as a configuration error, masked); the retries of
    # a valid one are logged, with the process's secret-named variables never shown.
    assert "not of the form thrift://HOST:PORT" in json.loads(refused.stdout)["error"]
    assert proc.returncode != 0
    assert_clean(proc, "127.0.0.1:1")
    retries = [json.loads(ln) for ln in proc.stderr.splitlines() if '"metastore.retry"' in ln]
    assert retries and all(r["uri"] == "thrift://127.0.0.1:1" for r in retries)
