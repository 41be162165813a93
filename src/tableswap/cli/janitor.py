"""``tableswap janitor run``: delete displaced data whose grace period ended (a scheduled job)."""

from __future__ import annotations

import datetime as dt
import sys
import time
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar

from tableswap.ops.janitor.run import (
    O_DELETED, O_DROPPED, O_ERROR, O_GONE, O_KEPT, O_REFUSED, O_SKIPPED, O_WOULD_DELETE, O_WOULD_DROP,
    JanitorReport, run_janitor,
)
from tableswap.cli.common import (EXIT_FAILURE, EXIT_UNSAFE, SRC_OPTION, connection_options, duration, handle_errors,
                                  human_bytes, journal_only, runtime)
from tableswap.cli.output import Output, render_table
from tableswap.core.durations import format_duration
from tableswap.metrics.janitor import Published, metrics_targets, publish_janitor_metrics
from tableswap.ops.janitor.status import Bytes, JanitorStatus, janitor_status

EPILOG = """\b
Exit codes:
  0  nothing failed (refusals are listed in the summary but do not fail the run,
     so that a path made live again by a rollback does not break a cron job)
  1  at least one location or temporary table could not be deleted (an error)
  5  --strict and at least one deletion was refused; or --grace below the floor
     without --force-short-grace
  3/4 as every tableswap command (not found / table locked, retry)

\b
Examples:
  tableswap janitor run --dry-run                 # show what would be deleted
  tableswap janitor run                           # grace 24h, every table in the journal
  tableswap janitor run --grace 7d --keep 2 --table sales.events
  tableswap janitor run --json > janitor-report.json
  tableswap janitor run --metrics-pushgateway http://pushgateway:9091
  tableswap janitor run --metrics-textfile /var/lib/node_exporter/textfile/tableswap_janitor.prom

\b
Scheduling (see docs/janitor.md):
  15 3 * * *  tableswap janitor run --grace 24h --json >> /var/log/tableswap-janitor.jsonl

\b
Metrics (docs/janitor.md, "Metrics"; needs tableswap[metrics]): last success,
deleted directories and bytes, refusals, errors, backlog past grace. A Pushgateway
that cannot be reached or a textfile that cannot be written is a warning: the run's
result and exit code stay the same.
"""




@click.group("janitor")
def janitor() -> None:
    """Delete displaced data once readers and rollbacks no longer need it.

    Every swap keeps the directories it displaced and queues them in the journal. The janitor
    deletes each one once its grace period has ended, after checking against the live metastore
    that no table or partition references it and that it lies inside the table's storage root.
    It also removes leftovers of crashed swaps (staging directories, temporary tables).
    """


@janitor.command("run", epilog=EPILOG)
@click.option("--grace", default=None, metavar="DURATION", callback=duration,
              help="How long a displaced location is kept after it was displaced (30m, 24h, 7d, 1h30m). "
                   "Default: the config file's [janitor] grace, else 24h.")
@click.option("--dry-run", is_flag=True, help="Print the plan; delete and change nothing.")
@click.option("--table", "table", metavar="DB.TABLE", default=None,
              help="Only this table (default: every table the journal has swapped).")
@click.option("--keep", type=click.IntRange(min=0), default=None, metavar="N",
              help="Keep the N most recent displaced locations of each partition, whatever their age "
                   "(they stay available for rollback). Default: [janitor] keep, else 0.")
@click.option("--force-short-grace", is_flag=True,
              help="Allow a grace period below the safety floor (1h, or TABLESWAP_JANITOR_MIN_GRACE, "
                   "or [janitor] min_grace).")
@click.option("--strict", is_flag=True, help="Exit 5 when any deletion was refused.")
@click.option("--batch-size", type=click.IntRange(min=1), default=None,
              help="Locations claimed, re-checked and deleted together (under one table lock). "
                   "Default: [janitor] batch_size, else 100.")
@click.option("--reference-scope", type=click.Choice(["metastore", "database", "table"]), default=None,
              help="Whose locations count as live references, never deleted: every table and partition of "
                   "every database (metastore), of the cleaned table's database (database), or of the "
                   "cleaned table and its temporary tables only (table). Default: [janitor] reference_scope, "
                   "else metastore.")
