"""The metastore adapter's writes: staging tables, partition batches, table repointing, statistics.

Each write is sent once; a lost response is reconciled by re-reading (``write_reconciled``), never
repeated blindly. A mixin of :class:`~tableswap.metastore.client.MetastoreClient`, which supplies
``read``, ``write``, ``write_reconciled`` and the raw reads."""

from __future__ import annotations

import copy
import functools
from typing import TYPE_CHECKING, Callable, Sequence, TypeVar

from tableswap.logs import get_logger
from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore
from hmsclient.genthrift.hive_metastore import ttypes as tt

from tableswap import errors
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.core.catalog_port import Snapshot
from tableswap.core.checks import PartitionAt, TableAt, require
from tableswap.metastore import compat
from tableswap.core.catalog import (
    EXTERNAL_TABLE,
    ROOT_PARAM,
    SWAP_ID_PARAM,
    LocationChange,
    NewPartition,
    PartitionInfo,
    TableInfo,
    is_stats_param,
)

from tableswap.metastore.convert import TableSnapshot, _partition_info, _partition_sd_template, _table_info

log = get_logger("tableswap.metastore")

T = TypeVar("T")


class MetastoreWrites:
    """Writes of :class:`~tableswap.metastore.client.MetastoreClient` (see the module's docstring)."""

    _table_cas_unsupported: bool
    write_batch_size: int

    if TYPE_CHECKING:  # what the host, MetastoreClient, supplies (the module's docstring)
        def read(self, what: str, fn: Callable[[ThriftHiveMetastore.Client], T]) -> T: ...

        def write_reconciled(self, what: str, fn: Callable[[ThriftHiveMetastore.Client], object],
                             landed: Callable[[], bool | None]) -> None: ...

        def get_table(self, db: str, name: str) -> TableInfo: ...

        def table_exists(self, db: str, name: str) -> bool: ...

        def get_partitions(self, table: TableInfo,
                           values_list: Sequence[Sequence[str]]) -> dict[tuple[str, ...], PartitionInfo]: ...

        def _get_table_raw(self, db: str, name: str) -> tt.Table: ...

        def _raw_table_of(self, table: TableInfo, snapshot: Snapshot | None) -> tt.Table: ...

        def _partitions_by_names_raw(self, db: str, name: str, names: Sequence[str]) -> list[tt.Partition]: ...

        def _raw_partitions(self, table: TableInfo,
                            values_list: Sequence[Sequence[str]]) -> dict[tuple[str, ...], tt.Partition]: ...

    def create_staging_table(
        self, source: TableInfo, name: str, location: str, parameters: dict[str, str],
        *, snapshot: Snapshot | None = None,
    ) -> TableInfo:
        """Create an EXTERNAL copy of ``source`` (schema, partitioning, format) at ``location``.
        With ``snapshot`` (the source as just read) the source is not read again."""
        raw = copy.deepcopy(self._raw_table_of(source, snapshot))
        raw.tableName = name
        raw.tableType = EXTERNAL_TABLE
        # external.table.purge=false spelled out: dropping it must never delete data (compat).
        raw.parameters = compat.staging_table_parameters(raw.parameters or {}, parameters, is_stats_param)
        raw.sd.location = location
        if raw.sd.serdeInfo is not None and raw.sd.serdeInfo.parameters and "path" in raw.sd.serdeInfo.parameters:
            raw.sd.serdeInfo.parameters["path"] = location
        raw.privileges = None
        raw.temporary = False
        self.write_reconciled(
            f"create_table({source.db}.{name})",
            lambda c: c.create_table(raw),
            landed=lambda: True if self.table_exists(source.db, name) else False,
        )
        return _table_info(raw)

    def drop_table_keep_data(self, db: str, name: str, *, created: TableInfo | None = None) -> None:
        """Drop a table's metadata. Refuses anything but an EXTERNAL, non-purging table.

        The drop is sent with ``deleteData=false``, which deletes no file on Hive 2.3 to 4.x
        whatever the table; the check on a fresh read guards the metadata of a table that is not
        ours. ``created``: the table as this process created it moments ago (a swap's own staging
        table under its random name), checked instead of a fresh read.
        """
        if created is not None:
            table = created
        else:
            try:
                table = self.get_table(db, name)
            except errors.TableNotFoundError:
                return
        if not table.is_plain_external:
            raise errors.UnsafeOperationError(
                f"refusing to drop {db}.{name}: it is not a plain EXTERNAL table, so dropping it "
                "could delete data",
                table=f"{db}.{name}"
            )
        ctx = tt.EnvironmentContext(properties={"ifPurge": "false"})
        try:
            self.write_reconciled(
                f"drop_table({db}.{name})",
                lambda c: c.drop_table_with_environment_context(db, name, False, ctx),
                landed=lambda: not self.table_exists(db, name),
            )
        except errors.TableNotFoundError:
            return

    # ------------------------------------------------------------------ flips
    def add_partitions(self, table: TableInfo, adds: Sequence[NewPartition], stamp: dict[str, str],
                       *, snapshot: Snapshot | None = None) -> int:
        """Add partitions in one transaction per chunk of ``write_batch_size``. Returns calls made.
        The storage descriptor template is the table's, from ``snapshot`` if given."""
        if not adds:
            return 0
        template = _partition_sd_template(self._raw_table_of(table, snapshot))
        calls = 0
        for start in range(0, len(adds), self.write_batch_size):
            chunk = adds[start : start + self.write_batch_size]
            parts = []
            for add in chunk:
                sd = copy.copy(template)  # shallow: the shared parts are only serialized, never changed
                sd.location = add.location
                params = {**add.parameters, **stamp}
                parts.append(
                    tt.Partition(values=list(add.values), dbName=table.db, tableName=table.name,
                                 sd=sd, parameters=params)
                )
            req = tt.AddPartitionsRequest(dbName=table.db, tblName=table.name, parts=parts,
                                          ifNotExists=False, needResult=False)
            values = [a.values for a in chunk]
            self.write_reconciled(
                f"add_partitions({table.qualified_name}, {len(parts)})",
                functools.partial(_add_partitions, req=req),
                landed=functools.partial(self._stamped, table, values, stamp),
            )
            calls += 1
        return calls

    def alter_partition_locations(
        self, table: TableInfo, changes: Sequence[LocationChange], stamp: dict[str, str],
        *, snapshot: Snapshot | None = None,
    ) -> int:
        """Repoint existing partitions, in one ``alter_partitions`` transaction per chunk, each with the
        table's current columns (those its new files carry; a restore checks them first).

        Compare-and-swap: every partition's current location must still be ``expected_location``
        (checked on a fresh read, under the caller's table lock); otherwise nothing is altered and
        :class:`SwapConflictError` is raised. Statistics of the old files are dropped and the
        new files' ``numFiles``/``totalSize`` (from ``change.parameters``) set; ``DO_NOT_UPDATE_STATS``
        keeps the metastore from listing every directory again. With ``snapshot`` (read by the
        caller under the same lock, covering every changed partition) the check runs against it
        instead of a new read.
        """
        if not changes:
            return 0
        keys = table.partition_key_names
        if isinstance(snapshot, TableSnapshot) and snapshot.table == table:
            current = dict(snapshot._raw_partitions)
        else:
            current = self._raw_partitions(table, [c.values for c in changes])
        seen = snapshot if isinstance(snapshot, TableSnapshot) and snapshot.table == table else TableSnapshot(
            table, {v: _partition_info(p) for v, p in current.items()}, None, current)
        require([PartitionAt(pn.partition_name(keys, c.values), tuple(c.values), c.expected_location) for c in changes],
                seen, table=table.qualified_name, since="since the swap was planned", then="Rerun the swap",
                changed="nothing was altered")
        ctx = tt.EnvironmentContext(properties={"DO_NOT_UPDATE_STATS": "true"})
        # The table's columns, as a new partition gets them: the new files were written with them (a
        # partition keeps its own column list otherwise, which Hive reads it through: HIVE-17460).
        columns = list(self._raw_table_of(table, snapshot).sd.cols or [])
        calls = 0
        for start in range(0, len(changes), self.write_batch_size):
            chunk = changes[start : start + self.write_batch_size]
            new_parts = []
            for change in chunk:
                old = current[tuple(change.values)]
                # Shallow copies: only the location, the columns and the parameters change, and the read
                # objects (the caller's snapshot) stay as they were.
                part = copy.copy(old)
                part.sd = copy.copy(old.sd)
                part.sd.location = change.new_location
                part.sd.cols = columns
                params = {k: v for k, v in (old.parameters or {}).items() if not is_stats_param(k)}
                params.update(change.parameters)
                params.update(stamp)
                part.parameters = params
                new_parts.append(part)
            values = [c.values for c in chunk]
            self.write_reconciled(
                f"alter_partitions({table.qualified_name}, {len(new_parts)})",
                functools.partial(_alter_partitions, table=table, parts=new_parts, ctx=ctx),
                landed=functools.partial(self._stamped, table, values, stamp),
            )
            calls += 1
        return calls

    def drop_partitions_keep_data(self, table: TableInfo, values_list: Sequence[Sequence[str]],
                                  expected_swap_id: str | None = None) -> int:
        """Drop partitions' metadata (EXTERNAL tables only), keeping their files."""
        if not values_list:
            return 0
        if not table.is_plain_external:
            raise errors.UnsafeOperationError(
                f"refusing to drop partitions of {table.qualified_name}: not a plain EXTERNAL table",
                table=table.qualified_name
            )
        names = pn.names(table.partition_key_names, values_list)
        req = tt.DropPartitionsRequest(
            dbName=table.db, tblName=table.name,
            parts=tt.RequestPartsSpec(names=names), deleteData=False, ifExists=True,
            needResult=False,
            environmentContext=tt.EnvironmentContext(properties={"ifPurge": "false"}),
        )
        self.write_reconciled(
            f"drop_partitions({table.qualified_name}, {len(names)})",
            lambda c: c.drop_partitions_req(req),
            landed=lambda: not self._partitions_by_names_raw(table.db, table.name, names),
        )
        return 1

    def alter_table_location(
        self, table: TableInfo, expected_location: str | None, new_location: str,
        stamp: dict[str, str], extra_parameters: dict[str, str] | None = None,
        *, snapshot: Snapshot | None = None,
    ) -> None:
        """Repoint an unpartitioned table (storage location and the datasource ``path``).

        Compare-and-swap on a fresh read under the caller's lock, plus the metastore's own
        table-parameter CAS (``expected_parameter_key/value`` on ``tableswap.swap_id``) where the
        table already carries a stamp; servers that ignore the context still get the locked check.
        """
        raw = copy.deepcopy(self._raw_table_of(table, snapshot))
        require([TableAt(expected_location)], TableSnapshot(_table_info(raw), {}, raw, {}), table=table.qualified_name,
                since="since the swap was planned", then="Rerun the swap", changed="nothing was altered")
        previous_stamp = (raw.parameters or {}).get(SWAP_ID_PARAM)
        raw.sd.location = new_location
        if raw.sd.serdeInfo is not None and raw.sd.serdeInfo.parameters and "path" in raw.sd.serdeInfo.parameters:
            raw.sd.serdeInfo.parameters["path"] = new_location
        params = {k: v for k, v in (raw.parameters or {}).items() if not is_stats_param(k)}
        params.setdefault(ROOT_PARAM, table.root or expected_location or new_location)
        params.update(extra_parameters or {})
        params.update(stamp)
        raw.parameters = params
        props = {"DO_NOT_UPDATE_STATS": "true"}
        cas = previous_stamp is not None and not self._table_cas_unsupported
        if cas and previous_stamp is not None:  # (cas implies the stamp: said again for the type checker)
            props["expected_parameter_key"] = SWAP_ID_PARAM
            props["expected_parameter_value"] = previous_stamp

        def landed() -> bool | None:
            now = self._get_table_raw(table.db, table.name)
            if (now.parameters or {}).get(SWAP_ID_PARAM) == stamp.get(SWAP_ID_PARAM) and loc.same(
                now.sd.location, new_location
            ):
                return True
            if loc.same(now.sd.location, expected_location):
                return False
            return None

        def send(properties: dict[str, str]) -> None:
            ctx = tt.EnvironmentContext(properties=properties)
            self.write_reconciled(
                f"alter_table({table.qualified_name})",
                lambda c: c.alter_table_with_environment_context(table.db, table.name, raw, ctx),
                landed=landed,
            )

        try:
            send(props)
        except errors.CatalogError as exc:
            if "expected" in str(exc).lower() and "modified" in str(exc).lower():
                raise errors.SwapConflictError(
                    f"{table.qualified_name} changed since the swap was planned: {exc}",
                    table=table.qualified_name
                ) from exc
            if not (cas and compat.table_cas_unsupported(str(exc))) or landed() is not False:
                raise
            # The server failed to evaluate its compare-and-swap and wrote nothing (re-read above);
            # the check made under our lock on the fresh read stands: send it without the CAS.
            self._table_cas_unsupported = True
            log.warning("metastore.table_cas_unsupported", table=table.qualified_name,
                        detail=compat.TABLE_CAS_UNSUPPORTED_HINT)
            send({"DO_NOT_UPDATE_STATS": "true"})

    def clear_table_statistics(self, table: TableInfo, *, snapshot: Snapshot | None = None) -> int:
        """Drop table-level statistics (Hive's and Spark's) after partitions changed under them,
        as Spark itself does after a write. One ``alter_table`` call, only if there is any; the
        location and everything else are left as they are. Returns the calls made."""
        raw = copy.deepcopy(self._raw_table_of(table, snapshot))
        params = raw.parameters or {}
        if not any(is_stats_param(k) for k in params):
            return 0
        raw.parameters = {k: v for k, v in params.items() if not is_stats_param(k)}
        ctx = tt.EnvironmentContext(properties={"DO_NOT_UPDATE_STATS": "true"})
        # Idempotent: resending it after a lost response yields the same table.
        self.read(f"alter_table({table.qualified_name}, statistics)",
                  lambda c: c.alter_table_with_environment_context(table.db, table.name, raw, ctx))
        return 1

    def _stamped(self, table: TableInfo, values: Sequence[Sequence[str]], stamp: dict[str, str]) -> bool | None:
        """Reconciliation for a partition batch: all carry our stamp (True), none do (False)."""
        swap_id = stamp.get(SWAP_ID_PARAM)
        found = self.get_partitions(table, values)
        ours = sum(1 for v in values if tuple(v) in found and found[tuple(v)].swap_id == swap_id)
        if ours == len(values):
            return True
        if ours == 0:
            return False
        return None


def _add_partitions(c: ThriftHiveMetastore.Client, req: tt.AddPartitionsRequest) -> object:
    return c.add_partitions_req(req)


def _alter_partitions(c: ThriftHiveMetastore.Client, table: TableInfo, parts: list[tt.Partition],
                      ctx: tt.EnvironmentContext) -> object:
    return c.alter_partitions_with_environment_context(table.db, table.name, parts, ctx)
