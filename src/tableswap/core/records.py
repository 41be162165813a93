"""What the journal records: a swap (:class:`SwapRecord`), its changes (:class:`PartitionChange`), the
displaced locations queued for the janitor (:class:`Deletion`), and the states they go through. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from tableswap.core.deprecated import renamed


class StrEnum(str, Enum):
    """An enum whose members are their string values (in comparisons, JSON, SQL and f-strings)."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, format_spec: str) -> str:
        return str.__format__(self, format_spec)


class Action(StrEnum):
    """What a swap does to one partition (or to the table: ``replace``)."""

    ADD = "add"
    REPLACE = "replace"
    UNCHANGED = "unchanged"
    DROP = "drop"


class SwapKind(StrEnum):
    """What a journaled operation changed: a swap of partitions or of an unpartitioned table, a merge of
    updates into partitions (``merge_partitions``), a compaction of partitions' small files
    (``compact_partitions``), or a restore of earlier locations (a rollback, a repair). Recorded with the
    swap, its manifest and its result. A merge and a compaction are partition swaps in every other respect."""

    PARTITIONS = "partitions"
    TABLE = "table"
    ROLLBACK = "rollback"
    REPAIR = "repair"
    MERGE = "merge"
    COMPACT = "compact"

    @classmethod
    def of_swap(cls, partitioned: bool) -> "SwapKind":
        return cls.PARTITIONS if partitioned else cls.TABLE

    @property
    def restores(self) -> bool:
        """A rollback or a repair: it points partitions back at locations the journal knows."""
        return self in (SwapKind.ROLLBACK, SwapKind.REPAIR)


class SwapState(StrEnum):
    """A swap's journal state: ``staging`` (writing its batch) → ``pending`` (intent recorded, flipping)
    → ``committed``; or ``failed`` (nothing changed) / ``aborted`` (dry run, nothing to do, recovered).
    A staged swap (``stage_partitions``, a refused audit) pauses between its stage and its commit in
    ``staged``: nothing a reader sees changed; its publish goes on ``pending`` → ``committed``, its
    discard (or the janitor after ``staged_ttl``) ends it ``aborted``."""

    STAGING = "staging"
    STAGED = "staged"
    PENDING = "pending"
    COMMITTED = "committed"
    FAILED = "failed"
    ABORTED = "aborted"


class DeletionState(StrEnum):
    """A displaced location's state in the deletion queue (not to be confused with a swap's ``pending``)."""

    PENDING = "pending"  # waiting for its grace period and the janitor
    DELETED = "deleted"
    REFUSED = "refused"  # the janitor found it referenced or outside the table root
    RESTORED = "restored"  # a rollback points a partition at it again


STAGING, PENDING, COMMITTED, FAILED, ABORTED = (SwapState.STAGING, SwapState.PENDING, SwapState.COMMITTED,
                                                SwapState.FAILED, SwapState.ABORTED)
STAGED = SwapState.STAGED
UNFINISHED = (STAGING, PENDING)


@dataclass(frozen=True)
class HookOutcome:
    """One post-commit hook's run for a swap (``tableswap.hooks``), as the journal records it."""

    hook: str  # the hook's name
    ok: bool
    seconds: float
    error: str | None = None
    ran_at: str | None = None  # ISO-8601 UTC, set by the journal


@dataclass(frozen=True)
class PartitionChange:
    """One partition's change (or the table's: ``partition`` ``""``) as recorded: the journal's intent holds
    one per partition (the journal's items; ``SwapItem`` is a deprecated name of this class, kept for one
    release) and a :class:`~tableswap.core.result.SwapResult` reports them. It is made from the plan's
    :class:`~tableswap.core.plan.PlannedChange` (which also carries what the flip sends the catalog: the
    partition's values and parameters) and keeps only the name, the action and the two locations."""

    partition: str  # e.g. "dt=2026-06-03/country=DE"; "" for a whole table
    action: str  # an Action: add | replace | unchanged | drop
    old_location: str | None
    new_location: str | None

    @property
    def partition_name(self) -> str:
        """The journal's name for :attr:`partition`."""
        return self.partition


@dataclass(frozen=True)
class SwapRecord:
    swap_id: str
    db_name: str
    table_name: str
    kind: str
    state: str
    table_root: str
    staging_location: str | None = None
    temp_table: str | None = None
    rollback_of: str | None = None
    started_at: str = ""
    intent_at: str | None = None
    committed_at: str | None = None
    finished_at: str | None = None
    user_name: str | None = None
    host_name: str | None = None
    app_id: str | None = None
    error: str | None = None
    #: When it was staged (journal version 8): set for a staged swap, and kept once it is published or
    #: discarded; None for a swap that never paused between its stage and its commit.
    staged_at: str | None = None
    #: A staged swap's ``replace_where`` drops (partition names), as JSON text; None: none.
    staged_drops: str | None = None
    #: A staged swap's ``replace_where`` scope (journal version 13), as JSON text
    #: (:meth:`tableswap.core.scope.ScopeDrops.to_json`); None: none, or staged before version 13.
    staged_scope: str | None = None
    #: The table's columns at its intent (journal version 13), JSON ``[[name, type], ...]``
    #: (:mod:`tableswap.core.column_types`): those its new files carry; None: recorded before version 13.
    table_columns: str | None = None
    #: The last liveness signal of the swap's process (journal version 10; ISO-8601 UTC): set at its begin and
    #: refreshed every ``heartbeat_s`` while it is ``staging`` or ``pending``. None: a swap begun before.
    heartbeat_at: str | None = None
    items: tuple[PartitionChange, ...] = field(default=())

    @property
    def table(self) -> str:
        return f"{self.db_name}.{self.table_name}"


@dataclass(frozen=True)
class Deletion:
    swap_id: str
    location: str
    db_name: str
    table_name: str
    partition_name: str
    table_root: str
    reason: str
    state: str
    queued_at: str
    deleted_at: str | None = None
    attempts: int = 0
    last_error: str | None = None
    #: The location's bytes as recorded when a swap wrote it (journal version 7); None: unknown.
    bytes: int | None = None
    #: When a janitor began deleting it (journal version 11): set before its first delete, never cleared. A
    #: location so marked may be partly gone and is never restored, whatever its state and what remains.
    delete_begun_at: str | None = None


if TYPE_CHECKING:  # the old name, for one release (tableswap.core.deprecated)
    SwapItem = PartitionChange
else:
    def __getattr__(name: str) -> Any:
        return renamed(__name__, globals(), name, {"SwapItem": "PartitionChange"})
