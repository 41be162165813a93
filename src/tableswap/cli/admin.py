"""Admin commands for on-call engineers: ``history``, ``show``, ``rollback``, ``recover``.

Thin: each command calls one library function and hands its result to the command's output
(:mod:`.output`: text, or with ``--json`` one JSON document carrying the same facts). Errors and exit
codes come from :mod:`.common`.
"""

from __future__ import annotations

import datetime as dt
import sys

import click

from tableswap.core.records import Action
from tableswap.ops.inspect.history import History, PastTableOverview, TableOverview, history, show, show_as_of
from tableswap.ops.restore.recover import RecoverReport, recover
from tableswap.core.result import SwapResult
from tableswap.ops.restore.rollback import RollbackPlan, execute_rollback, plan_rollback
from tableswap import errors
from tableswap.config import journal_setting, metastore_setting
from tableswap.runtime import Runtime
from tableswap.cli.common import (
    EXIT_CONFLICT,
    EXIT_FAILURE,
    SRC_OPTION,
    announce,
    current_where,
    connection_options,
    duration,
    handle_errors,
    runtime,
)
from tableswap.cli.output import Output, render_table
from tableswap.cli import groups as groups_cli

ITEMS_SHOWN = 20  # per swap in the text output of `history`; --json has all


def _yes_no(value: bool | None) -> str:
    return "?" if value is None else "yes" if value else "NO"


# ---------------------------------------------------------------------- history
@click.command("history")
@click.argument("table", metavar="DB.TABLE", required=False)
@click.option("--partition", "partition", metavar="SPEC",
              help="Only swaps that changed this partition, e.g. dt=2026-06-03 or a=1/b=x.")
@click.option("--limit", type=click.IntRange(min=1), default=None, metavar="N", help="Show at most N swaps.")
@click.option("--group", "group", is_flag=False, flag_value=groups_cli.ALL, default=None, metavar="[ID_OR_NAME]",
              help="Swap groups instead of one table's swaps: every group (newest first) with its member tables "
                   "and their swaps, or the one of this id (a name: the latest group of that name).")
@connection_options
@handle_errors
def history_command(table: str | None, partition: str | None, limit: int | None, group: str | None,
                    metastore_uri: str | None, journal_url: str | None, out: Output) -> None:
    """The swaps of DB.TABLE, newest first (with --group: the swap groups).

    For each swap: id, time, who and where (user, host, Spark app id), its state (committed, rolled
    back, partly rolled back, pending, failed, aborted), the partitions it added, replaced or dropped
    with old -> new locations, and whether each old location still exists (a rollback needs it).

    \b
    Examples:
      tableswap history sales.events
      tableswap history sales.events --partition dt=2026-06-03 --limit 5
      tableswap history sales.events --json | jq '.swaps[0].swap_id'
    """
    if group is not None or table is None:
        if table is not None or partition is not None or group is None:
            raise click.UsageError("give DB.TABLE, or --group [ID_OR_NAME] without DB.TABLE and --partition")
        groups_cli.history_groups(group, limit, metastore_uri, journal_url, out)
        return
    url, journal_source = journal_setting(journal_url, SRC_OPTION)
    uri, metastore_source = metastore_setting(metastore_uri, SRC_OPTION)
    announce((url, journal_source), (uri, metastore_source))
    result = history(table, partition, limit, journal_url=url, metastore_uri=uri)
    if not result.entries and partition is None:
        _unknown_table(result.table, uri)
    out.result(result.to_dict, lambda: format_history(result))


def _unknown_table(table: str, uri: str | None) -> None:
    """No swap of ``table`` in the journal: fine for a table the metastore knows (it was never swapped),
    exit 3 otherwise -- a mistyped name, or the wrong journal, must not look like an empty history."""
    journal = current_where().get("journal", {}).get("url", "the journal")
    if uri:
        try:
            with Runtime.from_options(metastore_uri=uri) as rt, rt.probe_catalog(timeout_s=10) as catalog:
                catalog.get_table(*table.split(".", 1))
            return  # the table exists: it has simply never been swapped
        except errors.TableNotFoundError as exc:
            raise errors.TableNotFoundError(f"{exc}; and the journal {journal} has no swap of it", table=table) \
                from exc
        except (errors.ConfigurationError, errors.CatalogUnavailableError) as exc:
            why = f"the metastore could not be asked whether it exists: {exc}"
    else:
        why = "no metastore is configured to ask whether it exists"
    raise errors.NotFoundError(f"no swaps of {table} in the journal {journal} ({why}); check the table name "
                               "and that this is the journal the writers use (--journal-url)", table=table)


