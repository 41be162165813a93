"""An operation that changes where a table points (a swap, a rollback, a repair, or ``recover``
finishing one of them), as one value the commit protocol drives from its begin to its end:

    op = Operation(SwapKind.PARTITIONS, swap_id, db, table, root, staging_location=..., discard=...)
    begin(journal, op)                           # the journal's record: state ``staging``
    ... stage ...                                # (a swap) then op = op.planned(what it staged)
    commit(rt, table_info, op, catalog=catalog)  # ops/commit.py: lock, plan, intent, flip, commit

A new kind of operation is a new value of this class (its kind, planner, ``before_flip``,
``input_conflicts`` and ``discard``), not new switches in the protocol.
"""

from __future__ import annotations

import dataclasses
import getpass
import socket
import threading
from dataclasses import dataclass
from typing import Callable, Sequence

from tableswap.core.catalog_port import CatalogLock, Snapshot
from tableswap.core.deprecated import warn_renamed
from tableswap.core.plan import Planner
from tableswap.core.records import STAGING, SwapKind, SwapRecord
from tableswap.journal.store import Journal, utcnow
from tableswap.logs import get_logger

log = get_logger("tableswap.operation")

#: How often a swap's process refreshes its journal heartbeat, unless told (``[swap] heartbeat_s``, the same
#: interval as its table lock's heartbeat).
HEARTBEAT_S = 20.0

#: An operation's step between its journaled intent and its flip, called with the snapshot read under the
#: lock and the held lock (a restore marks the locations it points back at).
BeforeFlip = Callable[[Snapshot, CatalogLock], None]
#: What an operation read that the catalog does not show (the files of the partitions a merge or a compaction
#: read), compared under the lock with the snapshot read there: one line per difference (none: unchanged).
InputConflicts = Callable[[Snapshot], Sequence[str]]


@dataclass(frozen=True)
class Operation:
    """One operation, from its begin (:func:`begin`) through the commit protocol
    (:func:`tableswap.ops.commit.commit`).

    Attributes:
        kind: what the journal records it as (a :class:`~tableswap.core.records.SwapKind`: a swap of
            partitions or of a table, a merge, a compaction, a rollback, a repair).
        swap_id, db, table: the operation's swap id and the table it changes.
        table_root: the table's storage root when it began ("" for none).
        planner: what the protocol plans from under the lock: a swap's staged batch (a
            :class:`~tableswap.core.plan.Planner`), or a :class:`~tableswap.core.plan.SwapPlan` made
            beforehand (a restore's, a recovery's remaining flip), checked against that read. None until
            the operation has it (a swap stages first: :meth:`planned`).
        label, rerun: how the protocol names it in logs, errors and the post-commit hooks' event (``swap``
            for a swap, a merge and a compaction alike, ``publish`` for a staged swap's commit, ``group``,
            ``rollback``, ``repair``: how it was run, where ``kind`` is what it changed), and what a conflict
            tells to do ("<table> changed since the <label> was planned ... <rerun>. Conflicts: ..."). Was
            ``what``, still readable for one release with a warning.
        before_flip: its step between the journaled intent and the flip.
        input_conflicts: what it read that the catalog does not show, compared under the lock before the
            intent is recorded and again right before the flip; a difference is a ``SwapConflictError``
            with nothing changed (a merge's or compaction's partition files, which another writer can append
            to in place without changing the partition's location or stamp).
        discard: undo what it staged, when it fails before its flip.
        rollback_of: the swap a rollback undoes.
        staging_location, temp_table, app_id: a swap's staging directory, temporary table and Spark
            application.
        resume: its intent was recorded by an earlier process (``recover``): none is recorded, and a
            failure leaves the journal as it is.
        displaced: what the journal commit queues for the janitor (None: what the plan displaces).
    """

    kind: SwapKind
    swap_id: str
    db: str
    table: str
    table_root: str
    planner: Planner | None = None
    label: str = "swap"
    rerun: str = "Rerun the swap"
    before_flip: BeforeFlip | None = None
    input_conflicts: InputConflicts | None = None
    discard: Callable[[], None] | None = None
    rollback_of: str | None = None
    staging_location: str | None = None
    temp_table: str | None = None
    app_id: str | None = None
    resume: bool = False
    displaced: tuple[tuple[str, str], ...] | None = None
    #: a member of this swap group: its lineage is the group's one run (ops/notify.py), never a run of its own
    group_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, SwapKind):
            object.__setattr__(self, "kind", SwapKind(self.kind))  # a journal record's value: checked
        if self.displaced is not None and not isinstance(self.displaced, tuple):
            object.__setattr__(self, "displaced", tuple(self.displaced))

    @property
    def what(self) -> str:
        """Deprecated (kept for one release): :attr:`label`."""
        warn_renamed("Operation.what", "Operation.label", stacklevel=3)
        return self.label

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.table}"

    def planned(self, planner: Planner) -> "Operation":
        """This operation with its planner (a swap's, once it has staged its batch)."""
        return dataclasses.replace(self, planner=planner)

    @classmethod
    def resumed(cls, record: SwapRecord, plan: Planner, displaced: Sequence[tuple[str, str]]) -> "Operation":
        """The operation of a journal record whose intent an earlier process recorded (``recover``): the
        rest of its flip (``plan``, maybe nothing), under a lock the caller holds, then its commit."""
        return cls(SwapKind(record.kind), record.swap_id, plan.db, plan.table, record.table_root,
                   plan, rollback_of=record.rollback_of, staging_location=record.staging_location,
                   temp_table=record.temp_table, app_id=record.app_id, resume=True, displaced=tuple(displaced))

    def begin_record(self) -> SwapRecord:
        """The journal's record of its begin: who started it where, state ``staging``, its first heartbeat."""
        now = utcnow()
        return SwapRecord(
            swap_id=self.swap_id, db_name=self.db, table_name=self.table, kind=self.kind, state=STAGING,
            table_root=self.table_root, staging_location=self.staging_location, temp_table=self.temp_table,
            rollback_of=self.rollback_of, started_at=now, user_name=getpass.getuser(),
            host_name=socket.gethostname(), app_id=self.app_id, heartbeat_at=now)