@click.option("--staged-ttl", default=None, metavar="DURATION", callback=duration,
              help="How long a staged swap (stage_partitions/stage_table) nobody published or discarded is kept; "
                   "after it the run discards it. Default: [janitor] staged_ttl, else 7d.")
@click.option("--skip-trash", is_flag=True,
              help="On HDFS, delete instead of moving into the deleting user's trash (as hdfs dfs -rm -skipTrash). "
                   "Default: [janitor] trash, else auto (the trash where the NameNode has it on).")
@click.option("--metrics-pushgateway", metavar="URL", default=None,
              help="Push the run's metrics to this Prometheus Pushgateway (job tableswap_janitor). Default: "
                   "TABLESWAP_JANITOR_METRICS_PUSHGATEWAY, else [janitor] metrics_pushgateway, else none.")
@click.option("--metrics-textfile", metavar="PATH", default=None,
              help="Write the run's metrics to this node_exporter textfile (*.prom, replaced atomically). Default: "
                   "TABLESWAP_JANITOR_METRICS_TEXTFILE, else [janitor] metrics_textfile, else none.")
@connection_options
@handle_errors
def run_command(grace, dry_run, table, keep, force_short_grace, strict, batch_size, reference_scope, staged_ttl,
                skip_trash, metrics_pushgateway, metrics_textfile, metastore_uri, journal_url, out: Output) -> None:
    """Delete displaced locations whose grace period ended, and crashed swaps' leftovers."""
    # Checked before the run: a malformed target or a missing prometheus-client is a configuration error.
    targets = metrics_targets(metrics_pushgateway, metrics_textfile, explicit_source=SRC_OPTION)
    published: Published | None = None
    with runtime(metastore_uri, journal_url, read_only=dry_run) as rt:
        with out.progress("janitor") as progress:
            report = run_janitor(grace=grace, dry_run=dry_run, table=table, keep=keep,
                                 force_short_grace=force_short_grace, runtime=rt, batch_size=batch_size,
                                 reference_scope=reference_scope, staged_ttl=staged_ttl, progress=progress,
                                 trash="never" if skip_trash else None)
        if targets.wanted:  # never changes the result: a failure is a warning in `published`
            published = publish_janitor_metrics(report, None if dry_run else rt.journal, targets)
    code = 0
    if report.errors:
        code = EXIT_FAILURE
    elif strict and report.refused:
        code = EXIT_UNSAFE
    out.result(lambda: {**report.to_dict(), "ok": code == 0, "exit_code": code,
                        "metrics": published.to_dict() if published else None},
               lambda: "\n".join([summary(report), *(published.lines() if published else [])]))
    if code:
        sys.exit(code)


def summary(report: JanitorReport) -> str:
    """The text summary: one line per location that was acted on or refused, then totals."""
    labels = {O_DELETED: "deleted", O_GONE: "already gone", O_WOULD_DELETE: "would delete",
              O_DROPPED: "dropped temp table", O_WOULD_DROP: "would drop temp table", O_REFUSED: "REFUSED",
              O_ERROR: "ERROR", O_SKIPPED: "skipped", O_KEPT: "kept"}
    rows = [(labels.get(o.outcome, o.outcome), o.table, o.location, human_bytes(o.bytes) if o.bytes else "",
             o.reason if o.outcome not in (O_DELETED, O_GONE) else
             o.partition + (f" (moved to the trash: {', '.join(o.trash)})" if o.trash else ""))
            for o in report.outcomes]
    head = (f"{'DRY RUN: ' if report.dry_run else ''}janitor {report.run_id}: grace "
            f"{report.grace_seconds / 3600:g}h, keep {report.keep}, "
            f"{len(report.tables)} table(s) checked in {report.seconds:.1f}s")
    scope = {"metastore": "every database", "database": "the cleaned tables' databases",
             "table": "the cleaned tables only"}.get(report.reference_scope, report.reference_scope)
    read = report.references_read
    head += (f"\nlive references read from {scope} (reference_scope {report.reference_scope}): "
             f"{read.get('tables', 0)} table(s), {read.get('partitions', 0)} partition(s)")
    if report.reference_source == "index":
        head += f", from the reference index and {read.get('events', 0)} notification-log event(s) since"
    elif report.full_scan_reason:
        head += f" (a full scan: {report.full_scan_reason})"
    counts = report.counts()
    freed = report.bytes_freed if not report.dry_run else sum(o.bytes for o in report.of(O_WOULD_DELETE))
    total = (f"{'would delete' if report.dry_run else 'deleted'} "
             f"{counts.get(O_WOULD_DELETE if report.dry_run else O_DELETED, 0)}"
             f"{'' if report.dry_run else f' (+{counts.get(O_GONE, 0)} already gone)'}, "
             f"{'would free' if report.dry_run else 'freed'} {human_bytes(freed)}; "
             f"refused {counts.get(O_REFUSED, 0)}; errors {counts.get(O_ERROR, 0)}; "
             f"kept {counts.get(O_KEPT, 0)}; skipped {counts.get(O_SKIPPED, 0)}; temp tables "
             f"{counts.get(O_WOULD_DROP if report.dry_run else O_DROPPED, 0)}")
    body = render_table(("outcome", "table", "location", "size", "reason / partition"), rows) if rows else \
        "nothing to do"
    return "\n".join([head, body, total])


