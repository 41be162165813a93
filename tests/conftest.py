"""Session-scoped real services: one Hive Metastore (tableswap's dev launcher) and one SparkSession.

Tests isolate themselves by database name (``db`` fixture), never by restarting services.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import queue
import threading
import time
import uuid
from pathlib import Path
from typing import Callable

import pytest

from tableswap.devmetastore import DevMetastore

from .support import report as campaign_report
from tableswap.metastore.client import MetastoreClient, probe

from .support import cluster, hive_client, hms_subset, needs, pg, schema_templates
from .support.s3 import ACCESS_KEY, REGION, SECRET_KEY, S3Endpoint


#: JIT and collector settings for every JVM the suite starts (the session's Spark driver, the metastores, the
#: writer and reader processes, Spark Connect, the standalone cluster and its executors, Trino, Maven): C1 only
#: and the serial collector, through ``$JAVA_TOOL_OPTIONS``, which every JVM reads (each prints one "Picked up"
#: line on its stderr). These JVMs run small jobs for seconds to minutes, where C2's compiler threads and G1's
#: threads cost a 2-core machine more CPU than they give back (docs/metastores.md#test-status has the figures).
#: ``TABLESWAP_TEST_JAVA_OPTIONS`` replaces them (empty: none); options already in ``$JAVA_TOOL_OPTIONS`` stay.
TEST_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _java_tool_options() -> None:
    ours = os.environ.get("TABLESWAP_TEST_JAVA_OPTIONS", TEST_JAVA_OPTIONS).strip()
    theirs = os.environ.get("JAVA_TOOL_OPTIONS", "").strip()
    if ours and ours not in theirs:
        os.environ["JAVA_TOOL_OPTIONS"] = f"{theirs} {ours}".strip()


_java_tool_options()

#: Seconds a server of the session gets between SIGTERM and SIGKILL at the session's end: what they hold is thrown
#: away with the session (temporary directories, a database dropped after), so none needs a graceful shutdown.
THROWAWAY_GRACE_S = 2.0

_stops: list[tuple[str, threading.Thread, list[float]]] = []  # the servers stopping at the session's end


def stop_beside_the_others(what: str, stop) -> None:
    """Stop a server of the session (``stop``: called with the grace) in a thread of its own, beside the other
    servers stopping then; :func:`_servers_stop_together` waits for all of them, so the time counts (to the last
    test's teardown) once, not once per server."""
    times: list[float] = [time.monotonic()]  # began, ended

    def run() -> None:
        try:
            stop(THROWAWAY_GRACE_S)
        finally:
            times.append(time.monotonic())

    thread = threading.Thread(target=run, name=f"stop {what}", daemon=True)
    thread.start()
    _stops.append((what, thread, times))


_stopped: list[str] = []  # what stopping the session's servers took (terminal summary)


@pytest.fixture(scope="session", autouse=True)
def _servers_stop_together():
    """Set up before every other session fixture, so torn down after them: waits for the servers they stop
    side by side (:func:`stop_beside_the_others`)."""
    yield
    for _, thread, _ in _stops:
        thread.join()
    if _stops:
        spans = {what: times[-1] - times[0] for what, _, times in _stops}
        slowest = max(spans, key=spans.__getitem__)
        span = max(times[-1] for _, _, times in _stops) - min(times[0] for _, _, times in _stops)
        _stopped.append(f"the session's {len(_stops)} server(s) stopped side by side in {span:.1f}s "
                        f"(slowest: {slowest}, {spans[slowest]:.1f}s)")


_skipped: list[str] = []


def _record_ci_skip(report: pytest.TestReport) -> None:
    if report.skipped and needs.strict():
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """In CI nothing may be skipped: a skip there means a part CI should have installed is missing."""
    if _skipped and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _report_ci_skips(terminalreporter) -> None:
    if _skipped:
        terminalreporter.write_line(
            f"FAILED: {len(_skipped)} test(s) skipped in CI (CI runs every test; see tests/support/needs.py): "
            + ", ".join(_skipped[:5]) + (" ..." if len(_skipped) > 5 else ""), red=True)


def s3_disabled() -> bool:
    """``TABLESWAP_TEST_NO_S3=1``: no S3A jars, no S3 endpoint; the s3a variants of tests are skipped
    (which fails a CI run: tests/support/needs.py)."""
    return os.environ.get("TABLESWAP_TEST_NO_S3") == "1"


_s3a_unavailable: list[str] = []  # why the S3A jars could not be resolved (outside CI)


@pytest.fixture(scope="session")
def moto_endpoint():
    """moto's server (an emulator of AWS, not AWS) on a loopback port, with a request log, for the whole
    session: S3, the Glue Data Catalog and DynamoDB on one endpoint."""
    endpoint = S3Endpoint().start()
    yield endpoint
    stop_beside_the_others("moto", lambda _grace: endpoint.stop())


@pytest.fixture(scope="session")
def s3_endpoint(moto_endpoint):
    """The session's moto server as the S3 endpoint (skipped with TABLESWAP_TEST_NO_S3=1)."""
    if s3_disabled():
        pytest.skip("TABLESWAP_TEST_NO_S3=1")
    return moto_endpoint


@pytest.fixture(scope="session")
def s3_jars():
    """The S3A jars for the installed pyspark, resolved by Maven coordinates into the jar cache
    ($TABLESWAP_JARS_DIR, else ~/.cache/tableswap/jars) on first use; None with TABLESWAP_TEST_NO_S3=1."""
    if s3_disabled():
        return None
    from tableswap.errors import TableSwapError
    from tableswap.jvm.jars import resolve_s3_jars

    try:
        return resolve_s3_jars()
    except TableSwapError as exc:
        if needs.strict():
            raise pytest.UsageError(f"the S3A jars are needed in CI: {exc}") from exc
        _s3a_unavailable.append(str(exc))  # the s3a variants skip, saying so (s3_bucket)
        return None


@pytest.fixture(scope="session")
def s3_access(request: pytest.FixtureRequest):
    """How Spark and the metastore reach the test endpoint (None with TABLESWAP_TEST_NO_S3=1)."""
    if request.getfixturevalue("s3_jars") is None:
        return None
    from tableswap.jvm.jars import S3Access

    endpoint = request.getfixturevalue("s3_endpoint")
    return S3Access(endpoint=endpoint.url, access_key=ACCESS_KEY, secret_key=SECRET_KEY, path_style=True,
                    region=REGION)


@pytest.fixture(scope="session")
def s3_bucket(s3_endpoint, s3_jars) -> str:
    """A fresh bucket for this test session, where Spark and the metastore speak s3a:// (the s3a
    variants of tests use it: without the S3A jars they fail in CI and skip elsewhere)."""
    if s3_jars is None:
        needs.missing("the S3A jars (hadoop-aws, the AWS SDK bundle, spark-hadoop-cloud)",
                      "; ".join(_s3a_unavailable) or "not resolved",
                      "apt-get install maven, and reach Maven Central once to fill the jar cache "
                      "(tableswap jars s3)")
    return s3_endpoint.new_bucket()


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never read the developer's own ~/.config/tableswap/config.toml or TABLESWAP_CONFIG."""
    monkeypatch.delenv("TABLESWAP_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("xdg-config")))


@pytest.fixture(autouse=True)
def _reset_structlog():
    """The CLI configures structlog to the (captured) stderr of its run; undo that after each test."""
    import structlog

    yield
    structlog.reset_defaults()


@pytest.fixture(autouse=True)
def _undo_cli_stdlib_logging():
    """The CLI routes the standard logging module's records through its own root handler; a CLI run
    inside a test must not leave that handler (or its level) behind for the next test."""
    import logging

    root = logging.getLogger()
    level = root.level
    yield
    for handler in [h for h in root.handlers if getattr(h, "_tableswap", False)]:
        root.removeHandler(handler)
    root.setLevel(level)


def selected_hive_version() -> str:
    """The metastore release the suite runs against (``$TABLESWAP_TEST_HIVE_VERSION``, default 2.3)."""
    return os.environ.get("TABLESWAP_TEST_HIVE_VERSION", "").strip() or "2.3"


def selected_metastore_db() -> str:
    """The session metastore's backing database (``$TABLESWAP_TEST_METASTORE_DB``, default derby)."""
    return os.environ.get("TABLESWAP_TEST_METASTORE_DB", "derby").strip().lower()


@pytest.fixture(scope="session")
def dev_metastore(tmp_path_factory: pytest.TempPathFactory, s3_jars, s3_access, request: pytest.FixtureRequest):
    """The session's development metastore (None when ``$TABLESWAP_TEST_METASTORE_URI`` names another),
    on the backend ``$TABLESWAP_TEST_METASTORE_DB`` selects: ``derby`` (default), ``postgresql`` (a
    fresh database with a random name on the server ``$TABLESWAP_TEST_POSTGRES``, dropped after) or
    ``mysql`` (the same on ``$TABLESWAP_TEST_MYSQL``; 3.1/4.x releases only), in
    the release ``$TABLESWAP_TEST_HIVE_VERSION`` selects: ``2.3`` (default, the pyspark wheel's) or a
    standalone 3.1.x/4.x release (e.g. ``4.0.1``, resolved by Maven coordinates into the cache
    ``$TABLESWAP_HMS_CACHE``). Fault campaigns stop and restart it (same port, same database)."""
    if os.environ.get("TABLESWAP_TEST_METASTORE_URI"):
        yield None
        return
    # Abandoned locks (a SIGKILLed writer's) expire after this many seconds.
    lock_timeout = int(os.environ.get("TABLESWAP_TEST_LOCK_TIMEOUT", "60"))
    backend = selected_metastore_db()
    if backend not in ("derby", "postgresql", "mysql"):
        raise pytest.UsageError(f"TABLESWAP_TEST_METASTORE_DB={backend!r}: expected derby, postgresql or mysql")
    if backend == "mysql" and selected_hive_version() == "2.3":
        raise pytest.UsageError("TABLESWAP_TEST_METASTORE_DB=mysql needs a standalone release: set "
                                "TABLESWAP_TEST_HIVE_VERSION (e.g. 4.0.1); 2.3 runs on Derby or PostgreSQL")
    # The metastore's own Hadoop client must know an HDFS nameservice to accept its locations (hdfs://ns1/...):
    # when a test of the HA HDFS is selected, that cluster starts first and its client settings go into the
    # metastore's configuration.
    hadoop_properties = None
    if any(item.get_closest_marker("hdfs_ha") for item in request.session.items):
        try:
            hadoop_properties = request.getfixturevalue("hdfs_ha_cluster").client_properties()
        except (pytest.skip.Exception, RuntimeError):
            pass  # the HA tests report it (each asks for the cluster); the others run
    # Likewise a viewfs:// mount table onto the session's HDFS, for the tests of viewfs locations.
    if any(item.get_closest_marker("viewfs") for item in request.session.items):
        from .support import hdfs

        try:
            mounts = hdfs.viewfs_properties(request.getfixturevalue("hdfs_cluster").url)
            hadoop_properties = {**(hadoop_properties or {}), **mounts}
        except (pytest.skip.Exception, RuntimeError):
            pass

    with contextlib.ExitStack() as stack:
        db = None
        if backend != "derby":
            from .support import mysql_metastore, pg_metastore

            server = pg_metastore if backend == "postgresql" else mysql_metastore
            reason = server.unavailable_reason()
            if reason is not None:
                raise pytest.UsageError(f"TABLESWAP_TEST_METASTORE_DB={backend} but {reason}")
            # A standalone release's schema: a copy of its template (tests/support/schema_templates.py).
            db = stack.enter_context(server.fresh_database("tswap_suite", selected_hive_version())).spec()
        ms = DevMetastore(state_dir=tmp_path_factory.mktemp("hms"), lock_timeout_seconds=lock_timeout, db=db,
                          s3=s3_access, jars_dir=s3_jars.directory.parent if s3_jars else None,
                          hive_version=selected_hive_version(), hadoop_properties=hadoop_properties)
        schema_templates.prepare_derby(ms)
        stack.callback(ms.stop, THROWAWAY_GRACE_S)
        ms.start(probe=probe)
        yield ms


@pytest.fixture(scope="session")
def metastore_uri(dev_metastore) -> str:
    return os.environ.get("TABLESWAP_TEST_METASTORE_URI") or dev_metastore.uri


@pytest.fixture(scope="session")
def spark(metastore_uri: str, tmp_path_factory: pytest.TempPathFactory, s3_jars, s3_access):
    """The session's SparkSession; it reads and writes s3a:// on the test endpoint through S3A with Hadoop's
    classic committer, spelled out (the magic committer is tested in a process of its own)."""
    from pyspark.sql import SparkSession

    from tableswap.jvm.jars import s3a_spark_conf

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    builder = SparkSession.builder
    if s3_jars is not None:
        for key, value in s3a_spark_conf(s3_jars, s3_access, committer="file").items():
            builder = builder.config(key, value)
        # Glue tables name s3:// locations (tests/integration/test_glue_swaps.py): off EMR, S3A serves them (docs/glue.md).
        builder = builder.config("spark.hadoop.fs.s3.impl", "org.apache.hadoop.fs.s3a.S3AFileSystem")
    # $TABLESWAP_TEST_SPARK_MASTER: a standalone cluster's master (tests/integration/test_cluster.py's inner run).
    master = os.environ.get(cluster.MASTER_ENV)
    for key, value in (cluster.client_conf() if master else {}).items():
        builder = builder.config(key, value)
    session = (
        builder.master(master or "local[2]")
        .appName("tableswap-tests")
        .config("spark.hadoop.hive.metastore.uris", metastore_uri)
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
    )
    version = selected_hive_version()
    client_conf = hive_client.client_conf(version)
    for key, value in client_conf.items():
        session = session.config(key, value)
    began = time.time()
    session = session.enableHiveSupport().getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    if client_conf.get(hive_client.JARS_KEY) == "maven":
        session.sql("SHOW DATABASES").collect()  # the first metastore call resolves the Hive client
        if hive_client.record(session, version, began):
            client_conf = hive_client.client_conf(version)
    if client_conf:
        # The SparkSessions tests start in subprocesses (crashed writers, campaigns) need it too.
        os.environ["PYSPARK_SUBMIT_ARGS"] = " ".join(
            f"--conf {key}={value}" for key, value in client_conf.items()) + " pyspark-shell"
    yield session
    session.stop()


@pytest.fixture(scope="session")
def pg_server():
    """The PostgreSQL server of the journal tests (tests/support/pg.py; unreachable: a failure in CI, a skip
    elsewhere). Drops every schema this session created at the end."""
    server = pg.start_server()
    try:
        yield server
    finally:
        server.drop_session_schemas()
        server.engine.dispose()


@pytest.fixture
def pg_journal_url(pg_server) -> str:
    """A journal URL on PostgreSQL in a fresh, empty schema, dropped after the test."""
    schema = pg_server.new_schema()
    yield pg.schema_url(pg_server.url, schema)
    pg_server.drop_schema(schema)


@pytest.fixture
def sqlite_journal_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('journal') / 'journal.db'}"


@pytest.fixture
def journal_url(request: pytest.FixtureRequest, sqlite_journal_url: str) -> str:
    """The journal of integration tests: SQLite, or PostgreSQL with TABLESWAP_TEST_JOURNAL=postgresql
    (to run any test file against a PostgreSQL journal)."""
    if os.environ.get("TABLESWAP_TEST_JOURNAL", "sqlite") == "postgresql":
        return request.getfixturevalue("pg_journal_url")
    return sqlite_journal_url


@pytest.fixture(params=["sqlite", "postgresql"])
def any_journal_url(request: pytest.FixtureRequest) -> str:
    """Each journal contract test runs against both dialects."""
    return request.getfixturevalue(f"{request.param}_journal_url".replace("postgresql", "pg"))


@pytest.fixture
def ts_env(monkeypatch: pytest.MonkeyPatch, metastore_uri: str, journal_url: str) -> dict[str, str]:
    """Environment the library and the CLI read their defaults from."""
    monkeypatch.setenv("TABLESWAP_METASTORE_URI", metastore_uri)
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", journal_url)
    return {"TABLESWAP_METASTORE_URI": metastore_uri, "TABLESWAP_JOURNAL_URL": journal_url}


@pytest.fixture
def hms(metastore_uri: str):
    """A connection to the session metastore, as the operations take one (the catalog port's Hive
    Metastore implementation: a MetastoreClient with its table lock)."""
    from tableswap.metastore.catalog import HiveMetastoreCatalog

    with HiveMetastoreCatalog(metastore_uri) as client:
        yield client


@pytest.fixture
def db(spark, metastore_uri: str, tmp_path: Path, request: pytest.FixtureRequest):
    """A fresh database per test, its files under the test's tmp dir; dropped from the metastore at the
    end (files kept), so that the metastore holds what a real one would rather than every test's tables:
    the janitor reads every database for live references."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    location = tmp_path / "warehouse" / f"{name}.db"
    spark.sql(f"CREATE DATABASE {name} LOCATION '{location.as_uri()}'")
    yield name
    _drop_later(metastore_uri, name)


_drops: "queue.Queue[tuple[str, str] | None]" = queue.Queue()
_dropper: list[threading.Thread] = []


def _drop_later(metastore_uri: str, name: str) -> None:
    """Drop database ``name`` (cascade, files kept) in a background thread, off the tests' own time."""
    if not _dropper:
        _dropper.append(threading.Thread(target=_drop_loop, name="drop-test-databases", daemon=True))
        _dropper[0].start()
    _drops.put((metastore_uri, name))


def _drop_loop() -> None:
    while (item := _drops.get()) is not None:
        uri, name = item
        try:
            with MetastoreClient(uri, connect_attempts=2) as client:
                client.read(f"drop_database({name})", lambda c, name=name: c.drop_database(name, False, True))
        except Exception:  # noqa: BLE001 - a test that stopped the metastore, or dropped the database itself
            pass


@pytest.fixture(scope="session")
def connect_server(metastore_uri: str, tmp_path_factory: pytest.TempPathFactory):
    """A Spark Connect server (subprocess) with Hive support on the test metastore; started on
    first use, shared by the whole test session, stopped at its end."""
    from .support.connect_server import ConnectServer

    server = ConnectServer(tmp_path_factory.mktemp("spark-connect"), metastore_uri).start()
    try:
        yield server
    finally:
        stop_beside_the_others("Spark Connect", server.stop)


@pytest.fixture(scope="session")
def connect_spark(connect_server):
    """A Spark Connect client session on :func:`connect_server` (this process stays in classic mode)."""
    from .support.connect_server import remote_session

    session = remote_session(connect_server.url)
    yield session
    session.stop()


_trino_startup: list[str] = []  # what the Trino server's start took (terminal summary)


@pytest.fixture(scope="session")
def trino_server(metastore_uri: str, s3_access, moto_endpoint, tmp_path_factory: pytest.TempPathFactory,
                 request: pytest.FixtureRequest):
    """A real Trino server (coordinator and worker, small heap) whose Hive catalogs read the session's
    metastore and storage, and whose ``glue`` catalogs read the session's Glue emulator (tests/support/trino_server.py;
    one server for both, one start per session); launched on first use without waiting (it boots while
    Spark starts, when a test names it before ``spark``; its first query waits), stopped at the session's
    end. Its distribution is resolved by Maven coordinates into a cache once (then offline). When a test
    marked both ``trino`` and ``hdfs`` is selected, the session's HDFS starts first and the Hive catalogs
    read its client configuration (``hive.config.resources``)."""
    from tableswap.errors import DependencyError

    from .support import trino_server as ts

    try:
        home, java = ts.resolve(), ts.find_java()
    except DependencyError as exc:
        needs.missing(f"the Trino server {ts.VERSION} and a Java {ts.MIN_JAVA}+", str(exc),
                      "apt-get install maven and a JDK 24 or later (e.g. Temurin 25), and reach Maven Central "
                      f"once to fill the cache ({ts.default_cache_dir()})")
    hadoop_conf = None
    if any(item.get_closest_marker("trino") and item.get_closest_marker("hdfs") for item in request.session.items):
        hadoop_conf = request.getfixturevalue("hdfs_cluster").conf_dir
    catalogs = {**ts.catalogs(metastore_uri, s3_access, hadoop_conf),
                **ts.glue_catalogs(moto_endpoint.url, REGION, ACCESS_KEY, SECRET_KEY)}
    server = ts.TrinoServer(home, tmp_path_factory.mktemp("trino"), java, catalogs)
    server.start(wait=False)
    try:
        yield server
    finally:
        if server.startup is not None:
            _trino_startup.append(f"Trino {ts.VERSION} started in {server.startup.seconds}s (its own figure), "
                                  f"RSS {server.startup.rss_mb:.0f} MB after start")
        stop_beside_the_others("Trino", server.stop)


_hdfs_startup: list[str] = []  # what the local HDFS's start took (terminal summary)


@pytest.fixture(scope="session")
def hdfs_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A real HDFS (a NameNode and a DataNode, Hadoop's MiniDFSCluster of the pyspark wheel's Hadoop release) on
    loopback ports, with a HADOOP_CONF_DIR (tests/support/hdfs.py); started once per session, on first use, and
    stopped at its end. Its jars are resolved by Maven coordinates into the jar cache once (then offline);
    tableswap reaches it through hdfs-native (the ``hdfs`` extra)."""
    yield from _local_hdfs(tmp_path_factory, "local HDFS (NameNode + DataNode)")


@pytest.fixture(scope="session")
def hdfs_trash_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A second local HDFS like ``hdfs_cluster``, whose NameNode has the trash on (``fs.trash.interval`` 60
    minutes), for the janitor's trash; started on first use only. Beside it a key management server
    (tests/support/kms.py, started at the same time) makes encryption zones possible on it
    (``hdfs.create_encryption_zone``); its client configuration names the server."""
    from tableswap.devmetastore.hdfs import KEY_PROVIDER
    from tableswap.errors import DependencyError

    from .support import kms

    try:
        classpath = kms.resolve()
    except DependencyError as exc:
        needs.missing(f"a key management server (org.apache.hadoop:hadoop-kms:{kms.HADOOP_KMS})", str(exc),
                      "apt-get install maven, and reach Maven Central once to fill the jar cache")
    server = kms.MiniKms(tmp_path_factory.mktemp("kms"), classpath).start(wait=False)
    try:
        yield from _local_hdfs(tmp_path_factory, "local HDFS with the trash on",
                               {"fs.trash.interval": "60", KEY_PROVIDER: server.provider_uri}, ready=server.wait)
    finally:
        if server.startup_seconds is not None:
            _hdfs_startup.append(f"key management server (MiniKMS {kms.HADOOP_KMS}) started in "
                                 f"{server.startup_seconds}s")
        server.stop()


@pytest.fixture(scope="session")
def hdfs_viewfs_conf(hdfs_cluster, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``HADOOP_CONF_DIR`` of the session's HDFS with a ``viewfs://`` mount table onto it
    (tests/support/hdfs.py: ``viewfs://tswap/vdata/...`` is ``<hdfs_cluster.url>/warehouse/...``); the session's
    metastore has the same mount table when a test marked ``viewfs`` is selected."""
    from .support import hdfs

    return hdfs.write_viewfs_conf(hdfs_cluster, tmp_path_factory.mktemp("viewfs-conf"))


#: The users of ``hdfs_acl_ec_cluster`` and their groups, as its NameNode resolves them (simple authentication: a
#: client names its user with HADOOP_USER_NAME; the NameNode maps it to groups, here by Hadoop's static mapping).
HDFS_TEST_GROUPS = {"ana": "analysts", "aud": "auditors", "bob": "etl"}


@pytest.fixture(scope="session")
def hdfs_acl_ec_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A third local HDFS, started on first use only, for permissions and erasure coding: three DataNodes (an
    erasure-coding policy needs as many as its data and parity blocks: ``XOR-2-1-1024k`` three) and the users
    of :data:`HDFS_TEST_GROUPS` in their groups (``hadoop.user.group.static.mapping.overrides`` in a
    core-site.xml on its class path). Permissions
    and ACLs are on (Hadoop's defaults); the NameNode's own user (this process's) is its superuser."""
    groups = ";".join(f"{user}={group}" for user, group in HDFS_TEST_GROUPS.items())
    yield from _local_hdfs(tmp_path_factory, "local HDFS with three DataNodes and test users", datanodes=3,
                           core_site={"hadoop.user.group.static.mapping.overrides": f"dr.who=;{groups}"})


@pytest.fixture(scope="session")
def yarn_cluster(hdfs_cluster, tmp_path_factory: pytest.TempPathFactory):
    """A real YARN (a ResourceManager and a NodeManager, Hadoop's MiniYARNCluster of the pyspark wheel's Hadoop
    release) on loopback ports, on the session's HDFS (``hdfs_cluster``: one HDFS for the HDFS and the YARN tests),
    with a HADOOP_CONF_DIR for both (tests/support/yarn.py); started once per session, on first use, and stopped at its
    end. Its jars are the HDFS's plus a few resolved by Maven coordinates into the jar cache once (then offline)."""
    from tableswap.errors import DependencyError

    from .support import yarn

    try:
        classpath = yarn.resolve()
    except DependencyError as exc:
        needs.missing("a local YARN (org.apache.hadoop:hadoop-client-minicluster and its extras)", str(exc),
                      "apt-get install maven, and reach Maven Central once to fill the jar cache")
    server = yarn.MiniYarn(tmp_path_factory.mktemp("yarn"), classpath, hdfs_cluster).start()
    try:
        yield server
    finally:
        _hdfs_startup.append(f"local YARN (ResourceManager + NodeManager) started in {server.startup_seconds}s")
        stop_beside_the_others("YARN", server.stop)


@pytest.fixture(scope="session")
def hdfs_ha_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A real HDFS with highly available NameNodes: the nameservice ``ns1``, NameNodes ``nn0`` (active) and
    ``nn1`` (standby) and a DataNode on loopback (tests/support/hdfs_ha.py: a Java main of tableswap's own around
    Hadoop's MiniDFSCluster, compiled at first use into the jar cache), with a HADOOP_CONF_DIR naming the
    nameservice; the tests fail it over through its standard input. Started once per session, when a test
    marked ``hdfs_ha`` is selected, before the session's metastore (which gets the nameservice's settings)."""
    from tableswap.errors import TableSwapError

    from .support import hdfs_ha

    classpath = _hdfs_classpath()
    try:
        server = hdfs_ha.MiniHaHdfs(tmp_path_factory.mktemp("hdfs-ha"), classpath).start()
    except TableSwapError as exc:  # no javac
        needs.missing("a JDK's javac (the HA HDFS is a Java main compiled at first use)", str(exc),
                      "apt-get install openjdk-17-jdk-headless")
    try:
        yield server
    finally:
        _hdfs_startup.append(f"local HA HDFS (ns1: 2 NameNodes + DataNode) started in {server.startup_seconds}s")
        stop_beside_the_others("HA HDFS", server.stop)


def _hdfs_classpath() -> tuple[Path, ...]:
    """The minicluster's class path, with hdfs-native there (else the test is missing a part)."""
    from tableswap.errors import DependencyError

    from .support import hdfs

    try:
        classpath = hdfs.resolve()
    except DependencyError as exc:
        needs.missing("a local HDFS (org.apache.hadoop:hadoop-client-minicluster)", str(exc),
                      "apt-get install maven, and reach Maven Central once to fill the jar cache")
    if importlib.util.find_spec("hdfs_native") is None:
        needs.missing("hdfs-native", "tableswap's HDFS client (the hdfs extra) is not installed",
                      "pip install -e '.[hdfs]' (or '.[test]')")
    return classpath


def _local_hdfs(tmp_path_factory: pytest.TempPathFactory, what: str, properties: dict[str, str] | None = None,
                datanodes: int = 1, core_site: dict[str, str] | None = None, ready: Callable[[], object] | None = None):
    """Start a local HDFS, yield it (once ``ready``, a server started beside it, has returned), stop it."""
    from .support import hdfs

    classpath = _hdfs_classpath()
    server = hdfs.MiniHdfs(tmp_path_factory.mktemp("hdfs"), classpath, properties=properties,
                           datanodes=datanodes, core_site=core_site).start()
    try:
        if ready is not None:
            ready()
        yield server
    finally:
        _hdfs_startup.append(f"{what} started in {server.startup_seconds}s")
        stop_beside_the_others(what, server.stop)


@pytest.fixture(scope="session")
def pushgateway(tmp_path_factory: pytest.TempPathFactory):
    """A real Prometheus Pushgateway on a loopback port (tests/support/pushgateway_server.py), for the janitor's
    metrics; built from its Go module with the Go toolchain into a cache once (then offline), stopped at the
    session's end."""
    from .support import pushgateway_server as pg

    try:
        binary = pg.build()
    except pg.BuildError as exc:
        needs.missing(f"the Prometheus Pushgateway {pg.VERSION}", str(exc),
                      "install the Go toolchain (/usr/local/go/bin/go) and run `python3 -m tests.support.pushgateway_server` "
                      f"once with the Go module proxy reachable (cache: {pg.default_cache_dir()})")
    server = pg.Pushgateway(binary, tmp_path_factory.mktemp("pushgateway")).start()
    try:
        yield server
    finally:
        stop_beside_the_others("Pushgateway", server.stop)


def pytest_collection_modifyitems(config, items):
    hms_subset.mark(items)
    # Tests of a standalone metastore release (marker hms_release) apply only when one is selected, and
    # tests that start a default-release metastore of their own (default_metastore) only when none is: the
    # run against another release would repeat them unchanged. Deselected, not skipped (a skip fails CI).
    from tableswap.devmetastore.releases import parse_hive_version, writes_notification_log

    # Tests of the Glue catalog (marker glue), and tests whose subject does not depend on the release (marker
    # release_independent), would only repeat the default run against another release. YARN (marker yarn) is
    # verified with the default release only so far; HDFS (marker hdfs) runs with every release (docs/hdfs.md).
    not_here = (("hms_release",) if parse_hive_version(selected_hive_version()) is None
                else ("default_metastore", "glue", "release_independent", "yarn"))
    # Tests of the notification log (marker notification_log) need a session metastore that writes one (3.1.x).
    if not writes_notification_log(parse_hive_version(selected_hive_version())):
        not_here += ("notification_log",)
    keep = [item for item in items if not any(item.get_closest_marker(m) for m in not_here)]
    if len(keep) != len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


def pytest_collection_finish(session):
    """The Airflow tests' and the dbt tests' virtual environments (and Airflow's database) take a minute or two
    to prepare and need nothing of the session: when tests/integration/test_airflow.py or tests/integration/test_dbt.py is among the
    selected tests, its environment is prepared in the background from now on, while the tests before them
    run (tests/support/airflow_env.py, tests/support/dbt_env.py)."""
    modules = {item.module.__name__.rsplit(".", 1)[-1] for item in session.items
               if getattr(item, "module", None) is not None}
    from .support import uv_env

    if uv_env.uv_command() is None:
        return
    if "test_airflow" in modules:
        from .support import airflow_env

        airflow_env.start(session.config._tmp_path_factory.mktemp("airflow"))
    if "test_dbt" in modules:
        from .support import dbt_env

        dbt_env.start(session.config._tmp_path_factory.mktemp("dbt"))


def pytest_report_header(config):
    return f"metastore: Hive {selected_hive_version()} (TABLESWAP_TEST_HIVE_VERSION)"


#: Seconds per test file (setup + call + teardown of its tests; a session fixture's start counts to the file
#: of the first test that needs it), printed at the end of every run: where CI's time goes.
_file_seconds: dict[str, float] = {}
TOP_FILES = 20


_hdfs_seconds: dict[str, float] = {}  # the same for the tests marked hdfs (CI's runs against further releases)


def _record_file_time(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    _file_seconds[path] = _file_seconds.get(path, 0.0) + (report.duration or 0.0)
    if "hdfs" in report.keywords:
        _hdfs_seconds[path] = _hdfs_seconds.get(path, 0.0) + (report.duration or 0.0)


def _report_file_times(terminalreporter) -> None:
    if not _file_seconds:
        return
    total = sum(_file_seconds.values())
    terminalreporter.write_sep("=", f"slowest {min(TOP_FILES, len(_file_seconds))} test files "
                                    f"(setup+call+teardown, of {total:.0f} s in {len(_file_seconds)} files)")
    for path, seconds in sorted(_file_seconds.items(), key=lambda item: -item[1])[:TOP_FILES]:
        terminalreporter.write_line(f"{seconds:8.1f}s {100 * seconds / total:5.1f}%  {path}")
    if _hdfs_seconds:
        terminalreporter.write_line(f"tests marked hdfs: {sum(_hdfs_seconds.values()):.1f}s in {len(_hdfs_seconds)} "
                                    f"files ({', '.join(sorted(_hdfs_seconds))})")


def pytest_runtest_logreport(report):
    campaign_report.record(report, report.keywords)
    _record_ci_skip(report)
    _record_file_time(report)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    campaign_report.print_table(terminalreporter)
    _report_file_times(terminalreporter)
    for line in _trino_startup + _hdfs_startup + _stopped:
        terminalreporter.write_line(line)
    _report_ci_skips(terminalreporter)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No tableswap setting from outside: no env, no config file, the state directory under tmp_path."""
    for key in list(os.environ):
        if key.startswith("TABLESWAP_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("TABLESWAP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path
