"""``tableswap repair``: rebuild a table's partitions after its metastore entry was lost."""

from __future__ import annotations

import sys

import click

from tableswap import errors
from tableswap.cli.common import EXIT_UNSAFE, connection_options, handle_errors, runtime
from tableswap.cli.output import Output
from tableswap.core.repair_plan import RepairPlan
from tableswap.core.result import SwapResult
from tableswap.ops.restore.repair import execute_repair, plan_table_repair, planned_result


@click.command("repair")
@click.argument("table", metavar="DB.TABLE")
@click.option("--from-storage", is_flag=True,
              help="Replay the recovery manifests under the table's storage root instead of the journal "
                   "(when the journal is lost too).")
@click.option("--partition", "partitions", multiple=True, metavar="SPEC",
              help="Repair only this partition (repeatable), e.g. dt=2026-06-03 or a=1/b=x.")
@click.option("--skip-missing", is_flag=True,
              help="Leave partitions whose data is gone as they are instead of refusing the whole repair.")
@click.option("--dry-run", is_flag=True, help="Print the plan and change nothing.")
@click.option("--yes", "-y", "assume_yes", is_flag=True,
              help="Do not ask for confirmation (required with --json or without a terminal).")
@connection_options
@handle_errors
def repair_command(table: str, from_storage: bool, partitions: tuple[str, ...], skip_missing: bool, dry_run: bool,
                   assume_yes: bool, metastore_uri: str | None, journal_url: str | None, out: Output) -> None:
    """Put DB.TABLE's partitions back where tableswap last left them.

    For a table whose metastore entry was lost: dropped and re-created, re-deployed, or restored
    from a metastore backup, possibly followed by MSCK REPAIR TABLE (which finds the directories
    swaps displaced, not the current ones). Re-create the table first with its original DDL and
    LOCATION. Each partition a committed swap, rollback or repair changed goes back to its last
    location (add, repoint or leave); partitions tableswap never touched are left alone.

    Prints the plan (each location and whether it exists on storage) and asks; --yes skips the
    question (with --json or without a terminal: --yes to apply, --dry-run to see the plan only).
    Applied as a journaled, locked swap of kind "repair" (undo it with `tableswap rollback`).
    Refused with exit code 5, changing nothing, when data to restore is gone (deleted by the
    janitor); --skip-missing repairs the rest.

    \b
    Examples:
      tableswap repair sales.events --dry-run
      tableswap repair sales.events --yes
      tableswap repair sales.events --from-storage --yes --json
    """
    # From the journal: it must exist (a missing one is an error, never created). --from-storage is for a
    # lost journal: the manifests are the history, and the repair is journaled in a new one.
    try:
        rt = runtime(metastore_uri, journal_url, read_only=not from_storage)
    except errors.JournalNotFoundError as exc:
        raise errors.JournalNotFoundError(
            f"{exc}; if the journal is lost, try --from-storage (the recovery manifests under the table's root)",
            url=exc.url) from exc
    with rt:
        planned = plan_table_repair(table, from_storage=from_storage, partitions=list(partitions) or None,
                                    skip_missing=skip_missing, runtime=rt)
        refusal = planned.refusal()
        if refusal is not None:  # the plan, then the error on stderr; in JSON the document's error fields
            out.result(lambda: refused_document(planned, refusal, dry_run), planned.describe)
            out.message(f"error: {refusal}", err=True)
            sys.exit(EXIT_UNSAFE)
        if dry_run or planned.is_noop:
            planned_only = planned_result(planned)
            out.result(lambda: repair_document(planned_only), lambda: format_plan(planned))
            return
        out.message(planned.describe())
        out.confirm(f"Repair {planned.table} as shown?", assume_yes, or_else="--dry-run")
        result = execute_repair(planned, runtime=rt)
    out.result(lambda: repair_document(result), lambda: format_repaired(planned.table, result))


def repair_document(result: SwapResult) -> dict:
    """The --json document of a repair, carried out or a dry run: the plan (the result's ``repair``) and the result."""
    plan = result.repair.to_dict() if result.repair is not None else None
    return {"ok": True, "dry_run": result.dry_run, "plan": plan, "result": result.to_dict()}


def refused_document(planned: RepairPlan, refusal: errors.UnsafeOperationError, dry_run: bool) -> dict:
    return {"ok": False, "dry_run": dry_run, "plan": planned.to_dict(), **refusal.to_dict()}


def format_plan(planned: RepairPlan) -> str:
    return "\n".join([planned.describe(),
                      "nothing to do: every partition tableswap knows is where it was last left" if planned.is_noop
                      else "dry run: nothing was changed (apply: run it again without --dry-run)"])


def format_repaired(table: str, result: SwapResult) -> str:
    lines = [result.summary().replace("swapped", "repaired", 1)]
    if result.table_change is not None:
        lines.append("note: Spark sessions that already read the table need `REFRESH TABLE` to see the data")
    lines.append(f"undo with: tableswap rollback {table} --dry-run")
    return "\n".join(lines)


def register(main: click.Group) -> None:
    main.add_command(repair_command)
