"""``tableswap backfill status NAME`` and ``tableswap backfill list``: progress of the backfills that
``tableswap.backfill(...)`` journaled (the runner itself is Python: it needs your ``build_df``)."""

from __future__ import annotations

import sys

import click

from tableswap.core.backfill import BackfillStatus
from tableswap.journal.backfills import BackfillLog
from tableswap.cli.common import EXIT_FAILURE, connection_options, handle_errors, journal_only
from tableswap.cli.output import Output, render_table

ERROR_WIDTH = 120  # of each failed unit's error in the text output; --json has it whole


@click.group("backfill")
def backfill_group() -> None:
    """Progress of resumable backfills run with tableswap.backfill(...)."""


@backfill_group.command("status")
@click.argument("name")
@click.option("--state", "states", multiple=True, type=click.Choice(["done", "failed", "pending"]),
              help="Only units in this state (repeatable); pending includes units a dead run left running.")
@connection_options
@handle_errors
def status_command(name: str, states: tuple[str, ...], metastore_uri: str | None, journal_url: str | None,
                   out: Output) -> None:
    """Units of backfill NAME: done (with the swap that committed each), failed (with the error) and
    pending (not run yet, or left running by a run that died).

    Exit code 0 when every unit is done, 1 otherwise (rerun the backfill to do the rest), 3 for an
    unknown NAME.

    \b
    Examples:
      tableswap backfill status events-june-fix
      tableswap backfill status events-june-fix --state failed
      tableswap backfill status events-june-fix --json | jq '.units[] | select(.state=="failed")'
    """
    journal = journal_only(journal_url, metastore_uri)
    try:
        status = BackfillLog(journal).status(name)
    finally:
        journal.close()
    out.result(status.to_dict, lambda: format_status(status, states))
    if not status.complete:
        sys.exit(EXIT_FAILURE)


def format_status(status: BackfillStatus, states: tuple[str, ...] = ()) -> str:
    lines = [f"backfill {status.name} of {status.table}: {len(status.done)} done, {len(status.failed)} failed, "
             f"{len(status.pending)} pending of {len(status.units)} (started {status.created_at}, "
             f"last activity {status.updated_at})"]
    shown = [u for u in status.units
             if not states or u.state in states or ("pending" in states and u.state == "running")]
    rows = []
    for u in shown:
        error = (u.error or "").splitlines()[0] if u.error else ""
        rows.append((u.unit, u.state if u.state != "running" else "running (or interrupted)", u.swap_id or "-",
                     u.attempts, u.finished_at or "-", "" if u.seconds is None else f"{u.seconds:.1f}",
                     error if len(error) <= ERROR_WIDTH else error[:ERROR_WIDTH] + "..."))
    lines.append(render_table(("unit", "state", "swap", "attempts", "finished", "seconds", "error"), rows))
    if status.complete:
        lines.append("complete: every unit is done")
    else:
        lines.append("not complete: rerun the same backfill (same name) to run the units not done")
    return "\n".join(lines)


@backfill_group.command("list")
@connection_options
@handle_errors
def list_command(metastore_uri: str | None, journal_url: str | None, out: Output) -> None:
    """Backfills in the journal, most recently active first, with their progress."""
    journal = journal_only(journal_url, metastore_uri)
    try:
        log = BackfillLog(journal)
        statuses = [log.status(n) for n in log.names()]
    finally:
        journal.close()
    out.result(lambda: {"backfills": [{k: v for k, v in s.to_dict().items() if k != "units"} for s in statuses]},
               lambda: format_list(statuses))


def format_list(statuses: list[BackfillStatus]) -> str:
    if not statuses:
        return "no backfills in the journal"
    return render_table(("name", "table", "done", "failed", "pending", "last activity"),
                        [(s.name, s.table, len(s.done), len(s.failed), len(s.pending), s.updated_at)
                         for s in statuses])


def register(main: click.Group) -> None:
    main.add_command(backfill_group)
