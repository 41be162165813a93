"""Lock safety: the heartbeat against the server's lock timeout, the lock confirmed right before the
flip, and durations that are not finite positive numbers refused wherever a setting comes from.

The unit tests need no metastore; the others run against the real metastore and SparkSession."""

from __future__ import annotations

import logging
import math
import threading
import time
from pathlib import Path

import pytest

from tableswap import errors, swap_partitions
from tableswap.config import SWAP_OPTIONS, resolve
from tableswap.core import locations as loc
from tableswap.journal import Journal
from tableswap.metastore.client import MetastoreClient
from tableswap.metastore.lock import TableLock
from tableswap.core.catalog import SWAP_ID_PARAM

from ..support.helpers import batch_df, create_events, partition_locations, reader_view, today

SECONDS = ("lock_timeout_s", "heartbeat_s", "metastore_timeout_s")
URI = "thrift://127.0.0.1:9"  # never connected to by these unit tests


@pytest.fixture
def no_env(monkeypatch):
    for name in ("TABLESWAP_METASTORE_URI", "TABLESWAP_JOURNAL_URL", "TABLESWAP_CONFIG"):
        monkeypatch.delenv(name, raising=False)


# --------------------------------------------------------------------------- bad durations (unit)
@pytest.mark.hostile
@pytest.mark.parametrize("name", SECONDS)
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 0, -1.5])
def test_a_non_finite_or_non_positive_duration_option_is_refused_naming_it(no_env, name, value):
    with pytest.raises(errors.ConfigurationError, match=name):
        resolve(metastore_uri=URI, **{name: value})


@pytest.mark.hostile
@pytest.mark.parametrize("name", SECONDS)
@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "+inf"])
def test_a_non_finite_duration_in_the_config_file_is_refused_naming_it(no_env, monkeypatch, tmp_path, name, text):
    path = tmp_path / "config.toml"
    path.write_text(f"[swap]\n{name} = {text}\n")
    monkeypatch.setenv("TABLESWAP_CONFIG", str(path))
    with pytest.raises(errors.ConfigurationError, match=f"{name}.*{str(path)}|{str(path)}.*{name}"):
        resolve(metastore_uri=URI)


@pytest.mark.hostile
def test_a_non_finite_hook_timeout_in_the_config_file_is_refused(no_env, monkeypatch, tmp_path):
    path = tmp_path / "config.toml"
    path.write_text("[hooks]\ntimeout_s = nan\n")
    monkeypatch.setenv("TABLESWAP_CONFIG", str(path))
    with pytest.raises(errors.ConfigurationError, match="timeout_s"):
        resolve(metastore_uri=URI)


@pytest.mark.hostile
@pytest.mark.parametrize("field", ["timeout_s", "heartbeat_s", "poll_s"])
@pytest.mark.parametrize("value", [math.inf, math.nan, 0, -1])
def test_a_lock_refuses_a_non_finite_or_non_positive_duration(field, value):
    client = MetastoreClient(URI)
    with pytest.raises(errors.ConfigurationError, match=field):
        TableLock(client, "db", "t", swap_id="x", **{field: value})


@pytest.mark.hostile
def test_heartbeat_inf_through_swap_options_is_a_configuration_error_not_an_overflow(no_env):
    from tableswap.runtime import Runtime

    with pytest.raises(errors.ConfigurationError, match="heartbeat_s"):
        Runtime.from_options(metastore_uri=URI, heartbeat_s=float("inf"))


def test_every_seconds_option_is_checked():
    assert set(SECONDS) <= set(SWAP_OPTIONS)


# --------------------------------------------------------------------------- heartbeat vs server timeout (unit)
def test_safe_heartbeat_keeps_a_short_enough_interval_and_clamps_a_long_one():
    from tableswap.metastore.lock import safe_heartbeat

    assert safe_heartbeat(20.0, 60.0) == 20.0  # 60 / 3: kept
    assert safe_heartbeat(5.0, 300.0) == 5.0
    assert safe_heartbeat(20.0, 30.0) == pytest.approx(10.0)  # clamped to a third of the timeout
    assert safe_heartbeat(20.0, None) == 20.0  # the server does not say: as configured


