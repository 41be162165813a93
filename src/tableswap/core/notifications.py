"""The metastore's notification log, as the janitor reads it (pure: no I/O).

Where the metastore runs Hive's ``DbNotificationListener``, every change to a database, table or
partition is an event with a sequence number (``NOTIFICATION_LOG``). The janitor keeps its index of
referenced locations from these events (:mod:`tableswap.ops.janitor.refs`): an event names what
changed, and the janitor reads that again from the metastore (the event's message is not trusted for
the location: it is read by name, as it is now).

This module holds the plain records the metastore adapter decodes events into, the decoding of the
messages' text (``json-0.2``: plain JSON; ``gzip(json-2.0)``, Hive 4's ``GzipJSONMessageEncoder``:
base64 of gzipped JSON) and what each event type means for the references:

- :data:`NO_REFERENCES`: the event changes no location (transactions, statistics, constraints,
  functions, inserts into an existing location);
- :data:`PARTITION_EVENTS`: the named partitions are read again by name;
- :data:`TABLE_EVENTS`: the table is read again in full (and its database listed again: a rename);
- :data:`DATABASE_EVENTS`: the database's tables are listed and read again in full.

Any other type (one this release does not know, a catalog's) means the index cannot tell what changed:
the janitor does a full scan.
"""

from __future__ import annotations

import base64
import gzip
import json
from dataclasses import dataclass
from typing import Any, Mapping, Protocol, runtime_checkable

__all__ = ["NotificationEvent", "NotificationLog", "decode_message", "partition_values", "renamed_table",
           "NO_REFERENCES", "PARTITION_EVENTS", "TABLE_EVENTS", "DATABASE_EVENTS", "effect",
           "UNKNOWN", "NONE", "PARTITIONS", "TABLE", "DATABASE"]

#: The message formats of Hive's encoders: ``JSONMessageEncoder`` and ``GzipJSONMessageEncoder`` (4.x).
JSON_FORMAT_PREFIX = "json-"
GZIP_JSON_FORMAT_PREFIX = "gzip(json-"

NO_REFERENCES = frozenset({
    "INSERT", "CREATE_DATABASE", "ALTER_DATABASE", "CREATE_FUNCTION", "DROP_FUNCTION",
    "OPEN_TXN", "COMMIT_TXN", "ABORT_TXN", "ALLOC_WRITE_ID", "ACID_WRITE", "BATCH_ACID_WRITE",
    "UPDATE_TABLE_COLUMN_STAT", "DELETE_TABLE_COLUMN_STAT", "UPDATE_PARTITION_COLUMN_STAT",
    "UPDATE_PARTITION_COLUMN_STAT_BATCH", "DELETE_PARTITION_COLUMN_STAT",
    "ADD_PRIMARYKEY", "ADD_FOREIGNKEY", "ADD_UNIQUECONSTRAINT", "ADD_NOTNULLCONSTRAINT",
    "ADD_DEFAULTCONSTRAINT", "ADD_CHECKCONSTRAINT", "DROP_CONSTRAINT",
    "CREATE_ISCHEMA", "ALTER_ISCHEMA", "DROP_ISCHEMA", "ADD_SCHEMA_VERSION", "ALTER_SCHEMA_VERSION",
    "DROP_SCHEMA_VERSION", "COMMIT_COMPACTION", "CREATE_DATACONNECTOR", "DROP_DATACONNECTOR",
    "ALTER_DATACONNECTOR",
})
PARTITION_EVENTS = frozenset({"ADD_PARTITION", "ALTER_PARTITION", "DROP_PARTITION"})
TABLE_EVENTS = frozenset({"CREATE_TABLE", "ALTER_TABLE", "DROP_TABLE"})
DATABASE_EVENTS = frozenset({"DROP_DATABASE"})

@runtime_checkable
class NotificationLog(Protocol):
    """A catalog that reads its notification log (the Hive Metastore; the Glue Data Catalog has none)."""

    def current_event_id(self) -> int: ...

    def events_after(self, last: int, limit: int = ...) -> list["NotificationEvent"]: ...


