"""Hive Metastore adapter: with :mod:`.lock` and :mod:`.projection`, the only modules that touch Thrift
and hmsclient.

* Reads are retried on transport errors with tenacity, reconnecting between attempts.
* Writes are sent once. If the response is lost, the caller's ``reconcile`` re-reads the metastore
  to find out whether the write landed; it is never blindly repeated.
* Thrift exceptions become :mod:`tableswap.errors` exceptions.
"""

from __future__ import annotations

import functools
import socket
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence, TypeVar
from urllib.parse import urlsplit

from tableswap.logs import get_logger
import tenacity
from hmsclient.genthrift.hive_metastore import ThriftHiveMetastore
from hmsclient.genthrift.hive_metastore import ttypes as tt
from thrift.protocol import TBinaryProtocol
from thrift.protocol.TProtocol import TProtocolException
from thrift.Thrift import TApplicationException
from thrift.transport import TTransport
from thrift.transport.TTransport import TTransportException

from tableswap import errors
from tableswap.core import partitions as pn
from tableswap.metastore import compat, notifications, projection, security as sec
from tableswap.core.security import NONE as NO_SECURITY, MetastoreSecurity
from tableswap.core.catalog import LockHolder, PartitionInfo, TableInfo
from tableswap.core.catalog_port import OutcomeUnknown, Snapshot
from tableswap.core.notifications import NotificationEvent

from tableswap.metastore.convert import (  # noqa: F401 (TableSnapshot is part of the API)
    TableSnapshot, _partition_info, _table_info,
)
from tableswap.metastore.writes import MetastoreWrites

log = get_logger("tableswap.metastore")

T = TypeVar("T")
_Client = TypeVar("_Client", bound="MetastoreClient")  # open() returns the adapter it is called on

TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    TTransportException,
    socket.error,
    EOFError,
    BrokenPipeError,
    ConnectionError,
)



#: Partitions per read call when a whole table is read (names first, then the partitions by name).
READ_PAGE = 1000
#: Partitions per call when only their locations are read (HMS 4.x's projection: a fraction of the size).
LOCATION_PAGE = 2000


