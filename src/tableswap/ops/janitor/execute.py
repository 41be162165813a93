"""The janitor's execution: carries out a :class:`~tableswap.core.janitor_plan.JanitorPlan` batch by
batch (claim, lock, re-read, re-check, delete, record) and reports an :class:`Outcome` per location.
Used by :func:`tableswap.ops.janitor.run.run_janitor`."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from tableswap import errors, storage
from tableswap.core import locations as loc
from tableswap.faults import crash_point
from tableswap.core.janitor_plan import (
    DELETE,
    DROP_TEMP,
    KEEP,
    LEFTOVER,
    REFUSE,
    JanitorAction,
    JanitorPlan,
    LiveView,
    check_location,
    expand,
)
from tableswap.core.records import STAGED, STAGING, DeletionState
from tableswap.journal.groups import GroupLog
from tableswap.journal.queue import DELETED, JanitorQueue, this_holder
from tableswap.journal.store import SwapRecord
from tableswap.logs import get_logger
from tableswap.core.catalog_port import Catalog
from tableswap.core.catalog_port import CatalogLock
from tableswap.runtime import Runtime
from tableswap.core.catalog import SWAP_ID_PARAM, TEMP_FOR_PARAM

from tableswap.ops import notify
from tableswap.ops.janitor.refs import ReferenceScan
from tableswap.ops.janitor.scan import partition_refs

log = get_logger("tableswap.janitor")

# Outcomes reported per location or temporary table.
O_DELETED, O_GONE, O_WOULD_DELETE = "deleted", "already_gone", "would_delete"
O_DROPPED, O_WOULD_DROP = "dropped_temp_table", "would_drop_temp_table"
O_REFUSED, O_KEPT, O_SKIPPED, O_ERROR = "refused", "kept", "skipped", "error"


@dataclass(frozen=True)
class Outcome:
    outcome: str
    kind: str
    table: str
    location: str
    reason: str = ""
    partition: str = ""
    swap_ids: tuple[str, ...] = ()
    bytes: int = 0
    paths: tuple[str, ...] = ()  # what was (or would be) deleted for it
    trash: tuple[str, ...] = ()  # where in HDFS's trash its paths were moved instead (storage.move_to_trash)



# --------------------------------------------------------------------------- execution


class Executor:
    """Carries out a :class:`JanitorPlan`: temp-table drops first, then deletes in batches."""

    def __init__(self, catalog: Catalog, rt: Runtime, *, run_id: str,
                 batch_size: int = 100, lease_s: float = 3600.0, lock: bool = True,
                 progress: Callable[[int], None] | None = None,
                 views: dict[tuple[str, str], LiveView] | None = None,
                 references: ReferenceScan | None = None, trash: str = "auto") -> None:
        self.catalog = catalog
        self.trash = trash  # [janitor] trash: HDFS's trash, storage.TRASH_MODES
        self.in_trash: dict[str, tuple[str, ...]] = {}  # where a deleted location's paths went in the trash
        # The live view of each table, read in full once per run (``views``: the discovery's) and, under
        # the lock for each batch, brought up to date (see _batch_view).
        self.views: dict[tuple[str, str], LiveView] = dict(views or {})
        # Every table and partition in the reference scope that matters (``references``: the discovery's;
        # without one, the first batch reads the whole scope).
        self.references = references or ReferenceScan(catalog, rt.settings.janitor.reference_scope)
        self.pruned: dict[tuple[str, str], set[str]] = {}  # deleted locations whose parents may now be empty
        self.rt = rt
        self.journal = rt.journal
        self.queue = JanitorQueue(self.journal)
        self.run_id = run_id
        self.token = f"{run_id}:{secrets.token_hex(4)}"
        self.batch_size = max(1, batch_size)
        self.lease_s = lease_s
        self.lock = lock
        self.progress = progress or (lambda n: None)
        self.outcomes: list[Outcome] = []
        self.blocked_swaps: set[str] = set()  # swaps that moved on meanwhile: leave their leftovers alone
        self.discarded_groups: set[str] = set()  # staged groups this run discarded past their staged_ttl
        self.batches_done = 0

    def _add(self, action: JanitorAction, outcome: str, reason: str = "", *, bytes_: int = 0,
             paths: Iterable[str] = (), trash: Iterable[str] = ()) -> None:
        self.outcomes.append(Outcome(outcome, action.kind, action.qualified, action.location,
                                     reason or action.reason, action.partition, action.swap_ids, bytes_,
                                     tuple(paths), tuple(trash)))

    def execute(self, plan: JanitorPlan) -> list[Outcome]:
        """Carry out ``plan``; returns the outcomes of this plan (also kept in ``self.outcomes``)."""
        start = len(self.outcomes)
        for action in plan.refusals:
            self._add(action, O_REFUSED)
            self.progress(1)
        refused_queued = [(k[0], k[1], DeletionState.REFUSED, a.reason)
                          for a in plan.refusals if a.queued for k in a.keys]
        if refused_queued:
            self.queue.record(refused_queued, token=None)
        for action in plan.kept:
            self._add(action, O_KEPT)
            self.progress(1)
        for action in plan.temp_drops:
            self._drop_temp(action)
            self.progress(1)
        by_table: dict[tuple[str, str], list[JanitorAction]] = {}
        for action in plan.deletes:
            by_table.setdefault((action.db, action.table), []).append(action)
        for (db, table), actions in by_table.items():
            for first in range(0, len(actions), self.batch_size):
                self._delete_batch(db, table, actions[first:first + self.batch_size])
            self._prune_table(db, table)
        return self.outcomes[start:]

    def _abandon(self, action: JanitorAction, swap_id: str) -> bool:
        """:func:`_abandon`, and for a staged swap discarded past its TTL the ABORT of its lineage run; a staged
        group's member: the whole group (:meth:`_discard_group`)."""
        if action.discards_staged and action.group_id is not None:
            return self._discard_group(action.group_id)
        done = _abandon(self.queue, action, swap_id)
        if done and action.discards_staged:
            notify.run_aborted(self.rt, self.catalog, swap_id, action.db, action.table, root=action.table_root,
                               staging_location=None)
        return done

    def _discard_group(self, group_id: str) -> bool:
        """A staged group past its staged_ttl, discarded as one unit: every member ``aborted`` (its staged data
        queued) and the group ``discarded`` in one journal transaction, or nothing (a member published or
        discarded meanwhile: False, left alone); then every member's temporary table dropped (its data kept for
        the janitor's re-checked deletes), whichever table this run cleans, and the group's lineage run ABORT.
        True for each member's action once this run discarded the group."""
        if group_id in self.discarded_groups:
            return True
        groups = GroupLog(self.journal)
        group = groups.find(group_id)
        if group is None or not group.waiting:
            return False
        records = [r for m in group.members if (r := self.journal.get_swap(m.swap_id)) is not None]
        try:
            groups.discard(group_id, "staged and neither published nor discarded within [janitor] staged_ttl: "
                                     "discarded by the janitor with every member", {r.swap_id: _own_staging(r)
                                                                                   for r in records})
        except errors.NotStagedError:
            return False
        self.discarded_groups.add(group_id)
        log.warning("janitor.staged_group_discarded", group_id=group_id, tables=list(group.tables))
        for r in records:
            if not r.temp_table:
                continue
            try:
                self.catalog.drop_table_keep_data(r.db_name, r.temp_table)
                self.references.forget(r.db_name, r.temp_table)  # what it referenced is no longer live
                self.views.pop((r.db_name, r.table_name), None)
            except errors.TableSwapError as exc:  # aborted already: a later run drops it (state aborted)
                log.warning("janitor.temp_drop_failed", swap_id=r.swap_id, error=str(exc))
        notify.group_ended(self.rt, group_id, group.kind, group.name,
                           notify.group_tables_now(self.rt, {m.table: m.swap_id for m in group.members}), aborted=True)
        return True

    # ------------------------------------------------------------------ temp tables
    def _drop_temp(self, action: JanitorAction) -> None:
        swap_id = action.swap_ids[0]
        if action.abandon and not self._abandon(action, swap_id):
            self.blocked_swaps.add(swap_id)
            self._add(action, O_SKIPPED, f"swap {swap_id} left state {_from_state(action)} meanwhile; leaving it alone")
            return
        try:
            info = self.catalog.get_table(action.db, action.location)
        except errors.TableNotFoundError:
            self._add(action, O_DROPPED, "already dropped")
            return
        except errors.TableSwapError as exc:
            self.blocked_swaps.add(swap_id)
            self._add(action, O_ERROR, f"cannot read {action.db}.{action.location}: {exc}")
            return
        if info.parameters.get(SWAP_ID_PARAM) != swap_id or not info.parameters.get(TEMP_FOR_PARAM):
            self.blocked_swaps.add(swap_id)
            self._add(action, O_REFUSED, f"{info.qualified_name} is not the temporary table of swap {swap_id}")
            return
        try:
            self.catalog.drop_table_keep_data(action.db, action.location)
            self.references.forget(action.db, action.location)  # what it referenced is no longer live
            self.views.pop((action.db, action.table), None)
            self._add(action, O_DROPPED)
            log.info("janitor.temp_table_dropped", table=f"{action.db}.{action.location}", swap_id=swap_id)
        except errors.TableSwapError as exc:
            self.blocked_swaps.add(swap_id)
            self._add(action, O_ERROR, f"could not drop {action.db}.{action.location}: {exc}")

    # ------------------------------------------------------------------ deletes
    def _claim(self, actions: Sequence[JanitorAction]) -> list[JanitorAction]:
        claimed = []
        for action in actions:
            if set(action.swap_ids) & self.blocked_swaps:
                self._add(action, O_SKIPPED, "its swap's temporary table could not be dropped or the swap moved on")
                continue
            queued = action.queued
            keys = action.keys
            if action.enqueue:
                self.journal.queue_orphans(action.swap_ids[0], [("", action.location)])
                if self.queue.requeue_reappeared(action.swap_ids[0], action.location):
                    log.warning("janitor.orphan_reappeared", location=action.location, swap_id=action.swap_ids[0])
                queued = True
            if action.abandon and not self._abandon(action, action.swap_ids[0]):
                self._add(action, O_SKIPPED, f"swap {action.swap_ids[0]} left state {_from_state(action)} meanwhile")
                continue
            got = []
            for swap_id, location in keys:
                if self.queue.claim(swap_id, location, token=self.token, lease_s=self.lease_s, queued=queued,
                                    holder=this_holder()):
                    got.append((swap_id, location))
            if len(got) != len(keys):
                self.queue.release(got, self.token)
                blocked = next(k for k in keys if k not in got)
                self._add(action, O_SKIPPED, self.queue.claim_blocker(*blocked))
                continue
            claimed.append(action if queued == action.queued else _as_queued(action))
        return claimed

    def _delete_batch(self, db: str, table: str, actions: Sequence[JanitorAction]) -> None:
        claimed = self._claim(actions)
        if not claimed:
            self.progress(len(actions))
            return
        results: list[tuple[JanitorAction, str, str, int, tuple[str, ...]]] = []
        try:
            lock = self._lock(db, table)
        except errors.TableSwapError as exc:
            self._finish(claimed, [(a, O_ERROR, f"could not lock {db}.{table}: {exc}", 0, ()) for a in claimed])
            self.progress(len(actions))
            return
        try:
            results = self._recheck_and_delete(db, table, claimed, lock)
        except errors.TableSwapError as exc:
            results = [(a, O_ERROR, str(exc), 0, ()) for a in claimed]
        finally:
            if lock is not None:
                lock.release()
        if self.batches_done > 0:
            crash_point("janitor_mid_batch")  # deleted, lock released, not yet recorded
        self.batches_done += 1
        self._finish(claimed, results)
        self.progress(len(actions))

    def _lock(self, db: str, table: str) -> CatalogLock | None:
        if not self.lock or not self.catalog.table_exists(db, table):
            return None
        return self.rt.table_lock(self.catalog, db, table, f"janitor-{self.run_id}").acquire()

    def _recheck_and_delete(self, db: str, table: str, actions: Sequence[JanitorAction],
                            lock: CatalogLock | None) -> list[tuple[JanitorAction, str, str, int, tuple[str, ...]]]:
        view = self._batch_view(db, table, actions)  # fresh where it matters, under the lock
        unfinished = self.queue.unfinished_locations(db, table)
        pending = [loc.normalize(d.location) for d in self.journal.deletions(db=db, table=table)] \
            if any(a.kind == LEFTOVER for a in actions) else []
        results: list[tuple[JanitorAction, str, str, int, tuple[str, ...]]] = []
        todo: list[tuple[JanitorAction, list[str], int]] = []
        surveyed: dict[str, storage.Survey] = {}
        for action in actions:
            reason, _ = check_location(action.location, action.table_root, view, unfinished=unfinished)
            if action.kind == LEFTOVER and not reason and any(
                    loc.is_within(p, action.location) for p in pending):
                reason = "holds displaced locations that are queued again"
            if reason:
                results.append((action, O_REFUSED, reason, 0, ()))
                continue
            try:
                found = storage.survey(action.location)  # one recursive listing: exists, bytes, keys
                if found is None:
                    results.append((action, O_GONE, "already gone (deleted by an interrupted run)", 0, ()))
                    continue
                paths, size = _what_to_delete(action.location, view.index, found)
            except errors.UnsafeOperationError as exc:  # a path the store cannot address exactly
                results.append((action, O_REFUSED, str(exc), 0, ()))
                continue
            except Exception as exc:  # noqa: BLE001 - fsspec implementations raise their clients' own errors
                results.append((action, *_storage_refusal("could not list it", exc), 0, ()))
                continue
            if paths == [found.location]:
                surveyed[found.location] = found
            todo.append((action, paths, size))
        if lock is not None:
            lock.ensure_held()
        # Before the first delete: a directory goes in several requests, and a janitor that dies between two
        # leaves part of it; marked, it is never restored (ops/locations.py), whatever remains of it.
        self.queue.mark_delete_begun([key for action, paths, _ in todo if action.queued and paths
                                      for key in action.keys])
        trashing = storage.move_to_trash([p for _, paths, _ in todo for p in paths], self.trash)
        trashed, failures = trashing.moved, dict(trashing.refused)
        not_moved = set(failures)
        failures.update(storage.delete_many(trashing.to_delete, surveyed))
        for action, paths, size in todo:
            failed = {p: failures[p] for p in paths if p in failures}
            if failed:
                refused = [p for p, e in failed.items() if storage.refusal(e)]
                if refused:
                    what = "move into the trash" if refused[0] in not_moved else "delete"
                    outcome, reason = _storage_refusal(f"could not {what} {refused[0]}", failed[refused[0]])
                else:
                    detail = "; ".join(f"{p}: {_one_line(e)}" for p, e in list(failed.items())[:3])
                    outcome, reason = O_ERROR, f"could not delete: {detail}"
                results.append((action, outcome, reason, 0, tuple(paths)))
                continue
            self.pruned.setdefault((db, table), set()).add(action.location)
            note = action.reason if action.kind != LEFTOVER else "removed"
            if action.partial:
                note = f"unreferenced contents removed; kept the live locations inside and {loc.STAGING_DIR}/"
            in_trash = tuple(trashed[p] for p in paths if p in trashed)
            zone_notes = sorted({trashing.notes[p] for p in paths if p in trashing.notes})
            if zone_notes:  # inside an HDFS encryption zone without a trash of its own: deleted, as Hive does
                note = f"{note}; {'; '.join(zone_notes)}"
            if in_trash:
                where = "its encryption zone's trash" if trashing.zone_trash & set(paths) else "the trash"
                note = f"{note}; moved to {where}: {', '.join(in_trash)}"
                self.in_trash[action.location] = in_trash
            results.append((action, O_DELETED, note, size, tuple(paths)))
            log.info("janitor.deleted", location=action.location, table=action.qualified, bytes=size,
                     partial=action.partial, trash=list(in_trash))
        return results

    def _batch_view(self, db: str, table: str, actions: Sequence[JanitorAction]) -> LiveView:
        """What the metastore references at, under or above the table's root, for deleting ``actions``'
        paths now, under the table's lock.

        Every table and partition in the reference scope was read in full once (at discovery, else for
        the first batch); before each batch the scan lists again what a new reference can appear through
        (new databases and tables, changed table locations, new partitions: ReferenceScan.refresh), and
        the table's own partitions of this batch's locations are read again by name: a displaced location
        becomes live again in its own table only through its own partition (a rollback points the
        partition back at it, under the lock this batch holds). The table is read again in full when a
        location of the batch belongs to no partition (an aborted swap's directory, a leftover) or when
        its location or storage root moved."""
        key = (db, table)
        refs = self.references
        refs.set_targets([key])
        refs.ensure()
        names = {a.partition for a in actions}
        if "" in names:
            refs.reread(db, table)
            view = refs.view(db, table)
        else:
            view = refs.view(db, table)
            fresh = partition_refs(self.catalog, db, table, sorted(names)) if view.exists and view.root else None
            updated = view.refreshed(names, fresh[0].location, fresh[0].root, fresh[1]) if fresh else None
            if updated is None:
                refs.reread(db, table)
                updated = refs.view(db, table)
            view = updated
        self.views[key] = view
        return view

    def _prune_table(self, db: str, table: str) -> None:
        """After a table's batches, under its lock once more: remove directories its deletes left empty,
        up to the root / ``_tableswap``, each directory once (not once per location deleted in it)."""
        locations = self.pruned.pop((db, table), None)
        view = self.views.get((db, table))
        if not locations or view is None or not view.root:
            return
        try:
            lock = self._lock(db, table)
        except errors.TableSwapError as exc:
            log.warning("janitor.prune_skipped", table=f"{db}.{table}", error=str(exc))
            return
        try:
            self._prune_parents(locations, view, view.root)
        finally:
            if lock is not None:
                lock.release()

    def _prune_parents(self, locations: set[str], view: LiveView, root: str) -> None:
        done: set[str] = set()
        for parent in sorted({p.rsplit("/", 1)[0] for p in locations}, key=lambda p: -p.count("/")):
            while parent not in done and loc.is_within(parent, root) and not loc.same(parent, root):
                done.add(parent)
                if parent.rsplit("/", 1)[-1] == loc.STAGING_DIR or next(view.index.at_or_below(parent), None):
                    break
                try:
                    if not storage.remove_empty_dir(parent):
                        break
                except OSError:
                    break
                parent = parent.rsplit("/", 1)[0]

    def _finish(self, claimed: Sequence[JanitorAction],
                results: Sequence[tuple[JanitorAction, str, str, int, tuple[str, ...]]]) -> None:
        rows: list[tuple[str, str, str, str | None]] = []
        for action, outcome, reason, size, paths in results:
            self._add(action, outcome, reason, bytes_=size, paths=paths, trash=self.in_trash.pop(action.location, ()))
            state = DELETED if outcome in (O_DELETED, O_GONE) else outcome
            if action.queued:
                rows.extend((k[0], k[1], state, reason) for k in action.keys)
        self.queue.record(rows, self.token)
        self.queue.release([k for a in claimed if not a.queued for k in a.keys], self.token)


