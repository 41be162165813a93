"""The CLI's one output interface (``tableswap.cli.output``): each method rendered as text and as JSON,
the choice made once from ``--json``, and no command looking at the flag itself. Pure: small click
commands run with click's ``CliRunner``, no metastore, no journal."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from tableswap import errors
from tableswap.cli.output import (
    JsonOutput, Output, TextOutput, choose_output, current_output, output_option, render_table, where_lines,
)

WHERE = {"journal": {"url": "sqlite:////tmp/j.db", "source": "command line", "default": False},
         "metastore": {"uri": "thrift://h:9083", "source": "env TABLESWAP_METASTORE_URI", "used": True}}


def run(body, *, json_flag: bool, **layout):
    """Run ``body(out)`` inside a click command whose ``--json`` option chose ``out``."""
    seen = {}

    @click.command()
    @output_option(**layout)
    def cmd(out: Output) -> None:
        seen["out"] = out
        seen["current"] = current_output()
        body(out)

    result = CliRunner().invoke(cmd, ["--json"] if json_flag else [])
    return result, seen


def never() -> str:
    raise AssertionError("called by the output that does not print it")


# ---------------------------------------------------------------- the choice, made once
def test_the_json_flag_chooses_the_output_once_and_helpers_find_the_same_object():
    for flag, kind in ((False, TextOutput), (True, JsonOutput)):
        result, seen = run(lambda out: None, json_flag=flag)
        assert result.exit_code == 0, result.output
        assert type(seen["out"]) is kind
        assert seen["current"] is seen["out"]


def test_choose_output_passes_the_json_layout():
    out = choose_output(True, indent=None, sort_keys=True)
    assert isinstance(out, JsonOutput) and (out.indent, out.sort_keys) == (None, True)
    assert isinstance(choose_output(False, indent=None), TextOutput)


def test_current_output_outside_a_command_is_text():
    assert isinstance(current_output(), TextOutput)


# ---------------------------------------------------------------- result
def test_result_text_prints_the_text_only_and_never_builds_the_document():
    result, _ = run(lambda out: out.result(never, lambda: "a\nb"), json_flag=False)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "a\nb\n", "")


def test_result_text_none_prints_nothing():
    result, _ = run(lambda out: out.result({"x": 1}, None), json_flag=False)
    assert (result.exit_code, result.stdout) == (0, "")


def test_result_json_prints_the_document_indented_in_its_order_and_never_builds_the_text():
    result, _ = run(lambda out: out.result(lambda: {"b": 1, "a": [1, 2]}, never), json_flag=True)
    assert result.exit_code == 0, result.output
    assert result.stdout == '{\n  "b": 1,\n  "a": [\n    1,\n    2\n  ]\n}\n'
    assert result.stderr == ""


def test_result_json_adds_where_after_the_document_unless_it_has_it():
    def body(out: Output) -> None:
        out.announce(WHERE)
        out.result({"ok": True, "metastore": "mine"})

    result, _ = run(body, json_flag=True)
    doc = json.loads(result.stdout)
    assert list(doc) == ["ok", "metastore", "journal"]
    assert doc["metastore"] == "mine" and doc["journal"] == WHERE["journal"]


def test_result_json_one_line_sorted_layout_and_non_dict_documents():
    result, _ = run(lambda out: out.result({"b": 1, "a": None}), json_flag=True, indent=None, sort_keys=True)
    assert result.stdout == '{"a": null, "b": 1}\n'
    result, _ = run(lambda out: out.result([Path("/x"), 2]), json_flag=True)
    assert json.loads(result.stdout) == ["/x", 2]  # default=str, as before


# ---------------------------------------------------------------- announce, message
def test_announce_text_prints_where_lines_json_prints_nothing():
    result, _ = run(lambda out: out.announce(WHERE), json_flag=False)
    assert result.stdout == "journal: sqlite:////tmp/j.db (command line)\n" \
                            "metastore: thrift://h:9083 (env TABLESWAP_METASTORE_URI)\n"
    result, seen = run(lambda out: out.announce(WHERE), json_flag=True)
    assert result.stdout == "" and seen["out"].where == WHERE


def test_where_lines_default_journal_no_metastore_and_not_contacted():
    where = {"journal": {"url": "sqlite:///x", "source": "default", "default": True}, "metastore": None}
    assert where_lines(where) == [
        "journal: sqlite:///x (default: a SQLite file local to this machine; set --journal-url / "
        "TABLESWAP_JOURNAL_URL to the writers' journal)", "metastore: none configured"]
    where["metastore"] = {"uri": "thrift://h:1", "source": "config file", "used": False}
    assert where_lines(where)[1] == "metastore: thrift://h:1 (config file), not contacted"


def test_message_text_on_stdout_or_stderr_json_dropped():
    def body(out: Output) -> None:
        out.message("plan")
        out.message("error: refused", err=True)

    result, _ = run(body, json_flag=False)
    assert (result.stdout, result.stderr) == ("plan\n", "error: refused\n")
    result, _ = run(body, json_flag=True)
    assert (result.stdout, result.stderr) == ("", "")


# ---------------------------------------------------------------- failures
def test_error_text_is_one_masked_line_on_stderr():
    exc = errors.JournalError("cannot open postgresql://u:hunter22@h/db, token sekrit-value-1")
    result, _ = run(lambda out: out.error(exc, 1, {"sekrit-value-1"}), json_flag=False)
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: cannot open postgresql://u:")
    assert "hunter22" not in result.stderr and "sekrit-value-1" not in result.stderr


def test_error_json_is_one_object_on_stdout_with_code_and_where():
    exc = errors.TableNotFoundError("no table db.t, token sekrit-value-1", table="db.t")

    def body(out: Output) -> None:
        out.announce(WHERE)
        out.error(exc, 3, {"sekrit-value-1"})

    result, _ = run(body, json_flag=True)
    assert result.stderr == "" and result.stdout.count("\n") == 1
    doc = json.loads(result.stdout)
    assert doc == {"ok": False, "error": "no table db.t, token ***", "error_type": "TableNotFoundError",
                   "retryable": False, "table": "db.t", "exit_code": 3, **WHERE}
    assert list(doc)[:2] == ["ok", "error"]


def test_usage_error_and_aborted():
    def body(out: Output) -> None:
        out.usage_error(click.UsageError("give --as-of or --at, not both"))
        out.aborted()

    result, _ = run(body, json_flag=False)
    assert "Error: give --as-of or --at, not both\n" in result.stderr and result.stderr.endswith("Aborted!\n")
    assert result.stdout == ""
    result, _ = run(body, json_flag=True)
    first, second = (json.loads(line) for line in result.stdout.splitlines())
    assert first == {"ok": False, "error": "give --as-of or --at, not both", "error_type": "UsageError",
                     "retryable": False, "exit_code": 2}
    assert second == {"ok": False, "error": "aborted", "error_type": "Aborted", "retryable": False, "exit_code": 1}
    result, _ = run(lambda out: out.usage_error(click.FileError("f", "gone")), json_flag=True)  # keeps its type
    assert json.loads(result.stdout)["error_type"] == "FileError"


# ---------------------------------------------------------------- confirm
def test_confirm_with_yes_goes_on_in_both_modes():
    for flag in (False, True):
        result, _ = run(lambda out: (out.confirm("go?", True), click.echo("went")), json_flag=flag)
        assert (result.exit_code, result.stdout) == (0, "went\n")


def test_confirm_without_yes_json_is_a_usage_error_naming_the_other_way():
    with pytest.raises(click.UsageError, match=re.escape(
            "--json needs --yes (or --dry-run): there is no prompt in JSON mode")):
        JsonOutput().confirm("go?", False, or_else="--dry-run")
    with pytest.raises(click.UsageError, match=re.escape("--json needs --yes: there")):
        JsonOutput().confirm("go?", False)


def test_confirm_without_yes_text_needs_a_terminal(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    with pytest.raises(click.UsageError, match="not on a terminal: pass --yes"):
        TextOutput().confirm("go?", False)


# ---------------------------------------------------------------- progress
class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_json_and_text_off_a_terminal_is_none(monkeypatch):
    monkeypatch.setattr(sys, "stderr", _Terminal())
    with JsonOutput().progress("janitor") as update:
        assert update is None
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    with TextOutput().progress("janitor") as update:
        assert update is None


def test_progress_text_on_a_terminal_draws_a_bar_on_stderr(monkeypatch):
    stderr = _Terminal()
    monkeypatch.setattr(sys, "stderr", stderr)
    with TextOutput().progress("janitor") as update:
        assert callable(update)
        assert stderr.getvalue() == ""  # nothing before the first update
        update(1, 4)
        update(4, 4)
    assert "janitor" in stderr.getvalue() and "100%" in stderr.getvalue()


# ---------------------------------------------------------------- text helpers, and nothing else reads --json
def test_render_table_aligns_and_blanks_none():
    assert render_table(("a", "long header"), [("xyz", None), (1, "v")]) == (
        "a    long header\n---  -----------\nxyz\n1    v")


def test_no_command_module_reads_the_json_flag_itself():
    cli = Path(__file__).resolve().parents[2] / "src" / "tableswap" / "cli"
    readers = {p.name for p in cli.glob("*.py") if "as_json" in p.read_text()}
    assert readers == {"output.py"}