def format_history(result: History) -> str:
    if not result.entries:
        return f"no swaps of {result.table} in the journal"
    lines = []
    for e in result.entries:
        who = f"{e.user or '?'}@{e.host or '?'}" + (f" app {e.app_id}" if e.app_id else "")
        head = f"{e.swap_id}  {e.status.upper()}  {e.kind}"
        if e.rollback_of:
            head += f" of {e.rollback_of}"
        lines.append(head)
        lines.append(f"  started {e.started_at}" + (f", committed {e.committed_at}" if e.committed_at else "")
                     + f" by {who}")
        lines.append(f"  {e.added} added, {e.replaced} replaced, {e.dropped} dropped")
        if e.error:
            lines.append(f"  note: {e.error}")
        for h in e.hooks:
            lines.append(f"  hook {h.hook}: " + (f"ok ({h.seconds:.1f}s)" if h.ok else f"FAILED: {h.error}"))
        rows = [(i.partition or "(table)", i.action, i.old_location or "-", i.new_location or "-",
                 "-" if i.old_location is None or i.action in (Action.ADD, Action.UNCHANGED)
                 else "DELETED by janitor" if i.old_deleted_by_janitor else _yes_no(i.old_exists),
                 "yes" if i.rolled_back else "")
                for i in e.items[:ITEMS_SHOWN]]
        if rows:
            table = render_table(("partition", "action", "old location", "new location", "old exists",
                                  "rolled back"), rows)
            lines.extend("  " + x for x in table.splitlines())
        if len(e.items) > ITEMS_SHOWN:
            lines.append(f"  ... {len(e.items) - ITEMS_SHOWN} more (use --partition or --json)")
        lines.append("")
    return "\n".join(lines).rstrip()


# ---------------------------------------------------------------------- show
@click.command("show")
@click.argument("table", metavar="DB.TABLE")
@click.option("--as-of", "as_of", metavar="SWAP_ID",
              help="Show the partitions as they were right after this committed swap (see `tableswap history`).")
@click.option("--at", "at", metavar="TIME",
              help="Show the partitions as they were at this time (ISO, e.g. 2026-06-03T04:00:00Z; no zone: UTC).")
@connection_options
@handle_errors
def show_command(table: str, as_of: str | None, at: str | None, metastore_uri: str | None,
                 journal_url: str | None, out: Output) -> None:
    """Current partitions (or location) of DB.TABLE and what can be rolled back.

    For each partition: its location, the swap that set it (the tableswap.swap_id stamp), and the
    location a rollback would restore, if it still exists.

    With --as-of SWAP_ID (or --at TIME): the partitions as they were right after that swap (or at
    that time), from the journal, each with the swap that set it and whether its data is still on
    storage (the janitor deletes displaced data after its grace period). Read that state with
    tableswap.read_as_of(spark, table, swap_id=...). Exit code 3 for a swap not in the table's history.

    \b
    Examples:
      tableswap show sales.events
      tableswap show sales.dim_user --json
      tableswap show sales.events --as-of 20260603_031502_9f3a1c2e
      tableswap show sales.events --at 2026-06-03T04:00:00Z --json
    """
    if as_of is not None and at is not None:
        raise click.UsageError("give --as-of or --at, not both")
    with runtime(metastore_uri, journal_url, read_only=True) as rt:
        if as_of is not None or at is not None:
            past = show_as_of(table, swap_id=as_of, timestamp=at, runtime=rt)
            out.result(past.to_dict, lambda: format_past(past))
            return
        state = show(table, runtime=rt)
    out.result(state.to_dict, lambda: format_show(state))