class Heartbeat:
    """The liveness signal of an unfinished operation: a daemon thread that refreshes its journal record's
    ``heartbeat_at`` every ``interval_s`` from its begin until the record leaves ``staging`` / ``pending``
    (committed, failed, staged, or aborted by ``tableswap recover``) or :meth:`stop` is called. ``recover``
    aborts a swap still ``staging`` only once its heartbeat is older than ``--stale-after``: a long batch
    write is not mistaken for a crash, a dead process is found without waiting for its table lock to expire.
    A journal that fails a refresh is logged and tried again at the next one."""

    def __init__(self, journal: Journal, swap_id: str, interval_s: float) -> None:
        if not interval_s > 0:
            raise ValueError(f"heartbeat interval must be > 0 seconds, not {interval_s!r}")
        self.journal, self.swap_id, self.interval_s = journal, swap_id, interval_s
        self.beats = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"tableswap-heartbeat-{swap_id}", daemon=True)

    def start(self) -> "Heartbeat":
        with _LOCK:
            _BEATING[self.swap_id] = self
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with _LOCK:
            if _BEATING.get(self.swap_id) is self:
                del _BEATING[self.swap_id]

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval_s):
                try:
                    if not self.journal.heartbeat(self.swap_id):
                        return  # no longer unfinished: nothing to signal
                    self.beats += 1
                except Exception as exc:  # noqa: BLE001 - the journal may be back at the next beat
                    log.warning("operation.heartbeat_failed", swap_id=self.swap_id, error=str(exc))
        finally:
            self.stop()


_LOCK = threading.Lock()
_BEATING: dict[str, Heartbeat] = {}


def begin(journal: Journal, op: Operation, *, heartbeat_s: float = HEARTBEAT_S) -> Heartbeat:
    """Begin ``op``: its record in the journal (state ``staging``), the one place an operation begins, and its
    :class:`Heartbeat` (every ``heartbeat_s``), which :func:`end_heartbeat` stops once the operation ended."""
    journal.begin_swap(op.begin_record())
    return Heartbeat(journal, op.swap_id, heartbeat_s).start()


def end_heartbeat(swap_id: str) -> None:
    """Stop the heartbeat of ``swap_id`` begun in this process (none: nothing to do)."""
    with _LOCK:
        beat = _BEATING.get(swap_id)
    if beat is not None:
        beat.stop()


__all__ = ["BeforeFlip", "HEARTBEAT_S", "Heartbeat", "InputConflicts", "Operation", "begin", "end_heartbeat"]
