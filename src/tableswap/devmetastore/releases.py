"""Standalone Hive Metastore releases (3.1.x, 4.x) for the development metastore, by Maven coordinates.

The default development metastore is the Hive 2.3 server inside the pyspark wheel. Any other
release is resolved with Maven (``mvn``, the ecosystem's own tool, with its default repository
and the user's ``~/.m2/settings.xml`` mirrors) into a cache directory, once; later starts reuse the
cache without Maven or a network::

    <cache>/<version>/
        lib/            the server and its runtime dependencies (``mvn dependency:copy-dependencies``
                        on a generated pom: the server artifact, plus the Hadoop jars it
                        declares optional (hadoop-common, -hdfs, -hdfs-client,
                        -mapreduce-client-core) at the Hadoop version the release was built
                        with: the Hive distribution expects a Hadoop install beside it)
        scripts/        the release's schema scripts (``scripts/metastore/upgrade/<db>/``), from the
                        release's ``bin`` tar.gz (``mvn dependency:copy``): its own ``schematool``
                        creates the schema, transaction and lock tables included
        pom.xml, poms/  what Maven was given / the release's poms (where the Hadoop version is read)
        manifest.json   written last: the cache entry is whole (:mod:`tableswap.jvm.downloads`)

Coordinates (group ``org.apache.hive``): 4.x ``hive-standalone-metastore-server`` (4.0.0, 4.0.1;
4.1.0's server artifact is not published to Maven Central), 3.1.x ``hive-standalone-metastore``.

Java: 3.1.x and 4.0.x are built for Java 8 and run on Java 17 with Spark's module options
(``java-options.txt``), as verified here with 3.1.3 and 4.0.1; 4.1+ are built for Java 17.
"""

from __future__ import annotations

import re
import shutil
import tarfile
import xml.etree.ElementTree as ET
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tableswap.devmetastore.backend import DevMetastoreError
from tableswap.jvm import downloads
from tableswap.dirs import lookup_paths, user_path
from tableswap.jvm.maven import MAVEN_ENV, find_maven, run_maven

__all__ = ["HiveRelease", "parse_hive_version", "default_cache_dir", "resolve", "Distribution",
           "CACHE_DIR_ENV", "MAVEN_ENV", "BUILTIN_VERSION", "spark_client_conf"]

#: The release the pyspark wheel ships (the default development metastore).
BUILTIN_VERSION = "2.3"

#: Environment variable naming the cache of downloaded releases.
CACHE_DIR_ENV = "TABLESWAP_HMS_CACHE"

GROUP = "org.apache.hive"
_POM_NS = "{http://maven.apache.org/POM/4.0.0}"
#: The Hadoop artifacts the server declares optional (it expects a Hadoop install beside it);
#: hadoop-hdfs holds e.g. SnapshotException, which 4.0.1 loads on the first create_table.
_HADOOP_ARTIFACTS = ("hadoop-common", "hadoop-hdfs-client", "hadoop-hdfs", "hadoop-mapreduce-client-core")


@dataclass(frozen=True)
class HiveRelease:
    """A standalone Hive Metastore release, e.g. ``4.0.1`` or ``3.1.3``."""

    version: str
    major: int
    minor: int

    @property
    def artifact(self) -> str:
        return "hive-standalone-metastore-server" if self.major >= 4 else "hive-standalone-metastore"

    @property
    def schema_tool_class(self) -> str:
        if self.major >= 4:
            return "org.apache.hadoop.hive.metastore.tools.schematool.MetastoreSchemaTool"
        return "org.apache.hadoop.hive.metastore.tools.MetastoreSchemaTool"

    @property
    def min_java(self) -> int:
        """The oldest Java the release runs on (its class files' target)."""
        return 17 if (self.major, self.minor) >= (4, 1) else 8

    @property
    def max_java(self) -> int | None:
        """The newest Java the release runs on, when known. 3.1.x and 4.0.x run on Hadoop 3.1/3.3, whose
        ``UserGroupInformation`` calls ``Subject.getSubject``: Java 23 and newer refuse that call
        ("getSubject is not supported", seen with Temurin 25 here), and the server does not start."""
        return 22 if (self.major, self.minor) <= (4, 0) else None

    @property
    def coordinates(self) -> str:
        return f"{GROUP}:{self.artifact}:{self.version}"


def parse_hive_version(text: str | None) -> HiveRelease | None:
    """``None``, ``""``, ``"2.3"`` or ``"builtin"`` → ``None`` (the pyspark wheel's 2.3); ``3.1.x``
    and ``4.x.y`` → a :class:`HiveRelease`; anything else → :class:`DevMetastoreError`."""
    if text is None:
        return None
    raw = text.strip()
    if raw.lower() in ("", "builtin", BUILTIN_VERSION) or raw.startswith(BUILTIN_VERSION + "."):
        return None
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)(-[A-Za-z0-9.\-]+)?", raw)
    supported = "3.1.x (e.g. 3.1.3), 4.x.y (e.g. 4.0.1), or 2.3 (the default, inside the pyspark wheel)"
    if not match:
        raise DevMetastoreError(f"unknown Hive Metastore version {raw!r}: expected {supported}")
    major, minor = int(match.group(1)), int(match.group(2))
    if not ((major == 3 and minor == 1) or major == 4):
        raise DevMetastoreError(f"unsupported Hive Metastore version {raw!r}: expected {supported}")
    return HiveRelease(raw, major, minor)


