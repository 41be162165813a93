"""The development metastore launcher (tableswap.devmetastore, `tableswap metastore start|stop|status`) against a
real HMS 2.3.

The integration tests share one metastore (module-scoped fixture): a start costs 5-30 s.
hmsclient is used directly here only to check that the launched server really works;
the library itself goes through tableswap.metastore.
"""

from __future__ import annotations

import importlib.resources
import os
import socket
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from tableswap.devmetastore import DevMetastore, DevMetastoreError, MetastoreStatus
from tableswap.devmetastore.launcher import default_state_dir
from tableswap.errors import TableSwapError

from ..support.helpers import raw_hms

LOCK_TIMEOUT_SECONDS = 10
REAPER_INTERVAL_SECONDS = 5  # what the template sets hive.timedout.txn.reaper.interval to


# ----------------------------------------------------------------------------- helpers
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _exited(pid: int) -> bool:
    """The process is gone, or an exited zombie waiting for init to reap it (the server is
    not a child of the test process)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z" and len(os.listdir(f"/proc/{pid}/task")) <= 1


def _table_lock_request(table: str):
    from hmsclient.genthrift.hive_metastore import ttypes

    return ttypes.LockRequest(
        component=[
            ttypes.LockComponent(
                type=ttypes.LockType.EXCLUSIVE,
                level=ttypes.LockLevel.TABLE,
                dbname="default",
                tablename=table,
                operationType=ttypes.DataOperationType.NO_TXN,
            )
        ],
        user="tableswap-test",
        hostname=socket.gethostname(),
    )


def _lock_ids(client) -> set[int]:
    from hmsclient.genthrift.hive_metastore import ttypes

    return {lock.lockid for lock in client.show_locks(ttypes.ShowLocksRequest()).locks or []}


# ----------------------------------------------------------------------------- unit tests
def test_resources_ship_inside_the_package() -> None:
    files = importlib.resources.files("tableswap.devmetastore")
    assert "${backend_properties}" in files.joinpath("hive-site.xml.template").read_text()
    assert "CREATE TABLE IF NOT EXISTS HIVE_LOCKS" in files.joinpath("txn-schema-postgres.sql").read_text()
    options = files.joinpath("java-options.txt").read_text()
    assert "--add-opens=java.base/java.lang=ALL-UNNAMED" in options


def test_rendered_hive_site(tmp_path: Path) -> None:
    dev = DevMetastore(state_dir=tmp_path / "a&b", port=_free_port(), lock_timeout_seconds=42)
    root = ET.fromstring(dev.render_hive_site())
    props = {p.findtext("name"): p.findtext("value") for p in root.iter("property")}
    derby = tmp_path / "a&b" / "metastore_db"
    assert props["javax.jdo.option.ConnectionURL"] == f"jdbc:derby:;databaseName={derby};create=true"
    assert props["hive.metastore.warehouse.dir"] == f"file://{tmp_path / 'a&b' / 'warehouse'}"
    assert props["datanucleus.schema.autoCreateAll"] == "true"
    assert props["hive.metastore.schema.verification"] == "false"
    assert props["datanucleus.connectionPoolingType"] == "DBCP"
    assert props["hive.async.log.enabled"] == "false"
    assert props["hive.in.test"] == "true"
    assert props["hive.txn.manager"] == "org.apache.hadoop.hive.ql.lockmgr.DbTxnManager"
    assert dev.status().backend == "derby (embedded)"
    assert props["hive.compactor.initiator.on"] == "true"
    assert props["hive.txn.timeout"] == "42s"
    assert props["hive.timedout.txn.reaper.interval"] == f"{REAPER_INTERVAL_SECONDS}s"
    assert "hive.stats.autogather" not in props


def test_command_line(tmp_path: Path) -> None:
    dev = DevMetastore(state_dir=tmp_path, port=9999)
    cmd = dev.build_command(9999)
    assert cmd[-3:] == ["org.apache.hadoop.hive.metastore.HiveMetaStore", "-p", "9999"]
    classpath = cmd[cmd.index("-cp") + 1].split(os.pathsep)
    assert classpath[0] == str(tmp_path.resolve() / "conf")
    assert classpath[1].endswith(f"{os.sep}jars{os.sep}*")
    assert f"-Dderby.stream.error.file={tmp_path.resolve() / 'derby.log'}" in cmd
    assert "-Dderby.language.statementCacheSize=1000" in cmd  # Derby backend: compiled statements kept
    assert dev.uri == "thrift://127.0.0.1:9999"


def test_default_state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TABLESWAP_STATE_DIR", str(tmp_path / "ts"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert default_state_dir() == tmp_path / "ts" / "metastore"
    monkeypatch.delenv("TABLESWAP_STATE_DIR")
    assert default_state_dir() == tmp_path / "xdg" / "tableswap" / "metastore"
    monkeypatch.delenv("XDG_STATE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_state_dir() == tmp_path / "home" / ".local/state/tableswap/metastore"


def test_missing_java_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(DevMetastoreError, match="Java 17") as info:
        DevMetastore(state_dir=tmp_path / "state").start(wait_timeout=5)
    assert isinstance(info.value, TableSwapError)


def test_dying_server_reports_the_log(tmp_path: Path) -> None:
    dev = DevMetastore(state_dir=tmp_path, java="false")
    with pytest.raises(DevMetastoreError) as info:
        dev.start(wait_timeout=20)
    message = str(info.value)
    assert "exited during startup" in message
    assert str(dev.log_file) in message
    assert not dev.status().running
    assert not dev.pid_file.exists()


# ----------------------------------------------------------------------------- integration
@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DevMetastore, float, Path]]:
    """One metastore for the module, started from an empty working directory."""
    state_dir = tmp_path_factory.mktemp("metastore-state")
    cwd = tmp_path_factory.mktemp("caller-cwd")
    dev = DevMetastore(state_dir=state_dir, port=_free_port(),
                       lock_timeout_seconds=LOCK_TIMEOUT_SECONDS)
    old_cwd = os.getcwd()
    os.chdir(cwd)
    try:
        began = time.monotonic()
        dev.start(wait_timeout=180)
        elapsed = time.monotonic() - began
    finally:
        os.chdir(old_cwd)
    try:
        yield dev, elapsed, cwd
    finally:
        dev.stop()


@pytest.mark.integration
@pytest.mark.default_metastore
def test_start_reports_running(started: tuple[DevMetastore, float, Path]) -> None:
    dev, elapsed, cwd = started
    status = dev.status()
    assert isinstance(status, MetastoreStatus)
    assert status.running
    assert status.uri == f"thrift://127.0.0.1:{dev.port}" == dev.uri
    assert status.pid is not None and status.pid > 0
    assert status.log_file == dev.state_dir / "metastore.log"
    assert status.warehouse_dir.is_dir()
    assert _port_open(status.port)
    assert elapsed < 180
    print(f"dev metastore startup took {elapsed:.1f}s")


@pytest.mark.integration
@pytest.mark.default_metastore
def test_nothing_written_to_the_callers_cwd(started: tuple[DevMetastore, float, Path]) -> None:
    _, _, cwd = started
    assert list(cwd.iterdir()) == []


@pytest.mark.integration
@pytest.mark.default_metastore
def test_real_thrift_calls_work(started: tuple[DevMetastore, float, Path]) -> None:
    dev, _, _ = started
    with raw_hms(dev.port) as client:
        assert "default" in client.get_all_databases()


@pytest.mark.integration
@pytest.mark.default_metastore
def test_table_locks(started: tuple[DevMetastore, float, Path]) -> None:
    from hmsclient.genthrift.hive_metastore import ttypes

    dev, _, _ = started
    with raw_hms(dev.port) as client:
        first = client.lock(_table_lock_request("x"))
        assert first.state == ttypes.LockState.ACQUIRED
        second = client.lock(_table_lock_request("x"))
        try:
            assert second.state == ttypes.LockState.WAITING
            client.unlock(ttypes.UnlockRequest(lockid=first.lockid))
            checked = client.check_lock(ttypes.CheckLockRequest(lockid=second.lockid))
            assert checked.state == ttypes.LockState.ACQUIRED
        finally:
            client.unlock(ttypes.UnlockRequest(lockid=second.lockid))
        assert not {first.lockid, second.lockid} & _lock_ids(client)


@pytest.mark.integration
@pytest.mark.default_metastore
def test_abandoned_lock_expires(started: tuple[DevMetastore, float, Path]) -> None:
    """A lock nobody heartbeats or unlocks disappears about lock_timeout seconds later."""
    from hmsclient.genthrift.hive_metastore import ttypes

    dev, _, _ = started
    with raw_hms(dev.port) as client:
        taken = time.monotonic()
        lock = client.lock(_table_lock_request("abandoned"))
        assert lock.state == ttypes.LockState.ACQUIRED
    # The client is gone; only the reaper can release the lock now.
    deadline = taken + LOCK_TIMEOUT_SECONDS + 2 * REAPER_INTERVAL_SECONDS + 20
    with raw_hms(dev.port) as observer:
        assert lock.lockid in _lock_ids(observer)
        while lock.lockid in _lock_ids(observer):
            assert time.monotonic() < deadline, "abandoned lock was never expired"
            time.sleep(0.5)
    expired_after = time.monotonic() - taken
    print(f"abandoned lock expired after {expired_after:.1f}s")
    assert expired_after >= LOCK_TIMEOUT_SECONDS - 1


@pytest.mark.integration
@pytest.mark.default_metastore
def test_start_is_idempotent(started: tuple[DevMetastore, float, Path]) -> None:
    dev, _, _ = started
    before = dev.status()
    again = dev.start(wait_timeout=5)
    assert again.running and again.pid == before.pid and again.uri == before.uri
    # A second handle on the same state directory (no port given) finds the same server.
    other = DevMetastore(state_dir=dev.state_dir)
    assert other.start(wait_timeout=5).pid == before.pid
    assert other.uri == dev.uri
    # Asking the running server for another port is an error, not a second server.
    with pytest.raises(DevMetastoreError, match="already running"):
        DevMetastore(state_dir=dev.state_dir, port=_free_port()).start(wait_timeout=5)
    # ... and so is asking a server started without S3 support for it (its classpath is fixed).
    from tableswap.jvm.jars import S3Access

    with pytest.raises(DevMetastoreError, match="without S3 support; stop it first"):
        DevMetastore(state_dir=dev.state_dir, s3=S3Access(endpoint="http://127.0.0.1:9")).start(wait_timeout=5)


@pytest.mark.integration
@pytest.mark.default_metastore
def test_stop_then_restart_keeps_port_and_data(started: tuple[DevMetastore, float, Path]) -> None:
    from hmsclient.genthrift.hive_metastore import ttypes

    dev, _, _ = started
    port = dev.port
    with raw_hms(port) as client:
        client.create_database(ttypes.Database(
            name="persist_check", description="", locationUri=None, parameters={}))
    pid = dev.status().pid

    assert dev.stop() is True
    status = dev.status()
    assert not status.running and status.pid is None and status.uri is None
    assert not _port_open(port)
    assert not dev.pid_file.exists()
    assert _exited(pid)
    assert dev.stop() is False

    restarted = DevMetastore(state_dir=dev.state_dir, lock_timeout_seconds=LOCK_TIMEOUT_SECONDS)
    status = restarted.start(wait_timeout=180)
    assert status.running and status.port == port and status.pid != pid
    with raw_hms(port) as client:
        assert "persist_check" in client.get_all_databases()
