"""``tableswap doctor``: check configuration, metastore, locks, journal and storage; say what to fix."""

from __future__ import annotations

import sys

import click

from tableswap.ops.inspect.doctor import FAIL, DoctorReport, run_doctor
from tableswap.cli.common import EXIT_FAILURE, connection_options, handle_errors, where_payload, SRC_OPTION
from tableswap.cli.output import Output, render_table
from tableswap import errors
from tableswap.config import journal_setting, metastore_setting

EPILOG = """\b
Exit codes:
  0  every check passed (warnings and skipped checks do not fail)
  1  at least one check failed; its "fix" line says what to do
  2  usage error

\b
Examples:
  tableswap doctor
  tableswap doctor --table sales.events
  tableswap doctor --table sales.events --json | jq '.checks[] | select(.status=="fail")'
"""

MARKS = {"ok": "ok", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


@click.command("doctor", epilog=EPILOG)
@click.option("--table", "table", metavar="DB.TABLE", default=None,
              help="Also lock this table (EXCLUSIVE, released at once) and check that its storage root exists "
                   "and is writable (a probe file under <root>/_tableswap/ is created and removed).")
@click.option("--lock-timeout", type=click.FloatRange(min=0.5), default=10.0, show_default=True, metavar="SECONDS",
              help="How long to wait for --table's lock if a swap holds it.")
@connection_options
@handle_errors
def doctor_command(table: str | None, lock_timeout: float, metastore_uri: str | None, journal_url: str | None,
                   out: Output) -> None:
    """Check that tableswap can work here, and say what to fix.

    \b
    Prints the effective configuration and where each value came from
    (option, environment, config file, Spark conf, default), then checks:
      config       the settings resolve (config file valid, a metastore set)
      metastore    a Thrift round trip (ms) and the server's version
      locks        with --table: acquire + release an EXCLUSIVE lock on it;
                   without: show_locks works
      lock expiry  the metastore expires a crashed writer's lock
      journal      opens, schema version, writable (a row written, rolled back)
      storage      with --table: the table's root exists, and a probe file
                   under <root>/_tableswap/ can be created and removed
    Spark is not needed. Nothing is changed.
    """
    report = run_doctor(table=table, metastore_uri=metastore_uri, journal_url=journal_url,
                        lock_timeout_s=lock_timeout, explicit_source="command line")
    try:
        where = where_payload(journal_setting(journal_url, SRC_OPTION), metastore_setting(metastore_uri, SRC_OPTION))
    except errors.ConfigurationError:  # an invalid config file: the config check says so
        where = where_payload(journal_setting(journal_url, SRC_OPTION, file=None),
                              metastore_setting(metastore_uri, SRC_OPTION, file=None))
    out.result(lambda: {**report.to_dict(), **where, "exit_code": 0 if report.ok else EXIT_FAILURE},
               lambda: format_report(report))
    if not report.ok:
        sys.exit(EXIT_FAILURE)


def format_report(report: DoctorReport) -> str:
    config = render_table(("setting", "value", "source"), [(e.key, e.value, e.source) for e in report.config])
    rows = [(c.name, MARKS.get(c.status, c.status), c.detail) for c in report.checks]
    checks = render_table(("check", "status", "detail"), rows)
    fixes = [f"  {c.name}: {c.fix}" for c in report.checks if c.fix and c.status in ("fail", "warn")]
    failed = sum(1 for c in report.checks if c.status == FAIL)
    lines = ["Configuration", config, "", "Checks", checks]
    if fixes:
        lines += ["", "What to do", *fixes]
    lines += ["", "all checks passed" if report.ok else f"{failed} check(s) failed"]
    return "\n".join(lines)


def register(main: click.Group) -> None:
    main.add_command(doctor_command)
