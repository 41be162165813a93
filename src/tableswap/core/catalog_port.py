"""The catalog port: what the commit protocol and the operations need of a table catalog, and nothing more.

A catalog (today the Hive Metastore through Thrift, ``tableswap.metastore``) is one implementation of
:class:`Catalog`; the operations in ``ops/`` are written against this module only and never import an
adapter (``tests/unit/test_layers.py``). An implementation declares what it can and cannot do in its
:class:`Capabilities`, and the protocol adapts to them rather than to the catalog's name:

* **lock**: :meth:`Catalog.table_lock` returns the table's exclusive lock. The Hive Metastore has a
  server lock (visible to ``SHOW LOCKS``, expired by the server when its holder dies); a catalog without
  one (the AWS Glue Data Catalog) must bring a lease of its own with the same contract.
* **batches**: the flip (``ops/commit.py``) sends adds, repoints and drops in chunks of at most
  :meth:`Capabilities.chunk` entries and confirms the lock before each chunk; a catalog whose batch call
  can half succeed (``atomic_batches=False``) must still report the outcome of every entry, so a lost or
  partial batch is reconciled through the swap-id stamp like a lost response.
* **fence**: every write that repoints carries a compare-and-swap on what the caller read under the lock
  (the expected location, the table's swap-id stamp); ``table_cas`` says whether the catalog itself
  evaluates the table's (otherwise the adapter checks it on a fresh read under the lock).

Values crossing the port are the plain dataclasses of :mod:`tableswap.core.catalog`; nothing of a
catalog's client library (Thrift types, boto3 responses) crosses it. A :class:`Snapshot` may carry the
adapter's raw objects in private fields, for the flip calls handed the same snapshot back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping, Protocol, Sequence, runtime_checkable

from tableswap.core.catalog import LocationChange, LockHolder, NewPartition, PartitionInfo, TableInfo


class OutcomeUnknown(Exception):
    """Inside an adapter only (never raised through the port): a write was sent but whether it was applied
    is unknown, because its response was lost or the server answered with an error that may follow an
    applied write. ``why`` says which. The adapter that raised it reads back and decides; it never resends
    blindly. One class for both adapters (Hive Metastore and Glue)."""

    def __init__(self, what: str, why: str = "its response was lost") -> None:
        super().__init__(f"{what}: {why}")
        self.what = what
        self.why = why


@dataclass(frozen=True)
class Capabilities:
    """What a catalog implementation can do, declared by it and read by the protocol.

    Attributes:
        kind: the catalog's kind as users name it (``hive-metastore``), shown by ``doctor`` and in errors.
        server_lock: the catalog has a lock of its own that other tools see and that it expires when its
            holder dies; ``False``: the adapter's :meth:`Catalog.table_lock` is a lease of tableswap's own.
        atomic_batches: one batch call applies entirely or not at all; ``False``: entries succeed or fail
            one by one and the adapter reports which (a half-applied batch is reconciled by the stamp).
        table_cas: the catalog evaluates a table update's compare-and-swap itself.
        max_add, max_alter, max_drop: the most entries one call takes (``None``: no limit of its own).
        lease_heartbeats: with a lease of tableswap's own (``server_lock=False``), how many heartbeat intervals
            a lease lasts unrenewed before a waiter takes it over; ``None`` for a server lock.
        spark_catalog: a SparkSession writing to the catalog's tables uses this catalog as its own (its Hive
            catalog): a swap checks that Spark sees the staging table, inserts through it where only a
            table lays the files out (bucketed, char/varchar columns), asks Spark for a Hive-created
            table's schema and refreshes Spark's cache of the table. ``False``: Spark only writes files
            (any session, any catalog of its own); the schema comes from the catalog's columns.
    """

    kind: str
    server_lock: bool
    atomic_batches: bool
    table_cas: bool
    max_add: int | None = None
    max_alter: int | None = None
    max_drop: int | None = None
    spark_catalog: bool = True
    lease_heartbeats: int | None = None

    def lease_s(self, heartbeat_s: float) -> float | None:
        """How long an abandoned lease holds the table before a waiter takes it over (``None``: a server
        lock, expired by the catalog's own setting)."""
        return None if self.lease_heartbeats is None else self.lease_heartbeats * heartbeat_s

    def chunk(self, operation: str, configured: int) -> int:
        """Entries per call for ``operation`` (``add``, ``alter`` or ``drop``): the configured
        ``write_batch_size``, lowered to the catalog's own limit."""
        limit = {"add": self.max_add, "alter": self.max_alter, "drop": self.max_drop}[operation]
        return max(1, min(configured, limit) if limit else configured)


#: The lock contract's waiting notice: a caller waiting for a lock another holds logs ``lock.waiting`` (naming
#: the holder) after this many seconds, and again every :data:`LOCK_WAIT_NOTICE_EVERY_S` (a wait for a dead
#: holder's lock or lease to expire can take minutes).
LOCK_WAIT_NOTICE_S = 15.0
LOCK_WAIT_NOTICE_EVERY_S = 60.0


@runtime_checkable
class Snapshot(Protocol):
    """A table and some of its partitions, read together by a caller holding the table's lock."""

    @property
    def table(self) -> TableInfo: ...

    @property
    def partitions(self) -> Mapping[tuple[str, ...], PartitionInfo]: ...


class CatalogLock(Protocol):
    """A table's exclusive lock, used as a context manager (acquired on entry, released on exit).

    ``ensure_held`` raises :class:`~tableswap.errors.LockLostError` when the lock was lost (a failed
    heartbeat); ``confirm`` asks the catalog (or the lease store) right now, whatever the age of the last
    heartbeat: the protocol calls it right before its first write."""

    @property
    def swap_id(self) -> str: ...

    @property
    def lock_id(self) -> int | str | None:
        """The catalog's id of the lock once acquired (shown by ``doctor``), else ``None``."""

    def __enter__(self) -> "CatalogLock": ...

    def acquire(self) -> "CatalogLock": ...

    def __exit__(self, *exc: object) -> None: ...

    def ensure_held(self) -> None: ...

    def confirm(self) -> None: ...

    def release(self) -> None: ...


class Catalog(Protocol):
    """One connection to a table catalog, for one operation (not thread-safe: a thread takes its own)."""

    uri: str
    #: Catalog calls made so far (for reports, benchmarks and tests).
    calls: int
    write_batch_size: int

    @property
    def capabilities(self) -> Capabilities: ...

    # -- connection
    def open(self) -> "Catalog": ...

    def close(self) -> None: ...

    def __enter__(self) -> "Catalog": ...  # open()

    def __exit__(self, *exc: object) -> None: ...  # close()

    @property
    def connected(self) -> bool: ...

    def ping(self) -> None: ...

    # -- reads
    def database_exists(self, db: str) -> bool: ...

    def list_databases(self) -> list[str]: ...

    def list_tables(self, db: str, pattern: str = "*") -> list[str]: ...

    def table_exists(self, db: str, name: str) -> bool: ...

    def get_table(self, db: str, name: str) -> TableInfo: ...

    def get_tables(self, db: str, names: Sequence[str]) -> list[TableInfo]: ...

    def partition_names(self, db: str, name: str) -> list[str]: ...

    def partitions_by_names(self, db: str, name: str, names: Sequence[str],
                            page: int = ...) -> Iterator[list[PartitionInfo]]: ...

    def partition_locations(self, db: str, name: str, names: Sequence[str],
                            ) -> Iterator[list[tuple[tuple[str, ...], str | None]]]:
        """``(values, location)`` of the existing partitions among ``names``, a page at a time (the
        janitor's reference scan: the cheapest read the catalog has of only these two fields)."""
        ...

    def list_partitions(self, db: str, name: str) -> list[PartitionInfo]: ...

    def list_partition_values(self, table: TableInfo) -> list[tuple[str, ...]]: ...

    def get_partitions(self, table: TableInfo,
                       values_list: Sequence[Sequence[str]]) -> dict[tuple[str, ...], PartitionInfo]: ...

    def snapshot(self, db: str, name: str, values_list: Sequence[Sequence[str]] = ()) -> Snapshot: ...

    # -- temporary tables (the staged batch registered as a table of its own)
    def create_staging_table(self, source: TableInfo, name: str, location: str, parameters: dict[str, str],
                             *, snapshot: Snapshot | None = None) -> TableInfo: ...

    def drop_table_keep_data(self, db: str, name: str, *, created: TableInfo | None = None) -> None: ...

    # -- the flip: each call reconciles a lost response through the stamp, never resends blindly
    def add_partitions(self, table: TableInfo, adds: Sequence[NewPartition], stamp: dict[str, str],
                       *, snapshot: Snapshot | None = None) -> int: ...

    def alter_partition_locations(self, table: TableInfo, changes: Sequence[LocationChange], stamp: dict[str, str],
                                  *, snapshot: Snapshot | None = None) -> int: ...

    def drop_partitions_keep_data(self, table: TableInfo, values_list: Sequence[Sequence[str]],
                                  expected_swap_id: str | None = None) -> int: ...

    def alter_table_location(self, table: TableInfo, expected_location: str | None, new_location: str,
                             stamp: dict[str, str], extra_parameters: dict[str, str] | None = None,
                             *, snapshot: Snapshot | None = None) -> None: ...

    def clear_table_statistics(self, table: TableInfo, *, snapshot: Snapshot | None = None) -> int: ...

    # -- locks
    def table_lock(self, db: str, name: str, *, owner: str, timeout_s: float, heartbeat_s: float) -> CatalogLock: ...

    def lock_holders(self, db: str, name: str) -> list[LockHolder]: ...

    def count_locks(self) -> int: ...

    # -- diagnostics (``tableswap doctor``); ``None`` where the catalog does not say
    def server_version(self) -> str | None: ...

    def config_value(self, name: str) -> str | None: ...


#: The members every implementation has (checked against each adapter by tests/integration/test_catalog_port.py).
PORT_MEMBERS = tuple(sorted(
    name for name in {**Catalog.__annotations__, **vars(Catalog)}
    if not name.startswith("_")
))
