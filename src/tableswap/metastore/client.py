"""Hive Metastore adapter: the only module (with :mod:`.lock`) that touches Thrift and hmsclient.

* Reads are retried on transport errors with tenacity, reconnecting between attempts.
* Writes are sent once. If the response is lost, the caller's ``reconcile`` re-reads the metastore
  to find out whether the write landed; it is never blindly repeated.
* Thrift exceptions become :mod:`tableswap.errors` exceptions.
"""

from __future__ import annotations

import copy
import socket
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence, TypeVar
from urllib.parse import urlsplit

from tableswap.logs import get_logger
import tenacity
from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore
from hmsclient.genthrift.hive_metastore import ttypes as tt
from thrift.protocol import TBinaryProtocol
from thrift.protocol.TProtocol import TProtocolException
from thrift.Thrift import TApplicationException
from thrift.transport import TSocket, TTransport
from thrift.transport.TTransport import TTransportException

from tableswap import errors
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.core.checks import PartitionAt, TableAt, require
from tableswap.metastore import compat
from tableswap.metastore.model import (
    EXTERNAL_TABLE,
    ROOT_PARAM,
    SWAP_ID_PARAM,
    BucketSpec,
    Column,
    LocationChange,
    LockHolder,
    NewPartition,
    PartitionInfo,
    TableInfo,
    is_stats_param,
)

log = get_logger("tableswap.metastore")

T = TypeVar("T")

TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    TTransportException,
    socket.error,
    EOFError,
    BrokenPipeError,
    ConnectionError,
)



class OutcomeUnknown(Exception):
    """Internal: a write was sent but its response was lost."""


@dataclass(frozen=True)
class TableSnapshot:
    """A table and some of its partitions, read together (by a caller holding the table lock).

    Handing it back to the flip calls saves re-reading what was just read and checked: the
    compare-and-swap expectations are verified against exactly this state. The raw metastore
    objects stay private to this adapter.
    """

    table: TableInfo
    partitions: Mapping[tuple[str, ...], PartitionInfo]
    _raw_table: Any = field(repr=False, compare=False)
    _raw_partitions: Mapping[tuple[str, ...], Any] = field(repr=False, compare=False)


def parse_uri(uri: str) -> tuple[str, int]:
    first = uri.split(",")[0].strip()
    parts = urlsplit(first if "://" in first else f"thrift://{first}")
    if parts.scheme != "thrift" or not parts.hostname:
        raise errors.ConfigurationError(
            f"metastore URI {uri!r} is not of the form thrift://HOST:PORT"
        )
    return parts.hostname, parts.port or 9083


def translate(exc: BaseException, what: str) -> errors.TableSwapError:
    """Turn a Thrift exception into a tableswap exception (message keeps the server's words)."""
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    if compat.is_unknown_method(exc):
        return compat.unknown_method_error(what, message)
    if isinstance(exc, tt.NoSuchObjectException):
        return errors.TableNotFoundError(f"{what}: {message}")
    if isinstance(exc, tt.NoSuchLockException):
        return errors.NotFoundError(f"{what}: {message}")
    if isinstance(exc, tt.AlreadyExistsException):
        return errors.MetastoreError(f"{what}: already exists: {message}")
    if isinstance(exc, (tt.InvalidOperationException, tt.InvalidObjectException)):
        return errors.MetastoreError(f"{what}: rejected by the metastore: {message}")
    if isinstance(exc, TProtocolException):
        return errors.MetastoreError(
            f"{what}: the server answered, but not in the Hive Metastore's Thrift protocol ({message}). "
            "Check the URI's port (a metastore usually listens on 9083) and whether the metastore requires "
            "SASL/Kerberos, which tableswap does not speak"
        )
    if isinstance(exc, (tt.MetaException, TApplicationException)):
        return errors.MetastoreError(f"{what}: metastore error: {message}")
    return errors.MetastoreError(f"{what}: {type(exc).__name__}: {message}")