STATUS_EPILOG = """\b
Exit codes: 0 (the status was read), 1 (the journal cannot be read, or does not exist).

\b
Alert rules on --json (docs/janitor.md, "Watching the janitor"):
  .past_grace.count > 0 for 6 hours      the janitor does not run or cannot keep up
  .refused.count > 0                     a deletion was refused: look at the reasons
  .last_run_age_seconds > 172800, null   no run in 48 hours
  .last_successful_run_age_seconds > 172800, null
                                         no run without errors in 48 hours
  .last_run.errors > 0                   the last run failed to delete something
  .pending.known_bytes > your budget     displaced data waiting (a lower bound
                                         while .pending.bytes_known is false)

\b
Examples:
  tableswap janitor status
  tableswap janitor status --table sales.events --grace 48h
  tableswap janitor status --measure      # list pending locations of unknown size
  tableswap janitor status --json | jq '.past_grace.count'
"""


@janitor.command("status", epilog=STATUS_EPILOG)
@click.option("--table", "table", metavar="DB.TABLE", default=None, help="Only this table's entries and runs.")
@click.option("--grace", default=None, metavar="DURATION", callback=duration,
              help="Count pending entries older than this as backlog (default: the config file's [janitor] grace, "
                   "else 24h).")
@click.option("--runs", "runs", type=click.IntRange(min=1), default=5, show_default=True, metavar="N",
              help="How many recent runs to list.")
@click.option("--measure", is_flag=True,
              help="List the pending locations whose size the journal does not know on storage (one recursive "
                   "listing each, progress on stderr) and add them to the bytes. Reads storage, changes nothing.")
@connection_options
@handle_errors
def status_command(table, grace, runs, measure, metastore_uri, journal_url, out: Output) -> None:
    """What the janitor did and what waits for it, from the journal alone (no metastore needed).

    Recent runs (deleted, bytes freed, refused, errors), pending entries (count and bytes: the size
    each location had when a swap wrote it; entries of unknown size are counted, never summed as
    zero), the oldest pending entry, the backlog past the grace period, and every refused deletion
    with its reason.
    """
    journal = journal_only(journal_url, metastore_uri)
    progress = _MeasureProgress() if measure else None
    try:
        status = janitor_status(journal, table=table, grace=grace, runs=runs, measure=measure,
                                progress=progress)
    finally:
        journal.close()
        if progress is not None:
            progress.close()
    out.result(status.to_dict, lambda: format_status(status))


MEASURE_PROGRESS_FROM = 20  # locations: fewer are listed without a progress report


class _MeasureProgress:
    """``--measure``'s progress on stderr (stdout keeps the status, text or JSON): a bar on a terminal,
    else a line at most every 5 seconds and at the end; nothing for fewer than
    :data:`MEASURE_PROGRESS_FROM` locations."""

    def __init__(self) -> None:
        self.bar: ProgressBar[int] | None = None
        self.last_line = 0.0
        self.done = 0

    def __call__(self, done: int, total: int) -> None:
        if total < MEASURE_PROGRESS_FROM:
            return
        if sys.stderr.isatty():
            if self.bar is None:
                self.bar = click.progressbar(length=total, label="measuring pending locations", file=sys.stderr)
                self.bar.__enter__()
            self.bar.update(done - self.done)
        elif done == total or time.monotonic() - self.last_line >= 5:
            self.last_line = time.monotonic()
            click.echo(f"measuring pending locations: {done}/{total}", err=True)
        self.done = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


