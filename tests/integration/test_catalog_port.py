"""The catalog port (src/tableswap/core/catalog_port.py): each adapter (the Hive Metastore's, the Glue Data
Catalog's) implements every member with the port's signatures, and the operations reach the catalog through the
port only.

The last test runs a swap, a rollback, a recovery check, a repair plan, the history and the janitor against
the real metastore through a runtime whose catalog connections and locks refuse every attribute the port does
not name: an operation that reached past the port (a Thrift call, an adapter helper) fails it.
"""

from __future__ import annotations

import inspect
from contextlib import contextmanager
from typing import Any, Iterator

import pytest

import tableswap
from tableswap.config import resolve
from tableswap.core.catalog_port import PORT_MEMBERS, Capabilities, Catalog, CatalogLock, Snapshot
from tableswap.glue.catalog import GlueCatalog
from tableswap.glue.convert import GlueSnapshot
from tableswap.metastore.catalog import HiveMetastoreCatalog
from tableswap.metastore.convert import TableSnapshot
from tableswap.ops.inspect.history import show
from tableswap.ops.janitor.run import run_janitor
from tableswap.ops.restore.recover import recover
from tableswap.ops.restore.repair import plan_table_repair
from tableswap.ops.restore.rollback import rollback
from tableswap.runtime import Runtime, open_catalog

from ..support.helpers import batch_df, create_events, reader_view, today

LOCK_MEMBERS = tuple(sorted(n for n in {**CatalogLock.__annotations__, **vars(CatalogLock)} if not n.startswith("_")))


def _signature(fn: Any) -> list[tuple[str, Any]]:
    return [(p.name, p.kind) for p in inspect.signature(fn).parameters.values()]


def test_the_port_names_what_the_protocol_needs():
    assert {"table_lock", "capabilities", "add_partitions", "alter_partition_locations", "drop_partitions_keep_data",
            "alter_table_location", "snapshot", "create_staging_table", "drop_table_keep_data"} <= set(PORT_MEMBERS)
    assert {"ensure_held", "confirm", "acquire", "release"} <= set(LOCK_MEMBERS)


# Each adapter, by the URI that selects it (runtime.open_catalog), not connected: nothing is called.
ADAPTERS = {"hive-metastore": ("thrift://127.0.0.1:9083", HiveMetastoreCatalog),
            "glue": ("glue://us-east-1", GlueCatalog)}


@pytest.mark.parametrize("member", PORT_MEMBERS)
@pytest.mark.parametrize("kind", sorted(ADAPTERS))
def test_each_adapter_implements_each_member_with_the_ports_signature(kind, member):
    uri, cls = ADAPTERS[kind]
    adapter = open_catalog(uri)
    assert type(adapter) is cls
    assert hasattr(adapter, member), f"{cls.__name__} lacks the port's {member}"
    declared = inspect.getattr_static(Catalog, member, None)
    if inspect.isfunction(declared):
        assert _signature(getattr(cls, member)) == _signature(declared), member


def test_the_adapters_snapshot_and_capabilities_are_the_ports():
    adapter = HiveMetastoreCatalog("thrift://127.0.0.1:9083")
    caps = adapter.capabilities
    assert caps == Capabilities(kind="hive-metastore", server_lock=True, atomic_batches=True, table_cas=True)
    assert isinstance(TableSnapshot(None, {}, None, {}), Snapshot)  # type: ignore[arg-type]
    lock = adapter.table_lock("db", "t", owner="o", timeout_s=5, heartbeat_s=1)
    assert all(hasattr(lock, m) for m in LOCK_MEMBERS)


def test_the_glue_adapters_snapshot_capabilities_and_lease_are_the_ports():
    adapter = open_catalog("glue://us-east-1")
    assert adapter.capabilities == Capabilities(kind="glue", server_lock=False, atomic_batches=False, table_cas=True,
                                                max_add=100, max_alter=100, max_drop=25, spark_catalog=False,
                                                lease_heartbeats=3)
    assert [adapter.capabilities.chunk(op, 10_000) for op in ("add", "alter", "drop")] == [100, 100, 25]
    assert isinstance(GlueSnapshot(None, {}, None, {}), Snapshot)  # type: ignore[arg-type]
    lock = adapter.table_lock("db", "t", owner="o", timeout_s=5, heartbeat_s=1)  # not acquired: no call made
    assert all(hasattr(lock, m) for m in LOCK_MEMBERS)
    for member in LOCK_MEMBERS:
        declared = inspect.getattr_static(CatalogLock, member, None)
        if inspect.isfunction(declared):
            assert _signature(getattr(type(lock), member)) == _signature(declared), member


