"""The development metastore of a standalone release (3.1.x/4.x) on MySQL or MariaDB.

The unit tests need nothing; the integration test starts the selected release (``TABLESWAP_TEST_HIVE_VERSION``)
a second time, on a fresh database of the MySQL/MariaDB server ``$TABLESWAP_TEST_MYSQL`` (``tests/support/mysql_metastore.py``),
and checks what tableswap relies on there: the schema made by the release's own schematool and reused on
restart, a stamped table flip with the server's compare-and-swap, lock conflicts and abandoned-lock expiry.
The whole suite runs on it with ``TABLESWAP_TEST_METASTORE_DB=mysql`` (docs/metastores.md).
"""

from __future__ import annotations

import time
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from tableswap import errors
from tableswap.cli import main
from tableswap.devmetastore import DevMetastore, DevMetastoreError
from tableswap.devmetastore import backend as be
from tableswap.metastore.client import MetastoreClient, probe
from tableswap.metastore.lock import TableLock
from tableswap.core.catalog import SWAP_ID_PARAM

from ..support import mysql_metastore
from ..conftest import selected_hive_version
from .test_postgres_metastore import _create_table


def _fake_jar(path: Path, entry: str) -> Path:
    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr(entry, b"\xca\xfe\xba\xbe")
    return path


def test_parse_mysql_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    b = be.parse_backend("mysql://hive:s%3Acret@db.example:3307/meta_store?useSSL=true")
    assert isinstance(b, be.MySQLBackend)
    assert (b.host, b.port, b.database, b.user, b.password) == ("db.example", 3307, "meta_store", "hive", "s:cret")
    assert b.describe() == "mysql://hive:***@db.example:3307/meta_store?useSSL=true"
    assert be.parse_backend(b.spec()) == b  # what the state directory records round-trips
    assert be.parse_backend("mariadb://u@h/m").port == 3306
    assert isinstance(be.parse_backend("mysql+pymysql://u@h/m"), be.MySQLBackend)  # a SQLAlchemy URL works too
    monkeypatch.setenv("MYSQL_PWD", "fromenv")
    assert be.parse_backend("mysql://u@h/m").password == "fromenv"
    with pytest.raises(DevMetastoreError, match="names no database") as info:
        be.parse_backend("mysql://u:pw@h/")
    assert ":pw@" not in str(info.value)


