"""``tableswap janitor status``: what the janitor has done and what waits for it, from the journal alone.

Read-only (no metastore; storage only with ``measure``): the recent runs (``tableswap_janitor_runs``), the
deletion queue's pending entries (``tableswap_deletions``: count, bytes, the oldest, those waiting for
longer than the grace period: the backlog a healthy, scheduled janitor keeps at zero) and its refusals with
their reasons. What a swap group's member displaced counts from the group's commit, as the janitor keeps it
(docs/groups.md): no backlog while the group is not committed, then its grace from the group's commit.

Bytes: a queue row carries the size its location had when a swap wrote it (the staging listing's, recorded
with the swap's intent: ``tableswap_location_sizes``). Locations queued before the journal recorded sizes,
or written by something else than a swap (a directory that predates tableswap, a rollback to one), have no
size: they are counted as unknown, never as zero, and a total is given only when every size is known.
``measure`` lists those locations on storage (one recursive listing each) to fill the gaps.
"""

from __future__ import annotations

import datetime as dt
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

from tableswap.core import locations as loc
from tableswap.core.janitor_plan import DISPLACED
from tableswap.core.durations import DEFAULT_GRACE, format_duration, parse_duration, parse_time
from tableswap.core.names import parse_table_name
from tableswap.core.records import Deletion, DeletionState
from tableswap.journal.queue import JanitorQueue
from tableswap.journal.store import Journal

REFUSED_PREFIX = "refused: "  # how a run records a refusal on an entry it leaves queued (JanitorQueue.record)
MEASURE_WORKERS = 8  # listings at once with measure (each one request per 1,000 objects on an object store)


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
    bytes: int | None = None  # recorded when a swap wrote it, or measured; None: unknown
    group_id: str | None = None  # displaced by a member of this swap group: its grace runs from the group's commit


@dataclass(frozen=True)
class Bytes:
    """The size of a set of queue entries: ``known`` bytes over the entries of known size, and how many
    entries are of unknown size. ``total`` only when none is unknown (a partial sum is never a total)."""

    known: int = 0
    unknown_count: int = 0

    @property
    def total(self) -> int | None:
        return self.known if self.unknown_count == 0 else None

    def to_dict(self) -> dict[str, Any]:
        return {"bytes": self.total, "bytes_known": self.unknown_count == 0, "known_bytes": self.known,
                "unknown_size_count": self.unknown_count}


@dataclass(frozen=True)
class Measured:
    """What ``measure`` found listing the pending locations of unknown size on storage."""

    locations: int = 0  # listed (distinct locations)
    bytes: int = 0  # found under them
    gone: int = 0  # nothing there any more (the janitor will record them as already gone)
    failed: int = 0  # could not be listed: still unknown
    first_error: str | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class GroupBacklog:
    """The pending entries displaced by swap groups' members: their grace runs from the group's commit, the same
    for every member (docs/groups.md), not from each member's own queue time; while a group is past its intent
    and not committed (``tableswap recover`` finishes it), what its members displaced is kept whatever its age:
    no backlog."""

    pending: int = 0  # pending entries displaced by a group's member
    groups: int = 0  # the groups they belong to
    held: int = 0  # of them, displaced by groups not committed yet
    uncommitted: tuple[str, ...] = ()  # those groups' ids

    def to_dict(self) -> dict[str, Any]:
        return {"pending": self.pending, "groups": self.groups, "held": self.held,
                "uncommitted": list(self.uncommitted)}


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
    pending_bytes: Bytes = field(default_factory=Bytes)
    past_grace_bytes: Bytes = field(default_factory=Bytes)
    measured: Measured | None = None  # None: not asked to measure
    last_successful_run: dict[str, Any] | None = None  # the latest run without errors (refusals allowed)
    groups: GroupBacklog = field(default_factory=GroupBacklog)

    @property
    def last_run(self) -> dict[str, Any] | None:
        return self.runs[0] if self.runs else None

    @property
    def last_run_age_seconds(self) -> float | None:
        return self._age(self.last_run)

    @property
    def last_successful_run_age_seconds(self) -> float | None:
        return self._age(self.last_successful_run)

    def _age(self, run: dict[str, Any] | None) -> float | None:
        if run is None:
            return None
        return (_timestamp(self.now) - _timestamp(str(run["started_at"]))).total_seconds()

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": True, "table": self.table, "now": self.now,
            "grace_seconds": self.grace_seconds, "grace_source": self.grace_source,
            "last_run": self.last_run, "last_run_age_seconds": self.last_run_age_seconds,
            "last_successful_run": self.last_successful_run,
            "last_successful_run_age_seconds": self.last_successful_run_age_seconds,
            "runs": list(self.runs),
            "pending": {"count": self.pending, **self.pending_bytes.to_dict(),
                        "oldest": asdict(self.oldest_pending) if self.oldest_pending else None},
            "past_grace": {"count": self.past_grace, "oldest_age_seconds": self.oldest_past_grace_age_seconds,
                           **self.past_grace_bytes.to_dict()},
            "refused": {"count": len(self.refused), "entries": [asdict(e) for e in self.refused]},
            "groups": self.groups.to_dict(),
            "measured": asdict(self.measured) if self.measured is not None else None,
        }


