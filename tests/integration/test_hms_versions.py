"""What the real metastore releases do, recorded as tests (docs/metastores.md).

The integration tests here run against the session's metastore: the pyspark wheel's 2.3 by default,
a standalone 3.1.x/4.x release with ``TABLESWAP_TEST_HIVE_VERSION`` (e.g. ``4.0.1``). Each asserts what
that release does, so the same file records the differences. The release-resolution tests at the end
run Maven for real (offline, against an empty repository) and need no server.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tableswap import swap_partitions, swap_table
from tableswap.devmetastore import DevMetastore, DevMetastoreError
from tableswap.devmetastore.process import java_major_version
from tableswap.devmetastore.releases import (
    HiveRelease,
    parse_hive_version,
    resolve,
    spark_client_conf,
)
from tableswap import errors
from tableswap.errors import CatalogError, TableSwapError
from tableswap.metastore import compat
from tableswap.metastore.client import MetastoreClient, probe

from ..support import schema_templates
from ..conftest import selected_hive_version, selected_metastore_db
from ..support.helpers import batch_df, create_events, today

RELEASE = parse_hive_version(selected_hive_version())
MAJOR = RELEASE.major if RELEASE is not None else 2


# ----------------------------------------------------------------------------- the session's server
@pytest.mark.integration
def test_get_version_answer(hms):
    """2.3 and 3.1.3 answer fb303 getVersion with the constant "3.0" (told apart by get_catalogs,
    which 2.3 lacks); 4.x with its own release."""
    raw = hms.read("getVersion", lambda c: c.getVersion())
    info = compat.server_info(hms, refresh=True)
    if RELEASE is None:
        assert raw == "3.0" and info.family == "2.x" and info.version is None
        with pytest.raises(errors.UnsupportedMetastoreError):
            compat.call_raw(hms, "get_catalogs")
    elif MAJOR == 3:
        assert raw == "3.0" and info.family == "3.x" and info.version is None and info.at_least_3
        assert info.describe() == "Hive Metastore 3.x (reports no exact version)"
    else:
        assert raw == RELEASE.version
        assert info.version == RELEASE.version
        assert info.family == f"{RELEASE.major}.x"
        assert (info.major, info.minor) == (RELEASE.major, RELEASE.minor)


@pytest.mark.integration
def test_a_managed_table_is_translated_to_external_with_purge_on_hive_4_and_refused(spark, db, hms, ts_env):
    """Hive 4 turns a MANAGED non-ACID table created through the metastore into EXTERNAL with
    external.table.purge=TRUE and TRANSLATED_TO_EXTERNAL=TRUE; dropping it deletes its files, so
    tableswap refuses to swap it (nothing changed). 2.3 and 3.1 keep it MANAGED, without purge."""
    spark.sql(f"CREATE TABLE {db}.managed (id bigint) USING parquet")
    spark.sql(f"INSERT INTO {db}.managed VALUES (1)")
    info = hms.get_table(db, "managed")
    before = info.location
    if MAJOR >= 4:
        assert info.table_type == "EXTERNAL_TABLE"
        assert info.parameters.get("external.table.purge", "").upper() == "TRUE"
        assert info.parameters.get("TRANSLATED_TO_EXTERNAL", "").upper() == "TRUE"
        with pytest.raises(TableSwapError, match="external.table.purge"):
            swap_table(spark.createDataFrame([(2,)], "id bigint"), f"{db}.managed")
        assert hms.get_table(db, "managed").location == before
        assert [r.id for r in spark.table(f"{db}.managed").collect()] == [1]
    else:
        assert info.table_type == "MANAGED_TABLE"
        assert "external.table.purge" not in info.parameters


@pytest.mark.integration
def test_partition_flip_keeps_the_data_of_every_location_and_the_staging_table_never_purges(
        spark, db, tmp_path, hms, ts_env):
    """A partition swap on a purge-off EXTERNAL table: the staging table (created EXTERNAL with
    external.table.purge=false spelled out) is dropped after the flip, and on every release the
    staged files the partitions now point at survive that drop, as do the displaced ones."""
    table = create_events(spark, db, tmp_path / "events")
    day = today()
    swap_partitions(batch_df(spark, {(day,): 3}, "v1"), table)
    first = {tuple(p.values): p.location for p in hms.list_partitions(db, "events")}
    swap_partitions(batch_df(spark, {(day,): 2}, "v2"), table)
    assert spark.table(table).count() == 2
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]
    for location in first.values():  # displaced, still on disk for readers and rollback
        path = Path(location.removeprefix("file:"))
        assert path.is_dir() and any(p.suffix == ".parquet" for p in path.iterdir())


@pytest.mark.integration
def test_notification_log_after_a_flip(spark, db, tmp_path, hms, ts_env, dev_metastore):
    """What a flip writes to the notification log (read by replication and cache-invalidation tools).

    The log is written by DbNotificationListener, which ships in hive-hcatalog-server-extensions, not with
    the metastore: the 2.3 server inside the pyspark wheel and the 4.x releases (whose extensions are not on
    Maven Central) write no events; the 3.1.x development metastore runs the listener (published for 3.1) and
    writes, for the target table, one ADD_PARTITION event per add_partitions call (all its partitions in
    one message) and one ALTER_PARTITION event per repointed partition (alter_partitions fires the listener
    per partition, in the same transaction)."""
    from hmsclient.genthrift.hive_metastore import ttypes as tt

    table = create_events(spark, db, tmp_path / "events")
    before = hms.read("get_current_notificationEventId", lambda c: c.get_current_notificationEventId()).eventId
    swap_partitions(batch_df(spark, {(today(),): 2, (today(-1),): 2}, "v1"), table)  # adds 2
    swap_partitions(batch_df(spark, {(today(),): 1, (today(-1),): 1}, "v2"), table)  # repoints 2
    after = hms.read("get_current_notificationEventId", lambda c: c.get_current_notificationEventId()).eventId
    listener = dev_metastore is not None and dev_metastore.release is not None and \
        dev_metastore.distribution().has_class("org.apache.hive.hcatalog.listener.DbNotificationListener")
    if not listener:
        assert after == before
        return
    events = hms.read("get_next_notification", lambda c: c.get_next_notification(
        tt.NotificationEventRequest(lastEvent=before, maxEvents=10_000))).events
    on_target = [e.eventType for e in events if e.dbName == db and e.tableName == "events"]
    assert on_target == ["ADD_PARTITION", "ALTER_PARTITION", "ALTER_PARTITION"], on_target
    [added] = [e for e in events if e.tableName == "events" and e.eventType == "ADD_PARTITION"]
    assert today() in added.message and today(-1) in added.message  # both partitions in one event
    staging = {e.eventType for e in events if e.tableName != "events"}
    assert {"CREATE_TABLE", "DROP_TABLE"} <= staging, staging  # the temporary tables


@pytest.mark.integration
def test_table_parameter_compare_and_swap_on_the_server(spark, db, tmp_path, hms):
    """alter_table with expected_parameter_key/value, sent raw: what each server does with it.

    2.3.10 and 4.x on PostgreSQL enforce it (a stale value is rejected, a matching one applied); 3.1.3
    ignores it (a stale value is applied); 4.0.x on Derby rejects a stale value but cannot apply a
    matching one (Derby error 42818: PARAM_VALUE is a CLOB there), after which tableswap resends the
    alter without it. tableswap's own check on a fresh read under the table lock holds on all."""
    from hmsclient.genthrift.hive_metastore import ttypes as tt

    from tableswap.core.catalog import SWAP_ID_PARAM

    root = (tmp_path / "dim").as_uri()
    spark.sql(f"CREATE TABLE {db}.dim (id bigint) USING parquet LOCATION '{root}'")
    info = hms.get_table(db, "dim")
    hms.alter_table_location(info, info.location, root + "/_tableswap/a", {SWAP_ID_PARAM: "a"})

    def raw_alter(expected: str, new_value: str) -> str:
        raw = hms._get_table_raw(db, "dim")
        raw.parameters["probe"] = new_value
        ctx = tt.EnvironmentContext(properties={"expected_parameter_key": SWAP_ID_PARAM,
                                                "expected_parameter_value": expected})
        try:
            hms.write("alter_table", lambda c: c.alter_table_with_environment_context(db, "dim", raw, ctx))
        except CatalogError as exc:
            if compat.table_cas_unsupported(str(exc)):
                return "cannot evaluate"
            assert "has been modified" in str(exc), exc
            return "rejected"
        assert hms.get_table(db, "dim").parameters["probe"] == new_value
        return "applied"

    stale, matching = raw_alter("not-a", "x"), raw_alter("a", "y")
    if RELEASE is None or (MAJOR >= 4 and selected_metastore_db() in ("postgresql", "mysql")):
        assert (stale, matching) == ("rejected", "applied")
    elif MAJOR == 3:
        assert (stale, matching) == ("applied", "applied")
    else:  # 4.x on Derby
        assert (stale, matching) == ("rejected", "cannot evaluate")
    # tableswap's stamped alter (CAS on the previous stamp "a") lands on every server.
    current = hms.get_table(db, "dim")
    hms.alter_table_location(current, current.location, root + "/_tableswap/b", {SWAP_ID_PARAM: "b"})
    assert hms.get_table(db, "dim").swap_id == "b"


