"""``tableswap sql``: run a SQL script whose ``INSERT OVERWRITE`` statements become swaps (docs/sql.md)."""

from __future__ import annotations

from pathlib import Path

import click

from tableswap.cli.common import connection_options, handle_errors, key_values, runtime
from tableswap.cli.output import Output
from tableswap.ops.write.compact import cli_session
from tableswap.ops.write.sql import StatementResult, sql


@click.command("sql")
@click.option("-e", "statements", metavar="STATEMENTS", help="The script itself (statements separated by ;).")
@click.option("-f", "file", type=click.Path(exists=True, dir_okay=False, path_type=Path), metavar="FILE",
              help="A file holding the script.")
@click.option("-d", "--define", "--hivevar", "variables", multiple=True, metavar="NAME=VALUE", callback=key_values,
              help="A variable for ${NAME} / ${hivevar:NAME} in the script (repeatable), as spark-sql's -d.")
@click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE", callback=key_values,
              help="A Spark setting for the session it starts (repeatable), e.g. spark.master=yarn or "
                   "spark.sql.sources.partitionOverwriteMode=dynamic.")
@click.option("--dry-run", is_flag=True,
              help="Parse, check and analyze every statement; print per statement which table and partitions it "
                   "would replace; run nothing that changes anything.")
@connection_options
@handle_errors
def sql_command(statements: str | None, file: Path | None, variables: list[tuple[str, str]],
                conf: list[tuple[str, str]], dry_run: bool, metastore_uri: str | None, journal_url: str | None,
                out: Output) -> None:
    """Run a SQL script as spark-sql would, except that every INSERT OVERWRITE of a table is a tableswap
    swap replacing exactly the partitions Spark's own statement replaces (the session's partition
    overwrite mode and the static part of the PARTITION clause decide which); readers see each
    partition whole, the old data stays for rollback. Every other statement runs as Spark runs it.

    Every statement is parsed by Spark and checked before the first one runs: a form tableswap cannot run
    with Spark's semantics (IF NOT EXISTS, a column list, a MANAGED table, another catalog's table, ...)
    refuses the whole script with its reason: nothing ran. A statement that fails when it runs stops the script;
    those before it ran. It starts a local SparkSession (local[*], Hive support on the same metastore)
    unless --conf names a master.

    --dry-run parses, checks and analyzes every statement as the run does and prints, per statement, which
    table and which partitions it would add, replace and drop, planned from the tables as they are now (an
    overwrite's query runs, reading only). It writes nothing, journals nothing, leaves no temporary table;
    USE and SET apply to the statements after them, any other statement does not run ("would run").

    \b
    Examples:
      tableswap sql -f daily.sql -d dt=2026-06-03 --dry-run
      tableswap sql -f daily.sql -d dt=2026-06-03
      tableswap sql -e "INSERT OVERWRITE TABLE sales.events PARTITION (dt) SELECT * FROM staging.events" --json
      tableswap sql -f daily.sql --conf spark.sql.sources.partitionOverwriteMode=dynamic
    """
    if (statements is None) == (file is None):
        raise click.UsageError("give the script with exactly one of -e STATEMENTS or -f FILE")
    text = file.read_text(encoding="utf-8") if file is not None else (statements or "")
    with runtime(metastore_uri, journal_url) as rt:
        spark, started = cli_session(rt, conf)
        try:
            results = sql(spark, text, variables=dict(variables), dry_run=dry_run, runtime=rt,
                          on_statement=lambda r: out.message(r.summary()))
        finally:
            if started:
                spark.stop()
    out.result(lambda: {"ok": True, "dry_run": dry_run, "statements": [r.to_dict() for r in results]},
               lambda: format_done(results, dry_run))


def format_done(results: list[StatementResult], dry_run: bool = False) -> str:
    swaps = [r for r in results if r.result is not None]
    if dry_run:
        return (f"dry run: {len(results)} statement(s) planned, {len(swaps)} of them would be swaps; nothing was "
                "changed")
    return f"{len(results)} statement(s) ran, {len(swaps)} of them as swaps"


def register(main: click.Group) -> None:
    main.add_command(sql_command)