#: What to do about a location the janitor's user may not list or delete.
_PERMISSION_FIX = ("run the janitor as a user that may delete it (on HDFS: HADOOP_USER_NAME or the Kerberos principal "
                   "of its keytab; the table's owner, or a member of the HDFS superuser group), or grant this one "
                   "write access to its parent directory and to everything below it; every run tries it once again")
#: What to do about a location HDFS keeps for its snapshots (it deletes no snapshottable directory with any).
_SNAPSHOT_FIX = ("HDFS deletes no snapshottable directory that has snapshots: once they are no longer wanted, delete "
                 "them (hdfs lsSnapshottableDir; hdfs dfs -deleteSnapshot <dir> <name>) and, for none to be taken "
                 "again, hdfs dfsadmin -disallowSnapshot <dir>; every run tries it once again")
#: What to do about a location a quota leaves no room for in the trash.
_QUOTA_FIX = ("a quota on the trash of the janitor's user, or on a directory above it, leaves no room for it: raise or "
              "clear it (hdfs dfs -count -q <dir>; hdfs dfsadmin -clrQuota / -clrSpaceQuota <dir>), or "
              + storage.SKIP_TRASH_HINT + "; every run tries it once again")
_FIXES = {"permission": _PERMISSION_FIX, "snapshot": _SNAPSHOT_FIX, "quota": _QUOTA_FIX}


