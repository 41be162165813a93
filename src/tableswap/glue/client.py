"""The Glue adapter's connection and reads.

* One boto3 Glue client per catalog object, botocore's own retries off: reads are retried here on
  transport errors and throttling; writes are sent once (:mod:`.writes` reconciles a lost response by
  re-reading the swap-id stamps, never by resending blindly).
* Reads page with ``NextToken``; ``BatchGetPartition`` takes at most 100 keys a call.
* botocore errors become :mod:`tableswap.errors` exceptions (:func:`.boto.translate`).
"""

from __future__ import annotations

import fnmatch
import functools
import time
from typing import Any, Callable, Iterator, Sequence, TypeVar

from tableswap import errors
from tableswap.core import partitions as pn
from tableswap.core.catalog import PartitionInfo, TableInfo
from tableswap.core.catalog_port import OutcomeUnknown, Snapshot
from tableswap.glue import boto
from tableswap.glue.boto import MAX_GET
from tableswap.glue.convert import GlueSnapshot, partition_info, table_info
from tableswap.glue.uri import parse_glue_uri
from tableswap.glue.writes import GlueWrites
from tableswap.logs import get_logger

log = get_logger("tableswap.glue")

T = TypeVar("T")
_Client = TypeVar("_Client", bound="GlueClient")  # open() returns the adapter it is called on

#: The default DynamoDB table of the table leases (setting ``glue.lock_table``).
DEFAULT_LOCK_TABLE = "tableswap_locks"