def test_capabilities_chunk_lowers_the_configured_batch_to_the_catalogs_limit():
    glue_like = Capabilities(kind="x", server_lock=False, atomic_batches=False, table_cas=True,
                             max_add=100, max_alter=100, max_drop=25)
    assert [glue_like.chunk(op, 10_000) for op in ("add", "alter", "drop")] == [100, 100, 25]
    assert glue_like.chunk("drop", 10) == 10
    assert Capabilities(kind="y", server_lock=True, atomic_batches=True, table_cas=True).chunk("add", 500) == 500
    with pytest.raises(KeyError):
        glue_like.chunk("rename", 1)


class _PortOnly:
    """A catalog (or a lock) of which only the port's members can be reached."""

    def __init__(self, inner: Any, members: tuple[str, ...], what: str, used: set[str]) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_members", members)
        object.__setattr__(self, "_what", what)
        object.__setattr__(self, "_used", used)

    def __getattr__(self, name: str) -> Any:
        if name not in self._members:
            raise AttributeError(f"{name!r} is not part of the {self._what} port (src/tableswap/core/catalog_port.py)")
        self._used.add(f"{self._what}.{name}")
        value = getattr(self._inner, name)
        if name == "table_lock":
            return lambda *a, **k: _PortOnly(value(*a, **k), LOCK_MEMBERS, "lock", self._used)
        if name in ("open", "acquire", "__enter__"):
            return lambda *a, **k: (value(*a, **k), self)[1]
        return value

    def __enter__(self) -> Any:
        self._used.add(f"{self._what}.__enter__")
        self._inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._inner.__exit__(*exc)


class _PortOnlyRuntime(Runtime):
    used: set[str] = set()

    def new_catalog(self) -> Any:
        return _PortOnly(super().new_catalog(), PORT_MEMBERS, "catalog", self.used)

    @contextmanager
    def catalog(self, *, ping: bool = True) -> Iterator[Any]:  # unpooled: a pooled one would bypass the wrapper
        client = self.new_catalog()
        client.open()
        try:
            if ping:
                client.ping()
            yield client
        finally:
            client.close()


@pytest.mark.integration
@pytest.mark.release_independent  # which layer calls the catalog is the subject
def test_the_operations_reach_the_catalog_through_the_port_only(spark, db, tmp_path, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "b0").write.insertInto(table)
    rt = _PortOnlyRuntime(resolve(metastore_uri=ts_env["TABLESWAP_METASTORE_URI"],
                                  journal_url=ts_env["TABLESWAP_JOURNAL_URL"], lock_timeout_s=10))
    with rt:
        swap = tableswap.swap_partitions(batch_df(spark, {(today(1),): 3, (today(2),): 1}, "b1"), table, runtime=rt)
        assert reader_view(spark, table) == {(today(0),): (2, ("b0",)), (today(1),): (3, ("b1",)),
                                             (today(2),): (1, ("b1",))}
        rollback(table, runtime=rt)
        assert reader_view(spark, table) == {(today(0),): (2, ("b0",)), (today(1),): (2, ("b0",))}
        assert show(table, runtime=rt)
        assert recover(table, runtime=rt).resolutions == ()
        plan_table_repair(table, runtime=rt)
        report = run_janitor(grace="0s", force_short_grace=True, dry_run=False, table=table, runtime=rt)
        assert report.deleted, report
    assert swap.swap_id
    # The run went through the port's reads, flip calls and lock (not around them).
    assert {"catalog.snapshot", "catalog.add_partitions", "catalog.alter_partition_locations",
            "catalog.table_lock", "lock.ensure_held", "lock.confirm"} <= rt.used, sorted(rt.used)
