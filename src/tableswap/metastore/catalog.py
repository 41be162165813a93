"""The Hive Metastore as a :class:`~tableswap.core.catalog_port.Catalog`: the Thrift client with its
declared capabilities and the metastore's own table lock."""

from __future__ import annotations

from tableswap.core.catalog_port import Capabilities
from tableswap.metastore.client import MetastoreClient
from tableswap.metastore.lock import TableLock


class HiveMetastoreCatalog(MetastoreClient):
    """One connection to a Hive Metastore (``thrift://HOST:PORT[,thrift://HOST2:PORT2...]``), as the
    operations see a catalog. Not thread-safe: :meth:`sibling` gives another thread its own."""

    @property
    def capabilities(self) -> Capabilities:
        # One transaction per add_partitions / alter_partitions / drop_partitions call; the lock API's
        # EXCLUSIVE lock; the table-parameter compare-and-swap where the server evaluates it.
        return Capabilities(kind="hive-metastore", server_lock=True, atomic_batches=True,
                            table_cas=not self._table_cas_unsupported)

    def table_lock(self, db: str, name: str, *, owner: str, timeout_s: float, heartbeat_s: float) -> TableLock:
        """The table's EXCLUSIVE metastore lock (not yet acquired: use it as a context manager), heartbeated
        on a connection of its own; ``owner`` (a swap id, ``recover-<id>``, ``janitor-<run>``) is shown to
        other holders."""
        return TableLock(self, db, name, swap_id=owner, timeout_s=timeout_s, heartbeat_s=heartbeat_s)