NONE, PARTITIONS, TABLE, DATABASE, UNKNOWN = "none", "partitions", "table", "database", "unknown"


@dataclass(frozen=True)
class NotificationEvent:
    """One event of the log, decoded. ``partitions``: for a partition event, the key -> value maps of
    the partitions it names (an altered partition: before and, when the message says, after); None when
    the message could not be read (the table is then read again in full)."""

    event_id: int
    event_type: str
    db: str | None
    table: str | None
    partitions: tuple[Mapping[str, str], ...] | None = None
    catalog: str | None = None
    #: An altered table's name after the change (a rename), when the message says.
    renamed_to: tuple[str, str] | None = None


def effect(event: NotificationEvent) -> str:
    """What ``event`` means for the references: :data:`NONE`, :data:`PARTITIONS`, :data:`TABLE`,
    :data:`DATABASE` or :data:`UNKNOWN` (a full scan)."""
    kind = event.event_type.upper()
    if kind in NO_REFERENCES:
        return NONE
    if event.catalog and event.catalog.lower() != "hive":
        return UNKNOWN  # the janitor reads the default catalog only; say so rather than guess
    if kind in PARTITION_EVENTS:
        if not event.db or not event.table:
            return UNKNOWN
        return PARTITIONS if event.partitions is not None else TABLE
    if kind in TABLE_EVENTS:
        return TABLE if event.db and event.table else UNKNOWN
    if kind in DATABASE_EVENTS:
        return DATABASE if event.db else UNKNOWN
    return UNKNOWN


def decode_message(text: str | None, message_format: str | None) -> dict[str, Any] | None:
    """The JSON object of an event's message, or None when it is not one this release reads."""
    if not text:
        return None
    fmt = (message_format or "").strip().lower()
    try:
        if fmt.startswith(GZIP_JSON_FORMAT_PREFIX):
            text = gzip.decompress(base64.b64decode(text)).decode("utf-8")
        elif fmt and not fmt.startswith(JSON_FORMAT_PREFIX):
            return None
        value = json.loads(text)
    except (ValueError, OSError, EOFError):
        return None
    return value if isinstance(value, dict) else None


def _thrift_json_values(obj_json: Any) -> dict[str, str] | None:
    """The partition values of a Partition serialized with Thrift's TJSONProtocol (``partitionObjAfterJson``):
    field 1 is ``{"lst": ["str", n, v1, ...]}``. None when it is not that."""
    if not isinstance(obj_json, str):
        return None
    try:
        obj = json.loads(obj_json)
        values = obj["1"]["lst"][2:]
    except (ValueError, KeyError, TypeError, IndexError):
        return None
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        return None
    return {str(i): v for i, v in enumerate(values)}  # positional: keys are the table's, in order


def partition_values(event_type: str, message: Mapping[str, Any] | None) -> tuple[Mapping[str, str], ...] | None:
    """The partitions a partition event names (key -> value maps; an altered partition's values after
    the change are keyed by position, ``"0"``, ``"1"``...), or None when the message does not say."""
    if message is None:
        return None
    kind = event_type.upper()
    if kind in ("ADD_PARTITION", "DROP_PARTITION"):
        parts = message.get("partitions")
        if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
            return None
        return tuple({str(k): str(v) for k, v in p.items()} for p in parts)
    if kind == "ALTER_PARTITION":
        before = message.get("keyValues")
        after = _thrift_json_values(message.get("partitionObjAfterJson"))
        if not isinstance(before, dict) or after is None:
            return None  # a rename's new values unknown: the table is read again in full
        return ({str(k): str(v) for k, v in before.items()}, after)
    return None


def renamed_table(event_type: str, message: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """An ALTER_TABLE's ``(db, table)`` after the change, from ``tableObjAfterJson`` (a Table in Thrift's
    TJSONProtocol: field 1 the name, field 2 the database), or None when the message does not say."""
    if event_type.upper() != "ALTER_TABLE" or message is None:
        return None
    try:
        obj = json.loads(message["tableObjAfterJson"])
        return str(obj["2"]["str"]).lower(), str(obj["1"]["str"]).lower()
    except (ValueError, KeyError, TypeError):
        return None
