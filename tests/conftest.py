"""Session-scoped real services: one Hive Metastore (tableswap's dev launcher) and one SparkSession.

Tests isolate themselves by database name (``db`` fixture), never by restarting services.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from tableswap.devmetastore import DevMetastore
from tableswap.metastore.client import MetastoreClient, probe


@pytest.fixture(scope="session")
def metastore_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    external = os.environ.get("TABLESWAP_TEST_METASTORE_URI")
    if external:
        yield external
        return
    # Abandoned locks (a SIGKILLed writer's) expire after this many seconds.
    lock_timeout = int(os.environ.get("TABLESWAP_TEST_LOCK_TIMEOUT", "60"))
    ms = DevMetastore(state_dir=tmp_path_factory.mktemp("hms"), lock_timeout_seconds=lock_timeout)
    status = ms.start(probe=probe)
    try:
        yield status.uri
    finally:
        ms.stop()


@pytest.fixture(scope="session")
def spark(metastore_uri: str, tmp_path_factory: pytest.TempPathFactory):
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("tableswap-tests")
        .config("spark.hadoop.hive.metastore.uris", metastore_uri)
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={warehouse}")
        .enableHiveSupport()
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def journal_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('journal') / 'journal.db'}"


@pytest.fixture
def ts_env(monkeypatch: pytest.MonkeyPatch, metastore_uri: str, journal_url: str) -> dict[str, str]:
    """Environment the library and the CLI read their defaults from."""
    monkeypatch.setenv("TABLESWAP_METASTORE_URI", metastore_uri)
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", journal_url)
    return {"TABLESWAP_METASTORE_URI": metastore_uri, "TABLESWAP_JOURNAL_URL": journal_url}


@pytest.fixture
def hms(metastore_uri: str):
    with MetastoreClient(metastore_uri) as client:
        yield client


@pytest.fixture
def db(spark, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A fresh database per test, its files under the test's tmp dir."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    location = tmp_path / "warehouse" / f"{name}.db"
    spark.sql(f"CREATE DATABASE {name} LOCATION '{location.as_uri()}'")
    return name


@pytest.fixture(scope="session")
def connect_server(metastore_uri: str, tmp_path_factory: pytest.TempPathFactory):
    """A Spark Connect server (subprocess) with Hive support on the test metastore; started on
    first use, shared by the whole test session, stopped at its end."""
    from .connect_server import ConnectServer

    server = ConnectServer(tmp_path_factory.mktemp("spark-connect"), metastore_uri).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def connect_spark(connect_server):
    """A Spark Connect client session on :func:`connect_server` (this process stays in classic mode)."""
    from .connect_server import remote_session

    session = remote_session(connect_server.url)
    yield session
    session.stop()
