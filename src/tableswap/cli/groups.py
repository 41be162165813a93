"""The ``--group`` forms of ``history`` and ``rollback`` (swap groups, docs/groups.md)."""

from __future__ import annotations

from tableswap.core.group import GroupRecord, GroupResult
from tableswap.journal.groups import GroupLog
from tableswap.ops.restore.group_rollback import execute_group_rollback, plan_group_rollback
from tableswap.cli.common import journal_only, runtime
from tableswap.cli.output import Output, render_table

#: ``tableswap history --group`` without an id: every group, newest first.
ALL = "*"


def history_groups(group: str, limit: int | None, metastore_uri: str | None, journal_url: str | None,
                   out: Output) -> None:
    """``tableswap history --group [ID_OR_NAME]``: the groups (or one) and their members."""
    journal = journal_only(journal_url, metastore_uri)  # the journal alone: no metastore needed
    try:
        log = GroupLog(journal)
        records = log.list(limit=limit or 50) if group == ALL else [log.get(group)]
    finally:
        journal.close()
    out.result(lambda: {"groups": [r.to_dict() for r in records]}, lambda: format_groups(records))


def format_groups(records: list[GroupRecord]) -> str:
    if not records:
        return "no swap groups in the journal"
    lines = []
    for r in records:
        label = r.group_id + (f" ({r.name})" if r.name else "")
        what = r.kind + (f" of group {r.rollback_of}" if r.rollback_of else "")
        when = r.committed_at or r.intent_at or r.created_at
        lines.append(f"{label}  {r.state.upper()}  {what}  {when}" + (f"  error: {r.error}" if r.error else ""))
        rows = [(m.table, m.swap_id, m.state or "?") for m in r.members]
        lines.append("  " + render_table(("table", "swap", "state"), rows).replace("\n", "\n  "))
    return "\n".join(lines)


def rollback_groups(group: str, dry_run: bool, assume_yes: bool, metastore_uri: str | None, journal_url: str | None,
                    out: Output) -> None:
    """``tableswap rollback --group ID_OR_NAME [--dry-run]``."""
    with runtime(metastore_uri, journal_url, read_only=True) as rt:
        group_id, plans = plan_group_rollback(group, runtime=rt)
        if dry_run or all(p.is_noop for p in plans.values()):
            result = GroupResult(group_id, None, {t: p.to_result(dry_run=True) for t, p in plans.items()},
                                 dry_run=True)
            out.result(lambda: {"ok": True, "rollback_of": group_id, **result.to_dict()},
                       lambda: "\n".join([*(p.describe() for p in plans.values()), "dry run: nothing was changed"]))
            return
        for p in plans.values():
            out.message(p.describe())
        out.confirm(f"Roll back the {len(plans)} table(s) of group {group_id} as one unit, as shown?", assume_yes,
                    or_else="--dry-run")
        result = execute_group_rollback(group_id, plans, runtime=rt)  # what was shown, checked under the locks
    out.result(lambda: {"ok": True, "rollback_of": group_id, **result.to_dict()},
               lambda: result.summary().replace("committed", f"rolled back group {group_id}:", 1))