def test_mysql_driver_discovery_and_how_each_driver_addresses_the_database(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv(be.MYSQL_JDBC_JAR_ENV, raising=False)
    backend = be.parse_backend("mysql://hive:pw@127.0.0.1/hms")
    mariadb = be.find_mysql_jdbc_driver(_fake_jar(tmp_path / "m.jar", "org/mariadb/jdbc/Driver.class"))
    props = dict(backend.connection_properties(mariadb))
    # MariaDB's driver is told to report "MySQL", the product name DataNucleus and Hive's TxnHandler know.
    assert props["javax.jdo.option.ConnectionURL"] == "jdbc:mariadb://127.0.0.1:3306/hms?useMysqlMetadata=true"
    assert props["javax.jdo.option.ConnectionDriverName"] == "org.mariadb.jdbc.Driver"
    assert props["javax.jdo.option.ConnectionPassword"] == "pw"
    monkeypatch.setenv(be.MYSQL_JDBC_JAR_ENV, str(_fake_jar(tmp_path / "c.jar", "com/mysql/cj/jdbc/Driver.class")))
    connector_j = be.find_mysql_jdbc_driver()
    assert dict(backend.connection_properties(connector_j))["javax.jdo.option.ConnectionURL"] == \
        "jdbc:mysql://127.0.0.1:3306/hms"
    # Named but wrong: a clear error, never a fallback to another jar.
    pg = _fake_jar(tmp_path / "pg.jar", "org/postgresql/Driver.class")
    with pytest.raises(DevMetastoreError, match=r"not a MySQL/MariaDB JDBC driver jar.*libmariadb-java"):
        be.find_mysql_jdbc_driver(pg)
    monkeypatch.delenv(be.MYSQL_JDBC_JAR_ENV)
    monkeypatch.setattr(be, "MYSQL_JDBC_JAR_SEARCH_PATHS", (str(tmp_path / "nowhere" / "mariadb-*.jar"),))
    with pytest.raises(DevMetastoreError, match=r"not found in .*nowhere.*apt-get install libmariadb-java.*"
                                                r"TABLESWAP_MYSQL_JDBC_JAR"):
        be.find_mysql_jdbc_driver()


def test_mysql_on_the_default_release_or_without_a_password_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """2.3's schema on a server database comes from DataNucleus plus tableswap's PostgreSQL lock-table
    script; on MySQL only a release's own schematool makes it. A clear error, nothing recorded."""
    result = CliRunner().invoke(main, ["metastore", "start", "--state-dir", str(tmp_path / "s"),
                                       "--db", "mysql://u:secret@127.0.0.1/hms"])
    assert result.exit_code == 1
    assert "needs a standalone release" in result.output and "--hive-version 4.0.1" in result.output
    assert "secret" not in result.output
    dev = DevMetastore(state_dir=tmp_path / "s")
    assert not dev.status().running and not dev.backend_file.exists()
    # A release without a password: refused up front, not after schematool's "Access denied".
    with pytest.raises(DevMetastoreError, match="gives no password.*mysql://USER:PASSWORD"):
        DevMetastore(state_dir=tmp_path / "r", db="mysql://u@127.0.0.1/hms", hive_version="4.0.1").start(wait_timeout=5)
    assert not DevMetastore(state_dir=tmp_path / "r").backend_file.exists()


@pytest.mark.integration
@pytest.mark.hms_release
def test_the_release_runs_on_mysql(tmp_path: Path) -> None:
    mysql_metastore.skip_or_fail_if_unavailable()
    version = selected_hive_version()
    lock_timeout = 5
    with mysql_metastore.fresh_database("tswap_mysql") as database:
        dev = DevMetastore(state_dir=tmp_path / "hms", db=database.spec(), hive_version=version,
                           lock_timeout_seconds=lock_timeout)
        try:
            status = dev.start(probe=probe, wait_timeout=240)
            assert status.backend == database.describe()
            assert not dev.derby_dir.exists()  # nothing went to Derby
            # The release's schematool made the schema, lock tables included, in this database.
            schema_version = mysql_metastore.sql(database, "SELECT SCHEMA_VERSION FROM VERSION").split()
            assert schema_version and schema_version[0].startswith(version.rsplit(".", 1)[0][:3]), schema_version
            tables = set(mysql_metastore.sql(database, "SHOW TABLES").split())
            assert {"DBS", "TBLS", "PARTITIONS", "HIVE_LOCKS", "TXNS", "NOTIFICATION_LOG"} <= tables

            # A stamped flip (tableswap's unpartitioned swap step) lands, recorded in MySQL.
            _create_table(status.uri, "mycheck", "events", tmp_path / "mycheck.db" / "events")
            root = (tmp_path / "mycheck.db" / "events").as_uri()
            with MetastoreClient(status.uri) as client, MetastoreClient(status.uri) as other:
                info = client.get_table("mycheck", "events")
                client.alter_table_location(info, info.location, root + "/_tableswap/a", {SWAP_ID_PARAM: "a"})
                assert client.get_table("mycheck", "events").swap_id == "a"
                rows = mysql_metastore.sql(database, "SELECT s.LOCATION FROM SDS s JOIN TBLS t ON t.SD_ID = s.SD_ID "
                                                     "WHERE t.TBL_NAME = 'events'").split()
                assert len(rows) == 1 and rows[0].endswith("/mycheck.db/events/_tableswap/a"), rows  # file:/ or file:///
                # Locks: a second writer is refused naming the holder; an abandoned lock expires.
                held = TableLock(client, "mycheck", "events", swap_id="holder", heartbeat_s=3600).acquire()
                with pytest.raises(errors.LockTimeoutError, match=r"held by lock .*\(tableswap swap=holder"):
                    TableLock(other, "mycheck", "events", swap_id="loser", timeout_s=1.5).acquire()
                held._stop.set()  # the holder "dies": no more heartbeats, no unlock
                deadline = time.monotonic() + lock_timeout + 60
                while client.lock_holders("mycheck", "events") and time.monotonic() < deadline:
                    time.sleep(0.5)
                assert client.lock_holders("mycheck", "events") == [], "the abandoned lock never expired"
                with TableLock(other, "mycheck", "events", swap_id="next", timeout_s=5) as lock:
                    assert lock.lock_id is not None

            # A plain restart reuses the recorded database and its schema (schematool -info, no -initSchema).
            dev.stop()
            restarted = DevMetastore(state_dir=dev.state_dir, lock_timeout_seconds=lock_timeout)
            assert restarted.start(probe=probe, wait_timeout=240).backend == database.describe()
            with MetastoreClient(restarted.uri) as client:
                assert client.get_table("mycheck", "events").swap_id == "a"
        finally:
            dev.stop()
    assert not mysql_metastore.database_exists(database.database)


def test_a_server_that_refuses_the_admin_user_is_a_missing_part_not_a_failure(monkeypatch) -> None:
    """A MariaDB without the user .ci/run creates (or with another password) skips the MySQL tests outside CI,
    saying so, like a MariaDB that is not there; without this check they failed at their first statement."""
    mysql_metastore.skip_or_fail_if_unavailable()
    server = mysql_metastore.admin()
    monkeypatch.setenv(mysql_metastore.ADMIN_URL_ENV,
                       f"mysql://{server.user}:not-{server.password}@{server.host}:{server.port}/{server.database}")
    reason = mysql_metastore.unavailable_reason()
    assert reason is not None and "refused the login" in reason and mysql_metastore.ADMIN_URL_ENV in reason, reason
    assert f"not-{server.password}" not in reason
