"""Issue 54: one dry-run rule (docs/cli.md, "Dry runs"). Every command and library call that changes a table or
deletes data takes ``--dry-run`` / ``dry_run=True``; the library's default is ``dry_run=False`` (``repair`` and
``run_janitor``, whose default was the dry run, require the keyword for now); the commands that rewrite a table's
past show their plan and ask, ``--yes`` skips the question. Pure checks of the CLI and the signatures, no
metastore (the behaviours against the real one: tests/integration/test_repair.py)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import click
import pytest

import tableswap
from tableswap import errors
from tableswap.cli import main
from tableswap.ops.janitor.run import run_janitor
from tableswap.ops.restore.group_rollback import rollback_group
from tableswap.ops.restore.recover import recover
from tableswap.ops.restore.repair import repair
from tableswap.ops.restore.rollback import rollback
from tableswap.ops.write.group import discard_group, publish_group
from tableswap.ops.write.staged import discard, publish

# Every command is in exactly one of these: a new command fails test_every_command_is_classified until it is.
CHANGES = {"rollback", "recover", "janitor run", "repair", "compact", "publish", "discard", "sql"}
READ_ONLY = {"history", "show", "staged", "diff", "doctor", "janitor status", "backfill status", "backfill list",
             "metastore start", "metastore stop", "metastore status", "jars s3"}  # change no table's data
#: Those that rewrite a table's past: they show the plan and ask on a terminal, --yes skips the question.
REWRITE_THE_PAST = {"rollback", "repair"}

#: Library calls that change a table or delete data, and the default of their ``dry_run``.
LIBRARY = {tableswap.swap_partitions: False, tableswap.swap_table: False, tableswap.merge_partitions: False,
           tableswap.compact_partitions: False, rollback: False, rollback_group: False, recover: False,
           repair: "required", run_janitor: "required", publish: False, discard: False, publish_group: False,
           discard_group: False, tableswap.sql: False, tableswap.backfill: False}


def commands(group: click.Group = main, prefix: str = "") -> dict[str, click.Command]:
    out: dict[str, click.Command] = {}
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            out.update(commands(command, f"{prefix}{name} "))
        else:
            out[prefix + name] = command
    return out


def options(command: click.Command) -> set[str]:
    return {o for p in command.params if isinstance(p, click.Option) for o in p.opts}


def test_every_command_is_classified():
    classes = [CHANGES, READ_ONLY]
    assert set(commands()) == set().union(*classes), "classify the new command here (and document its dry run)"
    assert sum(len(c) for c in classes) == len(set().union(*classes))


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_every_command_that_changes_a_table_takes_dry_run(name):
    assert "--dry-run" in options(commands()[name])


@pytest.mark.parametrize("name", sorted(REWRITE_THE_PAST))
def test_the_commands_that_rewrite_the_past_ask_and_take_yes(name):
    assert {"--yes", "--dry-run"} <= options(commands()[name])


@pytest.mark.parametrize("call", LIBRARY, ids=lambda f: f.__name__)
def test_every_library_call_that_changes_a_table_has_dry_run_off_by_default(call):
    parameter = inspect.signature(call).parameters.get("dry_run")
    assert parameter is not None and parameter.kind == inspect.Parameter.KEYWORD_ONLY
    if LIBRARY[call] == "required":
        assert parameter.default is not True and parameter.default is not False
        assert repr(parameter.default) == "<dry_run required>"
    else:
        assert parameter.default is False


@pytest.mark.parametrize("call, args", [(repair, ("db.events",)), (run_janitor, ())], ids=["repair", "run_janitor"])
def test_the_calls_whose_default_changed_require_dry_run(call, args):
    """A caller that relied on the old default (a dry run) is never surprised into a real run: it gets our error,
    before any connection (the metastore URI leads nowhere)."""
    with pytest.raises(errors.ConfigurationError) as caught:
        call(*args, metastore_uri="thrift://127.0.0.1:1", journal_url="sqlite:////nonexistent/journal.db")
    assert "pass dry_run=True to see the plan, dry_run=False to apply" in str(caught.value)
    assert "nothing was changed" in str(caught.value).lower()


def test_docs_cli_states_the_rule_for_every_command():
    """docs/cli.md's "Dry runs" section names every command that changes a table, and those without a dry run."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text()
    section = text[text.index("### Dry runs"):]
    section = section[:section.index("\n#")]
    named = set(re.findall(r"`([a-z_]+(?: [a-z]+)?)(?: --[a-z-]+)?`", section))
    assert CHANGES <= named, CHANGES - named
    assert {call.__name__ for call in LIBRARY} <= named, {call.__name__ for call in LIBRARY} - named


def test_a_result_with_its_default_timings_serialises():
    """What a compaction with nothing to compact returns (dry run or not) has the default timings: its document
    is still one (``to_dict`` used to fail on copying the read-only mapping)."""
    document = tableswap.SwapResult(swap_id="", table="db.events", kind="compact", dry_run=True).to_dict()
    assert document["timings"] == {} and document["dry_run"] is True and "repair" not in document