def test_safe_heartbeat_refuses_a_server_timeout_too_short_to_keep_a_lock():
    from tableswap.metastore.lock import safe_heartbeat

    with pytest.raises(errors.ConfigurationError, match="hive.txn.timeout") as info:
        safe_heartbeat(20.0, 1.0)
    assert "heartbeat_s" in str(info.value) and not info.value.retryable


def test_hive_time_values_are_parsed():
    from tableswap.metastore.compat import parse_time_value

    assert parse_time_value("60s") == 60.0
    assert parse_time_value("300") == 300.0
    assert parse_time_value("5m") == 300.0
    assert parse_time_value("1500ms") == 1.5
    assert parse_time_value(" 2 min ") == 120.0
    assert parse_time_value("1d") == 86400.0
    assert parse_time_value("soon") is None and parse_time_value(None) is None
    assert parse_time_value("inf") is None and parse_time_value("0s") is None


@pytest.mark.hostile
@pytest.mark.parametrize("value", ["9" * 400 + "s", float("inf"), float("nan")])
def test_a_duration_too_long_for_any_clock_is_bad_input_not_an_overflow(value):
    from tableswap.core.durations import parse_duration

    with pytest.raises(errors.InvalidInputError, match="duration"):
        parse_duration(value)


# --------------------------------------------------------------------------- against the real metastore
def server_lock_timeout(client: MetastoreClient) -> float:
    raw = client.config_value("metastore.txn.timeout") or client.config_value("hive.txn.timeout")
    assert raw and raw.rstrip("s").isdigit(), raw  # the test metastore's form, e.g. "60s"
    return float(raw.rstrip("s"))


@pytest.mark.integration
def test_a_heartbeat_too_slow_for_the_servers_lock_timeout_is_clamped_with_a_warning(hms, db, spark, caplog):
    spark.sql(f"CREATE TABLE {db}.clamped (id bigint) USING parquet")
    timeout = server_lock_timeout(hms)
    caplog.set_level(logging.WARNING, logger="tableswap.lock")
    with TableLock(hms, db, "clamped", swap_id="slow", heartbeat_s=timeout * 2) as lock:
        assert lock.heartbeat_s == pytest.approx(timeout / 3)
        assert hms.lock_holders(db, "clamped")[0].state == "ACQUIRED"
    [warning] = [r.getMessage() for r in caplog.records if "lock.heartbeat_lowered" in r.getMessage()]
    assert f"server_lock_timeout_s={timeout}" in warning and "hive.txn.timeout" in warning
    caplog.clear()
    with TableLock(hms, db, "clamped", swap_id="fast", heartbeat_s=1.0) as lock:
        assert lock.heartbeat_s == 1.0  # short enough: kept
    assert hms.lock_holders(db, "clamped") == []


@pytest.mark.integration
def test_a_long_wait_for_a_lock_says_who_holds_it_while_waiting(hms, db, spark, caplog, monkeypatch):
    """A wait for another holder's lock (a dead writer's lasts until the server expires it) is not silent:
    a warning names the holder after WAIT_NOTICE_S and again every WAIT_NOTICE_EVERY_S."""
    from tableswap.metastore import lock as lock_module

    spark.sql(f"CREATE TABLE {db}.waited (id bigint) USING parquet")
    monkeypatch.setattr(lock_module, "WAIT_NOTICE_S", 0.5)
    monkeypatch.setattr(lock_module, "WAIT_NOTICE_EVERY_S", 1.0)
    caplog.set_level(logging.WARNING, logger="tableswap.lock")
    with TableLock(hms, db, "waited", swap_id="the_holder", timeout_s=30, heartbeat_s=5):
        with MetastoreClient(hms.uri) as other:
            with pytest.raises(errors.LockTimeoutError):
                TableLock(other, db, "waited", swap_id="the_waiter", timeout_s=3.5, heartbeat_s=5,
                          poll_s=0.2).acquire()
    notices = [r.getMessage() for r in caplog.records if "lock.waiting" in r.getMessage()]
    assert 2 <= len(notices) <= 4, notices
    assert all("swap=the_holder" in n and f"{db}.waited" in n for n in notices), notices


