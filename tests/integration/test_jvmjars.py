"""The S3A jars: versions read from the installed wheel, resolution by Maven coordinates into a cache
reused offline, the Spark conf printed by ``tableswap jars s3``, and the dev metastore's S3 support."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pyspark
import pytest
from click.testing import CliRunner

from tableswap.jvm import jars as jvmjars
from tableswap.cli import main
from tableswap.devmetastore import DevMetastore
from tableswap.errors import DependencyError


@pytest.fixture
def resolved_s3_jars(s3_jars):
    """The session's resolved jars (skipped with TABLESWAP_TEST_NO_S3=1)."""
    if s3_jars is None:
        pytest.skip("TABLESWAP_TEST_NO_S3=1")
    return s3_jars


def test_versions_come_from_the_installed_wheel():
    versions = jvmjars.wheel_versions()
    assert versions.spark == pyspark.__version__
    assert (versions.jars_dir / f"hadoop-client-api-{versions.hadoop}.jar").is_file()
    assert (versions.jars_dir / f"spark-core_{versions.scala}-{versions.spark}.jar").is_file()


def test_versions_of_another_layout_and_a_clear_error_when_unknown(tmp_path: Path):
    for name in ("hadoop-client-api-3.9.1.jar", "hadoop-client-runtime-3.9.1.jar", "spark-core_2.14-5.0.0.jar"):
        (tmp_path / name).touch()
    v = jvmjars.wheel_versions(tmp_path)
    assert (v.hadoop, v.spark, v.scala) == ("3.9.1", "5.0.0", "2.14")
    assert jvmjars.s3_coordinates(v) == ("org.apache.hadoop:hadoop-aws:3.9.1",
                                         "org.apache.spark:spark-hadoop-cloud_2.14:[5.0.0,5.0.0]")
    (tmp_path / "hadoop-client-api-3.9.1.jar").unlink()
    with pytest.raises(DependencyError, match="hadoop-client-api"):
        jvmjars.wheel_versions(tmp_path)


def test_the_generated_pom_asks_for_coordinates_only():
    versions = jvmjars.wheel_versions()
    pom = jvmjars.render_pom(versions)
    deps = {(d.findtext("groupId"), d.findtext("artifactId")): d for d in ET.fromstring(pom).iter("dependency")}
    assert deps[("org.apache.hadoop", "hadoop-aws")].findtext("version") == versions.hadoop
    cloud = deps[("org.apache.spark", f"spark-hadoop-cloud_{versions.scala}")]
    assert cloud.findtext("version").endswith(f",{versions.spark}]")
    assert [e.findtext("groupId") for e in cloud.iter("exclusion")] == ["*"]
    assert "http" not in pom and "<repositor" not in pom  # Maven's own settings say where to look


def test_resolved_jars_are_reused_without_maven(resolved_s3_jars):
    """The session's cache (resolved by Maven on first use) is complete: a second resolution needs no
    Maven at all."""
    names = {j.name for j in resolved_s3_jars.jars}
    assert f"hadoop-aws-{resolved_s3_jars.versions.hadoop}.jar" in names
    assert any(n.startswith("bundle-") for n in names)  # the AWS SDK bundle hadoop-aws declares
    assert any(n.startswith(f"spark-hadoop-cloud_{resolved_s3_jars.versions.scala}-") for n in names)
    again = jvmjars.resolve_s3_jars(resolved_s3_jars.directory.parent, offline=True, mvn="/nonexistent/mvn")
    assert again.jars == resolved_s3_jars.jars and not again.resolved_now


def test_maven_missing_or_offline_without_the_jars_is_a_clear_error(tmp_path: Path, monkeypatch):
    with pytest.raises(DependencyError, match="apt-get install maven"):
        jvmjars.resolve_s3_jars(tmp_path / "cache", mvn="/nonexistent/mvn")
    # Offline, with an empty local Maven repository: Maven cannot resolve anything.
    monkeypatch.setenv("MAVEN_OPTS", f"-Dmaven.repo.local={tmp_path / 'empty-m2'}")
    with pytest.raises(DependencyError) as caught:
        jvmjars.resolve_s3_jars(tmp_path / "cache", offline=True)
    assert "Maven could not resolve org.apache.hadoop:hadoop-aws:" in str(caught.value)
    assert "reuse it offline from the cache" in str(caught.value)
    assert not any((tmp_path / "cache").glob("s3a-*"))  # no half-made cache entry


