"""Recovery manifests: what a committed swap or rollback did, kept on storage beside its data (pure).

Every commit writes ``<table root>/_tableswap/<swap id>/_tableswap.json`` (:func:`manifest_location`):
the table, the swap id and kind, each partition it added, replaced or dropped with the location before
and after, and when. With the journal lost as well as the metastore's entry, ``tableswap repair
--from-storage`` rebuilds the table by replaying these files in flip order (:func:`records`).

Crash semantics: the manifest is written with ``state: intent`` before the flip (after the journal's
intent, under the table lock) and rewritten with ``state: committed`` once the journal has committed
the swap. A crash in between leaves an ``intent`` manifest, which replay does not take as done: only a
partition whose current metastore entry carries the swap's id stamp counts as landed
(:func:`landed_record`). So a manifest never claims more than the metastore held; at worst a crash
makes it claim less, and replay says so.

The name starts with ``_``: Spark and Hive skip such files when they list a table's data, and the
janitor never treats it as data (:func:`is_manifest`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from tableswap.core import locations as loc
from tableswap.core.records import COMMITTED, PartitionChange, SwapRecord
from tableswap.errors import InvalidInputError

MANIFEST_NAME = "_tableswap.json"
FORMAT = 1
INTENT = "intent"
#: The manifest's states: ``intent`` (written before the flip) and ``committed`` (after the journal's commit).
STATES = (INTENT, COMMITTED)


def manifest_location(table_root: str, swap_id: str) -> str:
    """``<table root>/_tableswap/<swap id>/_tableswap.json`` (beside a swap's staged data)."""
    return loc.join(loc.staging_location(table_root, swap_id), MANIFEST_NAME)


def is_manifest(location: str) -> bool:
    return location.rstrip("/").rsplit("/", 1)[-1] == MANIFEST_NAME


@dataclass(frozen=True)
class Manifest:
    """One swap's (or rollback's, or repair's) record on storage."""

    swap_id: str
    db: str
    table: str
    kind: str  # partitions | table | merge | compact | rollback | repair
    state: str  # intent | committed
    table_root: str
    partition_keys: tuple[str, ...]
    intent_at: str
    committed_at: str | None = None
    changes: tuple[PartitionChange, ...] = field(default=())

    @property
    def qualified_name(self) -> str:
        return f"{self.db}.{self.table}"

    @property
    def named_locations(self) -> tuple[str, ...]:
        """The locations that keep the manifest worth keeping while they are live or on storage: where it
        points partitions, and what it dropped (an older manifest still names that data; this one says
        it is gone)."""
        out = {c.new_location for c in self.changes if c.new_location}
        out.update(c.old_location for c in self.changes if c.action == "drop" and c.old_location)
        return tuple(sorted(out))

    def committed(self, at: str) -> "Manifest":
        return Manifest(self.swap_id, self.db, self.table, self.kind, COMMITTED, self.table_root,
                        self.partition_keys, self.intent_at, at, self.changes)

    def to_json(self) -> str:
        return json.dumps({
            "format": FORMAT, "swap_id": self.swap_id, "table": self.qualified_name, "kind": self.kind,
            "state": self.state, "table_root": self.table_root, "partition_keys": list(self.partition_keys),
            "intent_at": self.intent_at, "committed_at": self.committed_at,
            "changes": [{"partition": c.partition, "action": c.action, "old_location": c.old_location,
                         "new_location": c.new_location} for c in self.changes],
        }, indent=1, sort_keys=False) + "\n"

    def to_record(self, changes: Sequence[PartitionChange] | None = None) -> SwapRecord:
        """The manifest as a committed journal record (so the journal's lineage rules replay it)."""
        db, table = self.db, self.table
        return SwapRecord(swap_id=self.swap_id, db_name=db, table_name=table, kind=self.kind, state=COMMITTED,
                          table_root=self.table_root, started_at=self.intent_at, intent_at=self.intent_at,
                          committed_at=self.committed_at,
                          items=tuple(self.changes if changes is None else changes))


def from_record(record: SwapRecord, partition_keys: Sequence[str], changes: Iterable[PartitionChange],
                *, intent_at: str) -> Manifest:
    """The ``intent`` manifest of a swap about to flip (``changes``: the plan's, unchanged ones left out)."""
    kept = tuple(c for c in changes if c.action != "unchanged")
    return Manifest(record.swap_id, record.db_name, record.table_name, record.kind, INTENT, record.table_root,
                    tuple(partition_keys), intent_at, None, kept)


def parse(text: str, where: str = "manifest") -> Manifest:
    """A manifest from its JSON text; :class:`InvalidInputError` naming ``where`` if it is not one."""
    try:
        raw: Mapping[str, Any] = json.loads(text)
        db, _, table = str(raw["table"]).partition(".")
        state = str(raw["state"])
        if state not in STATES or not table:
            raise ValueError(f"state {state!r}, table {raw['table']!r}")
        changes = tuple(PartitionChange(str(c["partition"]), str(c["action"]), c.get("old_location"),
                                        c.get("new_location")) for c in raw.get("changes", []))
        return Manifest(str(raw["swap_id"]), db, table, str(raw.get("kind", "")), state, str(raw["table_root"]),
                        tuple(raw.get("partition_keys", [])), str(raw["intent_at"]), raw.get("committed_at"),
                        changes)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InvalidInputError(f"{where} is not a tableswap manifest ({type(exc).__name__}: {exc})") from exc


def landed_record(manifest: Manifest, stamps: Mapping[str, str | None]) -> SwapRecord | None:
    """The changes of an ``intent`` manifest that are known to have landed, as a committed record, or
    None when none is: a change landed when the partition's current metastore entry (``stamps``:
    partition name → the swap id stamped on it, ``''`` for an unpartitioned table) carries this swap's
    id. A committed manifest is returned whole."""
    if manifest.state == COMMITTED:
        return manifest.to_record()
    landed = [c for c in manifest.changes if c.new_location and stamps.get(c.partition) == manifest.swap_id]
    return manifest.to_record(landed) if landed else None
