"""``tableswap compact``: rewrite partitions' small files into target-size files, as one swap."""

from __future__ import annotations

import click

from tableswap import errors
from tableswap.cli.common import connection_options, handle_errors, key_values, runtime
from tableswap.cli.output import Output, render_table
from tableswap.core.compaction import DEFAULT_MIN_FILES, CompactionPlan, parse_size
from tableswap.core.result import SwapResult
from tableswap.ops.write.compact import cli_session, compact_partitions, plan_compaction


def _size(ctx: click.Context, param: click.Parameter, value: str) -> int:
    try:
        return parse_size(value)
    except errors.InvalidInputError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command("compact")
@click.argument("table", metavar="DB.TABLE")
@click.option("--partition", "partitions", multiple=True, metavar="SPEC",
              help="Only this partition (repeatable), e.g. dt=2026-06-03 or a=1/b=x. Default: every partition.")
@click.option("--target-file-size", "target", default="128MiB", show_default=True, callback=_size, metavar="SIZE",
              help="The file size to compact to (128MiB, 64MB, 1GiB, bytes); files below half of it are small.")
@click.option("--min-files", type=click.IntRange(min=2), default=DEFAULT_MIN_FILES, show_default=True,
              help="Compact a partition when it has at least this many small files.")
@click.option("--dry-run", is_flag=True, help="List what would be compacted (from storage listings; no Spark).")
@click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE", callback=key_values,
              help="A Spark setting for the session the real run starts (repeatable), e.g. spark.master=yarn or "
                   "the S3A settings of `tableswap jars s3`.")
@connection_options
@handle_errors
def compact_command(table: str, partitions: tuple[str, ...], target: int, min_files: int, dry_run: bool,
                    conf: list[tuple[str, str]], metastore_uri: str | None, journal_url: str | None,
                    out: Output) -> None:
    """Compact DB.TABLE's partitions that have at least --min-files files smaller than half of
    --target-file-size into files of about that size, as one journaled swap of kind "compact": the
    same rows (count and checksum compared before the flip), format and schema; readers see each
    partition whole, before or after; the old files stay for rollback and the janitor.

    --dry-run lists each candidate's files, small files and bytes, from the metastore and storage
    listings only. The real run needs Spark: it starts a local SparkSession (local[*], Hive support on
    the same metastore) unless --conf names a master; undo it with `tableswap rollback`.

    \b
    Examples:
      tableswap compact sales.events --dry-run
      tableswap compact sales.events --partition dt=2026-06-03 --target-file-size 256MiB
      tableswap compact sales.events --conf spark.master=yarn --json
    """
    with runtime(metastore_uri, journal_url) as rt:  # the journal is opened (created) only by the swap
        plan = plan_compaction(table, partitions=list(partitions) or None, target_file_bytes=target,
                               min_files=min_files, runtime=rt)
        if dry_run or not plan.candidates:
            out.result(lambda: {"ok": True, "dry_run": dry_run, "plan": plan.to_dict()},
                       lambda: format_plan(plan, dry_run))
            return
        out.message(format_plan(plan, dry_run=True, heading=False))
        spark, started = cli_session(rt, conf)
        try:
            result = compact_partitions(spark, table, partitions=list(partitions) or None, target_file_bytes=target,
                                        min_files=min_files, runtime=rt)
        finally:
            if started:
                spark.stop()
    out.result(lambda: {"ok": True, "dry_run": False, "plan": plan.to_dict(), "result": result.to_dict()},
               lambda: format_compacted(table, result))


def format_plan(plan: CompactionPlan, dry_run: bool, heading: bool = True) -> str:
    chosen = plan.candidates
    if not chosen:
        return (f"nothing to compact in {plan.table}: no partition of {len(plan.partitions)} has "
                f"{plan.min_files} files below {plan.target_file_bytes // 2} bytes")
    rows = [(c.partition, c.files, c.small_files, c.bytes, c.target_files) for c in chosen]
    lines = [render_table(["partition", "files", "small files", "bytes", "files after"], rows)]
    if heading:
        lines.append(f"dry run: would compact {len(chosen)} of {len(plan.partitions)} partition(s) of {plan.table} "
                     f"({sum(c.files for c in chosen)} files into {sum(c.target_files for c in chosen)})"
                     if dry_run else "")
    return "\n".join(line for line in lines if line)


def format_compacted(table: str, result: SwapResult) -> str:
    return "\n".join([result.summary().replace("swapped", "compacted", 1),
                      f"undo with: tableswap rollback {table} --dry-run"])


def register(main: click.Group) -> None:
    main.add_command(compact_command)