def test_spark_conf_for_each_committer(resolved_s3_jars):
    access = jvmjars.S3Access(endpoint="http://127.0.0.1:9000", access_key="k", secret_key="s", path_style=True)
    magic = jvmjars.s3a_spark_conf(resolved_s3_jars, access)
    assert magic["spark.jars"].split(",") == [str(j) for j in resolved_s3_jars.jars]
    assert magic["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert magic["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert magic["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert magic["spark.hadoop.fs.s3a.committer.name"] == "magic"
    assert magic["spark.sql.sources.commitProtocolClass"].endswith("cloud.PathOutputCommitProtocol")
    classic = jvmjars.s3a_spark_conf(resolved_s3_jars, committer="file")
    assert classic["spark.hadoop.fs.s3a.committer.name"] == "file"
    assert classic["spark.sql.sources.commitProtocolClass"].endswith("SQLHadoopMapReduceCommitProtocol")
    assert "spark.hadoop.fs.s3a.endpoint" not in classic and "spark.hadoop.fs.s3a.access.key" not in classic
    with pytest.raises(DependencyError, match="both"):
        jvmjars.S3Access(access_key="k").hadoop_properties()


@pytest.mark.parametrize("hadoop, in_memory", [("3.3.6", False), ("3.4.0", True), ("3.4.2", True),
                                               ("3.5.0", True), ("3.10.1-SNAPSHOT", True), ("3.3.99", False)])
def test_the_magic_committer_tracks_pending_uploads_in_memory_from_hadoop_3_4(hadoop, in_memory):
    """Hadoop 3.4 added the in-memory tracking (3.3.6's hadoop-aws has no such key); the classic committer
    never gets it."""
    versions = jvmjars.WheelVersions(spark="4.3.0", scala="2.13", hadoop=hadoop, jars_dir=Path("/nowhere"))
    jars = jvmjars.S3Jars(directory=Path("/nowhere"), jars=(), coordinates=(), versions=versions)
    key = "spark.hadoop.fs.s3a.committer.magic.track.commits.in.memory.enabled"
    assert jvmjars.s3a_spark_conf(jars).get(key) == ("true" if in_memory else None)
    assert key not in jvmjars.s3a_spark_conf(jars, committer="file")


def test_cli_prints_the_conf(resolved_s3_jars):
    runner = CliRunner()
    cache = ["--jars-dir", str(resolved_s3_jars.directory.parent), "--offline"]
    text = runner.invoke(main, ["jars", "s3", *cache, "--s3-endpoint", "http://h:1", "--s3-path-style"])
    assert text.exit_code == 0, text.output
    lines = dict(line.split("=", 1) for line in text.output.splitlines())
    assert lines["spark.jars"] == ",".join(str(j) for j in resolved_s3_jars.jars)
    assert lines["spark.hadoop.fs.s3a.endpoint"] == "http://h:1"
    submit = runner.invoke(main, ["jars", "s3", *cache, "--committer", "file", "--format", "spark-submit"])
    assert submit.exit_code == 0 and all(line.startswith("--conf ") for line in submit.output.splitlines())
    assert "--conf spark.hadoop.fs.s3a.committer.name=file" in submit.output.splitlines()
    payload = json.loads(runner.invoke(main, ["jars", "s3", *cache, "--json"]).output)
    assert payload["ok"] and payload["hadoop_version"] == resolved_s3_jars.versions.hadoop
    assert payload["conf"]["spark.hadoop.fs.s3a.committer.name"] == "magic"
    bad = runner.invoke(main, ["jars", "s3", *cache, "--s3-access-key", "k", "--json"])
    assert bad.exit_code == 1 and "secret key" in json.loads(bad.output)["error"]


def test_dev_metastore_with_s3_gets_the_jars_and_the_endpoint(tmp_path: Path, resolved_s3_jars):
    access = jvmjars.S3Access(endpoint="http://127.0.0.1:9", access_key="ak", secret_key="sk", path_style=True)
    dev = DevMetastore(state_dir=tmp_path, port=9999, s3=access, jars_dir=resolved_s3_jars.directory.parent)
    props = {p.findtext("name"): p.findtext("value") for p in ET.fromstring(dev.render_hive_site()).iter("property")}
    assert props["fs.s3a.endpoint"] == "http://127.0.0.1:9"
    assert props["fs.s3a.access.key"] == "ak" and props["fs.s3a.secret.key"] == "sk"
    assert props["fs.s3a.path.style.access"] == "true"
    classpath = dev.build_command(9999)[dev.build_command(9999).index("-cp") + 1].split(os.pathsep)
    assert classpath[2:] == [str(j) for j in resolved_s3_jars.jars]
    plain = DevMetastore(state_dir=tmp_path / "plain", port=9999)
    assert not [k for k in ET.fromstring(plain.render_hive_site()).iter("name") if k.text.startswith("fs.s3a")]
    assert len(plain.build_command(9999)[plain.build_command(9999).index("-cp") + 1].split(os.pathsep)) == 2


def test_metastore_start_with_s3_refuses_half_a_key_pair_before_starting_anything(tmp_path: Path):
    result = CliRunner().invoke(main, ["metastore", "start", "--state-dir", str(tmp_path / "ms"), "--with-s3",
                                       "--s3-endpoint", "http://127.0.0.1:9", "--s3-access-key", "k"])
    assert result.exit_code == 1 and "give both the S3 access key and the secret key" in result.output
    assert not (tmp_path / "ms" / "metastore.pid").exists()


def test_maven_failure_messages_say_what_to_do():
    """One message builder for every Maven resolution (S3A jars, metastore releases): Maven's error lines,
    then a hint chosen by what went wrong."""
    from tableswap.jvm.maven import failure_message, looks_offline

    offline = ("[ERROR] Failed to execute goal on project x: Could not transfer artifact a:b:1 from/to central: "
               "java.net.UnknownHostException: repo\n[ERROR] \n")
    text = failure_message("a:b:1", offline)
    assert text.startswith("Maven could not resolve a:b:1:\nFailed to execute goal on project x")
    assert looks_offline(offline) and "offline" in text and "~/.m2/settings.xml" in text
    missing = "[ERROR] Could not find artifact org.apache.hive:hive-standalone-metastore-server:jar:4.1.0\n"
    assert not looks_offline(missing)
    assert "check that this version is published" in failure_message("hive", missing)
    other = "\x1b[1;31m[ERROR]\x1b[m Java heap space\n"
    text = failure_message("hive", other)
    assert "Java heap space" in text and "\x1b" not in text and "see Maven's message" in text
    assert "offline" in failure_message("hive", other, offline=True)