def _ago(seconds: float | None) -> str:
    return "never" if seconds is None else f"{format_duration(dt.timedelta(seconds=int(seconds)))} ago"


def _bytes_text(size: Bytes, count: int, hint: bool = True) -> str:
    """``12.0 GiB``; ``size unknown (...)``; or ``at least 3.0 GiB: 2 of them of unknown size (...)``: a sum
    over part of the entries is never shown as their total."""
    why = (" (queued before the journal recorded sizes, or not written by a swap: --measure lists them on storage)"
           if hint else "")
    if size.unknown_count == 0:
        return human_bytes(size.known)
    if size.unknown_count == count:
        return "size unknown" + why
    return f"at least {human_bytes(size.known)}: {size.unknown_count} of them of unknown size{why}"


def format_status(status: JanitorStatus) -> str:
    scope = status.table or "every table"
    grace = format_duration(dt.timedelta(seconds=status.grace_seconds))
    lines = [f"janitor status of {scope} (grace {grace}, {status.grace_source})"]
    last = status.last_run
    if last is None:
        lines.append("last run: none recorded" + (" for this table" if status.table else "")
                     + " -- is `tableswap janitor run` scheduled (docs/janitor.md)?")
    else:
        lines.append(f"last run: {last['run_id']} started {last['started_at']} ({_ago(status.last_run_age_seconds)}) "
                     f"on {last.get('host_name') or '?'}: deleted {last['deleted']}, freed "
                     f"{human_bytes(int(last['bytes_freed'] or 0))}, refused {last['refused']}, "
                     f"errors {last['errors']}")
        if last["errors"]:
            ok = status.last_successful_run
            lines.append("last run without errors: " + (
                f"{ok['run_id']} started {ok['started_at']} ({_ago(status.last_successful_run_age_seconds)})"
                if ok else "none recorded"))
    oldest = status.oldest_pending
    lines.append(f"pending: {status.pending} location(s), {_bytes_text(status.pending_bytes, status.pending)}")
    measured = status.measured
    if measured is not None:
        text = (f"measured: {measured.locations} location(s) of unknown size listed on storage in "
                f"{measured.seconds:.1f}s: {human_bytes(measured.bytes)}")
        if measured.gone:
            text += f", {measured.gone} already gone"
        if measured.failed:
            text += f", {measured.failed} could not be listed (first: {measured.first_error})"
        lines.append(text)
    if oldest is not None:
        lines.append(f"oldest pending: queued {oldest.queued_at} ({_ago(oldest.age_seconds)}), {oldest.table} "
                     f"{oldest.partition or '(table)'} {oldest.location} (swap {oldest.swap_id})")
    groups = status.groups
    if groups.pending:
        text = (f"swap groups: {groups.pending} pending location(s) displaced by {groups.groups} group(s): their "
                "grace runs from each group's commit")
        if groups.held:
            text += (f"; {groups.held} kept whatever their age: group(s) {', '.join(groups.uncommitted)} not "
                     "committed yet (`tableswap recover` finishes them)")
        lines.append(text)
    backlog = f"past grace: {status.past_grace} pending for longer than {grace}"
    if status.past_grace:
        backlog += f", {_bytes_text(status.past_grace_bytes, status.past_grace, hint=False)}"
        backlog += (f" (the oldest for {_ago(status.oldest_past_grace_age_seconds)[:-4]}): the janitor has not deleted "
                    "them -- not scheduled, failing, refusing, or kept by [janitor] keep")
    lines.append(backlog)
    lines.append(f"refused: {len(status.refused)}")
    if status.refused:
        rows = [(e.table, e.partition or "(table)", e.location, e.attempts, e.reason or "") for e in status.refused]
        lines.extend("  " + x for x in render_table(("table", "partition", "location", "attempts", "reason"),
                                                     rows).splitlines())
    if status.runs:
        lines.append("recent runs:")
        run_rows = [(r["run_id"], r["started_at"], r.get("table_filter") or "(all)", r["deleted"],
                     human_bytes(int(r["bytes_freed"] or 0)), r["refused"], r["errors"]) for r in status.runs]
        lines.extend("  " + x for x in render_table(("run", "started", "table", "deleted", "freed", "refused",
                                                     "errors"), run_rows).splitlines())
    return "\n".join(lines)


def register(main: click.Group) -> None:
    main.add_command(janitor)
