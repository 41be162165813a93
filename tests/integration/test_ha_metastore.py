"""A highly available metastore: ``thrift://A,thrift://B``, two real metastore servers on one PostgreSQL
database, one of them killed (SIGKILL) while a client is connected to it and holds a table lock."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tableswap import errors
from tableswap.devmetastore import DevMetastore, process
from tableswap.metastore.client import MetastoreClient, parse_uris, probe
from tableswap.metastore.lock import TableLock
from tableswap.core.catalog import LocationChange, NewPartition

from ..support import pg_metastore as pg
from .test_postgres_metastore import _create_table


@pytest.mark.parametrize("uri, expected", [
    ("thrift://hms:9083", [("hms", 9083)]),
    ("thrift://hms", [("hms", 9083)]),
    ("thrift://a:9083,thrift://b:9084", [("a", 9083), ("b", 9084)]),
    (" thrift://a:1 , thrift://b:2 ", [("a", 1), ("b", 2)]),
    ("THRIFT://a:1", [("a", 1)]),
])
def test_metastore_uris_and_lists(uri, expected):
    assert parse_uris(uri) == expected


@pytest.mark.hostile
@pytest.mark.parametrize("uri", ["hms:9083", "http://x:9083", "thrift://", "thrift://a:1,", "thrift://a:1,,thrift://b:2",
                                 "thrift://a:notaport", "thrift://a:1/db", "thrift://u:secret@a:1", "", " "])
def test_a_metastore_uri_that_is_not_thrift_is_refused(uri):
    with pytest.raises(errors.ConfigurationError, match="thrift://HOST:PORT") as caught:
        MetastoreClient(uri)
    assert "secret" not in str(caught.value)


@pytest.fixture
def two_servers(tmp_path: Path):
    """Two metastore servers of the default release on one fresh PostgreSQL database."""
    pg.skip_or_fail_if_unavailable()
    with pg.fresh_database("tswap_ha") as database:
        servers = [DevMetastore(state_dir=tmp_path / f"hms{i}", db=database.spec(), lock_timeout_seconds=60)
                   for i in (1, 2)]
        try:
            for server in servers:  # one after the other: the first makes the schema
                server.start(probe=probe, wait_timeout=240)
            yield servers
        finally:
            for server in servers:
                server.stop()


def _kill(server: DevMetastore) -> None:
    pid = process.read_int(server.pid_file)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    server.stop()  # reaps it and waits for the port to close


@pytest.mark.integration
@pytest.mark.default_metastore
@pytest.mark.fault
def test_a_highly_available_metastore_fails_over_when_a_server_dies(two_servers, tmp_path):
    first, second = two_servers
    uri = f"{first.uri},{second.uri}"
    _create_table(first.uri, "ha", "events", tmp_path / "wh" / "events")
    old = {d: (tmp_path / "wh" / "events" / f"dt={d}").as_uri() for d in ("d1", "d2")}
    new = {d: (tmp_path / "wh" / "events" / "_tableswap" / "s1" / f"dt={d}").as_uri() for d in ("d1", "d2")}

    with MetastoreClient(uri, max_wait_s=1) as client, MetastoreClient(second.uri) as witness:
        assert client.port == first.port  # the first server that answers
        info = client.get_table("ha", "events")
        client.add_partitions(info, [NewPartition((d,), old[d]) for d in old], {"tableswap.swap_id": "s0"})
        lock = TableLock(client, "ha", "events", swap_id="s1", timeout_s=30, heartbeat_s=2).acquire()
        try:
            _kill(first)  # the client's connection, and the lock's heartbeat connection, are to this one

            # A write on the dead connection: its outcome is unknown, so the metastore is read again (on the
            # other server) before it is sent again, once; it lands exactly once.
            client.alter_partition_locations(info, [LocationChange((d,), old[d], new[d]) for d in old],
                                             {"tableswap.swap_id": "s1"})
            assert client.port == second.port
            seen = witness.get_partitions(info, [("d1",), ("d2",)])
            assert {v[0]: p.location for v, p in seen.items()} == new
            assert {p.swap_id for p in seen.values()} == {"s1"}
            # The lock lives in the shared database: the other server confirms and keeps it.
            lock.confirm()
            assert [h.lock_id for h in witness.lock_holders("ha", "events")] == [lock.lock_id]
        finally:
            lock.release()
        assert witness.lock_holders("ha", "events") == []

    # A new client whose first server is down connects to the next one.
    with MetastoreClient(uri, connect_attempts=1) as client:
        assert client.port == second.port
        assert client.get_table("ha", "events").name == "events"
    # Every server down: one clear error naming the URI.
    _kill(second)
    with pytest.raises(errors.CatalogUnavailableError, match="cannot reach the Hive Metastore at thrift://"):
        MetastoreClient(uri, connect_attempts=1).open()