def _one_line(exc: BaseException) -> str:
    """A storage error in one line (HDFS's without the NameNode's stack trace); tableswap's own as they say."""
    return str(exc) if isinstance(exc, errors.TableSwapError) else storage.error_text(exc)


def _storage_refusal(what: str, exc: BaseException) -> tuple[str, str]:
    """The outcome and reason for a location the storage would not let the janitor list, delete or move into
    the trash: a refusal when another try would meet it again (:func:`tableswap.storage.refusal`: for want
    of permission, HDFS's snapshots, a quota; it stays queued, in ``janitor status``'s refused list, every run
    tries it once, and it does not fail the run), else an error (the run fails; the next one tries again)."""
    found = storage.refusal(exc)
    if found is not None:
        kind, said = found
        return O_REFUSED, f"{what}: {said}; nothing was deleted; {_FIXES[kind]}"
    return O_ERROR, f"{what}: {_one_line(exc)}; nothing was deleted"


def _as_queued(action: JanitorAction) -> JanitorAction:
    from dataclasses import replace

    return replace(action, queued=True, enqueue=False)


def _what_to_delete(location: str, refs: Any, found: storage.Survey) -> tuple[list[str], int]:
    """The paths to delete for ``location`` (:func:`expand`) and their bytes: the survey's when it is
    the whole location (the usual case: no further listing), else each remaining path's."""
    paths = expand(location, refs, storage.children)
    if paths == [loc.normalize(location)]:
        return [found.location], found.bytes
    return paths, sum(storage.size(p) for p in paths)


