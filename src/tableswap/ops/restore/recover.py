"""``recover``: resolve swaps a crash left unfinished, deciding from the metastore what landed.

For each swap in state ``pending`` (intent journaled, commit not), under the table lock — so it is
safe while other swaps run, and a swap that is merely slow finishes first — every changed item is
classified from the metastore (swap-id stamps and locations) and, where a later swap has changed the
partition since, from that swap's journaled "old" location (the state right after the crash):

* every item landed → the journal entry is committed and the displaced locations are queued;
* no item landed → the swap is aborted and its staged data queued as an orphan for the janitor;
* some landed and every other one is still exactly as before (a crash between ``add_partitions`` and
  ``alter_partitions``) → the rest of the flip is applied under the lock with compare-and-swap, then
  committed;
* anything else → reported for manual attention, nothing changed.

A swap still ``staging`` (writing its batch, or killed before its intent) is judged by its liveness signal:
its process refreshes the record's heartbeat (``heartbeat_at``) every ``heartbeat_s`` from its begin to its end
(:class:`~tableswap.ops.operation.Heartbeat`). One whose heartbeat is younger than ``stale_after_s`` is a live
writer, however long its batch write takes: left alone. One whose heartbeat is older is dead (or frozen for
longer than that): aborted at once, without its table lock, whose server may keep a dead writer's lock until
its lock timeout: nothing of a ``staging`` swap is visible to readers, and the abort is a compare-and-set on
the journal record (state ``staging`` and the heartbeat it judged), so a frozen writer that wakes up fails at
its intent, before its flip, with a clear error. A record from before journal version 10 (no heartbeat) is
judged as before: by its start time, and only when no lock of its own is held. A **pending** swap is resolved
under the table lock: a dead writer's lock is waited for up to ``lock_timeout_s`` (the server frees it once its
lock timeout passes without a heartbeat); longer, and it is reported ``locked`` with when to run again.
A **staged** swap (``stage_partitions``, a refused audit: waiting for its publish
or discard) is not a crashed one: recover never touches it; a staged swap whose publish died before any of
its flip landed is made staged again (outcome ``restaged``), one whose publish landed in part is finished.
Committed swaps whose temporary table was left behind are cleaned up.
A member of a swap group reports no lineage run of its own: once recover has committed every member, the
group's one run (begun when the group was staged) completes with every member table as an output, as the
group's own commit would have (``settle_groups``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any, Sequence

from tableswap import errors, storage
from tableswap.core import lineage
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.ops import notify
from tableswap.ops.commit import commit
from tableswap.ops.operation import Operation
from tableswap.core.group import FAILED as GROUP_FAILED, OPEN as GROUP_OPEN, PENDING as GROUP_PENDING, GroupRecord
from tableswap.journal.groups import GroupLog
from tableswap.journal.store import ABORTED, COMMITTED, PENDING, STAGED, STAGING, Journal, SwapRecord
from tableswap.lineage.events import GroupTable
from tableswap.logs import get_logger
from tableswap.core.catalog_port import Catalog
from tableswap.core.catalog import LockHolder, TableInfo
from tableswap.core.durations import parse_duration
from tableswap.core.names import parse_table_name
from tableswap.core.plan import ADD, DROP, REPLACE, PlannedChange, SwapPlan, TableChange
from tableswap.core.records import Action, PartitionChange, SwapKind
from tableswap.runtime import Runtime, use

log = get_logger("tableswap.recover")

LANDED, NOT_LANDED, OTHER = "landed", "not landed", "other"

# Outcomes
COMMITTED_OUT, COMPLETED, ABORTED_OUT, MANUAL, LOCKED, SKIPPED, CLEANED = (
    "committed", "completed", "aborted", "manual", "locked", "skipped", "cleaned")
RESTAGED = "restaged"  # a staged swap whose publish died before its flip: staged again


@dataclass(frozen=True)
class ItemCheck(PartitionChange):
    """A journal item of an unfinished swap, checked against the metastore."""

    found_location: str | None  # what the metastore (or the next swap's journal entry) shows
    verdict: str  # landed | not landed | other


@dataclass(frozen=True)
class Resolution:
    swap_id: str
    table: str
    kind: str
    state_before: str
    outcome: str  # committed | completed | aborted | manual | locked | skipped | cleaned
    state_after: str
    detail: str
    items: tuple[ItemCheck, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RecoverReport:
    """What ``recover`` did, or with ``dry_run`` what it would do: one :class:`Resolution` per unfinished
    swap (the same decision either way; a dry run's ``detail`` starts with ``dry run: would``)."""

    resolutions: tuple[Resolution, ...]
    dry_run: bool = False

    @property
    def needs_attention(self) -> tuple[Resolution, ...]:
        return tuple(r for r in self.resolutions if r.outcome in (MANUAL, LOCKED))

    def to_dict(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "resolutions": [r.to_dict() for r in self.resolutions],
                "needs_attention": [r.swap_id for r in self.needs_attention]}


# ---------------------------------------------------------------------- pure decisions
def classify(item: PartitionChange, swap_id: str, found: tuple[str | None, str | None] | None,
             later_old: tuple[bool, str | None] | None, names: loc.HdfsNames | None = None) -> ItemCheck:
    """Did ``item`` of swap ``swap_id`` land? (Locations compared with the HDFS spellings ``names`` makes one:
    a partition repointed at its old directory through a NameNode's address is at its old location.)

    ``found``: ``(location, stamped swap id)`` of the partition/table now, or ``None`` if absent.
    ``later_old``: when a later committed swap changed this partition, ``(True, its old location)``;
    that location is what the partition looked like right after the crashed swap.
    """
    if later_old is not None:
        after = later_old[1]
        at_new = after is not None and loc.same(after, item.new_location, names)
        present, location, stamp = after is not None, after, None
    else:
        present = found is not None
        location, stamp = (found if found is not None else (None, None))
        at_new = present and stamp == swap_id and loc.same(location, item.new_location, names)
    if item.action == DROP:
        verdict = (LANDED if not present else NOT_LANDED if loc.same(location, item.old_location, names) else OTHER)
    elif item.action == ADD:
        verdict = LANDED if at_new else NOT_LANDED if not present else OTHER
    else:
        verdict = LANDED if at_new else NOT_LANDED if loc.same(location, item.old_location, names) else OTHER
    return ItemCheck(item.partition, item.action, item.old_location, item.new_location, location, verdict)


def decide(checks: Sequence[ItemCheck], moved_on: bool) -> str:
    """``committed`` (all landed), ``aborted`` (none), ``completed`` (finish the rest), ``manual``."""
    verdicts = {c.verdict for c in checks}
    if OTHER in verdicts:
        return MANUAL
    if verdicts <= {LANDED}:
        return COMMITTED_OUT
    if verdicts == {NOT_LANDED}:
        return ABORTED_OUT
    return MANUAL if moved_on else COMPLETED


# ---------------------------------------------------------------------- I/O
def recover(table: str | None = None, *, stale_after_s: float = 3600.0, dry_run: bool = False,
            metastore_uri: str | None = None, journal_url: str | None = None, runtime: Runtime | None = None,
            **options: Any) -> RecoverReport:
    """Resolve every unfinished swap (of ``table`` if given). Safe to run at any time.

    ``stale_after_s``: a swap still ``staging`` is aborted once its process's heartbeat is older than this (a
    dead or frozen writer; keep it well above the writers' ``heartbeat_s``; 0: every ``staging`` swap, for
    writers known to be gone), never while its heartbeat is younger, however long its batch write takes.

    ``dry_run``: decide each as a real run would, from the journal and an unlocked read of the catalog, and
    change nothing (no lock taken, nothing written): the report says what a run would do now."""
    db = name = None
    if table is not None:
        db, name = parse_table_name(table)
    out: list[Resolution] = []
    with use(runtime, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt, \
            rt.session() as (catalog, journal):
        candidates = journal.list_swaps(db, name, states=[PENDING, STAGING])
        for record in sorted(candidates, key=lineage.flip_order):
            if record.state == STAGING and not _stale(record, stale_after_s):
                continue
            try:
                out.append(_preview(rt, catalog, record, stale_after_s) if dry_run
                           else _resolve(rt, catalog, record, stale_after_s))
            except errors.LockTimeoutError as exc:
                out.append(Resolution(record.swap_id, record.table, record.kind, record.state, LOCKED,
                                      record.state, f"not resolved, retry later: {exc}. {_when_free(catalog, record)}"))
            except errors.CatalogUnavailableError as exc:
                out.append(Resolution(record.swap_id, record.table, record.kind, record.state, LOCKED,
                                      record.state, f"not resolved, retry later: {exc}"))
            except errors.TableNotFoundError as exc:
                out.append(Resolution(record.swap_id, record.table, record.kind, record.state, MANUAL,
                                      record.state, f"{exc}; nothing was changed"))
        for swap_id, swap_db, swap_table, temp in journal.unfinished_cleanups():
            if (db, name) in ((None, None), (swap_db, swap_table)):
                if dry_run:
                    if catalog.table_exists(swap_db, temp):
                        out.append(Resolution(swap_id, f"{swap_db}.{swap_table}", "", COMMITTED, CLEANED, COMMITTED,
                                              f"dry run: would drop its leftover temporary table {swap_db}.{temp}"))
                    continue
                resolution = _clean_committed(catalog, journal, swap_id, swap_db, swap_table, temp)
                if resolution:
                    out.append(resolution)
        if not dry_run:
            settle_groups(rt, catalog, out)
    for r in out:
        log.info("recover.resolved", swap_id=r.swap_id, table=r.table, outcome=r.outcome, detail=r.detail,
                 dry_run=dry_run)
    return RecoverReport(tuple(out), dry_run=dry_run)


def settle_groups(rt: Runtime, catalog: Catalog, resolutions: Sequence[Resolution]) -> None:
    """The swap groups of the swaps just resolved: a group past its intent whose members are all committed now
    is committed, and its one lineage run (started when it was staged) completes with every member table as an
    output; an open group (its writer died before the group intent) whose member was put back to staged or
    aborted is failed (nothing of it was flipped), and its run fails."""
    groups = GroupLog(rt.journal)
    for r in resolutions:
        group = groups.group_of(r.swap_id)
        if group is None:
            continue
        if group.state == GROUP_PENDING and groups.settle(group.group_id):
            log.info("recover.group_committed", group_id=group.group_id)
            notify.group_ended(rt, group.group_id, group.kind, group.name,
                               partial(_group_tables, rt, catalog, group, finished=True),
                               rollback_of=group.rollback_of)
        elif group.state == GROUP_OPEN and r.outcome in (RESTAGED, ABORTED_OUT):
            why = "its writer stopped before the group intent: nothing of it was flipped; `tableswap recover` put " \
                  "its members back"
            groups.finish(group.group_id, GROUP_FAILED, why)
            notify.group_ended(rt, group.group_id, group.kind, group.name,
                               partial(_group_tables, rt, catalog, group, finished=False),
                               failed=errors.TableSwapError(why), rollback_of=group.rollback_of)


def _group_tables(rt: Runtime, catalog: Catalog, group: GroupRecord, *, finished: bool) -> list[GroupTable]:
    """The group's tables for its lineage run, each as it is now and, once the group ``finished``, with what the
    group changed on it: its member's whole journaled flip (what its first process and ``recover`` did)."""
    out = []
    for m in group.members:
        record = rt.journal.get_swap(m.swap_id)
        db, _, name = m.table.partition(".")
        try:
            table = catalog.get_table(db, name)
        except errors.TableNotFoundError:  # dropped since: named by the table alone
            out.append(GroupTable(db, name, m.swap_id, None))
            continue
        plan = None
        if finished and record is not None:
            plan = _plan_of(record, table, [i for i in record.items if i.action in (ADD, REPLACE, DROP)])
        out.append(GroupTable(db, name, m.swap_id, table.location, table.catalog_arn, plan))
    return out


def _silence_s(record: SwapRecord) -> float:
    """Seconds since the last sign of life of ``record``'s process: its heartbeat, or for a record from before
    journal version 10 its start (an unreadable time: infinitely long ago)."""
    try:
        last = dt.datetime.fromisoformat(record.heartbeat_at or record.started_at)
    except ValueError:
        return float("inf")
    if last.tzinfo is None:
        last = last.replace(tzinfo=dt.timezone.utc)
    return (dt.datetime.now(dt.timezone.utc) - last).total_seconds()


def _stale(record: SwapRecord, stale_after_s: float) -> bool:
    return _silence_s(record) >= stale_after_s


def _silent_reason(record: SwapRecord, stale_after_s: float) -> str:
    return (f"its process went silent while staging: last heartbeat {record.heartbeat_at}, "
            f"{_silence_s(record):.0f}s ago (--stale-after {stale_after_s:g}s); it never reached its flip")


def _resolve(rt: Runtime, catalog: Catalog, record: SwapRecord, stale_after_s: float) -> Resolution:
    journal = rt.journal
    if record.state == STAGING and record.heartbeat_at is not None:
        return _abort_silent(catalog, journal, record, stale_after_s)
    table = catalog.get_table(record.db_name, record.table_name)
    if record.state == STAGING:  # a record from before journal version 10: no heartbeat
        alive = [h for h in catalog.lock_holders(table.db, table.name)
                 if f"swap={record.swap_id} " in f"{h.agent_info or ''} "]
        if alive:
            return Resolution(record.swap_id, record.table, record.kind, record.state, SKIPPED, record.state,
                              f"still running: {alive[0].describe()}")
    with rt.table_lock(catalog, table.db, table.name, f"recover-{record.swap_id}") as lock:
        fresh = journal.get_swap(record.swap_id)
        if fresh is None or fresh.state not in (PENDING, STAGING):
            return Resolution(record.swap_id, record.table, record.kind, record.state, SKIPPED,
                              fresh.state if fresh else "?", "finished by its own process meanwhile")
        if fresh.state == STAGING:
            if not _stale(fresh, stale_after_s):
                return Resolution(record.swap_id, record.table, record.kind, record.state, SKIPPED, STAGING,
                                  "no longer stale")
            queued = _abort(catalog, journal, fresh, "aborted by `tableswap recover`: it never reached its flip "
                                           f"(staging for over {stale_after_s:.0f}s)")
            return Resolution(record.swap_id, record.table, record.kind, STAGING, ABORTED_OUT, ABORTED,
                              _abort_detail(fresh, queued))
        return _resolve_pending(rt, catalog, fresh, lock)


def _abort_silent(catalog: Catalog, journal: Journal, record: SwapRecord, stale_after_s: float) -> Resolution:
    """Abort the ``staging`` swap of a process whose heartbeat is older than ``stale_after_s``, without its
    table lock (see the module's docstring): the journal's compare-and-set first, so that a heartbeat that
    moves on meanwhile (a frozen writer waking up) keeps it, then its temporary table is dropped."""
    reason = _silent_reason(record, stale_after_s)
    staged = _staged_data(record)
    if not journal.abort_silent(record.swap_id, record.heartbeat_at, f"aborted by `tableswap recover`: {reason}",
                                staged):
        fresh = journal.get_swap(record.swap_id)
        return Resolution(record.swap_id, record.table, record.kind, record.state, SKIPPED,
                          fresh.state if fresh else "?", "alive after all: its heartbeat moved on, or it left "
                                                         "staging meanwhile")
    detail = f"{reason}; {_abort_detail(record, staged)}"
    if SwapKind(record.kind).restores:
        journal.unmark_restored(record.swap_id)
    try:
        _drop_temp(catalog, record)
    except errors.TableSwapError as exc:  # aborted already: what is left is the janitor's (its sweep)
        detail += f"; its temporary table is left for the janitor ({exc})"
    return Resolution(record.swap_id, record.table, record.kind, STAGING, ABORTED_OUT, ABORTED,
                      detail + _lock_note(catalog, record))


def _own_locks(catalog: Catalog, record: SwapRecord) -> list[LockHolder]:
    """The table locks the process of ``record`` holds (its agent info names the swap)."""
    return [h for h in catalog.lock_holders(record.db_name, record.table_name)
            if f"swap={record.swap_id} " in f"{h.agent_info or ''} "]


def _lock_note(catalog: Catalog, record: SwapRecord) -> str:
    """For a dead writer that still holds its table lock: what that means for the next swap of the table."""
    try:
        held = _own_locks(catalog, record)
    except errors.TableSwapError:
        return ""
    if not held:
        return ""
    return (f"; its {held[0].describe()} stays until the metastore expires it; "
            f"{_when_free(catalog, record)} The next swap of {record.table} waits for it (up to lock_timeout_s)")


def _when_free(catalog: Catalog, record: SwapRecord) -> str:
    """When the table lock a dead writer of ``record`` holds is freed by the metastore (its lock timeout after
    the lock's last heartbeat), as exactly as the server tells: the text to report."""
    try:
        held = _own_locks(catalog, record)
        timeout = next((t for t in map(_server_seconds, map(catalog.config_value, LOCK_TIMEOUT_KEYS))
                        if t is not None), None)
    except errors.TableSwapError:
        return "Run recover again once the metastore's lock timeout has passed."
    if not held:
        return "Run recover again once the swap holding the lock has finished."
    beat_ms = held[0].last_heartbeat_ms or held[0].acquired_at_ms
    if beat_ms is None:
        return "Run recover again once the metastore's lock timeout (hive.txn.timeout) has passed."
    last = dt.datetime.fromtimestamp(beat_ms / 1000, dt.timezone.utc)
    if not catalog.capabilities.server_lock:  # a lease of tableswap's own (Glue): it lapses by itself
        return (f"Its lease was last renewed at {last.isoformat(timespec='seconds')} and lapses three heartbeats "
                "after that: run recover again then.")
    if timeout is None:
        return (f"The lock's last heartbeat was at {last.isoformat(timespec='seconds')}: run recover again once the "
                "metastore's lock timeout (hive.txn.timeout, metastore.txn.timeout on Hive 3+) has passed since then.")
    free = last + dt.timedelta(seconds=timeout)
    return (f"The metastore frees it by {free.isoformat(timespec='seconds')} (its last heartbeat "
            f"{last.isoformat(timespec='seconds')} + the lock timeout {timeout:g}s, plus the server's reaper "
            "interval): run recover again after that.")


#: The metastore settings that hold its lock timeout (Hive 3+, then Hive 2.3).
LOCK_TIMEOUT_KEYS = ("metastore.txn.timeout", "hive.txn.timeout")


def _server_seconds(value: str | None) -> float | None:
    """A Hive time setting (``300``, ``300s``, ``5m``) in seconds; None when absent or unreadable."""
    if not value:
        return None
    text = value.strip().lower().removesuffix("ec").removesuffix("onds")
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return parse_duration(text).total_seconds() or None
    except errors.TableSwapError:
        return None


def _preview(rt: Runtime, catalog: Catalog, record: SwapRecord, stale_after_s: float) -> Resolution:
    """A dry run's resolution of ``record``: the decision a run would make now, nothing changed."""
    base: dict[str, Any] = dict(swap_id=record.swap_id, table=record.table, kind=record.kind, state_before=record.state)
    if record.state == STAGING and record.heartbeat_at is not None:
        return Resolution(**base, outcome=ABORTED_OUT, state_after=ABORTED,
                          detail=f"dry run: would abort it: {_silent_reason(record, stale_after_s)}")
    table = catalog.get_table(record.db_name, record.table_name)
    if record.state == STAGING:
        alive = [h for h in catalog.lock_holders(table.db, table.name)
                 if f"swap={record.swap_id} " in f"{h.agent_info or ''} "]
        if alive:
            return Resolution(**base, outcome=SKIPPED, state_after=STAGING,
                              detail=f"still running: {alive[0].describe()}")
        return Resolution(**base, outcome=ABORTED_OUT, state_after=ABORTED,
                          detail="dry run: would abort it: it never reached its flip")
    _, items, checks, outcome = _judge(rt.journal, catalog, record)
    if outcome == ABORTED_OUT and GroupLog(rt.journal).pending_with(record.swap_id):
        outcome = COMPLETED  # a member of a group past its intent (docs/groups.md)
    if outcome == ABORTED_OUT and record.staged_at:
        return Resolution(**base, outcome=RESTAGED, state_after=STAGED, items=tuple(checks),
                          detail="dry run: would make it staged again: its publish never reached its flip")
    after = {MANUAL: PENDING, ABORTED_OUT: ABORTED}.get(outcome, COMMITTED)
    would = {MANUAL: "leave it for a person: " + _manual_detail(checks),
             ABORTED_OUT: "abort it: nothing of it had landed",
             COMMITTED_OUT: "commit it: every change had landed",
             COMPLETED: f"complete the interrupted flip of {sum(c.verdict == NOT_LANDED for c in checks)} "
                        "item(s), then commit it"}[outcome]
    return Resolution(**base, outcome=outcome, state_after=after, detail=f"dry run: would {would}",
                      items=tuple(checks))


def _judge(journal: Journal, catalog: Catalog, record: SwapRecord) -> tuple[TableInfo, list[PartitionChange],
                                                                          list[ItemCheck], str]:
    """Read where each item of the pending ``record`` stands now and decide (:func:`classify`, :func:`decide`)."""
    table = catalog.get_table(record.db_name, record.table_name)
    items = [i for i in record.items if i.action in (ADD, REPLACE, DROP)]
    later = _later_old_locations(journal, record)
    if table.is_partitioned:
        keys = table.partition_key_names
        values = {i.partition_name: pn.values_for(keys, pn.parse_name(i.partition_name)) for i in items}
        now = catalog.get_partitions(table, list(values.values()))
        found = {name: ((now[v].location, now[v].swap_id) if v in now else None) for name, v in values.items()}
    else:
        found = {lineage.TABLE: (table.location, table.swap_id)}
    names = storage.hdfs_names()
    checks = [classify(i, record.swap_id, found.get(i.partition_name), later.get(i.partition_name), names)
              for i in items]
    moved_on = any(i.partition_name in later for i in items)
    return table, items, checks, decide(checks, moved_on)


def _manual_detail(checks: Sequence[ItemCheck]) -> str:
    odd = [c for c in checks if c.verdict == OTHER] or [c for c in checks if c.verdict == NOT_LANDED]
    return ("cannot tell safely how to finish it; nothing was changed. "
            + "; ".join(f"{c.partition or 'table'}: expected {c.new_location} (after) or "
                        f"{c.old_location or 'absent'} (before), found {c.found_location or 'absent'}"
                        for c in odd[:5])
            + ". Inspect with `tableswap show`, fix the table by hand or with a new swap, then mark the "
              "entry resolved by running recover again")


def _resolve_pending(rt: Runtime, catalog: Catalog, record: SwapRecord, lock: Any) -> Resolution:
    journal = rt.journal
    table, items, checks, outcome = _judge(journal, catalog, record)
    base: dict[str, Any] = dict(swap_id=record.swap_id, table=record.table, kind=record.kind, state_before=PENDING,
                items=tuple(checks))
    if outcome == MANUAL:
        return Resolution(**base, outcome=MANUAL, state_after=PENDING, detail=_manual_detail(checks))
    if outcome == ABORTED_OUT and GroupLog(journal).pending_with(record.swap_id):
        outcome = COMPLETED  # a member of a group past its intent: finished forward with the others (docs/groups.md)
    if outcome == ABORTED_OUT and record.staged_at:
        # The publish of a staged swap died before any of its flip landed: it is staged again, to be
        # published or discarded (its temporary table and data are still its own).
        if journal.restage(record.swap_id, "its publish was interrupted before its flip; staged again by "
                                           "`tableswap recover`"):
            return Resolution(**base, outcome=RESTAGED, state_after=STAGED,
                              detail="its publish never reached its flip: staged again (publish or discard it)")
    if outcome == ABORTED_OUT:
        queued = _abort(catalog, journal, record, "aborted by `tableswap recover`: the flip never happened")
        return Resolution(**base, outcome=ABORTED_OUT, state_after=ABORTED, detail=_abort_detail(record, queued))
    # Committed as it is (every change landed), or after the rest of the flip, checked and applied
    # under the lock held since the journal was re-read.
    remaining = [i for i, c in zip(items, checks) if c.verdict == NOT_LANDED] if outcome == COMPLETED else []
    displaced = _displaced(items)
    op = Operation.resumed(record, _plan_of(record, table, remaining), displaced)
    group = GroupLog(journal).group_of(record.swap_id)
    if group is not None:  # a group's member: its lineage is the group's one run (settle_groups ends it)
        op = dataclasses.replace(op, group_id=group.group_id)
    commit(rt, table, op, catalog=catalog, lock=lock)
    _drop_temp(catalog, record)
    journal.finish(record.swap_id, error=f"committed by `tableswap recover` ({outcome})")
    detail = ("every change had landed; journal entry committed" if outcome == COMMITTED_OUT
              else f"completed the interrupted flip of {len(remaining)} item(s), then committed")
    return Resolution(**base, outcome=outcome, state_after=COMMITTED,
                      detail=f"{detail}; {len(displaced)} displaced location(s) queued for the janitor")


def _later_old_locations(journal: Journal, record: SwapRecord) -> dict[str, tuple[bool, str | None]]:
    """Per partition, the old location journaled by the first committed swap after ``record``."""
    mine = lineage.flip_order(record)
    out: dict[str, tuple[bool, str | None]] = {}
    for other in lineage.committed(journal.list_swaps(record.db_name, record.table_name)):
        if lineage.flip_order(other) <= mine:
            continue
        for change in lineage.changes(other):
            out.setdefault(change.partition, (True, change.old_location))
    return out


def _plan_of(record: SwapRecord, table: TableInfo, remaining: Sequence[PartitionChange]) -> SwapPlan:
    """The plan of ``record``'s items ``remaining`` on ``table`` (the rest of its flip, or all of it)."""
    if not remaining:
        return SwapPlan(record.swap_id, table.db, table.name, table.partition_key_names)
    if not table.is_partitioned:
        item = remaining[0]
        return SwapPlan(record.swap_id, table.db, table.name, (), (),
                        TableChange(item.old_location, item.new_location or ""))
    keys = table.partition_key_names
    actions = tuple(
        PlannedChange(Action(i.action), pn.values_for(keys, pn.parse_name(i.partition_name)), i.partition_name,
                        i.old_location, i.new_location)
        for i in remaining
    )
    return SwapPlan(record.swap_id, table.db, table.name, keys, actions)


def _displaced(items: Sequence[PartitionChange]) -> list[tuple[str, str]]:
    return [(i.partition_name, i.old_location) for i in items if i.action in (REPLACE, DROP) and i.old_location]


def _abort(catalog: Catalog, journal: Journal, record: SwapRecord, reason: str) -> list[tuple[str, str]]:
    """Nothing of the swap is live: drop its temporary table, queue its staged data, mark it aborted. Returns
    what it queued."""
    _drop_temp(catalog, record)
    staged = _staged_data(record)
    journal.queue_orphans(record.swap_id, staged)
    if SwapKind(record.kind).restores:
        journal.unmark_restored(record.swap_id)
    journal.finish(record.swap_id, state=ABORTED, error=reason)
    return staged


def _staged_data(record: SwapRecord) -> list[tuple[str, str]]:
    """What of ``record``'s staged data to queue for the janitor: its staging directory when it lies in the
    table root's staging area and still exists (a failed writer may have deleted it already: queueing a
    directory that is gone would leave a row no deletion can explain). Storage unreachable: queued."""
    staged = record.staging_location
    if not (staged and record.table_root and loc.is_within(staged, loc.join(record.table_root, loc.STAGING_DIR))):
        return []
    try:
        present = storage.exists(staged)
    except Exception as exc:  # noqa: BLE001 - any storage failure: the janitor checks again before deleting
        log.warning("recover.staging_unreadable", swap_id=record.swap_id, location=staged, error=str(exc))
        present = True
    return [("", staged)] if present else []


def _abort_detail(record: SwapRecord, queued: Sequence[tuple[str, str]]) -> str:
    what = [] if not record.temp_table else [f"dropped temporary table {record.temp_table}"]
    if queued:
        what.append(f"queued {record.staging_location} for the janitor")
    elif record.staging_location:
        what.append(f"its staging directory {record.staging_location} is already gone")
    if SwapKind(record.kind).restores:
        what.append("the locations it meant to restore are pending deletion again")
    return "nothing of it had landed; aborted" + (": " + ", ".join(what) if what else "")


def _drop_temp(catalog: Catalog, record: SwapRecord) -> None:
    if record.temp_table:
        catalog.drop_table_keep_data(record.db_name, record.temp_table)


def _clean_committed(catalog: Catalog, journal: Journal, swap_id: str, db: str, table: str,
                     temp: str) -> Resolution | None:
    """A committed swap whose process died before dropping its temporary table."""
    try:
        present = catalog.table_exists(db, temp)
        if present:
            catalog.drop_table_keep_data(db, temp)
    except errors.TableSwapError as exc:
        return Resolution(swap_id, f"{db}.{table}", "", COMMITTED, MANUAL, COMMITTED,
                          f"could not drop its leftover temporary table {db}.{temp}: {exc}")
    journal.finish(swap_id)
    if not present:
        return None
    return Resolution(swap_id, f"{db}.{table}", "", COMMITTED, CLEANED, COMMITTED,
                      f"dropped its leftover temporary table {db}.{temp}")
