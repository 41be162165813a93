"""docs/cli.md against the real CLI, so that the two cannot drift (issue 31): every command a section heading
documents exists, every option its heading or option table names is in its ``--help``, the common options
are where the page says, and each code of the exit-code table comes out of a real invocation."""

from __future__ import annotations

import json
import re
import socket
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from tableswap.cli import main
from tableswap.journal import Journal

from ..support.helpers import assert_documented, documented_error

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
TEXT = DOC.read_text()
# Commands that use neither the metastore nor the journal (the page says so).
NO_CONNECTION = {("metastore", "start"), ("metastore", "stop"), ("metastore", "status"), ("jars", "s3")}


def leaf_commands(group=main, path=()) -> list[tuple[str, ...]]:
    out = []
    for name, command in sorted(group.commands.items()):
        if hasattr(command, "commands"):
            out.extend(leaf_commands(command, (*path, name)))
        else:
            out.append((*path, name))
    return out


def help_text(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(main, [*path, "--help"], catch_exceptions=False)
    assert result.exit_code == 0, (path, result.output)
    return result.stdout


def documented_sections() -> list[tuple[tuple[str, ...], set[str]]]:
    """``(command path, options)`` for each ``## `tableswap ...` `` / ``### `tableswap ...` `` heading: the
    options of the heading and of the option tables (``| `--x ...` |``) under it."""
    sections = []
    parts = re.split(r"^#{2,3} `tableswap ([^`]+)`.*$", TEXT, flags=re.M)
    for heading, body in zip(parts[1::2], parts[2::2]):
        words = []
        for word in heading.split():
            if word.startswith(("-", "[")) or word.isupper() or word == "DB.TABLE":
                break
            words.append(word)
        body = re.split(r"^#{2,3} ", body, flags=re.M)[0]  # up to the next heading
        options = set(re.findall(r"--[a-z][a-z0-9-]*", heading))
        for row in re.findall(r"^\| (`(?:\\\||[^|])*)\|", body, flags=re.M):  # first cells starting with `
            options.update(re.findall(r"--[a-z][a-z0-9-]*", row))
        alternatives = words[-1].split("|")
        for alternative in alternatives:
            sections.append(((*words[:-1], alternative), options))
    return sections


def test_every_documented_command_and_option_exists():
    sections = documented_sections()
    assert len(sections) >= 12
    leaves = set(leaf_commands())
    for path, options in sections:
        assert path in leaves, f"docs/cli.md documents `tableswap {' '.join(path)}`, which does not exist"
        text = help_text(path)
        for option in options:
            assert re.search(rf"(^|[\s,/]){re.escape(option)}\b", text), \
                f"docs/cli.md: `tableswap {' '.join(path)}` {option} is not in its --help"


def test_every_command_is_documented_in_cli_md_or_janitor_md():
    documented = {path for path, _ in documented_sections()}
    janitor_md = (DOC.parent / "janitor.md").read_text()
    for path in leaf_commands():
        if path not in documented:
            assert f"tableswap {' '.join(path)}" in janitor_md, f"`tableswap {' '.join(path)}` is not documented"


def test_the_common_options_are_where_the_page_says():
    common = re.search(r"## Common options and exit codes\n(.*?)\n\| exit code", TEXT, flags=re.S).group(1)
    options = set(re.findall(r"^\| `(--[a-z-]+)", common, flags=re.M))
    assert options == {"--metastore-uri", "--journal-url", "--json"}
    assert "all but `tableswap metastore start|stop|status`\nand `tableswap jars s3`" in common
    for path in leaf_commands():
        text = help_text(path)
        assert "--json" in text and "-h, --help" in text, path
        for option in ("--metastore-uri", "--journal-url"):
            assert (option in text) is (path not in NO_CONNECTION), (path, option)
    top = help_text(())
    for option in ("--log-level", "--log-format", "--json", "--metastore-uri", "--journal-url"):
        assert option in top


def exit_table() -> dict[int, str]:
    rows = re.findall(r"^\| (\d) \| (.+) \|$", TEXT, flags=re.M)
    return {int(code): meaning for code, meaning in rows}


@pytest.fixture
def docs_env(clean_env, monkeypatch, tmp_path):
    """conftest's clean environment, with a fresh SQLite journal as TABLESWAP_JOURNAL_URL."""
    url = f"sqlite:///{tmp_path}/j.db"
    Journal(url).close()
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", url)
    return tmp_path


def test_each_documented_exit_code_from_a_real_invocation(docs_env):
    table = exit_table()
    assert sorted(table) == [0, 1, 2, 3, 4, 5]
    assert "usage" in table[2] and "not found" in table[3] and "conflict" in table[4] and "unsafe" in table[5]
    cases = {
        0: ["backfill", "list"],
        1: ["history", "db.t", "--journal-url", f"sqlite:///{docs_env}/missing/j.db"],
        2: ["history"],  # a missing argument
        3: ["backfill", "status", "no-such-backfill"],
        5: ["janitor", "run", "--grace", "1m", "--metastore-uri", "thrift://127.0.0.1:1"],  # below the floor
    }
    for code, args in cases.items():
        text = CliRunner().invoke(main, args, catch_exceptions=False)
        assert text.exit_code == code, (args, text.output)
        as_json = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
        assert as_json.exit_code == code, (args, as_json.output)
        payload = json.loads(as_json.stdout)  # every outcome, usage errors too, is one JSON document
        if code:
            assert payload["ok"] is False and payload["exit_code"] == code and payload["error"], payload
    # The documented examples of exit 2.
    for args in (["janitor", "run", "--grace", "ten minutes", "--json"], ["--json", "history", "a.b", "--nope"]):
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 2 and json.loads(result.stdout)["error_type"] == "UsageError", result.output


@pytest.mark.integration
def test_exit_code_4_when_the_table_lock_is_held(spark, db, tmp_path, hms, ts_env, monkeypatch):
    from tableswap import swap_partitions
    from tableswap.metastore.lock import TableLock

    from ..support.helpers import batch_df, create_events, today

    assert "lock is held" in exit_table()[4]
    table = create_events(spark, db, tmp_path)
    swap_partitions(batch_df(spark, {(today(0),): 2}, "a"), table)
    config = tmp_path / "config.toml"
    config.write_text("[swap]\nlock_timeout_s = 1\n")
    monkeypatch.setenv("TABLESWAP_CONFIG", str(config))
    with TableLock(hms, db, "events", swap_id="held_by_test"):
        result = CliRunner().invoke(main, ["rollback", table, "--yes", "--json"], catch_exceptions=False)
        plain = CliRunner().invoke(main, ["rollback", table, "--yes"], catch_exceptions=False)
    # One line on stderr for the failure: the library's own record of it is not printed again.
    assert plain.exit_code == 4
    assert [line for line in plain.stderr.splitlines() if line.strip()] == [
        line for line in plain.stderr.splitlines() if line.startswith("error: could not lock ")], plain.stderr
    assert plain.stderr.count("error: could not lock ") == 1, plain.stderr
    assert result.exit_code == 4, result.output
    payload = json.loads(result.stdout)
    assert payload["exit_code"] == 4 and payload["retryable"] is True
    # docs/troubleshooting.md quotes this error (the holder's lock, user, host, swap id and pid, the table,
    # and the server version's expiry hint are the documented run's).
    assert_documented("error: " + payload["error"], documented_error("error: could not lock "),
                      ["sales.events", "root@vm", "host=vm", "20261125_023300_holder01",
                       "hive.txn.timeout, with hive.compactor.initiator.on=true on Hive 2.3"])


# ----------------------------------------------------------------- docs/troubleshooting.md's texts


def _serve(answer: bytes | None) -> tuple[socket.socket, int]:
    """A loopback port that reads each request and answers ``answer`` (None: nothing) before closing."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)

    def loop() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                try:
                    conn.recv(65536)
                    if answer:
                        conn.sendall(answer)
                except OSError:
                    pass

    threading.Thread(target=loop, daemon=True).start()
    return server, server.getsockname()[1]


def test_the_troubleshooting_metastore_texts_are_what_the_cli_prints(docs_env, monkeypatch):
    """A port that closes each connection unanswered (what a SASL metastore does to tableswap: seen with
    Hive 4.0.1 and metastore.authentication=CONFIG) and one that answers in another protocol (HTTP)."""
    config = docs_env / "config.toml"
    config.write_text("[swap]\nconnect_attempts = 2\n")
    monkeypatch.setenv("TABLESWAP_CONFIG", str(config))
    cases = [(None, "error: cannot reach the Hive Metastore at thrift://127.0.0.1:47120 (TSocket read 0 bytes"),
             (b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
              "error: get_all_databases: the server answered, but not in the Hive Metastore's Thrift protocol")]
    for answer, start in cases:
        server, port = _serve(answer)
        try:
            result = CliRunner().invoke(main, ["show", "db.t", "--metastore-uri", f"thrift://127.0.0.1:{port}",
                                               "--json"], catch_exceptions=False)
        finally:
            server.close()
        assert result.exit_code == 1, result.output
        assert_documented("error: " + json.loads(result.stdout)["error"], documented_error(start))