Progress = Callable[[int, int], None]


def _timestamp(value: str) -> dt.datetime:
    """A time the journal wrote (ISO 8601); one that is not fails with the TypeError its subtraction gave."""
    parsed = parse_time(value)
    if parsed is None:
        raise TypeError(f"not a timestamp: {value!r}")
    return parsed


def janitor_status(journal: Journal, *, table: str | None = None, grace: dt.timedelta | None = None,
                   grace_source: str | None = None, runs: int = 10, now: dt.datetime | None = None,
                   measure: bool = False, progress: Progress | None = None) -> JanitorStatus:
    """The janitor's state from ``journal``: runs, pending entries and their bytes, backlog past ``grace``
    (default: the config file's ``[janitor] grace``, else 24h), refusals. ``table`` (``db.table``) narrows it
    to one table. ``measure``: list the pending locations of unknown size on storage (``progress(done,
    total)`` after each), reading and changing nothing else."""
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
    pending = [d for d in rows if d.state == DeletionState.PENDING]
    pending.sort(key=lambda d: _timestamp(d.queued_at))

    # One size per distinct location (a location queued twice is one directory): recorded, else measured.
    sizes: dict[str, int] = {}
    for d in rows:
        if d.bytes is not None:
            sizes.setdefault(loc.key(d.location), int(d.bytes))
    measured = None
    if measure:
        unknown = sorted({loc.key(d.location): d.location for d in pending
                          if loc.key(d.location) not in sizes}.items())
        measured, found = measure_locations([x for _, x in unknown], progress=progress)
        sizes.update((k, found[x]) for k, x in unknown if x in found)

    def size(d: Deletion) -> int | None:
        return sizes.get(loc.key(d.location))

    queue = JanitorQueue(journal)
    in_groups = queue.group_commits() if pending else {}

    def group_of(d: Deletion) -> tuple[str, str | None] | None:
        return in_groups.get(d.swap_id) if d.reason == DISPLACED else None

    def grace_from(d: Deletion) -> dt.datetime | None:
        """When the grace of ``d`` started: its queue time, or its group's commit if later; None while its group
        is not committed."""
        queued = _timestamp(d.queued_at)
        group = group_of(d)
        if group is None:
            return queued
        return None if group[1] is None else max(queued, _timestamp(group[1]))

    def entry(d: Deletion, reason: str | None = None) -> Entry:
        age = (now - _timestamp(d.queued_at)).total_seconds()
        group = group_of(d)
        return Entry(table=f"{d.db_name}.{d.table_name}", partition=d.partition_name, location=d.location,
                     swap_id=d.swap_id, queued_at=d.queued_at, age_seconds=round(age, 1), attempts=d.attempts,
                     reason=reason, bytes=size(d), group_id=group[0] if group else None)

    started = [(since, d) for d in pending if (since := grace_from(d)) is not None]
    due = [d for since, d in sorted(started, key=lambda x: x[0]) if now - since > grace]
    oldest_due = min((since for since, d in started if now - since > grace), default=None)
    refused = [entry(d, _refusal(d)) for d in rows
               if d.state == DeletionState.REFUSED or (d.last_error or "").startswith(REFUSED_PREFIX)]
    of_groups = [(d, g) for d in pending if (g := group_of(d)) is not None]
    held = [(d, g) for d, g in of_groups if g[1] is None]
    successful = queue.runs(1, table=table, successful=True)
    return JanitorStatus(
        table=table, now=now.isoformat(timespec="seconds"), grace_seconds=grace.total_seconds(),
        grace_source=grace_source or "command line", runs=tuple(queue.runs(runs, table=table)),
        pending=len(pending), oldest_pending=entry(pending[0]) if pending else None, past_grace=len(due),
        oldest_past_grace_age_seconds=round((now - oldest_due).total_seconds(), 1) if oldest_due else None,
        refused=tuple(refused), pending_bytes=_bytes(pending, sizes), past_grace_bytes=_bytes(due, sizes),
        measured=measured, last_successful_run=successful[0] if successful else None,
        groups=GroupBacklog(len(of_groups), len({g[0] for _, g in of_groups}), len(held),
                            tuple(sorted({g[0] for _, g in held}))),
    )