@pytest.mark.integration
@pytest.mark.fault
def test_a_lock_taken_away_before_the_flip_stops_the_writer_and_keeps_the_other_writers_commit(
        spark, db, tmp_path, hms, ts_env, metastore_uri, monkeypatch):
    """Writer A holds the lock, its intent journaled, paused just before its flip (with a heartbeat
    interval that would not notice for minutes). Another client removes A's lock (as the server does
    when its lock timeout expires it) and writer B swaps one of A's partitions meanwhile. When A goes
    on, it must find its lock gone and flip nothing: B's partition survives, nothing of A is live."""
    from hmsclient.genthrift.hive_metastore import ttypes  # a raw call, as another client would make it

    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "old").write.insertInto(table)
    pause = tmp_path / "pause"
    monkeypatch.setenv("TABLESWAP_PAUSE_AT", "after_intent")
    monkeypatch.setenv("TABLESWAP_PAUSE_FILE", str(pause))
    a_batch = batch_df(spark, {(today(0),): 4, (today(5),): 1}, "writer-a")
    outcome: dict = {}

    def writer_a():
        try:
            outcome["result"] = swap_partitions(a_batch, table, heartbeat_s=600)
        except Exception as exc:  # noqa: BLE001 - asserted below
            outcome["error"] = exc

    thread = threading.Thread(target=writer_a)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while not Path(f"{pause}.reached").exists():
            assert thread.is_alive() and time.monotonic() < deadline, outcome
            time.sleep(0.05)
        monkeypatch.delenv("TABLESWAP_PAUSE_AT")  # writer B must not pause
        [held] = [h for h in hms.lock_holders(db, "events") if h.state == "ACQUIRED"]
        assert "tableswap swap=" in held.agent_info
        with MetastoreClient(metastore_uri) as other:
            other.read("unlock", lambda c: c.unlock(ttypes.UnlockRequest(lockid=held.lock_id)))
        b = swap_partitions(batch_df(spark, {(today(0),): 9}, "writer-b"), table)
    finally:
        Path(f"{pause}.go").touch()
        thread.join(timeout=120)
    error = outcome.get("error")
    assert error is not None, outcome  # the old code flipped without its lock
    assert isinstance(error, errors.LockLostError), outcome
    assert error.retryable and "nothing was changed" in str(error)
    # B's commit survives; nothing of A is live; A's staging is gone from the metastore.
    assert reader_view(spark, table) == {(today(0),): (9, ("writer-b",)), (today(1),): (2, ("old",))}
    parts = {p.values: p for p in hms.list_partitions(db, "events")}
    assert parts[(today(0),)].parameters.get(SWAP_ID_PARAM) == b.swap_id
    assert loc.normalize(parts[(today(0),)].location) == loc.normalize(b.replaced[0].new_location)
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]
    assert hms.lock_holders(db, "events") == []
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    assert journal.get_swap(error.swap_id).state == "failed"
    # Every displaced location is queued once: only what B displaced.
    queued = [loc.normalize(d.location) for d in journal.deletions(db=db, table="events")]
    assert queued == [loc.normalize(b.replaced[0].old_location)]
    # The error is retryable: the same swap, rerun, goes through after B (serial order B, A).
    again = swap_partitions(a_batch, table)
    assert reader_view(spark, table) == {(today(0),): (4, ("writer-a",)), (today(1),): (2, ("old",)),
                                         (today(5),): (1, ("writer-a",))}
    assert loc.normalize(again.replaced[0].old_location) == loc.normalize(b.replaced[0].new_location)
    assert partition_locations(hms, db, "events")[(today(0),)] == loc.normalize(again.replaced[0].new_location)