def format_past(state: PastTableOverview) -> str:
    point = (f"right after swap {state.as_of} (committed {state.as_of_committed_at})" if state.as_of
             else "before its first journaled swap")
    lines = [f"{state.table} as it was {point}"]
    if state.undone:
        lines.append(f"later swaps: {len(state.undone)} (newest {state.undone[-1]})")
    else:
        lines.append("later swaps: none (this is the current state)")
    rows = [(p.partition or "(table)", p.location, p.set_by or "-",
             "DELETED by janitor" if p.deleted_by_janitor else _yes_no(p.exists))
            for p in state.partitions]
    lines.append(render_table(("partition", "location", "set by swap", "data exists"), rows))
    if state.missing:
        lines.append(f"{len(state.missing)} partition(s) of this state cannot be read any more "
                     "(read_as_of(..., missing='skip') reads the rest)")
    return "\n".join(lines)


def format_show(state: TableOverview) -> str:
    lines = [f"{state.table}  location {state.location}",
             f"last swap: {state.last_swap or '-'}"]
    if state.unfinished_swaps:
        lines.append(f"UNFINISHED swaps: {', '.join(state.unfinished_swaps)} (run `tableswap recover`)")
    rows = [(p.partition or "(table)", p.location or "-", p.set_by or "-",
             "yes" if p.can_roll_back else "no", p.previous_location or "-", p.note)
            for p in state.partitions]
    lines.append(render_table(("partition", "location", "set by swap", "can roll back", "previous location",
                               "note"), rows))
    return "\n".join(lines)


# ---------------------------------------------------------------------- rollback
@click.command("rollback")
@click.argument("table", metavar="DB.TABLE", required=False)
@click.option("--partition", "partitions", multiple=True, metavar="SPEC",
              help="Roll back only this partition (repeatable), e.g. dt=2026-06-03 or a=1/b=x.")
@click.option("--to", "to", metavar="SWAP_ID",
              help="Restore the state just before this swap: every partition it or a later swap changed "
                   "(partitions they added are dropped).")
@click.option("--group", "group", metavar="ID_OR_NAME",
              help="Instead of DB.TABLE: every table of this committed swap group back to before the group, as "
                   "one locked, journaled group (a name: the latest group of that name).")
@click.option("--dry-run", is_flag=True, help="Print the plan and change nothing.")
@click.option("--yes", "-y", "assume_yes", is_flag=True,
              help="Do not ask for confirmation (required without a terminal).")
@connection_options
@handle_errors
def rollback_command(table: str | None, partitions: tuple[str, ...], to: str | None, group: str | None, dry_run: bool,
                     assume_yes: bool, metastore_uri: str | None, journal_url: str | None, out: Output) -> None:
    """Restore previous locations of DB.TABLE (itself a journaled, locked swap).

    \b
    Without options: every partition the last committed swap changed goes back
    to its location before that swap (an unpartitioned table: its table location).
    Running it again rolls back the rollback.
      --partition SPEC  only these partitions, each to its location before the
                        last swap that changed it.
      --to SWAP_ID      the state just before SWAP_ID (with --partition: only those).
      --group ID        instead of DB.TABLE: every table of a committed swap group
                        back to before the group, as one unit (docs/groups.md).

    Refused with exit code 5, changing nothing, when a location to restore was deleted by the
    janitor or no longer exists; exit code 4 when the table changed since the journal's record or
    since the plan was shown (look with `tableswap show`, then run again).

    \b
    Examples:
      tableswap rollback sales.events --dry-run
      tableswap rollback sales.events --partition dt=2026-06-03 --yes
      tableswap rollback sales.events --to 20260603_031502_9f3a1c2e --yes --json
      tableswap rollback --group orders-2026-06-03 --dry-run
    """
    if (group is None) == (table is None) or (group is not None and (partitions or to)):
        raise click.UsageError("give DB.TABLE (with --partition / --to), or --group ID_OR_NAME alone")
    if group is not None:
        groups_cli.rollback_groups(group, dry_run, assume_yes, metastore_uri, journal_url, out)
        return
    assert table is not None
    # Read-only until there is something to roll back: a missing journal is an error, never created.
    with runtime(metastore_uri, journal_url, read_only=True) as rt:
        planned = plan_rollback(table, list(partitions) or None, to, runtime=rt)
        if dry_run or planned.is_noop:
            _print_rollback(out, planned, planned.to_result(dry_run=True), planned_only=True)
            return
        out.message(planned.describe())
        out.confirm(f"Roll back {planned.table} as shown?", assume_yes, or_else="--dry-run")
        result = execute_rollback(planned, runtime=rt)
    _print_rollback(out, planned, result, planned_only=False)


