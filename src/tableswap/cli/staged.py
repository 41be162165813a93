"""Write, audit, publish from the command line: ``staged``, ``publish``, ``discard``, ``diff`` (docs/audit.md).

A staged swap (``stage_partitions`` / ``stage_table``, or a swap whose audit refused its batch) or a staged swap
group (``stage_group``, docs/groups.md) waits in the journal; a separate audit job, or a person, lists it,
compares it with the table, and publishes or discards it, from any machine that reaches the metastore, the
journal and the storage (no Spark).
"""

from __future__ import annotations

from typing import Sequence

import click

from tableswap import errors
from tableswap.core.durations import format_duration
from tableswap.core.group import GroupRecord, GroupResult
from tableswap.core.result import SwapResult
from tableswap.core.state import TableState
from tableswap.ops.write.group import (GroupDiscarded, discard_group, list_staged_groups, names_a_group,
                                       publish_group)
from tableswap.ops.write.staged import Discarded, discard, publish
from tableswap.ops.write.staged_view import StagedDiff, StagedEntry, diff, list_staged
from tableswap.cli.common import connection_options, handle_errors, human_bytes, runtime
from tableswap.cli.output import Output, render_table



def _num(n: int | None) -> str:
    return "?" if n is None else str(n)


# ---------------------------------------------------------------------- staged
@click.command("staged")
@click.argument("table", metavar="[DB.TABLE]", required=False)
@click.option("--no-measure", is_flag=True,
              help="Do not list the staging directories (no partition, file or byte counts): the journal only.")
@connection_options
@handle_errors
def staged_command(table: str | None, no_measure: bool, metastore_uri: str | None, journal_url: str | None,
                   out: Output) -> None:
    """List the staged swaps and swap groups (of DB.TABLE if given), oldest first: written, not yet published.

    For each swap: its swap id, table, age, who staged it, its group if it is a member of one, its
    temporary table (query it with Spark or Trino), and from one listing of its staging directory its
    partitions, data files and bytes. Then one line per staged group (stage_group, or a swap group whose
    audit refused it) with its members: publish or discard a group as one unit (tableswap publish GROUP_ID).
    The janitor discards a staged swap nobody publishes after [janitor] staged_ttl (7 days).

    \b
    Examples:
      tableswap staged
      tableswap staged sales.events --json | jq -r '.staged[].swap_id'
      tableswap staged --json | jq -r '.groups[].group_id'
    """
    with runtime(metastore_uri, journal_url, read_only=True) as rt:
        entries = list_staged(table, measure=not no_measure, runtime=rt)
        groups = list_staged_groups(table, runtime=rt)
    out.result(lambda: {"table": table, "staged": [e.to_dict() for e in entries],
                        "groups": [g.to_dict() for g in groups]},
               lambda: format_staged(entries, table, groups))


def format_staged(entries: list[StagedEntry], table: str | None, groups: Sequence[GroupRecord] = ()) -> str:
    if not entries and not groups:
        return "no staged swaps" + (f" of {table}" if table else "")
    lines = []
    if entries:
        rows = [(e.swap_id, e.table, format_duration_or(e.age_seconds), f"{e.user or '?'}@{e.host or '?'}",
                 e.group_id or "-",
                 "-" if e.kind != "partitions" else _num(e.partitions) + (f" (+{e.drops} dropped)" if e.drops else ""),
                 _num(e.files), human_bytes(e.bytes), e.staged_table or "-")
                for e in entries]
        lines.append(render_table(("swap", "table", "age", "staged by", "group", "partitions", "files", "bytes",
                                   "staged table"), rows))
    for g in groups:
        label = g.group_id + (f" ({g.name})" if g.name else "")
        members = ", ".join(f"{m.table} {m.swap_id}" + ("" if m.state == "staged" else f" [{m.state}]")
                            for m in g.members) or "no member yet"
        state = "staged" if g.waiting else "staging"
        lines.append(f"group {label}  {state}  {len(g.members)} table(s): {members}"
                     + (f"  ({g.error})" if g.error else ""))
    return "\n".join(lines)


def format_duration_or(seconds: float | None) -> str:
    import datetime as dt

    return "?" if seconds is None else format_duration(dt.timedelta(seconds=int(seconds)))


