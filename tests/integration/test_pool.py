"""The process's pool of idle metastore connections (against the real metastore)."""

from __future__ import annotations

import multiprocessing

import pytest

from tableswap import swap_partitions
from tableswap.metastore.client import MetastoreClient
from tableswap.metastore.pool import ClientPool

from ..support.helpers import batch_df, create_events, reader_view, today

pytestmark = pytest.mark.integration


def test_a_released_connection_is_reused_with_its_call_count_reset(metastore_uri):
    pool = ClientPool()
    first = pool.acquire("k", lambda: MetastoreClient(metastore_uri))
    first.list_tables("default")
    assert first.calls == 1
    pool.release(first)
    again = pool.acquire("k", lambda: MetastoreClient(metastore_uri))
    assert again is first and again.calls == 0
    assert pool.acquire("other", lambda: MetastoreClient(metastore_uri)) is not first  # keyed
    pool.close_all()


def test_a_connection_that_saw_an_error_is_closed_not_pooled(metastore_uri):
    pool = ClientPool()
    with pytest.raises(RuntimeError):
        with pool.client("k", lambda: MetastoreClient(metastore_uri)) as client:
            raise RuntimeError("boom")
    assert not client.connected
    assert pool.acquire("k", lambda: MetastoreClient(metastore_uri)) is not client


def test_a_dead_pooled_connection_is_reconnected_by_the_ping(metastore_uri):
    pool = ClientPool()
    client = pool.acquire("k", lambda: MetastoreClient(metastore_uri))
    pool.release(client)
    client._transport.close()  # the server side went away while it sat idle
    again = pool.acquire("k", lambda: MetastoreClient(metastore_uri))
    assert again is client and again.connected
    assert again.database_exists("default")
    pool.close_all()


def test_the_pool_keeps_at_most_max_idle_connections(metastore_uri):
    pool = ClientPool(max_idle=2)
    clients = [pool.acquire("k", lambda: MetastoreClient(metastore_uri)) for _ in range(3)]
    for client in clients:
        pool.release(client)
    assert [c.connected for c in clients] == [True, True, False]
    pool.close_all()
    assert not any(c.connected for c in clients)


def _child_uses_a_new_connection(pool: ClientPool, parent_client: MetastoreClient, uri: str, out) -> None:
    client = pool.acquire("k", lambda: MetastoreClient(uri))
    out.put((client is parent_client, client.list_tables("default") is not None))


def test_a_forked_child_never_uses_the_parents_connections(metastore_uri):
    pool = ClientPool()
    client = pool.acquire("k", lambda: MetastoreClient(metastore_uri))
    pool.release(client)
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child_uses_a_new_connection, args=(pool, client, metastore_uri, out))
    child.start()
    try:
        reused, answered = out.get(timeout=60)
        child.join(60)
    finally:
        if child.is_alive():  # never leave a hung child holding the session's sockets
            child.kill()
    assert (reused, answered) == (False, True)
    # The parent's connection is still in step after the child's work.
    assert pool.acquire("k", lambda: MetastoreClient(metastore_uri)) is client
    assert client.list_tables("default") is not None
    pool.close_all()


def test_a_second_swap_in_the_process_opens_no_new_connection(spark, db, tmp_path, ts_env, monkeypatch):
    table = create_events(spark, db, tmp_path)
    swap_partitions(batch_df(spark, {(today(0),): 2}, "first"), table)
    opened = []
    real_connect = MetastoreClient._connect

    def counting_connect(self):
        opened.append(self)
        return real_connect(self)

    monkeypatch.setattr(MetastoreClient, "_connect", counting_connect)
    result = swap_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 1}, "second"), table)
    assert opened == []
    assert reader_view(spark, table) == {(today(0),): (3, ("second",)), (today(1),): (1, ("second",))}
    assert 0 < result.catalog_calls < 20  # counted for this swap only, not since the connection opened
