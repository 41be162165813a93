"""The download cache (tableswap.jvm.downloads): one completeness rule, atomic entries, one download at a
time, and entries cached by earlier versions still found. Pure (a fake download fills the directory)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from tableswap.jvm import downloads
from tableswap.errors import DependencyError

COORDS = ["g:a:1"]


def counting_download(calls: list[int], *, pause: float = 0.0):
    def download(work: Path) -> list[str]:
        calls.append(1)
        time.sleep(pause)
        (work / "lib").mkdir()
        (work / "lib" / "a.jar").write_bytes(b"jar")
        return ["lib/a.jar"]
    return download


def test_downloaded_once_then_found_without_downloading(tmp_path: Path):
    calls: list[int] = []
    first = downloads.fetch([tmp_path], "e", COORDS, counting_download(calls))
    assert first.downloaded and first.files == (tmp_path.resolve() / "e/lib/a.jar",)
    manifest = json.loads((tmp_path / "e/manifest.json").read_text())
    assert manifest == {"coordinates": COORDS, "files": ["lib/a.jar"]}
    again = downloads.fetch([tmp_path], "e", COORDS, counting_download(calls))
    assert not again.downloaded and again == first and calls == [1]
    assert downloads.find([tmp_path], "e", ["g:a:2"]) is None  # other coordinates: not this entry


def test_a_failed_or_incomplete_download_leaves_nothing_under_the_name(tmp_path: Path):
    def failing(work: Path) -> list[str]:
        (work / "half.jar").write_bytes(b"")
        raise DependencyError("offline")

    with pytest.raises(DependencyError, match="offline"):
        downloads.fetch([tmp_path], "e", COORDS, failing)
    with pytest.raises(DependencyError, match="incomplete: missing lib/b.jar"):
        downloads.fetch([tmp_path], "e", COORDS, lambda work: ["lib/b.jar"])
    assert [p.name for p in tmp_path.iterdir()] == [".e.lock"]


def test_an_entry_missing_a_listed_file_is_downloaded_again(tmp_path: Path):
    calls: list[int] = []
    downloads.fetch([tmp_path], "e", COORDS, counting_download(calls))
    (tmp_path / "e/lib/a.jar").unlink()
    assert downloads.find([tmp_path], "e", COORDS) is None
    assert downloads.fetch([tmp_path], "e", COORDS, counting_download(calls)).downloaded and len(calls) == 2


def test_two_at_once_download_once(tmp_path: Path):
    calls: list[int] = []
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        downloads.fetch([tmp_path], "e", COORDS, counting_download(calls, pause=0.3)))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1] and sorted(r.downloaded for r in results) == [False, True]


def test_entries_cached_by_earlier_versions_are_found(tmp_path: Path):
    jars = tmp_path / "jars/s3a-x"
    (jars / "jars").mkdir(parents=True)
    (jars / "jars/a.jar").write_bytes(b"jar")
    (jars / "manifest.json").write_text(json.dumps({"coordinates": COORDS, "jars": ["a.jar"]}))
    assert downloads.find([tmp_path / "jars"], "s3a-x", COORDS).files == (jars.resolve() / "jars/a.jar",)
    release = tmp_path / "hms/3.1.3"
    release.mkdir(parents=True)
    (release / ".complete").write_text("org.apache.hive:hive-standalone-metastore:3.1.3\n")
    found = downloads.find([tmp_path / "hms"], "3.1.3", ["org.apache.hive:hive-standalone-metastore:3.1.3"])
    assert found is not None and found.directory == release.resolve()
    (tmp_path / "hms/4.0.1").mkdir()  # no marker: an interrupted download of an earlier version
    assert downloads.find([tmp_path / "hms"], "4.0.1", ["g:a:4.0.1"]) is None


def test_caches_are_searched_in_order_and_a_download_goes_to_the_first(tmp_path: Path):
    calls: list[int] = []
    old, new = tmp_path / "old", tmp_path / "new"
    downloads.fetch([old], "e", COORDS, counting_download(calls))
    assert downloads.fetch([new, old], "e", COORDS, counting_download(calls)).directory == old.resolve() / "e"
    assert downloads.fetch([new, old], "f", COORDS, counting_download(calls)).directory == new.resolve() / "f"
    assert len(calls) == 2


def test_a_release_and_jars_cached_under_the_xdg_default_are_used_offline_with_a_state_dir(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Caches filled before TABLESWAP_STATE_DIR was set, in the formats earlier versions wrote, are used
    without Maven (none is on this PATH); nothing is downloaded into the state directory."""
    from tableswap.jvm import jars as jvmjars
    from tableswap.devmetastore import releases

    for name in ("TABLESWAP_HMS_CACHE", "TABLESWAP_JARS_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TABLESWAP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("TABLESWAP_MVN", "/nonexistent/mvn")
    release = releases.parse_hive_version("3.1.3")
    cached = tmp_path / "home/.cache/tableswap/hive-metastore/3.1.3"
    cached.mkdir(parents=True)
    (cached / ".complete").write_text(release.coordinates + "\n")
    assert releases.resolve(release).home == cached.resolve()

    versions = jvmjars.wheel_versions()
    name = f"s3a-hadoop-{versions.hadoop}-spark-{versions.spark}_{versions.scala}"
    jars = tmp_path / "home/.cache/tableswap/jars" / name
    (jars / "jars").mkdir(parents=True)
    (jars / "jars/hadoop-aws.jar").write_bytes(b"jar")
    (jars / "manifest.json").write_text(json.dumps(
        {"coordinates": list(jvmjars.s3_coordinates(versions)), "jars": ["hadoop-aws.jar"]}))
    found = jvmjars.resolve_s3_jars()
    assert found.jars == (jars.resolve() / "jars/hadoop-aws.jar",) and not found.resolved_now
    assert not (tmp_path / "state").exists()


def test_a_releases_own_hadoop_jars_come_first_on_its_class_path(tmp_path: Path):
    """4.0.1's dependencies bring a shaded hadoop-client-api of another Hadoop release, whose HDFS client needs a
    hadoop-client-runtime that is not there: the jars of the release's own Hadoop (hadoop.version) go on the
    server's class path before the lib/* wildcard, so that their DFSClient is the one loaded."""
    from tableswap.devmetastore import releases

    home = tmp_path / "4.0.1"
    (home / "lib").mkdir(parents=True)
    (home / "hadoop.version").write_text("3.3.6\n")
    for jar in ("hadoop-client-api-3.3.5.jar", "hadoop-common-3.3.6.jar", "hadoop-hdfs-client-3.3.6.jar",
                "hive-standalone-metastore-server-4.0.1.jar", "hadoop-shaded-guava-1.1.1.jar"):
        (home / "lib" / jar).write_bytes(b"")
    distribution = releases.Distribution(releases.parse_hive_version("4.0.1"), home)
    assert [j.name for j in distribution.hadoop_jars()] == ["hadoop-common-3.3.6.jar", "hadoop-hdfs-client-3.3.6.jar"]