def _dry_run_outcomes(plan: JanitorPlan, views: dict[tuple[str, str], LiveView]) -> list[Outcome]:
    out = []
    for a in plan.actions:
        if a.decision == DELETE:
            view = views.get((a.db, a.table))
            refs = view.index if view else ()
            try:
                found = storage.survey(a.location)
                paths, size = _what_to_delete(a.location, refs, found) if found is not None else ([], 0)
            except errors.UnsafeOperationError as exc:
                out.append(Outcome(O_REFUSED, a.kind, a.qualified, a.location, str(exc), a.partition, a.swap_ids))
                continue
            except Exception as exc:  # noqa: BLE001 - fsspec implementations raise their clients' own errors
                outcome, why = _storage_refusal("could not list it", exc)
                out.append(Outcome(outcome, a.kind, a.qualified, a.location, why, a.partition, a.swap_ids))
                continue
            reason = a.reason or "grace period over"
            if a.partial:
                reason = ("would remove unreferenced contents only; the live locations inside and "
                          f"{loc.STAGING_DIR}/ stay")
            out.append(Outcome(O_WOULD_DELETE, a.kind, a.qualified, a.location, reason, a.partition, a.swap_ids,
                               size, tuple(paths)))
        elif a.decision == DROP_TEMP:
            out.append(Outcome(O_WOULD_DROP, a.kind, a.qualified, a.location, a.reason, a.partition, a.swap_ids))
        elif a.decision == REFUSE:
            out.append(Outcome(O_REFUSED, a.kind, a.qualified, a.location, a.reason, a.partition, a.swap_ids))
        elif a.decision == KEEP:
            out.append(Outcome(O_KEPT, a.kind, a.qualified, a.location, a.reason, a.partition, a.swap_ids))
    return out


def _own_staging(record: SwapRecord) -> list[tuple[str, str]]:
    """The staged data of ``record`` to queue for the janitor: its staging directory when it is the swap's own
    under the table root (the janitor re-checks it before deleting)."""
    where = record.staging_location
    own = loc.staging_location(record.table_root, record.swap_id) if record.table_root else None
    return [("", where)] if where and own and loc.same(where, own) else []


def _from_state(action: JanitorAction) -> str:
    return STAGED if action.discards_staged else STAGING


def _abandon(queue: JanitorQueue, action: JanitorAction, swap_id: str) -> bool:
    """Mark the swap of ``action`` aborted before its leftovers go: a swap stuck in ``staging``, or a staged
    swap past its ``staged_ttl`` (discarded: recorded in the journal and logged). False if it moved on."""
    if action.discards_staged:
        done = queue.abandon_swap(swap_id, "discarded by the janitor: staged and neither published nor discarded "
                                           "within [janitor] staged_ttl", state=STAGED)
        if done:
            log.warning("janitor.staged_discarded", swap_id=swap_id, table=action.qualified)
        return done
    return queue.abandon_swap(swap_id, "abandoned in state staging; leftovers removed by the janitor",
                              heartbeat_at=action.heartbeat_at)