# ----------------------------------------------------------------------------- lock expiry
@pytest.mark.integration
@pytest.mark.hms_release
def test_an_abandoned_lock_expires_on_the_release(tmp_path_factory):
    """Lock housekeeping is on: a lock whose holder stops heartbeating is removed after
    lock_timeout (+ the housekeeping interval). 2.3 is covered by test_devmetastore.py."""
    from hmsclient.genthrift.hive_metastore import ttypes

    ms = DevMetastore(state_dir=tmp_path_factory.mktemp("hms-expiry"), lock_timeout_seconds=5,
                      hive_version=RELEASE.version)
    schema_templates.prepare_derby(ms)  # the release's Derby schema, copied (tests/support/schema_templates.py)
    try:
        ms.start(probe=probe)
        with MetastoreClient(ms.uri) as client:
            request = ttypes.LockRequest(
                component=[ttypes.LockComponent(type=ttypes.LockType.EXCLUSIVE, level=ttypes.LockLevel.TABLE,
                                                dbname="default", tablename=f"t_{uuid.uuid4().hex[:8]}",
                                                operationType=ttypes.DataOperationType.NO_TXN)],
                user="tableswap-test", hostname=socket.gethostname())
            lock = client.read("lock", lambda c: c.lock(request))
            assert lock.state == ttypes.LockState.ACQUIRED

            def held() -> bool:
                locks = client.read("show_locks", lambda c: c.show_locks(ttypes.ShowLocksRequest())).locks
                return any(entry.lockid == lock.lockid for entry in locks or [])

            assert held()
            deadline = time.monotonic() + 90
            while held() and time.monotonic() < deadline:
                time.sleep(1)
            assert not held(), "the abandoned lock did not expire within 90 s"
    finally:
        ms.stop()


