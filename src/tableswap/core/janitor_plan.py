"""Janitor planning: pure functions, no I/O.

Given the deletion queue, a snapshot of what the metastore references (:class:`LiveView`) and the
leftovers found on storage (:class:`SwapDirCandidate`), :func:`plan_janitor` decides for each
location: ``delete``, ``refuse`` (with the reason; it stays queued), ``keep`` (grace period not
over, kept by ``--keep``, a swap still in flight, or a staged swap within its ``staged_ttl``) or ``drop_temp``
(a temporary table's metadata). The executor (:mod:`tableswap.ops.janitor.run`) re-checks every delete against a fresh
snapshot, under the table lock, right before it deletes.

The safety rules are :func:`tableswap.core.deletion_safety.check_location`'s.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from tableswap import errors
from tableswap.core import locations as loc
from tableswap.core.deletion_safety import (  # re-exported: part of janitor planning
    LiveRef as LiveRef, LiveView as LiveView, check_location as check_location, expand as expand,
    has_dot_segments as has_dot_segments,
)
from tableswap.core.records import COMMITTED, PENDING, STAGED, STAGING
from tableswap.core.names import (  # re-exported: part of the planning vocabulary
    SWAP_ID_RE as SWAP_ID_RE, swap_id_time as swap_id_time,
)

from tableswap.core.durations import (  # re-exported: part of janitor planning
    DEFAULT_GRACE as DEFAULT_GRACE, DEFAULT_STAGED_TTL as DEFAULT_STAGED_TTL,
    DEFAULT_MIN_GRACE as DEFAULT_MIN_GRACE, ENV_MIN_GRACE as ENV_MIN_GRACE, check_grace as check_grace,
    format_duration as format_duration, parse_duration as parse_duration, parse_time as parse_time,
)

DELETE, REFUSE, KEEP, DROP_TEMP = "delete", "refuse", "keep", "drop_temp"
DISPLACED, ORPHAN, LEFTOVER, TEMP_TABLE = "displaced", "orphan", "leftover", "temp_table"


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class QueueEntry:
    """One row of the deletion queue (``pending``)."""

    swap_id: str
    location: str  # as stored
    db: str
    table: str
    partition: str
    table_root: str
    reason: str  # displaced | orphan
    queued_at: dt.datetime
    #: a member of a swap group past its intent: the group's id, and when it committed (None: not yet). What a
    #: group displaced is kept until the group's grace ends, the same for every member, whatever the member's
    #: own record says (``recover`` may have committed a member before the group).
    group_id: str | None = None
    group_committed_at: dt.datetime | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.swap_id, self.location)


@dataclass(frozen=True)
class SwapDirCandidate:
    """A swap's leftovers found under ``<root>/_tableswap``: its directory and/or temporary table."""

    db: str
    table: str
    swap_id: str
    location: str | None  # normalized ``<root>/_tableswap/<id>`` if the directory exists
    temp_table: str | None  # name of its temporary table if that still exists
    state: str | None  # journal state, None when the journal does not know the swap
    last_activity: dt.datetime | None  # newest of: start, temp table creation, newest file write
    has_data: bool | None = None  # holds data files (names not starting with '_' or '.'); None: not looked
    manifest_state: str | None = None  # its recovery manifest's state (intent | committed); None: none read
    manifest_in_use: bool = False  # a location the manifest names is live or still on storage
    staged_at: dt.datetime | None = None  # a staged swap's: when it was staged (its staged_ttl runs from it)


# --------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class JanitorAction:
    decision: str  # delete | refuse | keep | drop_temp
    kind: str  # displaced | orphan | leftover | temp_table
    db: str
    table: str
    location: str  # normalized where possible; the temp table name for drop_temp
    reason: str = ""
    partition: str = ""
    swap_ids: tuple[str, ...] = ()
    keys: tuple[tuple[str, str], ...] = ()  # claim / queue keys (swap id, location as stored)
    queued: bool = False  # keys are rows of the deletion queue
    enqueue: bool = False  # a journaled swap's orphan: queue it before deleting (for the record)
    abandon: bool = False  # the swap is stuck in 'staging': mark it aborted before deleting
    #: with ``abandon``: the swap is a staged one past its staged_ttl ('staged' → 'aborted', not 'staging')
    discards_staged: bool = False
    partial: bool = False  # contains live locations: only the unreferenced entries go
    due_at: dt.datetime | None = None  # when the grace period ends / ended
    table_root: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.table}"