def default_cache_dir() -> Path:
    """``$TABLESWAP_HMS_CACHE``, else ``$TABLESWAP_STATE_DIR/hive-metastore``, else
    ``$XDG_CACHE_HOME/tableswap/hive-metastore``, else ``~/.cache/tableswap/hive-metastore``."""
    return user_path("hive-metastore", "cache", env=CACHE_DIR_ENV)


@dataclass(frozen=True)
class Distribution:
    """A resolved release in the cache."""

    release: HiveRelease
    home: Path  # METASTORE_HOME: holds scripts/metastore/upgrade/<db>/

    @property
    def lib_dir(self) -> Path:
        return self.home / "lib"

    @property
    def hadoop_version(self) -> str:
        return (self.home / "hadoop.version").read_text(encoding="utf-8").strip()

    def hadoop_jars(self) -> list[Path]:
        """The jars of the Hadoop release the server was resolved with (``hadoop-*-<hadoop.version>.jar``),
        to go on its class path before the rest: 4.0.1's server also pulls in a shaded
        ``hadoop-client-api`` of another release, whose HDFS client needs the shaded third-party classes of a
        ``hadoop-client-runtime`` that is not there (``NoClassDefFoundError: org/apache/hadoop/shaded/...``
        on the first ``hdfs://`` location); which of the two ``DFSClient`` classes a ``lib/*`` class path
        loads first is the directory's order."""
        return sorted(self.lib_dir.glob(f"hadoop-*-{self.hadoop_version}.jar"))

    def has_class(self, name: str) -> bool:
        """Whether one of the release's Hive jars holds class ``name``."""
        entry = name.replace(".", "/") + ".class"
        for jar in sorted(self.lib_dir.glob("hive-*.jar")):
            try:
                with zipfile.ZipFile(jar) as archive:
                    archive.getinfo(entry)
                return True
            except KeyError:
                continue
            except (OSError, zipfile.BadZipFile):
                continue
        return False

    def schema_version_scripts(self, db_type: str) -> list[str]:
        directory = self.home / "scripts" / "metastore" / "upgrade" / db_type
        return sorted(p.name for p in directory.glob("hive-schema-*.sql"))


def resolve(release: HiveRelease, cache_dir: Path | None = None, *, maven: str | None = None) -> Distribution:
    """The cached distribution of ``release``, downloading it with Maven the first time (one download at
    a time per release: several test sessions or CLI starts at once wait for the first)."""
    caches = (cache_dir,) if cache_dir is not None else lookup_paths("hive-metastore", "cache", env=CACHE_DIR_ENV)
    coordinates = [release.coordinates]
    entry = downloads.find(caches, release.version, coordinates)
    if entry is None:
        mvn = _find_maven(maven, release)
        entry = downloads.fetch(caches, release.version, coordinates, lambda work: _download(release, work, mvn),
                                error=DevMetastoreError)
    return Distribution(release, entry.directory)


def _download(release: HiveRelease, work: Path, mvn: str) -> list[str]:
    """Fill ``work`` with the release; the files that make it whole."""
    poms = work / "poms"
    _maven(mvn, release, work, ["dependency:copy", f"-Dartifact={release.coordinates}:pom",
                                f"-DoutputDirectory={poms}"], "its pom")
    hadoop = _hadoop_version(mvn, release, work, poms)
    (work / "hadoop.version").write_text(hadoop + "\n", encoding="utf-8")
    _maven(mvn, release, work, ["dependency:copy", f"-Dartifact={release.coordinates}:tar.gz:bin",
                                f"-DoutputDirectory={work / 'dist'}"], "its bin tar.gz (schema scripts)")
    _extract_scripts(next((work / "dist").glob("*.tar.gz")), work)
    shutil.rmtree(work / "dist")
    (work / "pom.xml").write_text(_server_pom(release, hadoop), encoding="utf-8")
    _maven(mvn, release, work, ["-f", str(work / "pom.xml"), "dependency:copy-dependencies",
                                "-DincludeScope=runtime", f"-DoutputDirectory={work / 'lib'}"],
           "the server and its dependencies")
    jars = sorted(p.relative_to(work).as_posix() for p in (work / "lib").glob("*.jar"))
    if not jars:
        raise DevMetastoreError(f"Maven copied no jar of Hive Metastore {release.version} into {work / 'lib'}")
    return ["hadoop.version", *jars]


# ---------------------------------------------------------------------- Maven
def _find_maven(explicit: str | None, release: HiveRelease) -> str:
    return find_maven(explicit, error=DevMetastoreError,
                      needed_for=f"Hive Metastore {release.version} ({release.coordinates}, "
                                 f"cache {default_cache_dir()})")