# ----------------------------------------------------------------------------- pure / offline
def test_versions_parse_and_unknown_ones_are_refused():
    assert parse_hive_version(None) is None
    assert parse_hive_version("2.3") is None and parse_hive_version("2.3.10") is None
    four = parse_hive_version("4.0.1")
    assert four == HiveRelease("4.0.1", 4, 0)
    assert four.artifact == "hive-standalone-metastore-server" and four.min_java == 8
    three = parse_hive_version("3.1.3")
    assert three.artifact == "hive-standalone-metastore"
    assert three.schema_tool_class == "org.apache.hadoop.hive.metastore.tools.MetastoreSchemaTool"
    assert parse_hive_version("4.1.0").min_java == 17
    for bad in ("5", "4.x", "3.0.0", "2.1.1", "latest"):
        with pytest.raises(DevMetastoreError, match="Hive Metastore version"):
            parse_hive_version(bad)
    with pytest.raises(DevMetastoreError, match="unsupported Hive Metastore version '3.0.0'"):
        DevMetastore(state_dir="/nonexistent", hive_version="3.0.0")


def test_spark_client_settings_only_for_hive_4():
    assert spark_client_conf(None) == {} and spark_client_conf("3.1.3") == {}
    assert spark_client_conf("4.0.1") == {"spark.sql.hive.metastore.version": "4.0.1",
                                          "spark.sql.hive.metastore.jars": "maven"}


