"""The right journal, never a silent empty one (issue 31): every command names the journal and the metastore
it uses (text and ``--json``); read-only commands never create a journal; an unknown table in ``history``
is exit 3, not an empty answer; ``backfill`` needs no metastore; ``doctor`` warns on the default local
journal and never offers SQLite as the fix for a shared journal it cannot reach."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tableswap.cli import main
from tableswap.journal import Journal


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


READ_ONLY = (
    ["history", "db.t"],
    ["backfill", "list"],
    ["backfill", "status", "fix-june"],
    ["janitor", "run", "--dry-run", "--metastore-uri", "thrift://127.0.0.1:1"],
    ["rollback", "db.t", "--dry-run", "--metastore-uri", "thrift://127.0.0.1:1"],
    ["show", "db.t", "--metastore-uri", "thrift://127.0.0.1:1"],
    ["repair", "db.t", "--metastore-uri", "thrift://127.0.0.1:1"],
    ["janitor", "status"],
)


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: " ".join(a[:2]))
def test_read_only_commands_never_create_the_default_journal(clean_env, args):
    state = clean_env / "state"
    result = invoke(*args)
    assert result.exit_code == 1, result.output
    assert "no swap journal at sqlite:///" in result.stderr and str(state / "journal.db") in result.stderr
    assert "--journal-url" in result.stderr and "TABLESWAP_JOURNAL_URL" in result.stderr
    assert "journal_url in the config file" in result.stderr
    assert not state.exists()  # neither the file nor its directory
    assert "Traceback" not in result.output


@pytest.mark.parametrize("args", READ_ONLY, ids=lambda a: " ".join(a[:2]))
def test_a_mistyped_journal_url_is_an_error_naming_it_in_json(clean_env, args):
    url = f"sqlite:///{clean_env}/nonexistent/dir/j.db"
    result = invoke(*args, "--journal-url", url, "--json")
    assert result.exit_code == 1, result.output
    payload = json.loads(result.stdout)
    assert payload["error_type"] == "JournalNotFoundError" and payload["exit_code"] == 1
    assert payload["journal"] == {"url": url, "source": "command line", "default": False}
    assert "does not exist" in payload["error"] and "--journal-url" in payload["error"]
    assert not (clean_env / "nonexistent").exists()


def test_an_empty_postgresql_database_is_no_journal(clean_env, pg_journal_url):
    result = invoke("history", "db.t", "--journal-url", pg_journal_url, "--json")
    assert result.exit_code == 1, result.output
    payload = json.loads(result.stdout)
    assert payload["error_type"] == "JournalNotFoundError" and "tableswap_* tables do not exist" in payload["error"]
    assert payload["journal"]["url"].startswith("postgresql://") and payload["journal"]["source"] == "command line"
    import sqlalchemy as sa

    from tableswap.journal.db import parse_url

    engine = sa.create_engine(parse_url(pg_journal_url))
    try:
        assert not [t for t in sa.inspect(engine).get_table_names() if t.startswith("tableswap_")]
    finally:
        engine.dispose()


def test_backfill_commands_need_no_metastore_and_name_the_journal(clean_env):
    url = f"sqlite:///{clean_env}/j.db"
    Journal(url).close()  # an existing, empty journal
    listed = invoke("backfill", "list", "--journal-url", url)
    assert listed.exit_code == 0, listed.output
    assert f"journal: {url} (command line)" in listed.stdout and "metastore: none configured" in listed.stdout
    assert "no backfills in the journal" in listed.stdout
    payload = json.loads(invoke("backfill", "list", "--journal-url", url, "--json").stdout)
    assert payload["backfills"] == [] and payload["journal"]["url"] == url and payload["metastore"] is None
    unknown = invoke("backfill", "status", "nope", "--journal-url", url, "--json")
    assert unknown.exit_code == 3 and json.loads(unknown.stdout)["journal"]["url"] == url


def test_the_default_journal_is_named_as_the_local_default(clean_env):
    Journal().close()  # the default file exists (a swap on this machine created it)
    result = invoke("history", "db.t")
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"journal: sqlite:///{clean_env}/state/journal.db (default")
    assert "local" in first
    payload = json.loads(invoke("history", "db.t", "--json").stdout)
    assert payload["journal"]["default"] is True and payload["journal"]["source"] == "default"


def test_history_of_a_table_not_in_the_journal_exits_3(clean_env):
    url = f"sqlite:///{clean_env}/j.db"
    Journal(url).close()
    result = invoke("history", "db.nope", "--journal-url", url)
    assert result.exit_code == 3, result.output
    assert "no swaps of db.nope in the journal" in result.stderr and url in result.stderr
    assert "no metastore is configured" in result.stderr
    payload = json.loads(invoke("history", "db.nope", "--journal-url", url, "--json").stdout)
    assert payload["exit_code"] == 3 and payload["error_type"] == "NotFoundError" and payload["table"] == "db.nope"


@pytest.mark.integration
def test_history_unknown_vs_never_swapped_table_against_the_metastore(clean_env, spark, db, tmp_path, metastore_uri):
    from ..support.helpers import create_events

    table = create_events(spark, db, tmp_path)
    url = f"sqlite:///{clean_env}/j.db"
    Journal(url).close()
    never = invoke("history", table, "--journal-url", url, "--metastore-uri", metastore_uri, "--json")
    assert never.exit_code == 0, never.output
    payload = json.loads(never.stdout)
    assert payload["swaps"] == [] and payload["metastore"]["uri"] == metastore_uri
    unknown = invoke("history", f"{db}.nope", "--journal-url", url, "--metastore-uri", metastore_uri, "--json")
    assert unknown.exit_code == 3, unknown.output
    assert json.loads(unknown.stdout)["error_type"] == "TableNotFoundError"


def test_doctor_warns_on_the_default_local_journal(clean_env):
    payload = json.loads(invoke("doctor", "--json").stdout)  # no metastore: config fails, journal still checked
    [journal] = [c for c in payload["checks"] if c["name"] == "journal"]
    assert journal["status"] == "warn" and "local to this machine" in journal["detail"]
    assert "shared PostgreSQL journal" in journal["fix"] and "TABLESWAP_JOURNAL_URL" in journal["fix"]
    assert payload["journal"]["default"] is True


def test_doctor_never_suggests_sqlite_for_an_unreachable_shared_journal(clean_env):
    url = "postgresql://postgres@127.0.0.1:1/test"
    payload = json.loads(invoke("doctor", "--journal-url", url, "--json").stdout)
    [journal] = [c for c in payload["checks"] if c["name"] == "journal"]
    assert journal["status"] == "fail" and "127.0.0.1:1" in journal["detail"]
    assert "sqlite:" not in journal["fix"].replace("local SQLite file", "")
    assert "do not switch" in journal["fix"]
    assert payload["journal"] == {"url": url, "source": "command line", "default": False}