THRIFT_ERRORS = (tt.NoSuchObjectException, tt.NoSuchLockException, tt.AlreadyExistsException,
                 tt.InvalidOperationException, tt.InvalidObjectException, tt.MetaException,
                 tt.TxnOpenException, TApplicationException, TProtocolException)


class MetastoreClient:
    """A connection to one Hive Metastore. Not thread-safe: use one per thread."""

    def __init__(
        self,
        uri: str,
        *,
        timeout_s: float = 300.0,
        connect_attempts: int = 4,
        max_wait_s: float = 8.0,
        write_batch_size: int = 10_000,
    ) -> None:
        self.uri = uri
        self.host, self.port = parse_uri(uri)
        self.timeout_s = timeout_s
        self.connect_attempts = connect_attempts
        self.max_wait_s = max_wait_s
        self.write_batch_size = write_batch_size
        self._transport: TTransport.TTransportBase | None = None
        #: The server cannot evaluate the table-parameter CAS (compat.table_cas_unsupported).
        self._table_cas_unsupported = False
        self._client: ThriftHiveMetastore.Client | None = None
        self.calls = 0  # metastore calls made, for benchmarks and tests

    def sibling(self) -> "MetastoreClient":
        """A new, unopened client to the same metastore with the same options (for another thread)."""
        return MetastoreClient(self.uri, timeout_s=self.timeout_s, connect_attempts=self.connect_attempts,
                               max_wait_s=self.max_wait_s, write_batch_size=self.write_batch_size)

    # ------------------------------------------------------------------ connection
    def _connect(self) -> None:
        sock = TSocket.TSocket(self.host, self.port)
        sock.setTimeout(int(self.timeout_s * 1000))
        transport = TTransport.TBufferedTransport(sock)
        transport.open()
        self._transport = transport
        # strictRead: a reply without the protocol's version header (not a metastore) fails at once.
        # The accelerated protocol (thrift's C extension, pure Python where it is missing) encodes and
        # decodes structs about ten times faster: thousands of partitions cost milliseconds, not seconds.
        self._client = ThriftHiveMetastore.Client(
            TBinaryProtocol.TBinaryProtocolAccelerated(transport, strictRead=True))

    def _disconnect(self) -> None:
        if self._transport is not None:
            try:
                self._transport.close()
            except Exception:  # noqa: BLE001 - closing a broken socket
                pass
        self._transport = None
        self._client = None

    def _retrying(self) -> tenacity.Retrying:
        return tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.connect_attempts),
            wait=tenacity.wait_exponential(multiplier=0.5, max=self.max_wait_s),
            retry=tenacity.retry_if_exception_type(TRANSPORT_ERRORS),
            before_sleep=self._before_retry,
            reraise=True,
        )

    def _before_retry(self, state: tenacity.RetryCallState) -> None:
        log.warning(
            "metastore.retry",
            uri=self.uri,
            attempt=state.attempt_number,
            error=repr(state.outcome.exception()) if state.outcome else None,
        )
        self._disconnect()

    def open(self) -> "MetastoreClient":
        try:
            for attempt in self._retrying():
                with attempt:
                    if self._client is None:
                        self._connect()
        except TRANSPORT_ERRORS as exc:
            raise self._unavailable(exc) from exc
        return self

    def close(self) -> None:
        self._disconnect()

    @property
    def connected(self) -> bool:
        """Open and in step with the server (a transport or protocol error disconnects)."""
        return self._client is not None

    def __enter__(self) -> "MetastoreClient":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _unavailable(self, exc: BaseException) -> errors.MetastoreUnavailableError:
        return errors.MetastoreUnavailableError(
            f"cannot reach the Hive Metastore at {self.uri} ({exc}); check that it is running and "
            "that TABLESWAP_METASTORE_URI / spark.hadoop.hive.metastore.uris point at it "
            "(for a local one: `tableswap metastore start`)"
        )

    def read(self, what: str, fn: Callable[[ThriftHiveMetastore.Client], T]) -> T:
        """Run an idempotent call, retrying transport errors with a fresh connection."""
        try:
            for attempt in self._retrying():
                with attempt:
                    if self._client is None:
                        self._connect()
                    self.calls += 1
                    return fn(self._client)  # type: ignore[arg-type]
        except TRANSPORT_ERRORS as exc:
            raise self._unavailable(exc) from exc
        except THRIFT_ERRORS as exc:
            if isinstance(exc, TProtocolException):
                self._disconnect()  # the stream is out of step
            raise translate(exc, what) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def write(self, what: str, fn: Callable[[ThriftHiveMetastore.Client], T]) -> T:
        """Send a non-idempotent call once. A lost response raises :class:`OutcomeUnknown`."""
        if self._client is None:
            self.open()
        self.calls += 1
        try:
            return fn(self._client)  # type: ignore[arg-type]
        except (*TRANSPORT_ERRORS, TProtocolException) as exc:
            # A garbled reply is as good as a lost one: the reconciling read decides.
            self._disconnect()
            log.warning("metastore.outcome_unknown", uri=self.uri, call=what, error=repr(exc))
            raise OutcomeUnknown(what) from exc
        except THRIFT_ERRORS as exc:
            raise translate(exc, what) from exc

    def write_reconciled(
        self,
        what: str,
        fn: Callable[[ThriftHiveMetastore.Client], object],
        landed: Callable[[], bool | None],
    ) -> None:
        """Send a write; if its response is lost, re-read to decide. ``landed()`` returns True
        (the write took effect), False (it did not: safe to send again once) or None (neither:
        the state is foreign — give up with :class:`CommitStateUnknownError`)."""
        for attempt in (1, 2):
            try:
                self.write(what, fn)
                return
            except OutcomeUnknown:
                state = landed()
                log.info("metastore.reconciled", call=what, landed=state, attempt=attempt)
                if state is True:
                    return
                if state is None or attempt == 2:
                    raise errors.CommitStateUnknownError(
                        f"{what}: the metastore connection was lost and the outcome cannot be "
                        "determined; run `tableswap recover` before retrying"
                    ) from None

    # ------------------------------------------------------------------ reads
    def ping(self) -> None:
        self.read("get_all_databases", lambda c: c.get_all_databases())

    def database_exists(self, db: str) -> bool:
        try:
            self.read(f"get_database({db})", lambda c: c.get_database(db))
            return True
        except errors.TableNotFoundError:
            return False

    def _get_table_raw(self, db: str, name: str) -> tt.Table:
        try:
            # The request variant: HMS 4 removed get_table (HIVE-26537); 2.3 and 3.1 have both.
            return self.read(f"get_table({db}.{name})",
                             lambda c: c.get_table_req(tt.GetTableRequest(dbName=db, tblName=name)).table)
        except errors.TableNotFoundError:
            if not self.database_exists(db):
                raise errors.TableNotFoundError(f"database {db!r} does not exist") from None
            raise errors.TableNotFoundError(f"table {db}.{name} does not exist") from None

    def get_table(self, db: str, name: str) -> TableInfo:
        return _table_info(self._get_table_raw(db, name))

    def table_exists(self, db: str, name: str) -> bool:
        try:
            self._get_table_raw(db, name)
            return True
        except errors.TableNotFoundError:
            return False

    def list_tables(self, db: str, pattern: str = "*") -> list[str]:
        return list(self.read(f"get_tables({db})", lambda c: c.get_tables(db, pattern)))

    def get_tables(self, db: str, names: Sequence[str]) -> list[TableInfo]:
        """The tables among ``names`` that exist, one ``get_table_objects_by_name_req`` call per chunk
        (HMS 4 removed the plain ``get_table_objects_by_name``)."""
        out: list[TableInfo] = []
        for start in range(0, len(names), self.write_batch_size):
            chunk = list(names[start : start + self.write_batch_size])
            raw = self.read(f"get_table_objects_by_name({db})",
                            lambda c, chunk=chunk: c.get_table_objects_by_name_req(
                                tt.GetTablesRequest(dbName=db, tblNames=chunk)).tables)
            out.extend(_table_info(t) for t in raw or [] if t is not None)
        return out

    def list_partitions(self, db: str, name: str) -> list[PartitionInfo]:
        raw = self.read(f"get_partitions({db}.{name})", lambda c: c.get_partitions(db, name, -1))
        return [_partition_info(p) for p in raw]

    def _partitions_by_names_raw(self, db: str, name: str, names: Sequence[str]) -> list[tt.Partition]:
        out: list[tt.Partition] = []
        for start in range(0, len(names), self.write_batch_size):
            chunk = list(names[start : start + self.write_batch_size])
            out.extend(
                self.read(
                    f"get_partitions_by_names({db}.{name})",
                    lambda c, chunk=chunk: c.get_partitions_by_names(db, name, chunk),
                )
            )
        return out

    def _raw_partitions(self, table: TableInfo,
                        values_list: Sequence[Sequence[str]]) -> dict[tuple[str, ...], tt.Partition]:
        names = pn.names(table.partition_key_names, values_list)
        return {tuple(p.values): p for p in self._partitions_by_names_raw(table.db, table.name, names)}

    def get_partitions(
        self, table: TableInfo, values_list: Sequence[Sequence[str]]
    ) -> dict[tuple[str, ...], PartitionInfo]:
        """The existing partitions among ``values_list``, keyed by their values."""
        return {v: _partition_info(p) for v, p in self._raw_partitions(table, values_list).items()}

    def snapshot(self, db: str, name: str, values_list: Sequence[Sequence[str]] = ()) -> TableSnapshot:
        """The table and those of ``values_list``'s partitions that exist: one ``get_table`` and
        one ``get_partitions_by_names`` per chunk."""
        raw_table = self._get_table_raw(db, name)
        table = _table_info(raw_table)
        raw_parts = self._raw_partitions(table, values_list) if values_list else {}
        return TableSnapshot(table, {v: _partition_info(p) for v, p in raw_parts.items()}, raw_table, raw_parts)

    def _raw_table_of(self, table: TableInfo, snapshot: TableSnapshot | None) -> tt.Table:
        if snapshot is not None and snapshot.table == table:
            return snapshot._raw_table
        return self._get_table_raw(table.db, table.name)

    def server_version(self) -> str | None:
        """The server's version string (fb303 ``getVersion``), or None where the server does not say."""
        try:
            version = self.read("getVersion", lambda c: c.getVersion())
        except errors.MetastoreError:
            return None
        return str(version) if version else None

    def config_value(self, name: str) -> str | None:
        """A server-side configuration value (``get_config_value``), or None if it is not readable."""
        try:
            value = self.read(f"get_config_value({name})", lambda c: c.get_config_value(name, ""))
        except (errors.MetastoreError, tt.ConfigValSecurityException):
            return None
        return value or None

    def count_locks(self) -> int:
        """The number of locks the server holds or queues (``show_locks`` over every table)."""
        resp = self.read("show_locks", lambda c: c.show_locks(tt.ShowLocksRequest()))
        return len(resp.locks or [])

    def lock_holders(self, db: str, name: str) -> list[LockHolder]:
        resp = self.read(
            f"show_locks({db}.{name})",
            lambda c: c.show_locks(tt.ShowLocksRequest(dbname=db, tablename=name)),
        )
        return [
            LockHolder(
                lock_id=e.lockid,
                state=tt.LockState._VALUES_TO_NAMES.get(e.state, str(e.state)),
                user=e.user,
                hostname=e.hostname,
                agent_info=e.agentInfo,
                acquired_at_ms=e.acquiredat,
                last_heartbeat_ms=e.lastheartbeat,
            )
            for e in (resp.locks or [])
            if (e.dbname or "").lower() == db.lower() and (e.tablename or "").lower() == name.lower()
        ]

    # ------------------------------------------------------------------ staging table
    def create_staging_table(
        self, source: TableInfo, name: str, location: str, parameters: dict[str, str],
        *, snapshot: TableSnapshot | None = None,
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
        if not table.is_external or table.purges_on_drop:
            raise errors.UnsafeOperationError(
                f"refusing to drop {db}.{name}: it is not a plain EXTERNAL table, so dropping it "
                "could delete data"
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
                       *, snapshot: TableSnapshot | None = None) -> int:
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
                lambda c, req=req: c.add_partitions_req(req),
                landed=lambda values=values: self._stamped(table, values, stamp),
            )
            calls += 1
        return calls

    def alter_partition_locations(
        self, table: TableInfo, changes: Sequence[LocationChange], stamp: dict[str, str],
        *, snapshot: TableSnapshot | None = None,
    ) -> int:
        """Repoint existing partitions, in one ``alter_partitions`` transaction per chunk.

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
        if snapshot is not None and snapshot.table == table:
            current = dict(snapshot._raw_partitions)
        else:
            current = self._raw_partitions(table, [c.values for c in changes])
        seen = snapshot if snapshot is not None and snapshot.table == table else TableSnapshot(
            table, {v: _partition_info(p) for v, p in current.items()}, None, current)
        require([PartitionAt(pn.partition_name(keys, c.values), tuple(c.values), c.expected_location) for c in changes],
                seen, table=table.qualified_name, since="since the swap was planned", then="Rerun the swap",
                changed="nothing was altered")
        ctx = tt.EnvironmentContext(properties={"DO_NOT_UPDATE_STATS": "true"})
        calls = 0
        for start in range(0, len(changes), self.write_batch_size):
            chunk = changes[start : start + self.write_batch_size]
            new_parts = []
            for change in chunk:
                old = current[tuple(change.values)]
                # Shallow copies: only the location and the parameters change, and the read objects
                # (the caller's snapshot) stay as they were.
                part = copy.copy(old)
                part.sd = copy.copy(old.sd)
                part.sd.location = change.new_location
                params = {k: v for k, v in (old.parameters or {}).items() if not is_stats_param(k)}
                params.update(change.parameters)
                params.update(stamp)
                part.parameters = params
                new_parts.append(part)
            values = [c.values for c in chunk]
            self.write_reconciled(
                f"alter_partitions({table.qualified_name}, {len(new_parts)})",
                lambda c, new_parts=new_parts: c.alter_partitions_with_environment_context(
                    table.db, table.name, new_parts, ctx
                ),
                landed=lambda values=values: self._stamped(table, values, stamp),
            )
            calls += 1
        return calls

    def drop_partitions_keep_data(self, table: TableInfo, values_list: Sequence[Sequence[str]],
                                  expected_swap_id: str | None = None) -> int:
        """Drop partitions' metadata (EXTERNAL tables only), keeping their files."""
        if not values_list:
            return 0
        if not table.is_external or table.purges_on_drop:
            raise errors.UnsafeOperationError(
                f"refusing to drop partitions of {table.qualified_name}: not a plain EXTERNAL table"
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
        *, snapshot: TableSnapshot | None = None,
    ) -> None:
        """Repoint an unpartitioned table (storage location and the datasource ``path``).

        Compare-and-swap on a fresh read under the caller's lock, plus the metastore's own
        table-parameter CAS (``expected_parameter_key/value`` on ``tableswap.swap_id``) where the
        table already carries a stamp; servers that ignore the context still get the locked check.
        """
        raw = copy.deepcopy(self._raw_table_of(table, snapshot))
        if not loc.same(raw.sd.location, expected_location):
            raise errors.SwapConflictError.of(
                table.qualified_name, [TableAt(expected_location).check(TableSnapshot(_table_info(raw), {}, raw, {}))],
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
        if cas:
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
        except errors.MetastoreError as exc:
            if "expected" in str(exc).lower() and "modified" in str(exc).lower():
                raise errors.SwapConflictError(
                    f"{table.qualified_name} changed since the swap was planned: {exc}"
                ) from exc
            if not (cas and compat.table_cas_unsupported(str(exc))) or landed() is not False:
                raise
            # The server failed to evaluate its compare-and-swap and wrote nothing (re-read above);
            # the check made under our lock on the fresh read stands: send it without the CAS.
            self._table_cas_unsupported = True
            log.warning("metastore.table_cas_unsupported", table=table.qualified_name,
                        detail=compat.TABLE_CAS_UNSUPPORTED_HINT)
            send({"DO_NOT_UPDATE_STATS": "true"})

    def clear_table_statistics(self, table: TableInfo, *, snapshot: TableSnapshot | None = None) -> int:
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


def _partition_sd_template(raw_table: tt.Table) -> tt.StorageDescriptor:
    """The table's storage descriptor as the template of a new partition's: a shallow copy, without
    the datasource ``path`` (a table-level property) in its serde parameters."""
    sd = copy.copy(raw_table.sd)
    if sd.serdeInfo is not None and sd.serdeInfo.parameters and "path" in sd.serdeInfo.parameters:
        serde = copy.copy(sd.serdeInfo)
        serde.parameters = {k: v for k, v in serde.parameters.items() if k != "path"}
        sd.serdeInfo = serde
    return sd


def _columns(fields: Sequence[tt.FieldSchema] | None) -> tuple[Column, ...]:
    return tuple(Column(f.name.lower(), (f.type or "").lower()) for f in (fields or []))


def _table_info(raw: tt.Table) -> TableInfo:
    sd = raw.sd or tt.StorageDescriptor()
    serde = sd.serdeInfo or tt.SerDeInfo()
    return TableInfo(
        db=raw.dbName.lower(),
        name=raw.tableName.lower(),
        table_type=raw.tableType or "",
        location=sd.location,
        columns=_columns(sd.cols),
        partition_keys=_columns(raw.partitionKeys),
        parameters=dict(raw.parameters or {}),
        serde_parameters=dict(serde.parameters or {}),
        serde_lib=serde.serializationLib,
        input_format=sd.inputFormat,
        output_format=sd.outputFormat,
        hive_buckets=_hive_buckets(sd),
    )


def _hive_buckets(sd: tt.StorageDescriptor) -> BucketSpec | None:
    if not sd.numBuckets or sd.numBuckets <= 0 or not sd.bucketCols:
        return None
    return BucketSpec(sd.numBuckets, tuple(c.lower() for c in sd.bucketCols),
                      tuple(o.col.lower() for o in (sd.sortCols or [])), hive=True)


def _partition_info(raw: tt.Partition) -> PartitionInfo:
    return PartitionInfo(
        values=tuple(raw.values or ()),
        location=raw.sd.location if raw.sd else None,
        parameters=dict(raw.parameters or {}),
        serde_lib=raw.sd.serdeInfo.serializationLib if raw.sd and raw.sd.serdeInfo else None,
        input_format=raw.sd.inputFormat if raw.sd else None,
    )


@contextmanager
def connect(uri: str, **kwargs: object) -> Iterator[MetastoreClient]:
    client = MetastoreClient(uri, **kwargs)  # type: ignore[arg-type]
    try:
        yield client.open()
    finally:
        client.close()


def probe(uri: str) -> None:
    """Raise unless the metastore at ``uri`` answers a real Thrift call (one attempt)."""
    with MetastoreClient(uri, connect_attempts=1, timeout_s=10) as client:
        client.ping()