class GlueClient(GlueWrites):
    """One connection to the Glue Data Catalog of a region. Not thread-safe: :meth:`sibling` gives another
    thread its own."""

    def __init__(self, uri: str, *, timeout_s: float = 300.0, connect_attempts: int = 4, max_wait_s: float = 8.0,
                 write_batch_size: int = 10_000, lock_table: str = DEFAULT_LOCK_TABLE) -> None:
        self.uri = uri
        self.region = parse_glue_uri(uri)  # None: the SDK's chain (resolved on open)
        self.timeout_s = timeout_s
        self.connect_attempts = connect_attempts
        self.max_wait_s = max_wait_s
        self.write_batch_size = write_batch_size
        self.lock_table = lock_table
        self.calls = 0
        self._session: Any = None
        self._glue: Any = None

    def sibling(self: _Client) -> _Client:
        """A new, unopened connection with the same options (for another thread)."""
        return type(self)(self.uri, timeout_s=self.timeout_s, connect_attempts=self.connect_attempts,
                          max_wait_s=self.max_wait_s, write_batch_size=self.write_batch_size,
                          lock_table=self.lock_table)

    # ------------------------------------------------------------------ connection
    def open(self: _Client) -> _Client:
        if self._glue is None:
            session = boto.new_session(self.region)
            if not session.region_name:
                raise errors.ConfigurationError(
                    f"{self.uri}: no AWS region: name it in the URI (glue://us-east-1) or set AWS_REGION / "
                    "AWS_DEFAULT_REGION (or a region in the AWS profile)")
            try:
                self._glue = session.client("glue", config=boto.client_config(self.timeout_s))
            except boto.boto_errors() as exc:
                raise boto.translate(exc, "opening the Glue client") from exc
            self._session, self.region = session, session.region_name
        return self

    def close(self) -> None:
        self._glue = None  # boto3 clients hold no connection that needs closing

    @property
    def connected(self) -> bool:
        return self._glue is not None

    def __enter__(self: _Client) -> _Client:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def boto_client(self, service: str) -> Any:
        """A boto3 client of ``service`` (``dynamodb`` for the leases) on this catalog's session."""
        self.open()
        return self._session.client(service, config=boto.client_config(self.timeout_s))

    def read(self, what: str, fn: Callable[[Any], T]) -> T:
        """An idempotent call, retried on transport errors and throttling (exponential back-off)."""
        self.open()
        delay = 0.25
        for attempt in range(1, self.connect_attempts + 1):
            try:
                self.calls += 1
                return fn(self._glue)
            except boto.boto_errors() + (ConnectionError,) as exc:
                retry = isinstance(exc, boto.transport_errors()) or boto.error_code(exc) in boto.TRANSIENT_CODES
                if not retry or attempt == self.connect_attempts:
                    raise boto.translate(exc, what) from exc
                log.info("glue.retry", call=what, attempt=attempt, error=repr(exc))
                time.sleep(delay)
                delay = min(delay * 2, self.max_wait_s)
        raise AssertionError("unreachable")  # pragma: no cover

    def write(self, what: str, fn: Callable[[Any], T]) -> T:
        """A non-idempotent call, sent once. A lost response, or a server error that may follow the request's
        being applied (``InternalServiceException``, ``OperationTimeoutException``...), raises
        :class:`OutcomeUnknown`: the caller reads back and decides, never resends blindly. A throttled
        request (refused, not applied) is sent again after a pause."""
        self.open()
        delay = 0.25
        for attempt in range(1, self.connect_attempts + 1):
            self.calls += 1
            try:
                return fn(self._glue)
            except boto.boto_errors() + (ConnectionError,) as exc:
                code = boto.error_code(exc)
                if isinstance(exc, boto.transport_errors()) or code in boto.MAYBE_APPLIED_CODES:
                    log.warning("glue.outcome_unknown", call=what, error=repr(exc))
                    why = (f"Glue answered {code} ({boto.error_message(exc)}), which does not say whether it was "
                           "applied") if code else f"its response was lost ({type(exc).__name__})"
                    raise OutcomeUnknown(what, why) from exc
                if code in boto.REFUSED_CODES and attempt < self.connect_attempts:
                    time.sleep(delay)
                    delay = min(delay * 2, self.max_wait_s)
                    continue
                raise boto.translate(exc, what) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _pages(self, what: str, call: Callable[[Any], Callable[..., dict[str, Any]]], key: str,
               **kwargs: Any) -> Iterator[Any]:
        """The items under ``key`` of every page of a ``NextToken``-paged call."""
        token: str | None = None
        while True:
            args = dict(kwargs, **({"NextToken": token} if token else {}))
            page = self.read(what, lambda g: call(g)(**args))  # noqa: B023 - called in this iteration
            yield from page.get(key) or []
            token = page.get("NextToken")
            if not token:
                return

    # ------------------------------------------------------------------ reads
    def ping(self) -> None:
        self.read("GetDatabases", lambda g: g.get_databases(MaxResults=1))

    def database_exists(self, db: str) -> bool:
        try:
            self.read(f"GetDatabase({db})", lambda g: g.get_database(Name=db))
            return True
        except errors.TableNotFoundError:
            return False

    def list_databases(self) -> list[str]:
        return [d["Name"] for d in self._pages("GetDatabases", lambda g: g.get_databases, "DatabaseList")]

    def list_tables(self, db: str, pattern: str = "*") -> list[str]:
        """The tables of ``db`` whose name matches ``pattern`` (the Hive Metastore's: ``*`` and ``|``)."""
        names = [t["Name"] for t in self._pages(f"GetTables({db})", lambda g: g.get_tables, "TableList",
                                                 DatabaseName=db)]
        globs = [p.strip().lower() for p in (pattern or "*").split("|")]
        return [n for n in names if any(fnmatch.fnmatchcase(n.lower(), g) for g in globs)]

    def _get_table_raw(self, db: str, name: str) -> dict[str, Any]:
        try:
            return self.read(f"GetTable({db}.{name})", lambda g: g.get_table(DatabaseName=db, Name=name))["Table"]
        except errors.TableNotFoundError:
            raise errors.TableNotFoundError.of(db, name, database_exists=self.database_exists(db)) from None

    def get_table(self, db: str, name: str) -> TableInfo:
        return table_info(self._get_table_raw(db, name), self.region)

    def table_exists(self, db: str, name: str) -> bool:
        try:
            self._get_table_raw(db, name)
            return True
        except errors.TableNotFoundError:
            return False

    def get_tables(self, db: str, names: Sequence[str]) -> list[TableInfo]:
        """The tables among ``names`` that exist (one paged ``GetTables`` of the database: Glue has no batch
        read of tables by name)."""
        wanted = {n.lower() for n in names}
        if not wanted:
            return []
        try:
            raws = list(self._pages(f"GetTables({db})", lambda g: g.get_tables, "TableList", DatabaseName=db))
        except errors.TableNotFoundError:
            return []
        by_name = {r["Name"].lower(): r for r in raws}
        return [table_info(by_name[n.lower()], self.region) for n in names if n.lower() in by_name]

    def _raw_partition_pages(self, db: str, name: str, *, schema: bool) -> Iterator[dict[str, Any]]:
        return self._pages(f"GetPartitions({db}.{name})", lambda g: g.get_partitions, "Partitions",
                           DatabaseName=db, TableName=name, ExcludeColumnSchema=not schema)

    def partition_names(self, db: str, name: str) -> list[str]:
        keys = self.get_table(db, name).partition_key_names
        return [pn.partition_name(keys, p["Values"]) for p in self._raw_partition_pages(db, name, schema=False)]

    def _batch_get_raw(self, db: str, name: str, values_list: Sequence[Sequence[str]]) -> dict[tuple[str, ...], Any]:
        """The existing partitions among ``values_list``: ``BatchGetPartition``, 100 keys a call; keys Glue
        left unprocessed are asked again."""
        out: dict[tuple[str, ...], Any] = {}
        todo = [list(v) for v in values_list]
        while todo:
            chunk, todo = todo[:MAX_GET], todo[MAX_GET:]
            for _ in range(self.connect_attempts + 1):
                resp = self.read(f"BatchGetPartition({db}.{name}, {len(chunk)})", functools.partial(
                    lambda g, chunk: g.batch_get_partition(DatabaseName=db, TableName=name,
                                                           PartitionsToGet=[{"Values": v} for v in chunk]),
                    chunk=chunk))
                for p in resp.get("Partitions") or []:
                    out[tuple(p["Values"])] = p
                chunk = [k["Values"] for k in resp.get("UnprocessedKeys") or []]
                if not chunk:
                    break
                time.sleep(0.2)
            else:
                raise errors.CatalogUnavailableError(
                    f"BatchGetPartition({db}.{name}): Glue left {len(chunk)} keys unprocessed after retries")
        return out

    def partitions_by_names(self, db: str, name: str, names: Sequence[str],
                            page: int = MAX_GET) -> Iterator[list[PartitionInfo]]:
        """The existing partitions among ``names``, ``page`` names at a time (at most 100 per call)."""
        if not names:
            return
        keys = self.get_table(db, name).partition_key_names
        for start in range(0, len(names), page):
            values = [pn.values_for(keys, pn.parse_name(n)) for n in names[start:start + page]]
            found = self._batch_get_raw(db, name, values)
            yield [partition_info(found[tuple(v)]) for v in values if tuple(v) in found]

    def partition_locations(self, db: str, name: str, names: Sequence[str],
                            ) -> Iterator[list[tuple[tuple[str, ...], str | None]]]:
        """``(values, location)`` of the existing partitions among ``names``, a page (100) at a time:
        Glue has no projection, so the partitions are read by name and only these two fields kept."""
        for page in self.partitions_by_names(db, name, names):
            yield [(p.values, p.location) for p in page]

    def list_partitions(self, db: str, name: str) -> list[PartitionInfo]:
        return [partition_info(p) for p in self._raw_partition_pages(db, name, schema=True)]

    def list_partition_values(self, table: TableInfo) -> list[tuple[str, ...]]:
        return [tuple(p["Values"]) for p in self._raw_partition_pages(table.db, table.name, schema=False)]

    def _raw_partitions(self, table: TableInfo,
                        values_list: Sequence[Sequence[str]]) -> dict[tuple[str, ...], Any]:
        return self._batch_get_raw(table.db, table.name, values_list)

    def get_partitions(self, table: TableInfo,
                       values_list: Sequence[Sequence[str]]) -> dict[tuple[str, ...], PartitionInfo]:
        return {v: partition_info(p) for v, p in self._raw_partitions(table, values_list).items()}

    def snapshot(self, db: str, name: str, values_list: Sequence[Sequence[str]] = ()) -> GlueSnapshot:
        raw_table = self._get_table_raw(db, name)
        table = table_info(raw_table, self.region)
        raw_parts = self._raw_partitions(table, values_list) if values_list else {}
        return GlueSnapshot(table, {v: partition_info(p) for v, p in raw_parts.items()}, raw_table, raw_parts)

    def _raw_table_of(self, table: TableInfo, snapshot: Snapshot | None) -> dict[str, Any]:
        if isinstance(snapshot, GlueSnapshot) and snapshot.table == table:
            return snapshot._raw_table
        return self._get_table_raw(table.db, table.name)

    # ------------------------------------------------------------------ diagnostics
    def server_version(self) -> str | None:
        return None  # Glue has no server version

    def config_value(self, name: str) -> str | None:
        return None