def parse_uris(uri: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` of each metastore of ``uri``: ``thrift://HOST[:PORT]`` (port 9083 by default),
    or a comma-separated list of them, as ``hive.metastore.uris`` names a highly available metastore
    (several servers on one database). Anything else is a :class:`ConfigurationError`."""
    entries = [e.strip() for e in (uri or "").split(",")]
    if not any(entries):
        raise errors.ConfigurationError("the metastore URI is empty: set it as thrift://HOST:PORT")
    out = []
    for entry in entries:
        shown = entry.split("://", 1)[0] + "://" + entry.split("://", 1)[1].rsplit("@", 1)[-1] if "@" in entry \
            and "://" in entry else entry  # never echo user-info: it may carry a password
        bad = errors.ConfigurationError(
            f"metastore URI {shown!r} is not of the form thrift://HOST:PORT (a highly available metastore is a "
            "comma-separated list: thrift://HOST1:9083,thrift://HOST2:9083; the AWS Glue Data Catalog is "
            "glue://REGION or glue://)")
        if not entry:
            raise bad
        try:
            parts = urlsplit(entry)
            port = parts.port
        except ValueError:
            raise bad from None
        if parts.scheme.lower() != "thrift" or not parts.hostname or parts.path not in ("", "/") \
                or parts.query or parts.fragment or parts.username or parts.password:
            raise bad
        out.append((parts.hostname, port or 9083))
    return out


def parse_uri(uri: str) -> tuple[str, int]:
    """The first metastore of ``uri`` (see :func:`parse_uris`)."""
    return parse_uris(uri)[0]


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
        return errors.CatalogError(f"{what}: already exists: {message}")
    if isinstance(exc, (tt.InvalidOperationException, tt.InvalidObjectException)):
        return errors.CatalogError(f"{what}: rejected by the metastore: {message}")
    if isinstance(exc, TProtocolException):
        return errors.CatalogError(
            f"{what}: the server answered, but not in the Hive Metastore's Thrift protocol ({message}). "
            "Check the URI's port (a metastore usually listens on 9083) and whether the metastore requires "
            "TLS (hive.metastore.use.SSL: set tls = true, TABLESWAP_METASTORE_TLS=true; docs/security.md)"
        )
    if isinstance(exc, (tt.MetaException, TApplicationException)):
        return compat.charset_refusal(what, message) or errors.CatalogError(f"{what}: metastore error: {message}")
    return errors.CatalogError(f"{what}: {type(exc).__name__}: {message}")


THRIFT_ERRORS = (tt.NoSuchObjectException, tt.NoSuchLockException, tt.AlreadyExistsException,
                 tt.InvalidOperationException, tt.InvalidObjectException, tt.MetaException,
                 tt.TxnOpenException, TApplicationException, TProtocolException)


class MetastoreClient(MetastoreWrites):
    """A connection to one Hive Metastore. Not thread-safe: use one per thread."""

    def __init__(
        self,
        uri: str,
        *,
        timeout_s: float = 300.0,
        connect_attempts: int = 4,
        max_wait_s: float = 8.0,
        write_batch_size: int = 10_000,
        security: MetastoreSecurity = NO_SECURITY,
    ) -> None:
        self.uri = uri
        #: Kerberos (SASL/GSSAPI) and TLS on the Thrift port (docs/security.md); the default: plain Thrift.
        self.security = security
        #: Who the metastore accepted on the last Kerberos connection (None: no Kerberos, or not yet open).
        self.authenticated_as: str | None = None
        #: The servers of the metastore, tried in turn (a highly available metastore names several).
        self.endpoints = parse_uris(uri)
        self._endpoint = 0  # the one to try first: the last that answered, the next after a failure
        self.host, self.port = self.endpoints[0]
        self.timeout_s = timeout_s
        self.connect_attempts = connect_attempts
        self.max_wait_s = max_wait_s
        self.write_batch_size = write_batch_size
        self._transport: TTransport.TTransportBase | None = None
        #: The server cannot evaluate the table-parameter CAS (compat.table_cas_unsupported).
        self._table_cas_unsupported = False
        self._client: ThriftHiveMetastore.Client | None = None
        #: Whether the server answers the location-only partition read (:mod:`.projection`, HMS 4.x);
        #: None until the first try.
        self._projection: bool | None = None
        self.calls = 0  # metastore calls made, for benchmarks and tests

    def sibling(self: _Client) -> _Client:
        """A new, unopened client to the same metastore with the same options (for another thread)."""
        return type(self)(self.uri, timeout_s=self.timeout_s, connect_attempts=self.connect_attempts,
                               max_wait_s=self.max_wait_s, write_batch_size=self.write_batch_size,
                               security=self.security)

    # ------------------------------------------------------------------ connection
    def _connect(self) -> None:
        """Connect to the first server that answers, starting with the current one."""
        error: BaseException | None = None
        for i in range(len(self.endpoints)):
            index = (self._endpoint + i) % len(self.endpoints)
            host, port = self.endpoints[index]
            transport, sasl = sec.transport(host, port, int(self.timeout_s * 1000), self.security, uri=self.uri)
            try:
                transport.open()
            except Exception as exc:
                if self.security.secured:
                    # A failed handshake is not a server that is down: no retry, no next server.
                    refused = sec.handshake_error(exc, uri=self.uri, host=host, port=port, security=self.security)
                    if refused is not None:
                        try:
                            transport.close()
                        except Exception:  # noqa: BLE001 - closing a half-open socket
                            pass
                        if refused is exc:  # already a TableSwapError (raised by the TLS socket)
                            raise
                        raise refused from exc
                if not isinstance(exc, TRANSPORT_ERRORS):
                    raise
                error = exc
                if len(self.endpoints) > 1:
                    log.info("metastore.server_unavailable", host=host, port=port, error=str(exc))
                continue
            if index != self._endpoint:
                log.warning("metastore.failover", uri=self.uri, to=f"{host}:{port}")
            self._endpoint, self.host, self.port = index, host, port
            self.authenticated_as = sec.authenticated_user(sasl)
            break
        else:
            assert error is not None
            raise error
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
        # One event per attempt at info; at the default level the final error alone summarises them.
        log.info(
            "metastore.retry",
            uri=self.uri,
            attempt=state.attempt_number,
            error=repr(state.outcome.exception()) if state.outcome else None,
        )
        self._disconnect()
        self._next_server()

    def _next_server(self) -> None:
        """After a transport error: a highly available metastore tries its next server first."""
        if len(self.endpoints) > 1:
            self._endpoint = (self._endpoint + 1) % len(self.endpoints)

    def open(self: _Client) -> _Client:
        try:
            for attempt in self._retrying():
                with attempt:
                    if self._client is None:
                        self._connect()
        except TRANSPORT_ERRORS as exc:
            raise self._unavailable(exc, self.connect_attempts) from exc
        return self

    def close(self) -> None:
        self._disconnect()

    @property
    def connected(self) -> bool:
        """Open and in step with the server (a transport or protocol error disconnects)."""
        return self._client is not None

    def __enter__(self: _Client) -> _Client:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _unavailable(self, exc: BaseException, attempts: int | None = None) -> errors.CatalogUnavailableError:
        tried = f", {attempts} attempts" if attempts and attempts > 1 else ""
        check = ("check that it is running and that TABLESWAP_METASTORE_URI / spark.hadoop.hive.metastore.uris "
                 "point at it (for a local one: `tableswap metastore start`)")
        if isinstance(exc, TTransportException) and exc.type == TTransportException.END_OF_FILE:
            # What a metastore that requires SASL does to a plain Thrift client (seen with Hive 4.0.1 and
            # metastore.authentication=CONFIG: "TSocket read 0 bytes"), as does a proxy without a backend.
            if not self.security.secured:
                check = ("the server accepted the connection and closed it without answering: a metastore that "
                         "requires Kerberos (hive.metastore.sasl.enabled; Hive 4: metastore.authentication) or TLS "
                         "(hive.metastore.use.SSL) does this to a plain Thrift client: set kerberos = true "
                         "(TABLESWAP_METASTORE_KERBEROS=true) or tls = true (TABLESWAP_METASTORE_TLS=true), "
                         "docs/security.md; otherwise " + check)
        return errors.CatalogUnavailableError(f"cannot reach the Hive Metastore at {self.uri} ({exc}{tried}); {check}")

    def read(self, what: str, fn: Callable[[ThriftHiveMetastore.Client], T]) -> T:
        """Run an idempotent call, retrying transport errors with a fresh connection."""
        try:
            for attempt in self._retrying():
                with attempt:
                    if self._client is None:
                        self._connect()
                    self.calls += 1
                    return fn(self._client)
        except TRANSPORT_ERRORS as exc:
            raise self._unavailable(exc, self.connect_attempts) from exc
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
            return fn(self._client)
        except (*TRANSPORT_ERRORS, TProtocolException) as exc:
            # A garbled reply is as good as a lost one: the reconciling read decides (on the next server of
            # a highly available metastore; the write itself is never sent again without that read).
            self._disconnect()
            self._next_server()
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
        self.list_databases()

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
            raise errors.TableNotFoundError.of(db, name, database_exists=self.database_exists(db)) from None

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
                            functools.partial(_tables_by_name, db=db, names=chunk))
            out.extend(_table_info(t) for t in raw or [] if t is not None)
        return out

    def list_databases(self) -> list[str]:
        return list(self.read("get_all_databases", lambda c: c.get_all_databases()))

    def partition_names(self, db: str, name: str) -> list[str]:
        """Every partition name of ``db.name`` (one light call: names only, no storage descriptors).

        A table that is not there is answered differently by each release: Hive 2.3 as "Internal error
        processing get_partition_names" (its IDL declares no NoSuchObjectException here), 3.1 as a
        MetaException "... table not found", 4.x with no names. On an error the table is looked up: gone, it
        is :class:`~tableswap.errors.TableNotFoundError`; there, the error stands."""
        what = f"get_partition_names({db}.{name})"
        try:
            return list(self.read(what, lambda c: c.get_partition_names(db, name, -1)))
        except errors.CatalogError as exc:
            if isinstance(exc.__cause__, (TApplicationException, tt.MetaException)) and not self.table_exists(db, name):
                raise errors.TableNotFoundError(f"{what}: no such table") from exc
            raise

    def partitions_by_names(self, db: str, name: str, names: Sequence[str],
                            page: int = READ_PAGE) -> Iterator[list[PartitionInfo]]:
        """The existing partitions among ``names``, ``page`` per call (a page at a time in memory)."""
        for start in range(0, len(names), page):
            chunk = list(names[start : start + page])
            yield [_partition_info(p) for p in self.read(
                f"get_partitions_by_names({db}.{name})",
                functools.partial(_partitions_by_names, db=db, name=name, names=chunk))]

    @property
    def reads_locations_only(self) -> bool | None:
        """Whether :meth:`partition_locations` reads only locations (HMS 4.x) or full partitions (2.3,
        3.1); None before its first call."""
        return self._projection

    def partition_locations(self, db: str, name: str, names: Sequence[str],
                            ) -> Iterator[list[tuple[tuple[str, ...], str | None]]]:
        """``(values, location)`` of the existing partitions among ``names``, a page at a time: on a
        server with the projection call (HMS 4.x) only those two fields are read and sent,
        ``LOCATION_PAGE`` per call (:mod:`.projection`); elsewhere, or when that call fails for a page,
        the full partitions by name, ``READ_PAGE`` per call."""
        for start in range(0, len(names), LOCATION_PAGE):
            chunk = list(names[start : start + LOCATION_PAGE])
            got = None
            if self._projection is not False:
                try:
                    got = self.read(f"{projection.METHOD}({db}.{name})",
                                    functools.partial(projection.call, db=db, table=name, names=chunk))
                    self._projection = True
                except errors.UnsupportedMetastoreError:  # 2.3, 3.1: no such call
                    self._projection = False
                except errors.CatalogError as exc:  # e.g. the table went away: the plain read decides
                    log.debug("metastore.projection_failed", table=f"{db}.{name}", error=str(exc))
            if got is not None:
                yield got
                continue
            for page in self.partitions_by_names(db, name, chunk):
                yield [(p.values, p.location) for p in page]

    def list_partitions(self, db: str, name: str) -> list[PartitionInfo]:
        """Every partition of ``db.name``: its names, then the partitions by name a page at a time (never one
        unbounded ``get_partitions`` of a large table)."""
        return [p for page in self.partitions_by_names(db, name, self.partition_names(db, name)) for p in page]

    def list_partition_values(self, table: TableInfo) -> list[tuple[str, ...]]:
        """The values of every partition of ``table``, from its partition names (one light call)."""
        names = self.read(f"get_partition_names({table.qualified_name})",
                          lambda c: c.get_partition_names(table.db, table.name, -1))
        keys = table.partition_key_names
        return [pn.values_for(keys, pn.parse_name(n)) for n in names]

    def _partitions_by_names_raw(self, db: str, name: str, names: Sequence[str]) -> list[tt.Partition]:
        out: list[tt.Partition] = []
        for start in range(0, len(names), self.write_batch_size):
            chunk = list(names[start : start + self.write_batch_size])
            out.extend(
                self.read(
                    f"get_partitions_by_names({db}.{name})",
                    functools.partial(_partitions_by_names, db=db, name=name, names=chunk),
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

    def _raw_table_of(self, table: TableInfo, snapshot: Snapshot | None) -> tt.Table:
        if isinstance(snapshot, TableSnapshot) and snapshot.table == table:
            return snapshot._raw_table
        return self._get_table_raw(table.db, table.name)

    def server_version(self) -> str | None:
        """The server's version string (fb303 ``getVersion``), or None where the server does not say."""
        try:
            version = self.read("getVersion", lambda c: c.getVersion())
        except errors.CatalogError:
            return None
        return str(version) if version else None

    def config_value(self, name: str) -> str | None:
        """A server-side configuration value (``get_config_value``), or None if it is not readable."""
        try:
            value = self.read(f"get_config_value({name})", lambda c: c.get_config_value(name, ""))
        except (errors.CatalogError, tt.ConfigValSecurityException):
            return None
        return value or None

    def current_event_id(self) -> int:
        """The id of the notification log's newest event (0: there is none, e.g. no listener writes it)."""
        return notifications.current_event_id(self)

    def events_after(self, last: int, limit: int = notifications.EVENT_PAGE) -> list[NotificationEvent]:
        """Up to ``limit`` events of the notification log after ``last``, oldest first (:mod:`.notifications`)."""
        return notifications.events_after(self, last, limit)

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


def _tables_by_name(c: ThriftHiveMetastore.Client, db: str, names: list[str]) -> list[tt.Table] | None:
    return c.get_table_objects_by_name_req(tt.GetTablesRequest(dbName=db, tblNames=names)).tables


def _partitions_by_names(c: ThriftHiveMetastore.Client, db: str, name: str, names: list[str]) -> list[tt.Partition]:
    return c.get_partitions_by_names(db, name, names)


@contextmanager
def connect(uri: str, **kwargs: object) -> Iterator[MetastoreClient]:
    client = MetastoreClient(uri, **kwargs)  # type: ignore[arg-type]  # the caller's keyword options, unchecked
    try:
        yield client.open()
    finally:
        client.close()


def probe(uri: str) -> None:
    """Raise unless the metastore at ``uri`` answers a real Thrift call (one attempt)."""
    with MetastoreClient(uri, connect_attempts=1, timeout_s=10) as client:
        client.ping()
