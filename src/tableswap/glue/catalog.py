"""The AWS Glue Data Catalog as a :class:`~tableswap.core.catalog_port.Catalog`: Glue's API with its
declared capabilities (no lock, per-entry batches of at most 100 / 100 / 25 entries, the table's own
compare-and-swap through ``VersionId``) and a lease of tableswap's own as the table lock."""

from __future__ import annotations

from tableswap.core.catalog import LockHolder
from tableswap.core.catalog_port import Capabilities
from tableswap.glue.boto import MAX_ADD, MAX_ALTER, MAX_DROP
from tableswap.glue.client import GlueClient
from tableswap.glue.lease import HEARTBEATS_PER_LEASE, LeaseLock, LeaseStore, _now_ms, holder_of, lease_key


class GlueCatalog(GlueClient):
    """One connection to the Glue Data Catalog (``glue://REGION`` or ``glue://``), as the operations see a
    catalog. Not thread-safe: :meth:`sibling` gives another thread its own."""

    _leases: LeaseStore | None = None

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(kind="glue", server_lock=False, atomic_batches=False, table_cas=True,
                            max_add=MAX_ADD, max_alter=MAX_ALTER, max_drop=MAX_DROP,
                            spark_catalog=False, lease_heartbeats=HEARTBEATS_PER_LEASE)

    def lease_store(self) -> LeaseStore:
        """The DynamoDB table of the leases (``lock_table``), on this catalog's AWS configuration."""
        if self._leases is None:
            self._leases = LeaseStore(self.boto_client("dynamodb"), self.lock_table, timeout_s=self.timeout_s)
        return self._leases

    def table_lock(self, db: str, name: str, *, owner: str, timeout_s: float, heartbeat_s: float) -> LeaseLock:
        """The table's lease (not yet acquired: use it as a context manager), renewed every ``heartbeat_s``
        by a thread of its own; ``owner`` (a swap id, ``recover-<id>``, ``janitor-<run>``) is shown to others."""
        store = self.lease_store()
        return LeaseLock(store, self.region or "", db, name, owner=owner, timeout_s=timeout_s,
                         heartbeat_s=heartbeat_s)

    def lock_holders(self, db: str, name: str) -> list[LockHolder]:
        """The table's live lease (one at most); an expired one is not a holder."""
        self.open()
        item = self.lease_store().get(lease_key(self.region or "", db, name))
        if item is None:
            return []
        holder = holder_of(item, _now_ms())
        return [holder] if holder.state == "ACQUIRED" else []

    def count_locks(self) -> int:
        """Live leases on tables of this region's catalog."""
        self.open()
        now = _now_ms()
        return sum(1 for item in self.lease_store().items(f"glue/{self.region}/")
                   if holder_of(item, now).state == "ACQUIRED")
