"""The tail of a committed swap, publish or group member, after its lock: its temporary table dropped (its data
kept) while Spark refreshes its cache of the table, then its journal record finished. It never fails the commit:
a drop or a refresh that fails is logged, and ``tableswap recover`` and the janitor's sweep drop the table.

A swap starts its temporary table's drop earlier (:class:`TempTableDrop`, its operation's ``before_flip``): once
its intent is journaled, nothing reads that table any more, and the drop runs on the side connection during the
flip instead of after it. Why that is safe: see :class:`TempTableDrop`."""

from __future__ import annotations

from typing import Any

from tableswap import errors
from tableswap.core.catalog import TableInfo
from tableswap.core.catalog_port import Catalog
from tableswap.core.names import quoted
from tableswap.journal.store import Journal
from tableswap.ops.background import Background


class TempTableDrop:
    """The drop of a swap's temporary table ``db.temp`` (``created``: as this process created it) on ``catalog``,
    a side connection nothing else uses until :meth:`join`. :meth:`start` is the swap's ``before_flip``: it runs
    once the intent is journaled (``pending``), so the drop overlaps the flip.

    Why dropping it before the flip weakens nothing: after the staging write (and the audit's reads) nothing reads
    the temporary table; from the intent on, the journal holds every location the flip points at, which keeps the
    janitor off the staging directory (a ``pending`` swap's) and is what ``tableswap recover`` decides from (the
    partitions' swap-id stamps, never the temporary table). Its data is kept (an EXTERNAL table dropped with
    ``deleteData=false``). Whatever happens next the table was to be dropped: on the commit by the finish, on a
    failure before the flip by the swap's discard (a drop of a table already gone does nothing). If the process dies
    before the drop lands, ``recover`` drops it (a ``committed`` swap not ``finished``, or a ``pending`` one), and
    the janitor's sweep drops any left over."""

    def __init__(self, catalog: Catalog, db: str, temp: str, created: TableInfo | None) -> None:
        self.catalog = catalog
        self.db = db
        self.temp = temp
        self.created = created
        self.running: Background | None = None

    def start(self, *_: Any) -> None:
        """Start the drop (once); takes and ignores ``before_flip``'s arguments (the snapshot and the lock)."""
        if self.running is None:
            db, temp, created = self.db, self.temp, self.created
            self.running = Background("drop-staging-table",
                                      lambda c: c.drop_table_keep_data(db, temp, created=created), self.catalog)

    def join(self) -> None:
        """Wait for the drop, if started; re-raises its error."""
        if self.running is not None:
            self.running.join()


def finish_committed(journal: Journal, catalog: Catalog, swap_id: str, db: str, table: str, temp: str | None, *,
                     created: TableInfo | None = None, spark: Any = None, log: Any, what: str,
                     dropping: TempTableDrop | None = None) -> None:
    """Drop the temporary table ``db.temp`` (none: nothing to drop) on ``catalog`` in the background while ``spark``
    (None: no Spark session whose catalog is the table's, or none whose cache of the table can be stale) refreshes
    its cache of ``db.table``, then finish the journal record of ``swap_id``. ``created``: the temporary table as
    this process created it (dropped without reading it again). ``dropping``: that drop, started already (a swap's,
    during its flip): waited for here. A failure of either is logged as ``<what>.refresh_failed`` /
    ``<what>.temp_drop_failed``. Nothing else may use ``catalog`` meanwhile."""
    if dropping is None and temp:
        dropping = TempTableDrop(catalog, db, temp, created)
    if dropping is not None:
        dropping.start()
    if spark is not None:
        try:
            spark.catalog.refreshTable(quoted(db, table))
        except Exception as exc:  # noqa: BLE001 - never fail a committed swap on a cache refresh
            log.warning(f"{what}.refresh_failed", error=str(exc))
    if dropping is not None:
        try:
            dropping.join()
        except errors.TableSwapError as exc:  # committed already: `recover` and the janitor's sweep drop it
            log.warning(f"{what}.temp_drop_failed", temp_table=dropping.temp, error=str(exc))
    journal.finish(swap_id)


__all__ = ["TempTableDrop", "finish_committed"]
