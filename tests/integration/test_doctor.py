"""``tableswap doctor`` against the real development metastore: a healthy setup, then one broken part
at a time (wrong metastore port, unopenable journal, missing / unwritable storage root, bad config)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys

import pytest
from click.testing import CliRunner

from tableswap.cli import main
from tableswap.journal import migrations
from tableswap.metastore.lock import TableLock

from ..support.helpers import SRC, create_events, file_tree

pytestmark = pytest.mark.integration


def doctor(*args: str, expect: int) -> dict:
    result = CliRunner().invoke(main, ["doctor", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == expect, f"exit {result.exit_code}: {result.stdout}\n{result.stderr}"
    payload = json.loads(result.stdout)
    assert payload["ok"] is (expect == 0) and payload["exit_code"] == expect
    return payload


def checks(payload: dict) -> dict[str, dict]:
    return {c["name"]: c for c in payload["checks"]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def doctor_table(spark, db, tmp_path) -> str:
    return create_events(spark, db, tmp_path)


def test_healthy_setup_all_checks_pass_and_nothing_is_left_behind(doctor_table, tmp_path, hms, ts_env):
    root = tmp_path / "events"
    before = file_tree(tmp_path)
    payload = doctor("--table", doctor_table, expect=0)
    got = checks(payload)
    assert {n: c["status"] for n, c in got.items()} == {
        "config": "ok", "metastore": "ok", "locks": "ok", "lock expiry": "ok", "journal": "ok", "hdfs": "skip",
        "storage": "ok", "recovery": "ok", "hooks": "skip", "janitor grace": "skip",
        "lineage": "skip"}  # nothing on HDFS, no [hooks] configured, no OpenLineage
    assert got["metastore"]["facts"]["round_trip_ms"] > 0
    assert got["metastore"]["facts"]["server_version"]  # HMS 2.3 answers getVersion (with "3.0")
    assert got["locks"]["facts"]["lock_id"] > 0
    assert got["journal"]["facts"]["schema_version"] == max(v for v, _ in migrations())
    assert got["storage"]["facts"]["root"].rstrip("/").endswith(str(root))
    assert "/_tableswap/_doctor_probe_" in got["storage"]["facts"]["probe"]
    sources = {e["key"]: e["source"] for e in payload["config"]}
    assert sources["metastore_uri"] == "env TABLESWAP_METASTORE_URI"
    assert sources["journal_url"] == "env TABLESWAP_JOURNAL_URL"
    # The lock was released, the probe and the _tableswap directory it created are gone.
    db, name = doctor_table.split(".")
    assert hms.lock_holders(db, name) == []
    assert file_tree(tmp_path) == before and not (root / "_tableswap").exists()


def test_text_output_and_without_table(ts_env, spark):
    result = CliRunner().invoke(main, ["doctor"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Configuration" in out and "Checks" in out and "all checks passed" in out
    assert "show_locks works" in out
    assert re.search(r"\bstorage +skip", out) and "pass --table DB.TABLE" in out


def test_wrong_metastore_port_fails_with_what_to_do(ts_env, monkeypatch):
    port = free_port()
    monkeypatch.setenv("TABLESWAP_METASTORE_URI", f"thrift://127.0.0.1:{port}")
    payload = doctor("--table", "db.events", expect=1)
    got = checks(payload)
    assert got["metastore"]["status"] == "fail" and str(port) in got["metastore"]["detail"]
    assert "tableswap metastore start" in got["metastore"]["fix"]
    assert "env TABLESWAP_METASTORE_URI" in got["metastore"]["fix"]
    assert got["locks"]["status"] == got["storage"]["status"] == "skip"
    assert got["journal"]["status"] == "ok"  # the journal does not depend on the metastore
    text = CliRunner().invoke(main, ["doctor", "--metastore-uri", f"thrift://127.0.0.1:{port}"])
    assert text.exit_code == 1 and "What to do" in text.stdout and "1 check(s) failed" in text.stdout


def test_unopenable_journal_fails(ts_env, tmp_path, spark):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the journal's directory should be")
    payload = doctor("--journal-url", f"sqlite:///{blocker}/journal.db", expect=1)
    got = checks(payload)
    assert got["journal"]["status"] == "fail" and "journal" in got["journal"]["detail"]
    assert "journal_url" in got["journal"]["fix"]
    assert got["metastore"]["status"] == "ok"


def test_missing_storage_root_fails(doctor_table, tmp_path, ts_env):
    shutil.rmtree(tmp_path / "events")
    got = checks(doctor("--table", doctor_table, expect=1))
    assert got["storage"]["status"] == "fail" and "does not exist" in got["storage"]["detail"]
    assert got["locks"]["status"] == "ok"
    assert not (tmp_path / "events").exists()  # doctor creates nothing


def test_unknown_table_fails_the_lock_check(ts_env, db):
    got = checks(doctor("--table", f"{db}.nope", expect=1))
    assert got["locks"]["status"] == "fail" and "does not exist" in got["locks"]["detail"]
    assert got["storage"]["status"] == "fail"


def test_unwritable_storage_root_fails(doctor_table, tmp_path, ts_env):
    """Run as a user that cannot write the table's root: as root, drop the capabilities that let
    root ignore file permissions (setpriv), so the permission bits apply as for anybody else."""
    root = tmp_path / "events"
    os.chmod(root, 0o555)
    try:
        cmd = [sys.executable, "-c", "from tableswap.cli import main; main()", "doctor", "--table", doctor_table, "--json"]
        if os.geteuid() == 0:
            if not shutil.which("setpriv"):
                pytest.skip("running as root and setpriv (util-linux) is missing: cannot drop CAP_DAC_OVERRIDE")
            cmd = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--", *cmd]
        env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    finally:
        os.chmod(root, 0o755)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    got = checks(json.loads(proc.stdout))
    assert got["storage"]["status"] == "fail"
    assert "PermissionError" in got["storage"]["detail"] and "_tableswap" in got["storage"]["fix"]
    assert got["locks"]["status"] == "ok" and got["journal"]["status"] == "ok"
    assert not (root / "_tableswap").exists()


def test_lock_held_by_a_swap_is_a_warning_not_a_failure(doctor_table, hms, ts_env):
    db, name = doctor_table.split(".")
    with TableLock(hms, db, name, swap_id="held_by_test"):
        got = checks(doctor("--table", doctor_table, "--lock-timeout", "1", expect=0))
    assert got["locks"]["status"] == "warn" and "held_by_test" in got["locks"]["detail"]


def test_bad_config_file_fails_config_and_skips_the_rest(ts_env, tmp_path, monkeypatch):
    bad = tmp_path / "bad.toml"
    bad.write_text('[swap]\nlock_timeout_s = "long"\n')
    monkeypatch.setenv("TABLESWAP_CONFIG", str(bad))
    got = checks(doctor(expect=1))
    assert got["config"]["status"] == "fail" and str(bad) in got["config"]["detail"]
    assert "[swap] lock_timeout_s" in got["config"]["detail"]
    assert {got[n]["status"] for n in ("metastore", "locks", "journal", "storage")} == {"skip"}


# --------------------------------------------------------------------------- the hdfs check
@pytest.mark.hdfs
def test_doctor_checks_the_hdfs_a_table_is_on(spark, db, hdfs_cluster, ts_env, monkeypatch):
    """A table on HDFS: the hdfs check finds the Hadoop configuration, the NameNode the location names, and
    its answer; the storage check then probes the root through hdfs-native. Without HADOOP_CONF_DIR the
    NameNode still answers (the location names it by host and port), and the check warns with what to set."""
    import uuid

    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_cluster.conf_dir))
    table = create_events(spark, db, f"{hdfs_cluster.url}/warehouse/{uuid.uuid4().hex[:10]}")

    got = checks(doctor("--table", table, expect=0))

    hdfs = got["hdfs"]
    assert hdfs["status"] == "ok", hdfs
    assert "answered" in hdfs["detail"] and "simple authentication" in hdfs["detail"], hdfs
    assert hdfs["facts"]["conf_dir"] == str(hdfs_cluster.conf_dir)
    assert list(hdfs["facts"]["namenodes"].values()) == [[f"127.0.0.1:{hdfs_cluster.port}"]]
    assert got["storage"]["status"] == "ok" and got["storage"]["facts"]["root"].startswith(hdfs_cluster.url)

    monkeypatch.delenv("HADOOP_CONF_DIR")
    monkeypatch.delenv("HADOOP_HOME", raising=False)
    unconfigured = checks(doctor("--table", table, expect=0))["hdfs"]
    assert unconfigured["status"] == "warn" and "HADOOP_CONF_DIR is not set" in unconfigured["detail"], unconfigured
    assert "export HADOOP_CONF_DIR" in unconfigured["fix"]


def _hadoop_conf(where, properties: dict[str, str]):
    from tableswap.devmetastore.hdfs import site_xml

    where.mkdir(parents=True, exist_ok=True)
    (where / "hdfs-site.xml").write_text(site_xml(properties))
    return where


@pytest.mark.hdfs
def test_the_hdfs_check_resolves_a_nameservice_from_hadoop_conf_dir(hdfs_cluster, tmp_path, monkeypatch):
    """``hdfs://ns1/...``: the nameservice's NameNodes are read from HADOOP_CONF_DIR; one of them answering
    is enough (the first here accepts no connection)."""
    from tableswap.ops.inspect.doctor_checks import check_hdfs

    closed = free_port()
    monkeypatch.setenv("HADOOP_CONF_DIR", str(_hadoop_conf(tmp_path / "conf", {
        "dfs.nameservices": "ns1", "dfs.ha.namenodes.ns1": "nn1,nn2",
        "dfs.namenode.rpc-address.ns1.nn1": f"127.0.0.1:{closed}",
        "dfs.namenode.rpc-address.ns1.nn2": f"127.0.0.1:{hdfs_cluster.port}",
        "dfs.client.failover.proxy.provider.ns1":
            "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider"})))

    check = check_hdfs(["hdfs://ns1/warehouse", "file:///tmp/elsewhere"])

    assert check.status == "ok", check
    assert check.facts["locations"] == ["hdfs://ns1/warehouse"]
    assert check.facts["namenodes"] == {"hdfs://ns1/warehouse": [f"127.0.0.1:{closed}",
                                                                 f"127.0.0.1:{hdfs_cluster.port}"]}
    assert "nameservice ns1 answered" in check.detail


def test_the_hdfs_check_says_what_is_wrong_and_what_to_do(tmp_path, monkeypatch):
    """Each broken part is one failure naming it, in seconds (hdfs-native itself would wait much longer for
    a NameNode that does not answer): hdfs-native missing, HADOOP_CONF_DIR not a directory, a nameservice
    HADOOP_CONF_DIR does not define, no NameNode accepting connections. Nothing on HDFS: skipped."""
    import sys

    from tableswap.ops.inspect.doctor_checks import check_hdfs

    assert check_hdfs(["file:///tmp/x", "s3a://bucket/x"]).status == "skip"

    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path / "missing"))
    missing_dir = check_hdfs(["hdfs://nn1:8020/warehouse"])
    assert missing_dir.status == "fail" and "not a directory" in missing_dir.detail, missing_dir

    conf = _hadoop_conf(tmp_path / "conf", {"dfs.nameservices": "ns1", "dfs.ha.namenodes.ns1": "nn1"})
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    undefined = check_hdfs(["hdfs://ns1/warehouse"])
    assert undefined.status == "fail" and "no dfs.namenode.rpc-address" in undefined.detail, undefined

    closed = free_port()
    refused = check_hdfs([f"hdfs://127.0.0.1:{closed}/warehouse"])
    assert refused.status == "fail" and f"cannot connect to the NameNode 127.0.0.1:{closed}" in refused.detail
    assert "HADOOP_CONF_DIR" in refused.fix

    monkeypatch.delenv("HADOOP_CONF_DIR")
    monkeypatch.delenv("HADOOP_HOME", raising=False)
    unknown = check_hdfs(["hdfs://no-such-nameservice.invalid/warehouse"])
    assert unknown.status == "fail" and "without HADOOP_CONF_DIR a nameservice reads as a host name" in unknown.detail

    monkeypatch.setitem(sys.modules, "hdfs_native", None)  # as if the extra were not installed
    without = check_hdfs(["hdfs://nn1:8020/warehouse"])
    assert without.status == "fail" and "hdfs-native, is not installed" in without.detail, without
    assert "pip install 'tableswap[hdfs]'" in without.fix