@dataclass(frozen=True)
class JanitorPlan:
    now: dt.datetime
    grace: dt.timedelta
    keep: int
    actions: tuple[JanitorAction, ...] = ()

    def of(self, decision: str) -> tuple[JanitorAction, ...]:
        return tuple(a for a in self.actions if a.decision == decision)

    @property
    def deletes(self) -> tuple[JanitorAction, ...]:
        return self.of(DELETE)

    @property
    def refusals(self) -> tuple[JanitorAction, ...]:
        return self.of(REFUSE)

    @property
    def kept(self) -> tuple[JanitorAction, ...]:
        return self.of(KEEP)

    @property
    def temp_drops(self) -> tuple[JanitorAction, ...]:
        return self.of(DROP_TEMP)


# --------------------------------------------------------------------------- planning


def _norm_or_raw(location: str) -> str:
    try:
        return loc.normalize(location)
    except ValueError:
        return location


def _key_or_raw(location: str) -> str:
    try:
        return loc.key(location)
    except ValueError:
        return location


def plan_janitor(
    entries: Sequence[QueueEntry],
    views: Mapping[tuple[str, str], LiveView],
    *,
    now: dt.datetime,
    grace: dt.timedelta,
    keep: int = 0,
    candidates: Sequence[SwapDirCandidate] = (),
    unfinished: Mapping[tuple[str, str], Sequence[tuple[str, str]]] | None = None,
    swap_started: Mapping[str, dt.datetime] | None = None,
    staged_ttl: dt.timedelta = DEFAULT_STAGED_TTL,
) -> JanitorPlan:
    """Decide what to do with every queued location and every swap leftover. Pure.

    A staged swap's temporary table and data (state ``staged``: written, audited or waiting for its
    publish) are kept until ``staged_ttl`` after it was staged, whatever the grace period; then it is
    discarded (marked aborted, its temporary table dropped, its data deleted) like an abandoned swap."""
    if keep < 0:
        raise errors.InvalidInputError("--keep must be 0 or more")
    unfinished = unfinished or {}
    swap_started = swap_started or {}
    actions: list[JanitorAction] = []

    # One decision per distinct location (a path displaced, restored and displaced again is queued
    # twice): its grace period runs from the *latest* time it was displaced.
    groups: dict[tuple[str, str, str], list[QueueEntry]] = {}
    for entry in entries:
        groups.setdefault((entry.db, entry.table, _key_or_raw(entry.location)), []).append(entry)

    def displaced_at(group: list[QueueEntry]) -> dt.datetime:
        times = []
        for e in group:
            t = e.queued_at
            if e.reason == ORPHAN and e.swap_id in swap_started:
                t = min(t, swap_started[e.swap_id])  # never read by anyone: age from the swap's start
            if e.reason == DISPLACED and e.group_committed_at is not None:
                t = max(t, e.group_committed_at)  # the group's grace, the same for every member
            times.append(t)
        return max(times)

    def uncommitted_group(group: list[QueueEntry]) -> str | None:
        """A swap group, past its intent and not yet committed, that displaced this location: its grace has not
        started (``recover`` finishes the group)."""
        return next((e.group_id for e in group
                     if e.reason == DISPLACED and e.group_id is not None and e.group_committed_at is None), None)

    kept_by_keep: set[tuple[str, str, str]] = set()
    if keep:
        by_partition: dict[tuple[str, str, str], list[tuple[dt.datetime, tuple[str, str, str]]]] = {}
        for gkey, group in groups.items():
            if any(e.reason == DISPLACED for e in group):
                part = group[0].partition
                by_partition.setdefault((gkey[0], gkey[1], part), []).append((displaced_at(group), gkey))
        for items in by_partition.values():
            for _, gkey in sorted(items, reverse=True)[:keep]:
                kept_by_keep.add(gkey)

    for gkey, group in sorted(groups.items(), key=lambda kv: (kv[0], displaced_at(kv[1]))):
        db, table, _ = gkey
        first = group[0]
        norm = _norm_or_raw(first.location)
        kind = DISPLACED if any(e.reason == DISPLACED for e in group) else ORPHAN
        view = views.get((db, table)) or LiveView(db, table, exists=False)
        due = displaced_at(group) + grace
        common: dict[str, Any] = dict(kind=kind, db=db, table=table, location=norm, partition=first.partition,
                      swap_ids=tuple(sorted({e.swap_id for e in group})),
                      keys=tuple(sorted(e.key for e in group)), queued=True, due_at=due,
                      table_root=first.table_root)
        reason = None
        partial = False
        for e in group:  # every row's own recorded root must hold
            reason, partial = check_location(e.location, e.table_root, view,
                                             unfinished=unfinished.get((db, table), ()))
            if reason:
                break
        if reason:
            actions.append(JanitorAction(REFUSE, reason=reason, **common))
        elif (waiting_group := uncommitted_group(group)) is not None:
            actions.append(JanitorAction(KEEP, reason=f"displaced by swap group {waiting_group}, not committed yet "
                                                      "(`tableswap recover`): its grace runs from the group's commit",
                                         **common))
        elif gkey in kept_by_keep:
            actions.append(JanitorAction(KEEP, reason=f"one of the {keep} most recent displaced locations "
                                                      "of its partition (--keep)", **common))
        elif now < due:
            actions.append(JanitorAction(KEEP, reason=f"grace period ends {due.isoformat(timespec='seconds')}",
                                         **common))
        else:
            actions.append(JanitorAction(DELETE, partial=partial, **common))

    queued_locations = {(a.db, a.table, _key_or_raw(a.location)) for a in actions}
    pending_by_table: dict[tuple[str, str], list[str]] = {}
    for gkey in groups:
        pending_by_table.setdefault((gkey[0], gkey[1]), []).append(gkey[2])
    for cand in sorted(candidates, key=lambda c: (c.db, c.table, c.swap_id)):
        actions.extend(_plan_candidate(cand, views, now=now, grace=grace, queued_locations=queued_locations,
                                       pending=pending_by_table.get((cand.db, cand.table), []),
                                       staged_ttl=staged_ttl))
    order = {DROP_TEMP: 0, DELETE: 1, REFUSE: 2, KEEP: 3}
    return JanitorPlan(now=now, grace=grace, keep=keep,
                       actions=tuple(sorted(actions, key=lambda a: order[a.decision])))