# ---------------------------------------------------------------------- publish
@click.command("publish")
@click.argument("target", metavar="SWAP_ID|GROUP_ID|GROUP_NAME")
@click.option("--if-unchanged-since", "tokens", metavar="TOKEN", multiple=True,
              help="A state token (tableswap.table_state) taken before staging: refuse (exit 4, nothing changed) "
                   "if a partition the batch touches changed since. For a group: one per table (each token names "
                   "its table), besides those journaled when its members were staged.")
@click.option("--dry-run", is_flag=True,
              help="Print what the publish would do, planned and checked as it plans, and change nothing.")
@connection_options
@handle_errors
def publish_command(target: str, tokens: tuple[str, ...], dry_run: bool, metastore_uri: str | None,
                    journal_url: str | None, out: Output) -> None:
    """Publish the staged swap SWAP_ID, or every table of a staged swap group as one unit.

    The same protocol as a swap: the table lock, a plan from the table as read under it (a swap committed
    since the stage is taken into account: the result is that of running them one after the other), the
    journal, the flip. A group (its id, or the name of one staged group): every table's lock in one order,
    every table planned and checked under its lock, one group intent, the flips, one group commit: every
    table or none. Needs no Spark and runs no audit: audit the staged tables before (query them with Spark
    or Trino, tableswap diff), or publish from Python with publish_group(GROUP_ID, audit=...).

    Exit 3 if the journal has no such swap or group, 1 if it is not staged (already published or
    discarded, a member published alone: nothing changed), 4 on a conflict with --if-unchanged-since.
    --dry-run: the same reads, plan and checks from the table as it is now, without the lock; prints the
    result the publish would print, marked as a dry run, and changes nothing.

    \b
    Examples:
      tableswap publish 20261127T164512Z_3f9a0c2e1b7d --dry-run
      tableswap publish 20261127T164512Z_3f9a0c2e1b7d
      tableswap publish orders-2026-06-03
      tableswap publish "$SWAP_ID" --json
    """
    with runtime(metastore_uri, journal_url) as rt:
        if names_a_group(rt.journal, target):
            by_table = {TableState.decode(t).table: t for t in tokens}
            if len(by_table) != len(tokens):
                raise errors.InvalidInputError("--if-unchanged-since: two tokens of one table; nothing was changed")
            grouped = publish_group(target, if_unchanged_since=by_table, dry_run=dry_run, runtime=rt)
            out.result(grouped.to_dict, lambda: format_group_published(grouped))
            return
        if len(tokens) > 1:
            raise errors.InvalidInputError(f"--if-unchanged-since: one token for the swap {target} (several are for "
                                           "a group); nothing was changed")
        result = publish(target, if_unchanged_since=tokens[0] if tokens else None, dry_run=dry_run, runtime=rt)
    out.result(result.to_dict, lambda: format_published(result))


def format_published(result: SwapResult) -> str:
    if result.dry_run:
        return f"dry run: would publish {result.swap_id} to {result.table}: {result.summary()}; nothing was changed"
    return f"published {result.swap_id} to {result.table}: {result.summary()}"


def format_group_published(grouped: GroupResult) -> str:
    if grouped.dry_run:
        return f"dry run: would publish {grouped.summary()}; nothing was changed"
    return grouped.summary().replace("committed", "published", 1)


# ---------------------------------------------------------------------- discard
@click.command("discard")
@click.argument("target", metavar="SWAP_ID|GROUP_ID|GROUP_NAME")
@click.option("--reason", default="by `tableswap discard`", show_default=True, metavar="TEXT",
              help="Why, recorded in the journal (history shows it).")
@click.option("--dry-run", is_flag=True, help="Print what the discard would do, after the same checks, and change "
                                              "nothing.")
