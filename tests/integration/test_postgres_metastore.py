"""The development metastore on PostgreSQL (``tableswap metastore start --db postgresql://...``).

Unit tests (URL parsing, driver discovery, rendered config, clear errors) always run. The
integration tests start one PostgreSQL-backed HMS 2.3 for this module, in a fresh database with a
random name on the local server (``$TABLESWAP_TEST_POSTGRES``, default postgres@127.0.0.1:5432),
dropped afterwards; without a server or a JDBC driver they fail in CI and are skipped elsewhere
(``tests/support/needs.py``). The rest of the suite runs on Derby; the last test
reruns a representative subset of it (swap partitions, swap table, lock conflict, writer conflict,
table CAS, rollback, partition values differing by a trailing blank) against this module's PostgreSQL-backed metastore, in a child pytest with its
own SparkSession, so CI covers both backends at the cost of one more metastore and Spark start.
Run the whole suite on PostgreSQL with ``TABLESWAP_TEST_METASTORE_DB=postgresql python3 -m pytest``.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Iterator

import pytest
from click.testing import CliRunner

from tableswap import errors
from tableswap.cli import main
from tableswap.devmetastore import DevMetastore, DevMetastoreError
from tableswap.devmetastore import backend as be
from tableswap.metastore.client import MetastoreClient, probe
from tableswap.metastore.lock import TableLock

from ..support import pg_metastore as pg

LOCK_TIMEOUT_SECONDS = 10
REAPER_INTERVAL_SECONDS = 5
ROOT = Path(__file__).resolve().parents[2]

# What the child run executes against the PostgreSQL-backed metastore.
REPRESENTATIVE_SUBSET = [
    "tests/integration/test_swap_partitions.py::test_backfill_replaces_existing_adds_new_and_rerun_is_idempotent",
    "tests/integration/test_swap_table.py::test_swap_table_repoints_location_and_keeps_old_files",
    "tests/integration/test_concurrency.py::test_lock_timeout_names_the_holder_and_changes_nothing",
    "tests/integration/test_concurrency.py::test_a_writer_that_commits_first_is_followed_not_refused",
    "tests/integration/test_concurrency.py::test_table_cas_rejects_a_stale_expected_stamp",
    "tests/integration/test_admin_cli.py::test_rollback_partition_then_rollback_of_rollback_then_to",
    # PostgreSQL does not pad strings with blanks: 'a ' and 'a' are two partitions only here.
    "tests/integration/test_hostile_names.py::test_values_with_trailing_whitespace_are_their_own_partitions",
]


# ----------------------------------------------------------------------------- unit tests
def test_parse_backend_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PGPASSWORD", raising=False)
    assert isinstance(be.parse_backend(None), be.DerbyBackend)
    assert isinstance(be.parse_backend(" Derby "), be.DerbyBackend)
    b = be.parse_backend("postgresql://hive:s%3Acret@db.example:6543/meta%20store?sslmode=require")
    assert isinstance(b, be.PostgresBackend)
    assert (b.host, b.port, b.database, b.user, b.password) == ("db.example", 6543, "meta store", "hive", "s:cret")
    assert b.jdbc_url == "jdbc:postgresql://db.example:6543/meta%20store?sslmode=require"
    assert "s:cret" not in b.describe() and "s%3Acret" not in b.describe() and ":***@" in b.describe()
    assert be.parse_backend(b.spec()) == b  # what the state directory records round-trips
    plain = be.parse_backend("postgres://u@[::1]/m")
    assert (plain.host, plain.port, plain.password) == ("::1", 5432, None)
    assert plain.jdbc_url == "jdbc:postgresql://[::1]:5432/m"
    assert be.parse_backend("postgresql+psycopg://u@h/m").database == "m"  # a SQLAlchemy URL works too
    monkeypatch.setenv("PGPASSWORD", "fromenv")
    assert be.parse_backend("postgresql://u@h/m").password == "fromenv"


@pytest.mark.parametrize("url, message", [
    ("oracle://u:pw@h/m", "expected 'derby', postgresql://.* or mysql://"),
    ("postgresql://u@h", "names no database"),
    ("postgresql://u@h/", "names no database"),
    ("postgresql://u:pw@h:notaport/m", "invalid port"),
])
def test_bad_database_urls_are_clear_errors_without_the_password(url: str, message: str) -> None:
    with pytest.raises(DevMetastoreError, match=message) as info:
        be.parse_backend(url)
    assert ":pw@" not in str(info.value)
    assert isinstance(info.value, errors.TableSwapError)


def _fake_jar(path: Path, entry: str = "org/postgresql/Driver.class") -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr(entry, b"\xca\xfe\xba\xbe")
    return path


def test_jdbc_driver_discovery(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(be.JDBC_JAR_ENV, raising=False)
    explicit = _fake_jar(tmp_path / "pg.jar")
    assert be.find_postgres_jdbc_jar(explicit) == explicit.resolve()
    env_jar = _fake_jar(tmp_path / "env.jar")
    monkeypatch.setenv(be.JDBC_JAR_ENV, str(env_jar))
    assert be.find_postgres_jdbc_jar() == env_jar.resolve()
    assert be.find_postgres_jdbc_jar(explicit) == explicit.resolve()  # the option wins over the env
    # Named but wrong: a clear error, never a fallback to another jar.
    monkeypatch.setenv(be.JDBC_JAR_ENV, str(_fake_jar(tmp_path / "other.jar", "org/other/Driver.class")))
    with pytest.raises(DevMetastoreError, match=r"not a PostgreSQL JDBC driver jar.*TABLESWAP_PG_JDBC_JAR"):
        be.find_postgres_jdbc_jar()
    with pytest.raises(DevMetastoreError, match=r"does not exist.*libpostgresql-jdbc-java"):
        be.find_postgres_jdbc_jar(tmp_path / "missing.jar")
    # Nothing anywhere: the error names the package to install and every place searched.
    monkeypatch.delenv(be.JDBC_JAR_ENV)
    monkeypatch.setattr(be, "JDBC_JAR_SEARCH_PATHS", (str(tmp_path / "nowhere" / "postgresql.jar"),
                                                      str(tmp_path / "nowhere" / "postgresql-*.jar")))
    with pytest.raises(DevMetastoreError) as info:
        be.find_postgres_jdbc_jar()
    message = str(info.value)
    assert "apt-get install libpostgresql-jdbc-java" in message
    assert str(tmp_path / "nowhere" / "postgresql.jar") in message
    assert "--jdbc-driver" in message and be.JDBC_JAR_ENV in message
    # The glob entries are searched too.
    (tmp_path / "nowhere").mkdir()
    found = _fake_jar(tmp_path / "nowhere" / "postgresql-42.7.1.jar")
    assert be.find_postgres_jdbc_jar() == found.resolve()


def test_rendered_hive_site_for_postgres(tmp_path: Path) -> None:
    jar = _fake_jar(tmp_path / "pg.jar")
    dev = DevMetastore(state_dir=tmp_path / "s", port=9999, db="postgresql://hive:p&w@127.0.0.1:5432/hms",
                       jdbc_driver=jar, lock_timeout_seconds=33)
    props = {p.findtext("name"): p.findtext("value") for p in ET.fromstring(dev.render_hive_site()).iter("property")}
    assert props["javax.jdo.option.ConnectionURL"] == "jdbc:postgresql://127.0.0.1:5432/hms"
    assert props["javax.jdo.option.ConnectionDriverName"] == "org.postgresql.Driver"
    assert props["javax.jdo.option.ConnectionUserName"] == "hive"
    assert props["javax.jdo.option.ConnectionPassword"] == "p&w"  # XML-escaped, parsed back
    assert props["hive.in.test"] == "false"  # TxnDbUtil.prepDb is Derby-only SQL
    assert props["hive.txn.manager"] == "org.apache.hadoop.hive.ql.lockmgr.DbTxnManager"  # else no reaper
    assert props["hive.compactor.initiator.on"] == "true" and props["hive.txn.timeout"] == "33s"
    assert props["datanucleus.autoStartMechanism"] == "Classes"  # every object table at startup
    assert "org.apache.hadoop.hive.metastore.model.MTablePrivilege" in props["datanucleus.autoStartClassNames"]
    assert not [v for v in props.values() if "derby" in (v or "").lower()]
    assert dev.build_command(9999)[dev.build_command(9999).index("-cp") + 1].endswith(os.pathsep + str(jar.resolve()))
    assert not [o for o in dev.build_command(9999) if o.startswith("-Dderby.language.")]  # Derby's only
    assert dev.status().backend == "postgresql://hive:***@127.0.0.1:5432/hms"


def test_txn_schema_resource_is_idempotent_sql() -> None:
    text = be.txn_schema_sql()
    statements = [s.strip() for s in re.sub(r"--[^\n]*", "", text).split(";") if s.strip()]
    creates = [s for s in statements if s.upper().startswith("CREATE")]
    assert creates and all("IF NOT EXISTS" in s.upper() for s in creates)
    inserts = [s for s in statements if s.upper().startswith("INSERT")]
    assert len(inserts) == 3 and all("WHERE NOT EXISTS" in s.upper() for s in inserts)
    for table in ("HIVE_LOCKS", "NEXT_LOCK_ID", "TXNS", "TXN_COMPONENTS", "COMPACTION_QUEUE",
                  "COMPLETED_TXN_COMPONENTS", "NEXT_TXN_ID", "WRITE_SET", "AUX_TABLE", "COMPLETED_COMPACTIONS"):
        assert f"CREATE TABLE IF NOT EXISTS {table} (" in text


def test_txn_schema_covers_every_table_and_column_of_the_servers_own_ddl() -> None:
    """The Derby DDL TxnDbUtil.prepDb runs lives as strings in the hive-metastore jar the server runs:
    every table and column it creates must exist in our PostgreSQL script."""
    import zipfile

    jar = next(DevMetastore._pyspark_jars_dir().glob("hive-metastore-*.jar"))
    with zipfile.ZipFile(jar) as zf:
        blob = zf.read("org/apache/hadoop/hive/metastore/txn/TxnDbUtil.class").decode("latin-1")
    ddl = re.findall(r"CREATE TABLE (\S+) \(([ -~]*)", blob)  # one class-file string constant each
    ours = be.txn_schema_sql().upper()
    checked = 0
    for table, body in ddl:
        if table.startswith('"'):
            continue
        assert f"CREATE TABLE IF NOT EXISTS {table.upper()} (" in ours, table
        section = ours.split(f"CREATE TABLE IF NOT EXISTS {table.upper()} (", 1)[1].split(");", 1)[0]
        for column in re.findall(r"(?:^|,)\s*([A-Z][A-Z0-9_]+) (?:bigint|char|varchar|integer|int)", body):
            assert re.search(rf"\b{column}\b", section), f"{table}.{column}"
            checked += 1
    assert checked >= 60


def test_missing_driver_is_a_clear_error_and_starts_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(be.JDBC_JAR_ENV, raising=False)
    monkeypatch.setattr(be, "JDBC_JAR_SEARCH_PATHS", (str(tmp_path / "none.jar"),))
    dev = DevMetastore(state_dir=tmp_path / "s", db="postgresql://postgres@127.0.0.1:1/x")
    with pytest.raises(DevMetastoreError, match="libpostgresql-jdbc-java"):
        dev.start(wait_timeout=5)
    assert not dev.pid_file.exists() and not dev.status().running
    assert not dev.backend_file.exists()  # nothing recorded: the next plain start is still Derby


def test_cli_rejects_a_bad_database_url(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["metastore", "start", "--state-dir", str(tmp_path / "s"),
                                       "--db", "sqlserver://u:secret@h/m"])
    assert result.exit_code == 1
    assert "expected 'derby', postgresql://" in result.output and "secret" not in result.output
    assert not (tmp_path / "s" / "metastore.pid").exists()


def test_cli_help_documents_the_options() -> None:
    text = CliRunner().invoke(main, ["metastore", "start", "--help"]).output
    for needle in ("--db", "postgresql://USER", "--jdbc-driver", "libpostgresql-jdbc-java", "TABLESWAP_PG_JDBC_JAR"):
        assert needle in text


# ----------------------------------------------------------------------------- integration
@pytest.fixture(scope="module")
def pg_metastore(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevMetastore, be.PostgresBackend]]:
    pg.skip_or_fail_if_unavailable()
    with pg.fresh_database("tswap_pgmod") as database:
        dev = DevMetastore(state_dir=tmp_path_factory.mktemp("pg-hms"), db=database.spec(),
                           lock_timeout_seconds=LOCK_TIMEOUT_SECONDS)
        try:
            dev.start(probe=probe, wait_timeout=240)
            yield dev, database
        finally:
            dev.stop()
    assert not pg.database_exists(database.database)


def _create_table(uri: str, db: str, table: str, location: Path) -> None:
    from hmsclient import hmsclient
    from hmsclient.genthrift.hive_metastore import ttypes as tt

    client = hmsclient.HMSClient(host="127.0.0.1", port=int(uri.rsplit(":", 1)[1]))
    client.open()
    try:
        client.create_database(tt.Database(name=db, locationUri=location.parent.as_uri(), parameters={}))
        grant = tt.PrivilegeGrantInfo(privilege="ALL", grantor="root", grantorType=tt.PrincipalType.USER,
                                      grantOption=True)
        client.create_table(tt.Table(
            tableName=table, dbName=db, tableType="EXTERNAL_TABLE", parameters={"EXTERNAL": "TRUE"},
            privileges=tt.PrincipalPrivilegeSet(userPrivileges={"root": [grant]}),  # as Spark sends it
            partitionKeys=[tt.FieldSchema("dt", "string", None)],
            sd=tt.StorageDescriptor(
                cols=[tt.FieldSchema("id", "bigint", None)], location=location.as_uri(),
                inputFormat="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
                outputFormat="org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
                serdeInfo=tt.SerDeInfo(serializationLib="org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
                                       parameters={}),
            ),
        ))
    finally:
        client.close()


@pytest.mark.integration
@pytest.mark.default_metastore
def test_metastore_runs_on_postgres(pg_metastore, tmp_path: Path) -> None:
    dev, database = pg_metastore
    status = dev.status()
    assert status.running and status.backend == database.describe()
    assert stat.S_IMODE(dev.hive_site_file.stat().st_mode) == 0o600  # may hold the password
    assert not dev.derby_dir.exists()  # nothing went to Derby
    tables = set(pg.sql(database, "SELECT table_name FROM information_schema.tables "
                                  "WHERE table_schema = 'public';").split())
    # DataNucleus' object tables (quoted upper case), all created at startup — a table created
    # lazily inside a metastore transaction deadlocks on PostgreSQL — and our lock tables (lower case).
    assert {"DBS", "TBLS", "PARTITIONS", "SDS", "TBL_PRIVS", "PART_PRIVS", "TAB_COL_STATS",
            "PART_COL_STATS", "FUNCS", "NOTIFICATION_LOG"} <= tables
    assert {"hive_locks", "next_lock_id", "txns", "txn_components", "compaction_queue"} <= tables
    # Metastore objects really live in PostgreSQL.
    _create_table(status.uri, "pgcheck", "events", tmp_path / "pgcheck.db" / "events")  # with privileges
    rows = pg.sql(database, 'SELECT t."TBL_NAME", t."TBL_TYPE" FROM "TBLS" t JOIN "DBS" d ON t."DB_ID" = d."DB_ID" '
                            "WHERE d.\"NAME\" = 'pgcheck';")
    assert rows.split() == ["events", "EXTERNAL_TABLE"]
    with MetastoreClient(status.uri) as client:
        assert client.get_table("pgcheck", "events").is_partitioned


@pytest.mark.integration
@pytest.mark.default_metastore
def test_locks_acquire_heartbeat_conflict_release(pg_metastore, tmp_path: Path) -> None:
    dev, database = pg_metastore
    uri = dev.status().uri
    with MetastoreClient(uri) as client, MetastoreClient(uri) as other:
        with TableLock(client, "default", "locked_t", swap_id="holder", heartbeat_s=0.5) as held:
            holders = client.lock_holders("default", "locked_t")
            assert [h.lock_id for h in holders] == [held.lock_id] and holders[0].state == "ACQUIRED"
            rows = pg.sql(database, "SELECT hl_lock_ext_id, hl_lock_state, hl_table FROM hive_locks;").split()
            assert rows == [str(held.lock_id), "a", "locked_t"]  # the lock row lives in PostgreSQL
            with pytest.raises(errors.LockTimeoutError, match=r"held by lock .*\(tableswap swap=holder"):
                TableLock(other, "default", "locked_t", swap_id="loser", timeout_s=1.5).acquire()
            deadline = time.monotonic() + 10
            while held.heartbeats < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert held.heartbeats >= 2
            beat = client.lock_holders("default", "locked_t")[0].last_heartbeat_ms
            assert beat > holders[0].last_heartbeat_ms  # heartbeats reach the server
        assert client.lock_holders("default", "locked_t") == []
        assert pg.sql(database, "SELECT count(*) FROM hive_locks;").split() == ["0"]


@pytest.mark.integration
@pytest.mark.default_metastore
def test_abandoned_lock_expires_through_the_reaper(pg_metastore) -> None:
    dev, _ = pg_metastore
    uri = dev.status().uri
    with MetastoreClient(uri) as client:
        lock = TableLock(client, "default", "abandoned_t", swap_id="dead-writer", heartbeat_s=3600).acquire()
        lock._stop.set()  # the holder "dies": no more heartbeats, no unlock
        taken = time.monotonic()
        deadline = taken + LOCK_TIMEOUT_SECONDS + 2 * REAPER_INTERVAL_SECONDS + 30
        while client.lock_holders("default", "abandoned_t") and time.monotonic() < deadline:
            time.sleep(0.5)
        expired_after = time.monotonic() - taken
        assert client.lock_holders("default", "abandoned_t") == [], "abandoned lock never expired"
        assert expired_after >= LOCK_TIMEOUT_SECONDS - 1
        # The table is free again for the next writer.
        with TableLock(client, "default", "abandoned_t", swap_id="next", timeout_s=5):
            pass
    print(f"abandoned lock expired after {expired_after:.1f}s (timeout {LOCK_TIMEOUT_SECONDS}s)")


@pytest.mark.integration
@pytest.mark.default_metastore
def test_representative_suite_subset_on_postgres(pg_metastore, tmp_path: Path) -> None:
    """Swap partitions, swap table, lock and writer conflicts, table CAS and rollback, unchanged
    tests from the Derby suite, run in a child pytest against the PostgreSQL-backed metastore."""
    dev, _ = pg_metastore
    # The child talks to this 2.3 server: not with the suite's release and its Hive client settings.
    inherited = {k: v for k, v in os.environ.items()
                 if k not in ("TABLESWAP_TEST_HIVE_VERSION", "PYSPARK_SUBMIT_ARGS")}
    env = {**inherited, "TABLESWAP_TEST_METASTORE_URI": dev.status().uri,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    with open(tmp_path / "child.log", "w") as log:  # a file: Spark's JVM may keep a pipe open
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "--basetemp", str(tmp_path / "child"), *REPRESENTATIVE_SUBSET],
                              cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=1200)
    output = (tmp_path / "child.log").read_text()
    summary = output.strip().splitlines()[-1] if output.strip() else ""
    print(f"PostgreSQL-backed subset: {summary}")
    assert done.returncode == 0, output[-6000:]
    passed = re.search(r"(\d+) passed", summary)
    assert passed and int(passed.group(1)) >= len(REPRESENTATIVE_SUBSET), summary
    assert "failed" not in summary and "error" not in summary


@pytest.mark.integration
@pytest.mark.default_metastore
def test_restart_reuses_postgres_and_keeps_metadata(pg_metastore) -> None:
    """A plain restart (no --db) reuses the recorded database; the schema script is idempotent."""
    dev, database = pg_metastore
    dev.stop()
    restarted = DevMetastore(state_dir=dev.state_dir, lock_timeout_seconds=LOCK_TIMEOUT_SECONDS)
    status = restarted.start(probe=probe, wait_timeout=240)
    assert status.backend == database.describe()
    assert pg.sql(database, "SELECT count(*) FROM next_lock_id;").split() == ["1"]  # seeded once
    with MetastoreClient(status.uri) as client:
        assert "pgcheck" in client.read("get_all_databases", lambda c: c.get_all_databases())
        with TableLock(client, "default", "after_restart", swap_id="r", timeout_s=5) as lock:
            assert lock.lock_id is not None
    with pytest.raises(DevMetastoreError, match="already running on postgresql://.* not derby"):
        DevMetastore(state_dir=dev.state_dir, db="derby").start(wait_timeout=5)


def test_every_persistent_class_of_the_server_is_created_at_startup() -> None:
    """The autoStart list must name every class of the hive-metastore jar's package.jdo."""
    import zipfile

    jar = next(DevMetastore._pyspark_jars_dir().glob("hive-metastore-*.jar"))
    with zipfile.ZipFile(jar) as zf:
        jdo = zf.read("package.jdo").decode("utf-8")
    assert set(re.findall(r'<class name="(M\w+)"', jdo)) == set(be._MODEL_CLASSES)