def test_the_suites_spark_processes_use_the_hive_client_jars_a_first_resolution_recorded(tmp_path, monkeypatch):
    """tests/support/hive_client.py: Maven coordinates until a complete recorded directory exists, then that directory."""
    from ..support import hive_client

    monkeypatch.setenv("TABLESWAP_JARS_DIR", str(tmp_path))
    assert hive_client.client_conf("3.1.3") == {} and hive_client.client_conf(None) == {}
    assert hive_client.client_conf("4.0.1") == spark_client_conf("4.0.1")  # nothing recorded yet
    where = hive_client.recorded_dir("4.0.1")
    where.mkdir(parents=True)
    (where / "hive-metastore-4.0.1.jar").write_bytes(b"")
    assert hive_client.client_conf("4.0.1") == spark_client_conf("4.0.1")  # incomplete: a copy stopped midway
    (where / hive_client.COMPLETE).write_text("1 jar\n")
    assert hive_client.client_conf("4.0.1") == {"spark.sql.hive.metastore.version": "4.0.1",
                                                "spark.sql.hive.metastore.jars": "path",
                                                "spark.sql.hive.metastore.jars.path": f"{where.as_uri()}/*.jar"}


def _script(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_release_not_in_the_cache_offline_says_so_and_leaves_no_cache_entry(tmp_path):
    """Real Maven in offline mode against an empty local repository: the download cannot happen."""
    mvn = _script(tmp_path / "mvn-offline",
                  f'#!/bin/sh\nexec mvn -o -Dmaven.repo.local={tmp_path / "m2"} "$@"\n')
    cache = tmp_path / "cache"
    with pytest.raises(DevMetastoreError) as caught:
        resolve(parse_hive_version("4.0.1"), cache, maven=mvn)
    text = str(caught.value)
    assert "Maven could not resolve Hive Metastore 4.0.1" in text and "offline" in text
    assert "org.apache.hive:hive-standalone-metastore-server:4.0.1" in text
    assert not (cache / "4.0.1").exists() and not [p for p in cache.glob(".4.0.1.*") if p.is_dir()]


def test_no_maven_for_a_release_not_in_the_cache(tmp_path):
    with pytest.raises(DevMetastoreError, match="Maven.*was not found.*apt-get install maven"):
        resolve(parse_hive_version("3.1.3"), tmp_path / "cache", maven=str(tmp_path / "no-such-mvn"))


def test_java_too_old_is_refused_before_anything_starts(tmp_path):
    """A Java 11 in JAVA_HOME for the default metastore (Spark 4 needs 17): a clear error, no process."""
    java = _script(tmp_path / "java", '#!/bin/sh\necho \'openjdk version "11.0.22" 2024-01-16\' >&2\n')
    assert java_major_version(java) == 11
    old = _script(tmp_path / "java8", '#!/bin/sh\necho \'java version "1.8.0_402"\' >&2\n')
    assert java_major_version(old) == 8
    state = tmp_path / "state"
    ms = DevMetastore(state_dir=state, java=java)
    with pytest.raises(DevMetastoreError, match="Java 11, too old .* needs Java 17"):
        ms.start(wait_timeout=5)
    assert not ms.status().running and not ms.pid_file.exists()


@pytest.mark.parametrize("version", ["4.0.1", "3.1.3"])
def test_java_too_new_for_a_release_is_refused_before_anything_is_resolved(tmp_path, monkeypatch, version):
    """3.1.x and 4.0.x run on Hadoop 3.1/3.3, whose UserGroupInformation calls Subject.getSubject; Java 23
    and newer refuse it and the server dies at start ("getSubject is not supported", seen with Temurin 25
    here on 2026-11-24). The launcher says so before resolving or starting anything."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("TABLESWAP_HMS_CACHE", str(cache))
    java = _script(tmp_path / "java", '#!/bin/sh\necho \'openjdk version "25.0.1" 2025-10-21 LTS\' >&2\n')
    assert parse_hive_version(version).max_java == 22 and parse_hive_version("4.1.0").max_java is None
    ms = DevMetastore(state_dir=tmp_path / "state", hive_version=version, java=java)
    with pytest.raises(DevMetastoreError, match=rf"Java 25, too new for Hive Metastore {version}, which runs on "
                                                r"Java 22 at the newest .*Subject.getSubject.*JAVA_HOME"):
        ms.start(wait_timeout=5)
    assert not cache.exists() and not ms.status().running and not ms.pid_file.exists()
    # The Java 17 the machine has is within the range (the suite runs the releases on it).
    assert 17 >= parse_hive_version(version).min_java


def test_the_installed_java_is_new_enough():
    found = java_major_version(subprocess.run(["sh", "-c", "command -v java"], capture_output=True,
                                              text=True).stdout.strip() or "java")
    assert found is not None and found >= 17, found


def test_a_derby_state_dir_is_not_reopened_by_another_release(tmp_path):
    state = tmp_path / "state"
    (state / "metastore_db").mkdir(parents=True)
    (state / "metastore.version").write_text("2.3\n")
    with pytest.raises(DevMetastoreError, match="holds the Derby database of Hive Metastore 2.3, not 4.0.1"):
        DevMetastore(state_dir=state, hive_version="4.0.1").start(wait_timeout=5)
    assert os.listdir(state / "metastore_db") == []


def test_cli_refuses_an_unknown_version_and_starts_nothing(tmp_path):
    from click.testing import CliRunner

    from tableswap.cli import main

    state = tmp_path / "state"
    result = CliRunner().invoke(main, ["metastore", "start", "--hive-version", "9.9.9", "--state-dir", str(state)])
    assert result.exit_code == 1
    assert "unsupported Hive Metastore version '9.9.9'" in result.output and "4.0.1" in result.output
    assert not state.exists()


@pytest.mark.integration
@pytest.mark.hms_release
def test_the_release_configuration_the_session_metastore_runs_with(dev_metastore):
    """What the launcher wrote for the selected release: housekeeping on (lock expiry), the lock timeout,
    background tasks limited to classes the release holds, the notification API open."""
    if dev_metastore is None:
        pytest.skip("needs the session's own metastore (TABLESWAP_TEST_METASTORE_URI is set)")
    import xml.etree.ElementTree as ET

    conf = {p.findtext("name"): p.findtext("value")
            for p in ET.parse(dev_metastore.metastore_site_file).getroot().iter("property")}
    assert not dev_metastore.hive_site_file.exists()
    assert conf["metastore.housekeeping.threads.on"] == "true"
    assert conf["metastore.txn.timeout"] == f"{dev_metastore.lock_timeout_seconds}s"
    assert conf["hive.metastore.event.db.notification.api.auth"] == "false"
    tasks = conf["metastore.task.threads.always"].split(",")
    assert "org.apache.hadoop.hive.metastore.events.EventCleanerTask" in tasks
    assert "org.apache.hadoop.hive.metastore.HiveProtoEventsCleanerTask" not in tasks  # in hive-exec
    assert "org.apache.hadoop.hive.metastore.repl.DumpDirCleanerTask" not in tasks  # in hive-exec
    dist = dev_metastore.distribution()
    assert all(dist.has_class(task) for task in tasks)
    assert dist.schema_version_scripts("derby") and dist.hadoop_version
    assert dev_metastore.status().hive_version == RELEASE.version


@pytest.mark.integration
def test_partition_names_of_a_table_that_is_gone_reads_as_gone_on_every_release(db, hms):
    """A table dropped between a listing and the read of its partition names (the janitor's scan beside a job
    dropping its temporary table) must read as gone, so that the scan goes on. The servers answer it three ways:
    2.3 "Internal error processing get_partition_names" (its IDL declares no NoSuchObjectException on the call),
    3.1 a MetaException "... table not found", 4.x no names at all; the client makes the first two
    TableNotFoundError."""
    if MAJOR >= 4:
        assert hms.partition_names(db, "never_was_here") == []
    else:
        with pytest.raises(errors.TableNotFoundError):
            hms.partition_names(db, "never_was_here")