def _plan_candidate(cand: SwapDirCandidate, views: Mapping[tuple[str, str], LiveView], *, now: dt.datetime,
                    grace: dt.timedelta, queued_locations: set[tuple[str, str, str]],
                    pending: Sequence[str], staged_ttl: dt.timedelta = DEFAULT_STAGED_TTL) -> list[JanitorAction]:
    view = views.get((cand.db, cand.table)) or LiveView(cand.db, cand.table, exists=False)
    base: dict[str, Any] = dict(db=cand.db, table=cand.table, swap_ids=(cand.swap_id,))
    last = cand.last_activity or now
    due = last + grace
    young = now < due
    out: list[JanitorAction] = []
    state = cand.state
    temp = cand.temp_table

    if state == PENDING:
        what = " and ".join(filter(None, [f"temporary table {temp}" if temp else "",
                                          f"directory {cand.location}" if cand.location else ""]))
        return [JanitorAction(KEEP, ORPHAN, location=cand.location or temp or "", due_at=None,
                              reason=f"swap {cand.swap_id} is unfinished (state pending): its {what} may "
                                     "still be needed; run `tableswap recover`", **base)]
    if state == COMMITTED:
        if temp:
            out.append(JanitorAction(DROP_TEMP, TEMP_TABLE, location=temp,
                                     reason=f"swap {cand.swap_id} is committed; its temporary table's "
                                            "metadata is left over (data untouched)", **base))
        if cand.location and (cand.db, cand.table, _key_or_raw(cand.location)) not in queued_locations:
            reason, partial = check_location(cand.location, None, view, ignore_temp_of=cand.swap_id)
            if reason or partial:
                return out  # live data (or a table we cannot check): nothing left over here
            if any(loc.is_within(p, cand.location) for p in pending):
                return out  # still holds displaced locations waiting in the queue (grace, --keep)
            if cand.has_data is not False:
                hint = (f"; its recovery manifest records them: if the table's metastore entry was lost, run "
                        f"`tableswap repair {cand.db}.{cand.table}` (not MSCK REPAIR)"
                        if cand.manifest_in_use else "")
                out.append(JanitorAction(REFUSE, LEFTOVER, location=cand.location, due_at=due,
                                         reason=f"committed swap {cand.swap_id}'s directory holds data files that "
                                                "no table references and that are not queued (repointed "
                                                f"outside tableswap?); check it and delete it by hand{hint}", **base))
            elif cand.manifest_in_use:
                return out  # the recovery manifest of locations still in use (a rollback's, a repair's)
            elif young:
                out.append(JanitorAction(KEEP, LEFTOVER, location=cand.location, due_at=due,
                                         reason=f"grace period ends {due.isoformat(timespec='seconds')}", **base))
            else:
                out.append(JanitorAction(DELETE, LEFTOVER, location=cand.location, due_at=due,
                                         keys=((cand.swap_id, cand.location),),
                                         reason="empty remains of a committed swap's directory", **base))
        return out

    staged = state == STAGED
    if staged:
        # A staged swap is waiting for its publish or discard: neither its temporary table (readers
        # audit it) nor its data go before its staged_ttl, whatever the grace period.
        expires = (cand.staged_at or last) + staged_ttl
        if now < expires:
            return [JanitorAction(KEEP, ORPHAN, location=cand.location or temp or "", due_at=expires,
                                  reason=f"swap {cand.swap_id} is staged, waiting for `tableswap publish` or "
                                         f"`tableswap discard`; the janitor discards it once its staged_ttl "
                                         f"({format_duration(staged_ttl)}) ends "
                                         f"{expires.isoformat(timespec='seconds')}", **base)]

    # Not committed: staging (in flight, or abandoned once idle for the grace period), staged past its
    # staged_ttl, failed, aborted, or unknown to this journal.
    label = (f"state {state}" if not staged else f"staged, not published within {format_duration(staged_ttl)}") \
        if state else "not in the journal"
    if young:
        why = "in flight" if state == STAGING else label
        return [JanitorAction(KEEP, ORPHAN, location=cand.location or temp or "", due_at=due,
                              reason=f"swap {cand.swap_id} ({why}) was active less than the grace period ago; "
                                     f"its leftovers become eligible {due.isoformat(timespec='seconds')}",
                              **base)]
    if cand.manifest_in_use and cand.manifest_state == COMMITTED:
        return [JanitorAction(KEEP, ORPHAN, location=cand.location or "", due_at=None,
                              reason=f"swap {cand.swap_id} ({label}) has a committed recovery manifest naming "
                                     "locations still in use: the journal may have lost it; if the table's "
                                     f"metastore entry was lost too, run `tableswap repair {cand.db}.{cand.table} "
                                     "--from-storage`", **base)]
    abandon = state in (STAGING, STAGED)
    if temp:
        out.append(JanitorAction(DROP_TEMP, TEMP_TABLE, location=temp, abandon=abandon, discards_staged=staged,
                                 reason=f"temporary table of swap {cand.swap_id} ({label}, idle beyond the grace "
                                        "period)", **base))
    if cand.location and (cand.db, cand.table, _key_or_raw(cand.location)) not in queued_locations:
        reason, partial = check_location(cand.location, None, view, ignore_temp_of=cand.swap_id)
        if reason:
            out.append(JanitorAction(REFUSE, ORPHAN, location=cand.location, reason=reason, due_at=due, **base))
        else:
            out.append(JanitorAction(DELETE, ORPHAN, location=cand.location, partial=partial, due_at=due,
                                     keys=((cand.swap_id, cand.location),), enqueue=state is not None,
                                     abandon=abandon and not temp, discards_staged=staged and not temp,
                                     reason=f"staging directory of swap {cand.swap_id} ({label})", **base))
    return out
