"""The Glue adapter's writes: temporary tables, the partition batches, the table repoint, statistics.

Glue's batch calls (``BatchCreatePartition`` and ``BatchUpdatePartition``: 100 entries, ``BatchDeletePartition``:
25) are not transactions: each entry succeeds or fails on its own and the response lists the failures. So
every entry is accounted for: an entry reported failed is an error unless a re-read shows it landed with
this swap's stamp (an ``AlreadyExistsException`` for a partition carrying our stamp is ours); an unknown
outcome (a lost response, or a server error such as ``InternalServiceException`` or
``OperationTimeoutException``, which Glue may answer after applying the request) is reconciled by re-reading
the stamps of the chunk's entries, and only the entries shown not to have landed are sent again, once.
The table repoint is fenced by Glue's own compare-and-swap, ``UpdateTable`` with the ``VersionId`` read
under the lock (a stale one: ``ConcurrentModificationException``, our
:class:`~tableswap.errors.SwapConflictError`).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Sequence, TypeVar

from tableswap import errors
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.core.catalog import (EXTERNAL_TABLE, ROOT_PARAM, SWAP_ID_PARAM, LocationChange, NewPartition,
                                    TableInfo, is_stats_param)
from tableswap.core.catalog_port import Snapshot
from tableswap.core.checks import PartitionAt, TableAt, require
from tableswap.core.catalog_port import OutcomeUnknown
from tableswap.glue.boto import MAX_ADD, MAX_ALTER, MAX_DROP
from tableswap.glue.convert import (GlueSnapshot, partition_info, partition_input, partition_sd_template,
                                    table_info, table_input)
from tableswap.logs import get_logger

log = get_logger("tableswap.glue")

_NOT_COPIED_TO_STAGING = frozenset({"transient_lastDdlTime", "external.table.purge", "TRANSLATED_TO_EXTERNAL",
                                    "EXTERNAL"})

Values = tuple[str, ...]
T = TypeVar("T")


def _listing(failed: dict[Values, str], keys: Sequence[str]) -> list[str]:
    return [f"{pn.partition_name(keys, v)}: {why}" for v, why in failed.items()]


def _entry_error(detail: dict[str, Any] | None) -> str:
    detail = detail or {}
    return f"{detail.get('ErrorCode', 'error')}: {detail.get('ErrorMessage', '')}".rstrip(": ")


class GlueWrites:
    """Writes of :class:`~tableswap.glue.client.GlueClient`, a mixin as
    :class:`~tableswap.metastore.writes.MetastoreWrites` is of the Thrift client (see the module's docstring)."""

    write_batch_size: int
    region: str | None

    if TYPE_CHECKING:  # what the host, GlueClient, supplies
        def write(self, what: str, fn: Callable[[Any], T]) -> T: ...

        def get_table(self, db: str, name: str) -> TableInfo: ...

        def table_exists(self, db: str, name: str) -> bool: ...

        def _get_table_raw(self, db: str, name: str) -> dict[str, Any]: ...

        def _raw_table_of(self, table: TableInfo, snapshot: Snapshot | None) -> dict[str, Any]: ...

        def _raw_partitions(self, table: TableInfo,
                            values_list: Sequence[Sequence[str]]) -> dict[tuple[str, ...], Any]: ...

    # ------------------------------------------------------------------ temporary tables
    def create_staging_table(self, source: TableInfo, name: str, location: str, parameters: dict[str, str],
                             *, snapshot: Snapshot | None = None) -> TableInfo:
        """Create an EXTERNAL_TABLE copy of ``source`` (columns, partition keys, storage descriptor: its
        format and serde) at ``location``."""
        raw = self._raw_table_of(source, snapshot)
        ti = table_input(raw)
        ti["Name"] = name
        ti["TableType"] = EXTERNAL_TABLE
        params = {k: v for k, v in (ti.get("Parameters") or {}).items()
                  if not is_stats_param(k) and not k.startswith("tableswap.") and k not in _NOT_COPIED_TO_STAGING}
        params.update(parameters)
        params["EXTERNAL"] = "TRUE"
        ti["Parameters"] = params
        sd = ti.setdefault("StorageDescriptor", {})
        sd["Location"] = location
        serde = sd.get("SerdeInfo") or {}
        if "path" in (serde.get("Parameters") or {}):
            serde["Parameters"]["path"] = location
        what = f"CreateTable({source.db}.{name})"
        try:
            self.write(what, lambda g: g.create_table(DatabaseName=source.db, TableInput=ti))
        except OutcomeUnknown:
            if not self.table_exists(source.db, name):
                try:
                    self.write(what, lambda g: g.create_table(DatabaseName=source.db, TableInput=ti))
                except OutcomeUnknown as again:
                    if not self.table_exists(source.db, name):
                        raise errors.CatalogUnavailableError(
                            f"{what}: the outcome was unknown twice ({again.why}) and the table was not "
                            "created") from None
        return table_info({**ti, "DatabaseName": source.db}, self.region)

    def drop_table_keep_data(self, db: str, name: str, *, created: TableInfo | None = None) -> None:
        """Delete a table's metadata (Glue's ``DeleteTable`` never deletes data). Refuses anything but an
        EXTERNAL table, as on the Hive Metastore: the check guards the metadata of a table not ours."""
        if created is not None:
            table = created
        else:
            try:
                table = self.get_table(db, name)
            except errors.TableNotFoundError:
                return
        if not table.is_external:
            raise errors.UnsafeOperationError(
                f"refusing to drop {db}.{name}: it is not an EXTERNAL table",
                table=f"{db}.{name}")
        what = f"DeleteTable({db}.{name})"
        for attempt in (1, 2):
            try:
                self.write(what, lambda g: g.delete_table(DatabaseName=db, Name=name))
                return
            except errors.TableNotFoundError:
                return
            except OutcomeUnknown as unknown:
                if not self.table_exists(db, name):
                    return
                if attempt == 2:
                    raise errors.CommitStateUnknownError(f"{what}: the outcome was unknown twice ({unknown.why}); "
                                                         "the table is still there",
                              table=f"{db}.{name}") from None

    # ------------------------------------------------------------------ the flip
    def _per_entry(self, what: str, table: TableInfo, entries: dict[Values, Any], limit: int,
                   send: Callable[[Any, list[Any]], dict[str, Any]],
                   errors_of: Callable[[dict[str, Any]], dict[Values, Any]],
                   state: Callable[[list[Values], dict[Values, Any]],
                                   tuple[set[Values], set[Values], dict[Values, str]]],
                   accept: Callable[[Any], bool] = lambda detail: False) -> int:
        """Send ``entries`` (values → the call's entry) in chunks of ``limit`` with per-entry accounting.

        ``state(values, raw)`` classifies ``values`` from a re-read (``raw``: the partitions found): those that
        landed, those that did not and may be sent (again), and the foreign ones (value: why). ``accept``:
        a per-entry error that means done (a drop's ``EntityNotFoundException``). Returns calls made."""
        keys = table.partition_key_names
        calls = 0
        items = list(entries)
        for start in range(0, len(items), limit):
            pending = items[start:start + limit]
            for attempt in (1, 2):
                try:
                    resp = self.write(f"{what}({table.qualified_name}, {len(pending)})",
                                      functools.partial(lambda g, batch: send(g, batch),
                                                        batch=[entries[v] for v in pending]))
                    calls += 1
                except OutcomeUnknown as unknown:
                    calls += 1
                    landed, absent, foreign = state(pending, self._raw_partitions(table, pending))
                    log.info("glue.reconciled", call=what, landed=len(landed), not_landed=len(absent),
                             foreign=len(foreign), attempt=attempt)
                    if foreign:
                        raise errors.CommitStateUnknownError(
                            f"{what}({table.qualified_name}): {unknown.why}, and {len(foreign)} entries are in "
                            f"a state this swap did not write: {errors.listing(_listing(foreign, keys))}; run "
                            "`tableswap recover` before retrying", table=table.qualified_name) from None
                    pending = [v for v in pending if v in absent]
                    if not pending:
                        break
                    if attempt == 2:
                        raise errors.CommitStateUnknownError(
                            f"{what}({table.qualified_name}): the outcome was unknown twice ({unknown.why}); "
                            f"{len(pending)} entries have not landed; run `tableswap recover` before retrying",
                            table=table.qualified_name) from None
                    continue
                failed = {v: d for v, d in errors_of(resp).items() if not accept(d)}
                if failed:
                    # Per entry: an error unless a re-read shows it landed with our stamp.
                    landed, _absent, _foreign = state(list(failed), self._raw_partitions(table, list(failed)))
                    bad = {v: _entry_error(d) for v, d in failed.items() if v not in landed}
                    if bad:
                        raise errors.CatalogError(
                            f"{what}({table.qualified_name}): Glue refused {len(bad)} of {len(pending)} entries "
                            f"(the others were applied): {errors.listing(_listing(bad, keys))}",
                            table=table.qualified_name)
                break
        return calls

    def add_partitions(self, table: TableInfo, adds: Sequence[NewPartition], stamp: dict[str, str],
                       *, snapshot: Snapshot | None = None) -> int:
        """``BatchCreatePartition`` in chunks of at most 100 (and ``write_batch_size``); returns calls made.
        Each partition's storage descriptor is the table's, at its own location."""
        if not adds:
            return 0
        template = partition_sd_template(self._raw_table_of(table, snapshot))
        swap_id = stamp.get(SWAP_ID_PARAM)
        entries: dict[Values, Any] = {}
        for add in adds:
            sd = dict(template, Location=add.location)
            entries[tuple(add.values)] = {"Values": list(add.values), "StorageDescriptor": sd,
                                          "Parameters": {**add.parameters, **stamp}}

        def state(values: list[Values], found: dict[Values, Any]) -> tuple[set[Values], set[Values], dict[Values, str]]:
            landed = {v for v in values if v in found
                      and (found[v].get("Parameters") or {}).get(SWAP_ID_PARAM) == swap_id}
            foreign = {v: f"exists with swap id {(found[v].get('Parameters') or {}).get(SWAP_ID_PARAM)!r}"
                       for v in values if v in found and v not in landed}
            return landed, {v for v in values if v not in found}, foreign

        return self._per_entry(
            "BatchCreatePartition", table, entries, min(MAX_ADD, self.write_batch_size),
            lambda g, chunk: g.batch_create_partition(DatabaseName=table.db, TableName=table.name,
                                                      PartitionInputList=chunk),
            lambda resp: {tuple(e["PartitionValues"]): e.get("ErrorDetail") for e in resp.get("Errors") or []},
            state)

    def alter_partition_locations(self, table: TableInfo, changes: Sequence[LocationChange], stamp: dict[str, str],
                                  *, snapshot: Snapshot | None = None) -> int:
        """Repoint existing partitions with ``BatchUpdatePartition``, in chunks of at most 100.

        Compare-and-swap: every partition must still be at ``expected_location`` (checked on ``snapshot``,
        read under the caller's lock, or on a fresh read); otherwise nothing is sent and
        :class:`SwapConflictError` is raised. The old files' statistics are dropped, ``change.parameters``
        and the stamp set, the table's current columns given (those the new files carry)."""
        if not changes:
            return 0
        keys = table.partition_key_names
        if isinstance(snapshot, GlueSnapshot) and snapshot.table == table:
            current = dict(snapshot._raw_partitions)
            seen = snapshot
        else:
            current = self._raw_partitions(table, [c.values for c in changes])
            seen = GlueSnapshot(table, {v: partition_info(p) for v, p in current.items()}, None, current)
        require([PartitionAt(pn.partition_name(keys, c.values), tuple(c.values), c.expected_location)
                 for c in changes], seen, table=table.qualified_name, since="since the swap was planned",
                then="Rerun the swap", changed="nothing was altered")
        swap_id = stamp.get(SWAP_ID_PARAM)
        by_values = {tuple(c.values): c for c in changes}
        # The table's columns, as a new partition gets them: the new files were written with them.
        columns = (self._raw_table_of(table, snapshot).get("StorageDescriptor") or {}).get("Columns")
        entries: dict[Values, Any] = {}
        for change in changes:
            pi = partition_input(current[tuple(change.values)])
            sd = pi.setdefault("StorageDescriptor", {})
            sd["Location"] = change.new_location
            if columns is not None:
                sd["Columns"] = [dict(c) for c in columns]
            params = {k: v for k, v in (pi.get("Parameters") or {}).items() if not is_stats_param(k)}
            params.update(change.parameters)
            params.update(stamp)
            pi["Parameters"] = params
            entries[tuple(change.values)] = {"PartitionValueList": list(change.values), "PartitionInput": pi}

        def state(values: list[Values], found: dict[Values, Any]) -> tuple[set[Values], set[Values], dict[Values, str]]:
            landed, absent, foreign = set(), set(), {}
            for v in values:
                p = found.get(v)
                where = ((p or {}).get("StorageDescriptor") or {}).get("Location")
                if p is not None and (p.get("Parameters") or {}).get(SWAP_ID_PARAM) == swap_id \
                        and loc.same(where, by_values[v].new_location):
                    landed.add(v)
                elif p is not None and loc.same(where, by_values[v].expected_location):
                    absent.add(v)
                else:
                    foreign[v] = "missing" if p is None else f"at {where}"
            return landed, absent, foreign

        return self._per_entry(
            "BatchUpdatePartition", table, entries, min(MAX_ALTER, self.write_batch_size),
            lambda g, chunk: g.batch_update_partition(DatabaseName=table.db, TableName=table.name, Entries=chunk),
            lambda resp: {tuple(e["PartitionValueList"]): e.get("ErrorDetail") for e in resp.get("Errors") or []},
            state)

    def drop_partitions_keep_data(self, table: TableInfo, values_list: Sequence[Sequence[str]],
                                  expected_swap_id: str | None = None) -> int:
        """``BatchDeletePartition`` in chunks of at most 25 (Glue deletes metadata only, never files). A
        partition already gone counts as dropped."""
        if not values_list:
            return 0
        if not table.is_external:
            raise errors.UnsafeOperationError(
                f"refusing to drop partitions of {table.qualified_name}: not an EXTERNAL table",
                table=table.qualified_name)
        entries = {tuple(v): {"Values": list(v)} for v in values_list}

        def state(values: list[Values], found: dict[Values, Any]) -> tuple[set[Values], set[Values], dict[Values, str]]:
            return {v for v in values if v not in found}, {v for v in values if v in found}, {}

        return self._per_entry(
            "BatchDeletePartition", table, entries, min(MAX_DROP, self.write_batch_size),
            lambda g, chunk: g.batch_delete_partition(DatabaseName=table.db, TableName=table.name,
                                                      PartitionsToDelete=chunk),
            lambda resp: {tuple(e["PartitionValues"]): e.get("ErrorDetail") for e in resp.get("Errors") or []},
            state, accept=lambda d: (d or {}).get("ErrorCode") == "EntityNotFoundException")

    def alter_table_location(self, table: TableInfo, expected_location: str | None, new_location: str,
                             stamp: dict[str, str], extra_parameters: dict[str, str] | None = None,
                             *, snapshot: Snapshot | None = None) -> None:
        """Repoint an unpartitioned table (its location and the datasource ``path``).

        Compare-and-swap twice over: the location is checked on the read (``snapshot``, under the
        caller's lock) and ``UpdateTable`` carries that read's ``VersionId``, so Glue refuses the update if
        anything changed the table since (``ConcurrentModificationException`` → :class:`SwapConflictError`).
        An unknown outcome (a lost response, a server error) is reconciled by a re-read; a resend carries the
        same ``VersionId``, so it can never apply twice."""
        raw = self._raw_table_of(table, snapshot)
        current = table_info(raw, self.region)
        require([TableAt(expected_location)], GlueSnapshot(current, {}, raw, {}), table=table.qualified_name,
                since="since the swap was planned", then="Rerun the swap", changed="nothing was altered")
        ti = table_input(raw)
        sd = ti.setdefault("StorageDescriptor", {})
        sd["Location"] = new_location
        serde = sd.get("SerdeInfo") or {}
        if "path" in (serde.get("Parameters") or {}):
            serde["Parameters"]["path"] = new_location
        params = {k: v for k, v in (ti.get("Parameters") or {}).items() if not is_stats_param(k)}
        params.setdefault(ROOT_PARAM, table.root or expected_location or new_location)
        params.update(extra_parameters or {})
        params.update(stamp)
        ti["Parameters"] = params
        self._update_table(table, ti, raw.get("VersionId"), lambda now: (
            True if (now.get("Parameters") or {}).get(SWAP_ID_PARAM) == stamp.get(SWAP_ID_PARAM)
            and loc.same((now.get("StorageDescriptor") or {}).get("Location"), new_location)
            else False if loc.same((now.get("StorageDescriptor") or {}).get("Location"), expected_location)
            else None))

    def _update_table(self, table: TableInfo, ti: dict[str, Any], version_id: str | None,
                      landed: Callable[[dict[str, Any]], bool | None]) -> None:
        what = f"UpdateTable({table.qualified_name})"
        kwargs: dict[str, Any] = {"DatabaseName": table.db, "TableInput": ti, "SkipArchive": True}
        if version_id is not None:
            kwargs["VersionId"] = version_id
        for attempt in (1, 2):
            try:
                self.write(what, lambda g: g.update_table(**kwargs))
                return
            except errors.SwapConflictError as exc:
                raise errors.SwapConflictError(
                    f"{table.qualified_name} changed since it was read under the lock (Glue refused the update: "
                    f"its VersionId {version_id} is no longer current); nothing was altered. Rerun it",
                    table=table.qualified_name) from exc
            except OutcomeUnknown as unknown:
                state = landed(self._get_table_raw(table.db, table.name))
                log.info("glue.reconciled", call=what, landed=state, attempt=attempt)
                if state is True:
                    return
                if state is None or attempt == 2:
                    raise errors.CommitStateUnknownError(
                        f"{what}: {unknown.why}, and the outcome cannot be determined from a re-read; run "
                        "`tableswap recover` before retrying", table=table.qualified_name) from None

    def clear_table_statistics(self, table: TableInfo, *, snapshot: Snapshot | None = None) -> int:
        """Drop table-level statistics after partitions changed under them; one ``UpdateTable`` (fenced by
        the ``VersionId`` of the read) only if there is any. Returns the calls made."""
        raw = self._raw_table_of(table, snapshot)
        params = raw.get("Parameters") or {}
        if not any(is_stats_param(k) for k in params):
            return 0
        ti = table_input(raw)
        ti["Parameters"] = {k: v for k, v in params.items() if not is_stats_param(k)}
        stats = frozenset(k for k in params if is_stats_param(k))
        self._update_table(table, ti, raw.get("VersionId"), lambda now: (
            not any(k in stats for k in (now.get("Parameters") or {}))))
        return 1
