"""Session-scoped real services: one Hive Metastore (tableswap's dev launcher) and one SparkSession.

Tests isolate themselves by database name (``db`` fixture), never by restarting services.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

import pytest

from tableswap.devmetastore import DevMetastore
from tableswap.metastore.client import MetastoreClient, probe


@pytest.fixture(scope="session")
def metastore_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The session's metastore: ``$TABLESWAP_TEST_METASTORE_URI`` if set, else a dev metastore on
    the backend ``$TABLESWAP_TEST_METASTORE_DB`` selects: ``derby`` (default) or ``postgresql`` (a
    fresh database with a random name on the server ``$TABLESWAP_TEST_POSTGRES``, dropped after)."""
    external = os.environ.get("TABLESWAP_TEST_METASTORE_URI")
    if external:
        yield external
        return
    # Abandoned locks (a SIGKILLed writer's) expire after this many seconds.
    lock_timeout = int(os.environ.get("TABLESWAP_TEST_LOCK_TIMEOUT", "60"))
    backend = os.environ.get("TABLESWAP_TEST_METASTORE_DB", "derby").strip().lower()
    if backend not in ("derby", "postgresql"):
        raise pytest.UsageError(f"TABLESWAP_TEST_METASTORE_DB={backend!r}: expected derby or postgresql")
    with contextlib.ExitStack() as stack:
        db = None
        if backend == "postgresql":
            from . import pg

            reason = pg.unavailable_reason()
            if reason is not None:
                raise pytest.UsageError(f"TABLESWAP_TEST_METASTORE_DB=postgresql but {reason}")
            db = stack.enter_context(pg.fresh_database("tswap_suite")).spec()
        ms = DevMetastore(state_dir=tmp_path_factory.mktemp("hms"), lock_timeout_seconds=lock_timeout, db=db)
        stack.callback(ms.stop)
        yield ms.start(probe=probe).uri


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
