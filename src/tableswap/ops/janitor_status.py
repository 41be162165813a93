"""``tableswap janitor status``: what the janitor has done and what waits for it, from the journal alone.

Read-only (no metastore, no storage): the recent runs (``tableswap_janitor_runs``), the deletion queue's
pending entries (``tableswap_deletions``: count, the oldest, those waiting for longer than the grace period:
the backlog a healthy, scheduled janitor keeps at zero) and its refusals with their reasons. Sizes of pending
entries are not in the journal (it records bytes only of what a run deleted): they are reported as unknown.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any

from tableswap.core.durations import DEFAULT_GRACE, format_duration, parse_duration, parse_time
from tableswap.core.names import parse_table_name
from tableswap.core.records import Deletion, DeletionState
from tableswap.journal.queue import JanitorQueue
from tableswap.journal.store import Journal

REFUSED_PREFIX = "refused: "  # how a run records a refusal on an entry it leaves queued (JanitorQueue.record)


@dataclass(frozen=True)
class Entry:
    """One deletion-queue entry as the status shows it."""

    table: str
    partition: str
    location: str
    swap_id: str
    queued_at: str
    age_seconds: float
    attempts: int = 0
    reason: str | None = None  # a refusal's reason


@dataclass(frozen=True)
class JanitorStatus:
    table: str | None
    now: str
    grace_seconds: float
    grace_source: str
    runs: tuple[dict[str, Any], ...]
    pending: int
    oldest_pending: Entry | None
    past_grace: int
    oldest_past_grace_age_seconds: float | None
    refused: tuple[Entry, ...] = field(default_factory=tuple)

    @property
    def last_run(self) -> dict[str, Any] | None:
        return self.runs[0] if self.runs else None

    @property
    def last_run_age_seconds(self) -> float | None:
        if not self.runs:
            return None
        return (parse_time(self.now) - parse_time(str(self.runs[0]["started_at"]))).total_seconds()

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": True, "table": self.table, "now": self.now,
            "grace_seconds": self.grace_seconds, "grace_source": self.grace_source,
            "last_run": self.last_run, "last_run_age_seconds": self.last_run_age_seconds,
            "runs": list(self.runs),
            "pending": {"count": self.pending, "bytes": None, "bytes_known": False,
                        "oldest": asdict(self.oldest_pending) if self.oldest_pending else None},
            "past_grace": {"count": self.past_grace, "oldest_age_seconds": self.oldest_past_grace_age_seconds},
            "refused": {"count": len(self.refused), "entries": [asdict(e) for e in self.refused]},
        }


def janitor_status(journal: Journal, *, table: str | None = None, grace: dt.timedelta | None = None,
                   grace_source: str | None = None, runs: int = 10, now: dt.datetime | None = None) -> JanitorStatus:
    """The janitor's state from ``journal``: runs, pending entries, backlog past ``grace`` (default: the
    config file's ``[janitor] grace``, else 24h), refusals. ``table`` (``db.table``) narrows it to one table."""
    if grace is None:
        from tableswap.config import file_setting

        text, source = file_setting("janitor.grace")
        grace, grace_source = (parse_duration(text), source) if text else (DEFAULT_GRACE, "default")
    now = now or dt.datetime.now(dt.timezone.utc)
    db = name = None
    if table is not None:
        db, name = parse_table_name(table)
        table = f"{db}.{name}"
    rows = journal.deletions(states=(DeletionState.PENDING, DeletionState.REFUSED), db=db, table=name)

    def entry(d: Deletion, reason: str | None = None) -> Entry:
        age = (now - parse_time(d.queued_at)).total_seconds()
        return Entry(table=f"{d.db_name}.{d.table_name}", partition=d.partition_name, location=d.location,
                     swap_id=d.swap_id, queued_at=d.queued_at, age_seconds=round(age, 1), attempts=d.attempts,
                     reason=reason)

    pending = [d for d in rows if d.state == DeletionState.PENDING]
    pending.sort(key=lambda d: parse_time(d.queued_at))
    due = [d for d in pending if now - parse_time(d.queued_at) > grace]
    refused = [entry(d, _refusal(d)) for d in rows
               if d.state == DeletionState.REFUSED or (d.last_error or "").startswith(REFUSED_PREFIX)]
    return JanitorStatus(
        table=table, now=now.isoformat(timespec="seconds"), grace_seconds=grace.total_seconds(),
        grace_source=grace_source or "command line", runs=tuple(JanitorQueue(journal).runs(runs, table=table)),
        pending=len(pending), oldest_pending=entry(pending[0]) if pending else None, past_grace=len(due),
        oldest_past_grace_age_seconds=round((now - parse_time(due[0].queued_at)).total_seconds(), 1) if due else None,
        refused=tuple(refused),
    )


def _refusal(d: Deletion) -> str:
    text = d.last_error or "refused"
    return text[len(REFUSED_PREFIX):] if text.startswith(REFUSED_PREFIX) else text


__all__ = ["janitor_status", "JanitorStatus", "Entry", "format_duration"]