def _print_rollback(out: Output, planned: RollbackPlan, result: SwapResult, *, planned_only: bool) -> None:
    out.result(lambda: rollback_document(planned, result), lambda: format_rollback(planned, result, planned_only))


def rollback_document(planned: RollbackPlan, result: SwapResult) -> dict:
    payload = result.to_dict()
    payload.update({"ok": True, "rollback_of": planned.rollback_of,
                    "undone": [{"swap_id": s, "partition": p} for s, p in planned.undone],
                    "nothing_to_do": planned.is_noop})
    return payload


def format_rollback(planned: RollbackPlan, result: SwapResult, planned_only: bool) -> str:
    if planned_only:
        return "\n".join([planned.describe(),
                          "nothing to do: every partition is already at the location to restore" if planned.is_noop
                          else "dry run: nothing was changed"])
    lines = [result.summary().replace("swapped", "rolled back", 1)]
    if result.table_change is not None:
        lines.append("note: Spark sessions that already read the table need `REFRESH TABLE` to see the old data")
    return "\n".join(lines)


# ---------------------------------------------------------------------- recover
@click.command("recover")
@click.option("--table", "table", metavar="DB.TABLE", help="Only swaps of this table.")
@click.option("--stale-after", default="1h", show_default=True, metavar="DURATION", callback=duration,
              help="Abort a swap still writing its batch (state staging) once its process's heartbeat is older "
                   "than this, e.g. 30m, 2h (keep it well above heartbeat_s; 0s: the writers are known dead).")
@click.option("--dry-run", is_flag=True,
              help="Say what recover would do now (the same decisions, from an unlocked read); change nothing.")
@connection_options
@handle_errors
def recover_command(table: str | None, stale_after: dt.timedelta, dry_run: bool, metastore_uri: str | None,
                    journal_url: str | None, out: Output) -> None:
    """Resolve swaps a crash left between journal intent and commit.

    Decides from the metastore (swap-id stamps and locations) whether each flip landed, then commits
    it, completes it, or aborts it and queues its staged data for the janitor. Safe to run at any
    time, also while swaps run: it takes each table's lock, and a swap still writing its batch is
    left alone while its process's heartbeat is younger than --stale-after, however long it takes.

    A dead writer (its heartbeat older than --stale-after) that never journaled its intent is
    aborted at once, also when it died holding the table lock (the metastore frees that lock after
    its hive.txn.timeout). For one killed after its intent, recover waits for that lock up to
    lock_timeout_s, else reports it locked with the time to run recover again. Exit code 1 if a
    swap needs manual attention, 4 if one was locked.

    \b
    Examples:
      tableswap recover
      tableswap recover --table sales.events --json
      tableswap recover --stale-after 30m
      tableswap recover --dry-run
    """
    with runtime(metastore_uri, journal_url) as rt:
        report = recover(table, stale_after_s=stale_after.total_seconds(), dry_run=dry_run, runtime=rt)
    out.result(lambda: {"ok": not report.needs_attention, **report.to_dict()}, lambda: format_recover(report))
    _exit_for(report)


def format_recover(report: RecoverReport) -> str:
    if not report.resolutions:
        return "nothing to recover: no unfinished swaps"
    lines = ["dry run: nothing was changed"] if report.dry_run else []
    rows = [(r.swap_id, r.table, r.kind, f"{r.state_before} -> {r.state_after}", r.outcome, r.detail)
            for r in report.resolutions]
    return "\n".join([*lines, render_table(("swap", "table", "kind", "state", "outcome", "detail"), rows)])


def _exit_for(report: RecoverReport) -> None:
    outcomes = {r.outcome for r in report.needs_attention}
    if "manual" in outcomes:
        sys.exit(EXIT_FAILURE)
    if outcomes:
        sys.exit(EXIT_CONFLICT)


def register(main: click.Group) -> None:
    for command in (history_command, show_command, rollback_command, recover_command):
        main.add_command(command)

