"""The tail of a committed swap, publish or group member, after its lock: its temporary table dropped (its data
kept) while Spark refreshes its cache of the table, then its journal record finished. It never fails the commit:
a drop or a refresh that fails is logged, and ``tableswap recover`` and the janitor's sweep drop the table."""

from __future__ import annotations

from typing import Any

from tableswap import errors
from tableswap.core.catalog import TableInfo
from tableswap.core.catalog_port import Catalog
from tableswap.core.names import quoted
from tableswap.journal.store import Journal
from tableswap.ops.background import Background


def finish_committed(journal: Journal, catalog: Catalog, swap_id: str, db: str, table: str, temp: str | None, *,
                     created: TableInfo | None = None, spark: Any = None, log: Any, what: str) -> None:
    """Drop the temporary table ``db.temp`` (none: nothing to drop) on ``catalog`` in the background while ``spark``
    (None: no Spark session whose catalog is the table's) refreshes its cache of ``db.table``, then finish the
    journal record of ``swap_id``. ``created``: the temporary table as this process created it (dropped without
    reading it again). A failure of either is logged as ``<what>.refresh_failed`` / ``<what>.temp_drop_failed``.
    Nothing else may use ``catalog`` meanwhile."""
    dropping = None
    if temp:
        dropping = Background("drop-staging-table",
                              lambda c: c.drop_table_keep_data(db, temp, created=created), catalog)
    if spark is not None:
        try:
            spark.catalog.refreshTable(quoted(db, table))
        except Exception as exc:  # noqa: BLE001 - never fail a committed swap on a cache refresh
            log.warning(f"{what}.refresh_failed", error=str(exc))
    if dropping is not None:
        try:
            dropping.join()
        except errors.TableSwapError as exc:  # committed already: `recover` and the janitor's sweep drop it
            log.warning(f"{what}.temp_drop_failed", temp_table=temp, error=str(exc))
    journal.finish(swap_id)


__all__ = ["finish_committed"]
