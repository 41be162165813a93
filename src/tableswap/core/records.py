"""What the journal records: a swap (:class:`SwapRecord`), its changes (:class:`SwapItem`), the
displaced locations queued for the janitor (:class:`Deletion`), and the states they go through. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

STAGING, PENDING, COMMITTED, FAILED, ABORTED = "staging", "pending", "committed", "failed", "aborted"
UNFINISHED = (STAGING, PENDING)


@dataclass(frozen=True)
class SwapItem:
    partition_name: str  # '' for an unpartitioned table
    action: str  # add | replace | drop | unchanged
    old_location: str | None
    new_location: str | None


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
    items: tuple[SwapItem, ...] = field(default=())

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
