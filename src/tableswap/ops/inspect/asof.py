"""``read_as_of``: a DataFrame of a table as it was right after a swap, or at a time.

Until the janitor deletes them, the locations a swap displaced are still on storage and the journal
knows which partition each belonged to. The past state comes from :func:`tableswap.ops.inspect.history.show_as_of`;
its locations are read with the table's format and schema (:mod:`tableswap.spark.reading`).
Nothing is changed: the metastore is only read.
"""

from __future__ import annotations

import warnings
from typing import Any

from tableswap import errors
from tableswap.core.group import COMMITTED as GROUP_COMMITTED
from tableswap.journal.groups import GroupLog
from tableswap.core import eligibility, partitions as pn
from tableswap.core.names import parse_table_name, quoted
from tableswap.logs import get_logger
from tableswap.ops.inspect.history import PastTableOverview, show_as_of
from tableswap.runtime import Runtime, use
from tableswap.spark import api as sparkapi
from tableswap.spark.reading import catalog_schema, read_locations, stored_schema

log = get_logger("tableswap.asof")

MISSING_CHOICES = ("error", "skip")


class MissingDataWarning(UserWarning):
    """``read_as_of(..., missing="skip")`` left out partitions whose data is gone."""


def _as_of_group(rt: Runtime, group_id: str, table: str, swap_id: str | None,
                 timestamp: Any) -> tuple[str | None, Any]:
    """``read_as_of(group_id=...)`` as a ``swap_id`` (a member table) or a ``timestamp`` (any other table)."""
    if swap_id is not None or timestamp is not None:
        raise errors.InvalidInputError("give one of swap_id, timestamp and group_id")
    group = GroupLog(rt.journal).get(group_id)
    if group.state != GROUP_COMMITTED:
        raise errors.InvalidInputError(f"swap group {group.group_id} is {group.state}, not committed: there is no "
                                       "state right after it to read")
    member = next((m for m in group.members if m.table.lower() == table.lower()), None)
    return (member.swap_id, None) if member is not None else (None, group.committed_at)


def read_as_of(spark: Any, table: str, *, swap_id: str | None = None, timestamp: Any = None,
               missing: str = "error", metastore_uri: str | None = None, journal_url: str | None = None,
               runtime: Runtime | None = None, group_id: str | None = None, **options: Any) -> Any:
    """The table ``db.table`` as it was right after committed swap ``swap_id``, or at ``timestamp``.

    Built from the journal's locations with the table's current schema and partition columns, and
    read with the table's format; the table itself is not changed. Give exactly one of ``swap_id``
    and ``timestamp``.

    Args:
        spark: the SparkSession to read with (classic or Spark Connect).
        table: ``db.table`` (or ``table`` in the session's current database).
        swap_id: a committed swap of the table (see ``tableswap history``); rollbacks count too.
        timestamp: a ``datetime`` or ISO text (naive is UTC): the state after the last swap committed
            at or before it (before the first journaled swap: every journaled change undone).
        group_id: a committed swap group (its id, or its name: the latest group of that name), instead of
            ``swap_id``: the table as it was right after the group committed (a member table: right after its
            member swap; any other table: at the group's commit time). Reading every member table so gives
            one consistent cross-table view (docs/groups.md).
        missing: ``"error"`` (default) raises when data of that state is gone; ``"skip"`` leaves those
            partitions out and issues a :class:`MissingDataWarning` listing them.

    Returns:
        A DataFrame with the table's columns, partition columns last.

    Raises:
        PastDataMissingError: a location of that state was deleted by the janitor, in whole or in part (its
            deletion began), or no longer exists (``missing="error"``); the message names each.
        NotFoundError: ``swap_id`` is not a swap of this table.
        InvalidInputError: the swap is not committed; a bad ``timestamp`` or ``missing``.
    """
    if missing not in MISSING_CHOICES:
        raise errors.InvalidInputError(f"missing={missing!r}: expected one of {', '.join(MISSING_CHOICES)}")
    with use(runtime, spark=spark, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        spark_catalog = rt.capabilities.spark_catalog
        if spark_catalog:  # else (Glue) Spark reads the files only: its own catalog does not matter
            sparkapi.require_hive_catalog(spark)
        try:
            current_db = spark.catalog.currentDatabase()
        except Exception:  # noqa: BLE001 - a session that cannot say: the name must then be qualified
            current_db = None
        db, name = parse_table_name(table, current_db)
        if group_id is not None:
            swap_id, timestamp = _as_of_group(rt, group_id, f"{db}.{name}", swap_id, timestamp)
        state = show_as_of(f"{db}.{name}", swap_id=swap_id, timestamp=timestamp, runtime=rt)
        with rt.catalog() as catalog:
            info = catalog.get_table(db, name)
    eligibility.check_readable(info)
    gone = state.missing
    if gone:
        lines = [_describe(p) for p in gone]
        if missing == "error":
            raise errors.PastDataMissingError(
                f"{state.table} as of {_point(state)} cannot be read: the data of {len(gone)} "
                f"partition(s) is gone: {errors.listing(lines)}. Pass missing='skip' to read the rest",
                table=state.table, swap_id=state.as_of, missing=[p.location for p in gone])
        warnings.warn(f"{state.table} as of {_point(state)}: left out {len(gone)} partition(s) whose data is "
                      f"gone: {errors.listing(lines, limit=20)}", MissingDataWarning, stacklevel=2)
    schema = stored_schema(info)
    if schema is None:
        schema = spark.table(quoted(db, name)).schema if spark_catalog else catalog_schema(spark, info)
    keys = info.partition_key_names
    parts = [(pn.values_for(keys, pn.parse_name(p.partition)) if keys else (), p.location)
             for p in state.partitions if not p.missing]
    log.info("asof.read", table=state.table, as_of=state.as_of, partitions=len(parts), missing=len(gone),
             connect=sparkapi.is_connect(spark))
    return read_locations(spark, info, schema, parts)


def _point(state: PastTableOverview) -> str:
    return f"swap {state.as_of}" if state.as_of else "before its first journaled swap"


def _describe(p: Any) -> str:
    why = "deleted by the janitor, in whole or in part" if p.deleted_by_janitor else "no longer exists"
    return f"{p.partition or '(table)'} at {p.location} ({why})"
