"""JVM parts for object stores, resolved by Maven coordinates into a cache reused offline (an adapter).

Spark reaches S3 through Hadoop's S3A connector, which the pyspark wheel does not ship. It needs:

* ``org.apache.hadoop:hadoop-aws`` of *exactly* the Hadoop version inside the installed wheel (read
  from its ``jars/hadoop-client-api-<version>.jar``), with the dependencies that ``hadoop-aws``
  itself declares (the AWS SDK bundle among them: its version is Maven's answer, never ours);
* ``org.apache.spark:spark-hadoop-cloud_<scala>`` of the installed Spark version (else the newest
  published release of the same major version below it: Maven resolves the range), for the S3A
  committers (``PathOutputCommitProtocol``, ``BindingParquetOutputCommitter``). Only its own jar:
  its other dependencies (Azure, GCS connectors, a second hadoop-aws) are not needed for S3.

They are resolved with Maven (``mvn dependency:copy-dependencies`` on a generated ``pom.xml``, from
the repositories of the user's own Maven settings) into one directory per (Hadoop, Spark) pair under
the cache directory (:mod:`tableswap.jvm.downloads`: a complete entry carries a ``manifest.json`` written
last; when it is there, nothing is run and no network is needed, Maven need not even be installed).

The same jars serve Spark (``spark.jars``) and the development metastore (``--with-s3``).

A local HDFS (Hadoop's ``MiniDFSCluster``, what the test suite runs swaps on) is resolved the same way, from
``org.apache.hadoop:hadoop-client-minicluster`` of the wheel's Hadoop version
(:func:`resolve_hdfs_minicluster_jars`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from xml.sax.saxutils import escape as _xml_escape

from . import downloads
from tableswap.dirs import lookup_paths, user_path
from tableswap.errors import DependencyError
from .maven import find_maven, pyspark_jars_dir, run_maven

__all__ = [
    "ENV_JARS_DIR", "S3Access", "S3Jars", "WheelVersions", "default_cache_dir", "hdfs_minicluster_coordinates",
    "resolve_hdfs_minicluster_jars", "resolve_jars", "resolve_s3_jars", "s3a_spark_conf",
    "wheel_versions", "FILE_COMMITTER_CONF", "MAGIC_COMMITTER_CONF", "MAGIC_IN_MEMORY_CONF",
]

#: Environment variable naming the jar cache directory (wins over the state-directory default).
ENV_JARS_DIR = "TABLESWAP_JARS_DIR"

#: The Spark settings that make a session write through the S3A magic committer (no copy on commit).
MAGIC_COMMITTER_CONF = {
    "spark.hadoop.fs.s3a.committer.name": "magic",
    "spark.hadoop.fs.s3a.committer.magic.enabled": "true",
    "spark.sql.sources.commitProtocolClass": "org.apache.spark.internal.io.cloud.PathOutputCommitProtocol",
    "spark.sql.parquet.output.committer.class":
        "org.apache.spark.internal.io.cloud.BindingParquetOutputCommitter",
}

#: Hadoop 3.4 and later: the magic committer keeps each task attempt's pending uploads in the task's memory
#: until the task commits, instead of a 0-byte marker and a ``.pending`` record PUT in the store per file and
#: read back at task commit. The uploads stay uncompleted until the job commits, as before: a failed or
#: aborted attempt's files never appear. Measured against moto's S3 (docs/benchmarks.md): a write of 400 files
#: went from 3,650 requests to 1,244. Hadoop 3.3 ignores the key.
MAGIC_IN_MEMORY_CONF = {"spark.hadoop.fs.s3a.committer.magic.track.commits.in.memory.enabled": "true"}
MAGIC_IN_MEMORY_SINCE = (3, 4)

#: Hadoop's classic committer, spelled out: with spark-hadoop-cloud on the classpath, Spark 4 (seen with
#: 4.3.0 and Hadoop 3.5.0) otherwise picks the S3A magic committer by itself.
FILE_COMMITTER_CONF = {
    "spark.hadoop.fs.s3a.committer.name": "file",
    "spark.sql.sources.commitProtocolClass":
        "org.apache.spark.sql.execution.datasources.SQLHadoopMapReduceCommitProtocol",
    "spark.sql.parquet.output.committer.class": "org.apache.parquet.hadoop.ParquetOutputCommitter",
}


@dataclass(frozen=True)
class WheelVersions:
    """Versions of the installed pyspark wheel that the extra jars must match."""

    spark: str
    scala: str  # binary version, e.g. "2.13"
    hadoop: str
    jars_dir: Path


@dataclass(frozen=True)
class S3Jars:
    """Resolved jars (absolute paths) and the coordinates they were resolved from."""

    directory: Path
    jars: tuple[Path, ...]
    coordinates: tuple[str, ...]
    versions: WheelVersions
    resolved_now: bool = field(default=False, compare=False)  # False: taken from the cache

    @property
    def classpath(self) -> str:
        return os.pathsep.join(str(j) for j in self.jars)

    def to_dict(self) -> dict[str, object]:
        return {
            "directory": str(self.directory),
            "jars": [str(j) for j in self.jars],
            "coordinates": list(self.coordinates),
            "hadoop_version": self.versions.hadoop,
            "spark_version": self.versions.spark,
            "scala_version": self.versions.scala,
            "resolved_now": self.resolved_now,
        }


def default_cache_dir() -> Path:
    """``$TABLESWAP_JARS_DIR``, else ``$TABLESWAP_STATE_DIR/jars``, else ``$XDG_CACHE_HOME/tableswap/jars``,
    else ``~/.cache/tableswap/jars``."""
    return user_path("jars", "cache", env=ENV_JARS_DIR)


def wheel_versions(jars_dir: Path | None = None) -> WheelVersions:
    """Hadoop, Spark and Scala versions of the wheel, from its jar file names."""
    jars_dir = jars_dir or pyspark_jars_dir()
    names = sorted(p.name for p in jars_dir.glob("*.jar"))
    hadoop = _version_of(names, r"hadoop-client-api-(\d[\w.\-]*)\.jar")
    core = [m for m in (re.fullmatch(r"spark-core_(\d+\.\d+)-(\d[\w.\-]*)\.jar", n) for n in names) if m]
    if hadoop is None or len(core) != 1:
        raise DependencyError(
            f"cannot tell the Hadoop and Spark versions of the pyspark wheel from {jars_dir} (expected one "
            "hadoop-client-api-<version>.jar and one spark-core_<scala>-<version>.jar)")
    return WheelVersions(spark=core[0].group(2), scala=core[0].group(1), hadoop=hadoop, jars_dir=jars_dir)


def _version_of(names: list[str], pattern: str) -> str | None:
    found = {m.group(1) for m in (re.fullmatch(pattern, n) for n in names) if m}
    return found.pop() if len(found) == 1 else None


def s3_coordinates(versions: WheelVersions, *, committers: bool = True) -> tuple[str, ...]:
    """``group:artifact:version`` of what is asked of Maven (before transitive resolution); without
    ``committers``, S3A alone (for a metastore server, which commits no Spark job)."""
    aws = f"org.apache.hadoop:hadoop-aws:{versions.hadoop}"
    if not committers:
        return (aws,)
    return (aws, f"org.apache.spark:spark-hadoop-cloud_{versions.scala}:{_same_major_up_to(versions.spark)}")


def _same_major_up_to(version: str) -> str:
    """A Maven version range: the newest release of the same major version not newer than ``version``.
    The committer bindings are published a while after a Spark release (pyspark 4.3.0 had none yet when
    this was written); their two classes have kept their binary interface across 4.x."""
    major = version.split(".", 1)[0]
    return f"[{major}.0.0,{version}]"


def render_pom(versions: WheelVersions, *, committers: bool = True) -> str:
    """The throw-away project whose runtime dependencies are the S3A jars."""
    aws, *cloud = (c.split(":") for c in s3_coordinates(versions, committers=committers))

    def dep(group: str, artifact: str, version: str, exclusions: str = "") -> str:
        return (f"    <dependency><groupId>{_xml_escape(group)}</groupId><artifactId>{_xml_escape(artifact)}"
                f"</artifactId><version>{_xml_escape(version)}</version>{exclusions}</dependency>")

    only_own_jar = "<exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions>"
    return "\n".join([
        '<?xml version="1.0" encoding="UTF-8"?>',
        "<!-- Generated by tableswap (tableswap jars s3): the S3A jars matching the installed pyspark. -->",
        "<project>",
        "  <modelVersion>4.0.0</modelVersion>",
        "  <groupId>tableswap.local</groupId><artifactId>s3a-jars</artifactId><version>1</version>",
        "  <packaging>pom</packaging>",
        "  <dependencies>",
        dep(*aws),  # hadoop-aws with what it declares for compile/runtime (the AWS SDK bundle)
        # the committer bindings; Spark/Hadoop: the wheel's
        *(dep(g, a, v, exclusions=only_own_jar) for g, a, v in cloud),
        "  </dependencies>",
        "</project>",
        "",
    ])


def resolve_s3_jars(cache_dir: Path | None = None, *, offline: bool = False, mvn: str | None = None,
                    timeout: float = 1800.0, hadoop_version: str | None = None) -> S3Jars:
    """The S3A jars for the installed pyspark, from the cache or (once) resolved with Maven.

    Args:
        cache_dir: where resolved jar sets live (default :func:`default_cache_dir`).
        offline: never reach the network: a cache miss is resolved from Maven's local repository only
            (``mvn --offline``).
        mvn: the Maven executable (default ``$TABLESWAP_MVN``, else ``mvn`` on PATH); not needed when the
            cache is complete.
        timeout: seconds Maven may take.
        hadoop_version: S3A alone (no committer bindings) for another Hadoop than the wheel's: a Hive
            Metastore release's own (S3A must match the ``hadoop-common`` it runs with).

    Raises:
        DependencyError: Maven missing, offline or failing (the message carries Maven's own words).
    """
    versions = wheel_versions()
    committers = hadoop_version is None
    if hadoop_version is not None:  # (not committers)
        versions = replace(versions, hadoop=hadoop_version)
    coordinates = s3_coordinates(versions, committers=committers)
    name = (f"s3a-hadoop-{versions.hadoop}-spark-{versions.spark}_{versions.scala}" if committers
            else f"s3a-hadoop-{versions.hadoop}")
    caches = (cache_dir,) if cache_dir is not None else lookup_paths("jars", "cache", env=ENV_JARS_DIR)
    entry = downloads.find(caches, name, coordinates)
    if entry is None:
        what = ", ".join(coordinates)
        executable = find_maven(mvn, needed_for=f"The S3A jar set {name} ({what})")

        def download(work: Path) -> list[str]:
            return _copy_dependencies(executable, work, render_pom(versions, committers=committers), what=what,
                                      offline=offline, timeout=timeout)

        entry = downloads.fetch(caches, name, coordinates, download)
    return S3Jars(entry.directory, entry.files, coordinates, versions, resolved_now=entry.downloaded)


def resolve_jars(name: str, coordinates: tuple[str, ...], cache_dir: Path | None = None, *, offline: bool = False,
                 mvn: str | None = None, timeout: float = 1800.0) -> tuple[Path, ...]:
    """Other JVM parts by Maven coordinates (``group:artifact:version``, or ``group:artifact:version:classifier``
    for an artifact's other jar such as its ``tests`` one; each with its runtime dependencies),
    cached under ``name`` like the S3A jars: resolved once with Maven, reused offline. Dependencies of scope
    ``provided`` (Spark's own, for a Spark library such as Delta Lake) are not copied.

    Raises:
        DependencyError: Maven missing, offline or failing (the message carries Maven's own words).
    """
    caches = (cache_dir,) if cache_dir is not None else lookup_paths("jars", "cache", env=ENV_JARS_DIR)
    entry = downloads.find(caches, name, coordinates)
    if entry is None:
        what = ", ".join(coordinates)
        executable = find_maven(mvn, needed_for=f"The jar set {name} ({what})")

        def download(work: Path) -> list[str]:
            deps = "\n".join(_dependency(c) for c in coordinates)
            pom = ("<project><modelVersion>4.0.0</modelVersion><groupId>tableswap.local</groupId>"
                   f"<artifactId>jars</artifactId><version>1</version><packaging>pom</packaging>\n"
                   f"  <dependencies>\n{deps}\n  </dependencies>\n</project>\n")
            return _copy_dependencies(executable, work, pom, what=what, offline=offline, timeout=timeout)

        entry = downloads.fetch(caches, name, coordinates, download)
    return tuple(entry.files)


def _dependency(coordinate: str) -> str:
    """A POM's ``<dependency>`` for ``group:artifact:version[:classifier]``."""
    group, artifact, version, *classifier = coordinate.split(":")
    extra = f"<classifier>{_xml_escape(classifier[0])}</classifier>" if classifier else ""
    return (f"    <dependency><groupId>{_xml_escape(group)}</groupId><artifactId>{_xml_escape(artifact)}</artifactId>"
            f"<version>{_xml_escape(version)}</version>{extra}</dependency>")


#: What ``MiniDFSCluster``'s test-directory helper (``GenericTestUtils``) calls at start: JUnit 5's
#: ``Assertions``, a test-scope dependency that the shaded minicluster artifact leaves out. Any 5.x serves;
#: this is the release Hadoop 3.5.0 builds with.
JUNIT_API = "org.junit.jupiter:junit-jupiter-api:5.13.3"


def hdfs_minicluster_coordinates(hadoop_version: str) -> tuple[str, ...]:
    """``group:artifact:version`` of a local HDFS (a NameNode and DataNodes in one JVM, Hadoop's own
    ``MiniDFSCluster``) of ``hadoop_version``: the shaded ``hadoop-client-minicluster``, which brings the
    shaded client jars of the same release, and what its start needs besides."""
    return (f"org.apache.hadoop:hadoop-client-minicluster:{hadoop_version}", JUNIT_API)


def resolve_hdfs_minicluster_jars(cache_dir: Path | None = None, *, offline: bool = False, mvn: str | None = None,
                                  timeout: float = 1800.0) -> tuple[Path, ...]:
    """The jars of a local HDFS matching the Hadoop client of the installed pyspark wheel (its class path:
    ``org.apache.hadoop.mapreduce.MiniHadoopClusterManager -nomr`` starts it), from the cache or (once)
    resolved with Maven (about 100 MB).

    Raises:
        DependencyError: Maven missing, offline or failing (the message carries Maven's own words).
    """
    hadoop = wheel_versions().hadoop
    return resolve_jars(f"hdfs-minicluster-{hadoop}", hdfs_minicluster_coordinates(hadoop), cache_dir,
                        offline=offline, mvn=mvn, timeout=timeout)


def _copy_dependencies(executable: str, work: Path, pom: str, *, what: str, offline: bool,
                       timeout: float) -> list[str]:
    """Write ``pom`` into ``work`` and have Maven copy its runtime dependencies into ``work/jars``; their paths
    relative to ``work``."""
    (work / "pom.xml").write_text(pom, encoding="utf-8")
    run_maven(executable, ["-f", str(work / "pom.xml"), "dependency:copy-dependencies",
                           "-DincludeScope=runtime", f"-DoutputDirectory={work / 'jars'}"],
              cwd=work, what=what, offline=offline, timeout=timeout)
    jars = sorted((work / "jars").glob("*.jar"))
    if not jars:
        raise DependencyError(f"Maven resolved {what} but copied no jar into {work / 'jars'}")
    return [f"jars/{j.name}" for j in jars]


@dataclass(frozen=True)
class S3Access:
    """How S3A reaches the store: an endpoint (None: AWS), keys (None: S3A's default credential chain),
    path-style access (needed by most S3-compatible servers) and a region."""

    endpoint: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    path_style: bool = False
    region: str | None = None

    def hadoop_properties(self) -> dict[str, str]:
        """The ``fs.s3a.*`` Hadoop settings (for a ``hive-site.xml``/``core-site.xml``, or Spark with the
        ``spark.hadoop.`` prefix)."""
        props = {"fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
        if self.endpoint:
            props["fs.s3a.endpoint"] = self.endpoint
            if self.endpoint.startswith("http://"):
                props["fs.s3a.connection.ssl.enabled"] = "false"
        if self.region:
            props["fs.s3a.endpoint.region"] = self.region
        if self.path_style:
            props["fs.s3a.path.style.access"] = "true"
        if (self.access_key is None) != (self.secret_key is None):
            raise DependencyError("give both the S3 access key and the secret key, or neither")
        if self.access_key is not None:
            props["fs.s3a.access.key"] = self.access_key
            props["fs.s3a.secret.key"] = self.secret_key or ""
            props["fs.s3a.aws.credentials.provider"] = "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
        return props


def s3a_spark_conf(jars: S3Jars, access: S3Access | None = None, *, committer: str = "magic") -> dict[str, str]:
    """The Spark settings a session needs to read and write ``s3a://`` and, with ``committer="magic"``
    (recommended), to commit a write without copying a byte; ``"file"``: Hadoop's classic committer,
    which copies every file on task and job commit (renames are copies on S3)."""
    if committer not in ("magic", "file"):
        raise DependencyError(f"unknown committer {committer!r}: expected magic or file")
    conf = {"spark.jars": ",".join(str(j) for j in jars.jars)}
    conf.update({f"spark.hadoop.{k}": v for k, v in (access or S3Access()).hadoop_properties().items()})
    conf.update(MAGIC_COMMITTER_CONF if committer == "magic" else FILE_COMMITTER_CONF)
    if committer == "magic" and _release(jars.versions.hadoop) >= MAGIC_IN_MEMORY_SINCE:
        conf.update(MAGIC_IN_MEMORY_CONF)
    return conf


def _release(version: str) -> tuple[int, ...]:
    """``"3.5.0"`` -> ``(3, 5, 0)``; what follows the leading numbers (``-SNAPSHOT``) is left out."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    return tuple(int(x) for x in match.group(0).split(".")) if match else ()