def _maven(mvn: str, release: HiveRelease, cwd: Path, goals: list[str], what: str) -> None:
    run_maven(mvn, goals, cwd=cwd, error=DevMetastoreError,
              what=f"Hive Metastore {release.version} ({what}, {release.coordinates})")


def _hadoop_version(mvn: str, release: HiveRelease, work: Path, poms: Path) -> str:
    """The ``hadoop.version`` property of the release's pom, else of its Hive parent pom."""
    pom = poms / f"{release.artifact}-{release.version}.pom"
    for _ in range(3):
        root = ET.parse(pom).getroot()
        value = root.findtext(f"{_POM_NS}properties/{_POM_NS}hadoop.version")
        if value and "${" not in value:
            return value.strip()
        parent = root.find(f"{_POM_NS}parent")
        if parent is None or parent.findtext(f"{_POM_NS}groupId") != GROUP:
            break
        artifact = parent.findtext(f"{_POM_NS}artifactId")
        version = parent.findtext(f"{_POM_NS}version")
        _maven(mvn, release, work, ["dependency:copy", f"-Dartifact={GROUP}:{artifact}:{version}:pom",
                                    f"-DoutputDirectory={poms}"], "its parent pom")
        pom = poms / f"{artifact}-{version}.pom"
    raise DevMetastoreError(
        f"the poms of Hive Metastore {release.version} name no hadoop.version; this release cannot be "
        "resolved automatically"
    )


def _server_pom(release: HiveRelease, hadoop: str) -> str:
    """The server plus the Hadoop client jars it needs at runtime. Hadoop's own SLF4J binding
    (reload4j) is left out, so that the server logs through its log4j2 binding."""
    exclusions = "".join(
        f"<exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
        for g, a in (("org.slf4j", "slf4j-reload4j"), ("ch.qos.reload4j", "reload4j"),
                     ("org.slf4j", "slf4j-log4j12"), ("log4j", "log4j"))
    )
    hadoop_deps = "".join(
        f"<dependency><groupId>org.apache.hadoop</groupId><artifactId>{a}</artifactId>"
        f"<version>{hadoop}</version><exclusions>{exclusions}</exclusions></dependency>"
        for a in _HADOOP_ARTIFACTS
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        f"  <groupId>tableswap.devmetastore</groupId><artifactId>hive-metastore-{release.version}</artifactId>\n"
        "  <version>0</version><packaging>pom</packaging>\n"
        "  <dependencies>\n"
        f"    <dependency><groupId>{GROUP}</groupId><artifactId>{release.artifact}</artifactId>"
        f"<version>{release.version}</version><exclusions>{exclusions}</exclusions></dependency>\n"
        f"    {hadoop_deps}\n"
        f"    {_listener_dep(release)}\n"
        "  </dependencies>\n"
        "</project>\n"
    )


def writes_notification_log(release: HiveRelease | None) -> bool:
    """Whether the development metastore of ``release`` (None: the default 2.3, the pyspark wheel's) writes a
    notification log: 3.1.x only, whose release cache holds Hive's listener (see :func:`_listener_dep`)."""
    return release is not None and release.major == 3


def _listener_dep(release: HiveRelease) -> str:
    """3.1.x: Hive's notification-log writer (DbNotificationListener), alone: it ships in hcatalog's
    server extensions, not with the standalone metastore, and needs nothing beyond the metastore's own
    classes. Its 4.x artifact is not published to Maven Central."""
    if not writes_notification_log(release):
        return ""
    return (f"<dependency><groupId>{GROUP}.hcatalog</groupId><artifactId>hive-hcatalog-server-extensions</artifactId>"
            f"<version>{release.version}</version><exclusions><exclusion><groupId>*</groupId>"
            "<artifactId>*</artifactId></exclusion></exclusions></dependency>")


def _extract_scripts(archive: Path, into: Path) -> None:
    """Copy ``<top>/scripts/**`` of the release's tarball to ``into/scripts``."""
    with tarfile.open(archive, "r:gz") as tar:
        members = []
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) > 2 and parts[1] == "scripts" and (member.isfile() or member.isdir()):
                member.name = str(Path(*parts[1:]))
                members.append(member)
        if not members:
            raise DevMetastoreError(f"{archive.name} holds no scripts/ directory: not a Hive Metastore release")
        tar.extractall(into, members=members, filter="data")


def spark_client_conf(version: str | None) -> dict[str, str]:
    """The Spark settings a SparkSession needs to talk to a metastore of ``version`` (pure).

    Spark's built-in Hive 2.3.10 client talks to 2.3 and 3.1 servers. HMS 4 removed ``get_table``
    (and the other calls the 4.0 server no longer implements, HIVE-26537), which the built-in client
    uses for every table lookup ("Invalid method name: 'get_table'"): a SparkSession on a 4.x server
    needs Spark's Hive 4 client, which Spark resolves by Maven coordinates through Ivy
    (``spark.sql.hive.metastore.jars=maven``, cached in Ivy's cache; Spark 4.3 supports 4.0.0-4.1.0).
    """
    release = parse_hive_version(version)
    if release is None or release.major < 4:
        return {}
    return {"spark.sql.hive.metastore.version": release.version, "spark.sql.hive.metastore.jars": "maven"}