@connection_options
@handle_errors
def discard_command(target: str, reason: str, dry_run: bool, metastore_uri: str | None, journal_url: str | None,
                    out: Output) -> None:
    """Discard the staged swap SWAP_ID, or every member of a staged swap group: nothing readers see changes.

    Its temporary table is dropped (its data kept) and its staged data queued for the janitor, which
    deletes it once the grace period ends. A group (its id, or the name of one staged group): every member
    in one journal transaction, or none. Exit 3 if the journal has no such swap or group, 1 if it is not
    staged (already published or discarded: nothing changed). --dry-run: the same checks; prints what it
    would drop and queue, and changes nothing.

    \b
    Examples:
      tableswap discard 20261127T164512Z_3f9a0c2e1b7d --dry-run
      tableswap discard 20261127T164512Z_3f9a0c2e1b7d --reason "null customer ids"
      tableswap discard orders-2026-06-03
    """
    with runtime(metastore_uri, journal_url) as rt:
        if names_a_group(rt.journal, target):
            gone = discard_group(target, reason=reason, dry_run=dry_run, runtime=rt)
            out.result(gone.to_dict, lambda: format_group_discarded(gone))
            return
        done = discard(target, reason=reason, dry_run=dry_run, runtime=rt)
    out.result(done.to_dict, lambda: format_discarded(done))


def format_discarded(done: Discarded) -> str:
    if done.dry_run:
        lines = [f"dry run: would discard {done.swap_id} of {done.table}; nothing was changed"]
    else:
        lines = [f"discarded {done.swap_id} of {done.table}: nothing readers see changed"]
    drop, queue = ("would drop", "would queue") if done.dry_run else ("dropped", "queued")
    if done.temp_table_dropped:
        lines.append(f"  {drop} its temporary table {done.temp_table_dropped}")
    for q in done.queued:
        lines.append(f"  {queue} {q} for the janitor")
    return "\n".join(lines)


def format_group_discarded(done: GroupDiscarded) -> str:
    label = done.group_id + (f" ({done.name})" if done.name else "")
    if done.dry_run:
        lines = [f"dry run: would discard group {label}, {len(done.members)} table(s); nothing was changed"]
    else:
        lines = [f"discarded group {label}, {len(done.members)} table(s): nothing readers see changed"]
    drop, queue = ("would drop", "would queue") if done.dry_run else ("dropped", "queued")
    lines += [f"  {table}: swap {swap_id}" for table, swap_id in done.members.items()]
    lines += [f"  {drop} {t}" for t in done.temp_tables_dropped]
    lines += [f"  {queue} {q} for the janitor" for q in done.queued]
    return "\n".join(lines)


# ---------------------------------------------------------------------- diff
@click.command("diff")
@click.argument("swap_id", metavar="SWAP_ID")
@click.option("--no-rows", is_flag=True, help="Do not read row counts from the files' footers.")
@connection_options
@handle_errors
def diff_command(swap_id: str, no_rows: bool, metastore_uri: str | None, journal_url: str | None,
                 out: Output) -> None:
    """What publishing the staged swap SWAP_ID would change, per partition.

    For each partition it adds, replaces or drops: the current and the staged data's file count and
    bytes and, for Parquet and ORC tables, row counts read from the files' footers (no Spark; needs
    pyarrow: pip install 'tableswap[audit]', else the rows show as unknown). Planned from the table as it
    is now, without the lock: a publish plans again under it.

    \b
    Examples:
      tableswap diff 20261127T164512Z_3f9a0c2e1b7d
      tableswap diff "$SWAP_ID" --json | jq '.partitions[] | select(.staged.rows < .current.rows)'
    """
    with runtime(metastore_uri, journal_url, read_only=True) as rt:
        result = diff(swap_id, rows=not no_rows, runtime=rt)
    out.result(result.to_dict, lambda: format_diff(result))


def format_diff(result: StagedDiff) -> str:
    lines = [f"staged swap {result.swap_id} of {result.table} ({result.storage_format}); rows: {result.rows_note}"]
    rows = [(r.partition or "(table)", r.action, _num(r.current.files), human_bytes(r.current.bytes),
             _num(r.current.rows), _num(r.staged.files), human_bytes(r.staged.bytes), _num(r.staged.rows))
            for r in result.partitions]
    lines.append(render_table(("partition", "action", "files now", "bytes now", "rows now", "files staged",
                               "bytes staged", "rows staged"), rows))
    return "\n".join(lines)


def register(main: click.Group) -> None:
    for command in (staged_command, publish_command, discard_command, diff_command):
        main.add_command(command)