def _bytes(entries: Iterable[Deletion], sizes: dict[str, int]) -> Bytes:
    """Known bytes (each distinct location once) and the count of entries of unknown size."""
    known: dict[str, int] = {}
    unknown = 0
    for d in entries:
        k = loc.key(d.location)
        if k in sizes:
            known[k] = sizes[k]
        else:
            unknown += 1
    return Bytes(sum(known.values()), unknown)


def measure_locations(locations: list[str], *, progress: Progress | None = None,
                      workers: int = MEASURE_WORKERS) -> tuple[Measured, dict[str, int]]:
    """List each location on storage (one recursive listing: :func:`tableswap.storage.survey`, as the janitor
    measures what it deletes), several at once; returns the summary and the bytes of each location listed
    (0 for one that is gone). A location that cannot be listed stays unknown."""
    from tableswap import storage

    start = time.monotonic()
    found: dict[str, int] = {}
    gone = failed = 0
    first_error: str | None = None

    def one(location: str) -> tuple[str, int | None, str | None]:
        try:
            survey = storage.survey(location)
        except Exception as exc:  # noqa: BLE001 - fsspec implementations raise their clients' own errors
            return location, None, f"{location}: {type(exc).__name__}: {exc}"
        return location, (survey.bytes if survey is not None else -1), None

    done = 0
    if locations:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(locations))),
                                thread_name_prefix="tableswap-measure") as pool:
            for location, size, error in pool.map(one, locations):
                done += 1
                if error is not None:
                    failed += 1
                    first_error = first_error or error
                elif size == -1:
                    gone += 1
                    found[location] = 0
                else:
                    found[location] = int(size or 0)
                if progress is not None:
                    progress(done, len(locations))
    summary = Measured(locations=len(locations), bytes=sum(found.values()), gone=gone, failed=failed,
                       first_error=first_error, seconds=round(time.monotonic() - start, 2))
    return summary, found


def _refusal(d: Deletion) -> str:
    text = d.last_error or "refused"
    return text[len(REFUSED_PREFIX):] if text.startswith(REFUSED_PREFIX) else text


__all__ = ["janitor_status", "measure_locations", "JanitorStatus", "Entry", "Bytes", "Measured", "GroupBacklog",
           "format_duration"]
