"""A real Trino server for the tests: a second engine reading the tables tableswap swaps, through the same
metastore and the same storage.

The server distribution is resolved by Maven coordinates (``io.trino:trino-server:VERSION:tar.gz``, with
Maven's own repositories or the mirrors of ``~/.m2/settings.xml``) once, and only what the tests run is kept
in a cache that later runs reuse offline::

    <cache>/<version>/            ($TABLESWAP_TRINO_CACHE, else ~/.cache/tableswap/trino)
        lib/                      the server's jars
        plugin/hive/              the Hive connector, with its hdfs/ class path (file: locations) and
                                  the AWS SDK's Glue client (hive.metastore=glue: :func:`glue_catalog`)
        .complete                 written last: the cache entry is whole

The server is one coordinator that also runs the work, with a small heap, and several Hive catalogs on the
session's metastore, each with its own cache settings (see :func:`catalogs`). Trino 476 (the newest
release Maven Central has) needs Java 24 or later: :func:`find_java` looks for one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tableswap.errors import DependencyError
from tableswap.jvm.maven import find_maven, run_maven

from .connect_server import ServerProcess, free_port

VERSION = "476"
#: The Java release Trino 476 needs at least.
MIN_JAVA = 24
#: A Java executable (or a JDK directory) for the server, when none is found otherwise.
JAVA_ENV = "TABLESWAP_TEST_TRINO_JAVA"
CACHE_ENV = "TABLESWAP_TRINO_CACHE"
SERVER_CLASS = "io.trino.server.TrinoServer"
COORDINATES = "io.trino:trino-server:{version}:tar.gz"

#: The catalogs every test server has. ``hive``: Trino's defaults, which are the settings readers of swapped
#: tables need (no metastore cache, no file-status cache: docs/engines.md). ``hive_cached``: the caches
#: teams turn on for speed (metastore cache and file-status cache for every table), with a TTL short enough
#: for a test to watch it expire. ``hive_cached_long``: the same caches with a TTL no test outlives, where
#: only a flush (the post-commit hook) makes a swap visible.
CACHED_TTL_S = 10
LONG_TTL_S = 3600


def catalogs(metastore_uri: str, s3: object | None = None,
             hadoop_conf: Path | None = None) -> dict[str, dict[str, str]]:
    """The Hive catalogs of the test server (see :data:`CACHED_TTL_S`); ``s3``: a
    :class:`tableswap.jvm.jars.S3Access` for Trino's native S3 file system (s3a:// locations);
    ``hadoop_conf``: a Hadoop client configuration directory (an HDFS's ``core-site.xml`` and
    ``hdfs-site.xml``) for Trino's HDFS support (hdfs:// locations; ``hive.config.resources``)."""
    base = {"connector.name": "hive", "hive.metastore.uri": metastore_uri,
            # file: locations (what Spark writes locally) go through the Hadoop file system; Trino's native
            # local file system lists them as local:/// paths, which its Hive connector then ignores. So do
            # hdfs:// locations (Trino's HDFS support is its Hadoop file system).
            "fs.hadoop.enabled": "true"}
    if hadoop_conf is not None:
        base["hive.config.resources"] = f"{hadoop_conf}/core-site.xml,{hadoop_conf}/hdfs-site.xml"
    if s3 is not None:
        base.update({"fs.native-s3.enabled": "true", "s3.endpoint": s3.endpoint, "s3.region": s3.region,
                     "s3.path-style-access": str(bool(s3.path_style)).lower(),
                     "s3.aws-access-key": s3.access_key, "s3.aws-secret-key": s3.secret_key})

    def cached(ttl_s: int) -> dict[str, str]:
        ttl = f"{ttl_s}s"
        return {**base, "hive.metastore-cache-ttl": ttl, "hive.metastore-refresh-interval": ttl,
                "hive.file-status-cache-tables": "*", "hive.file-status-cache-expire-time": ttl}

    return {"hive": dict(base), "hive_cached": cached(CACHED_TTL_S), "hive_cached_long": cached(LONG_TTL_S)}


def glue_catalog(endpoint: str, region: str, access_key: str, secret_key: str, *,
                 path_style: bool = True) -> dict[str, str]:
    """A Hive catalog on the AWS Glue Data Catalog (``hive.metastore=glue``) at ``endpoint`` (a private endpoint
    or an emulator), its data on S3 at the same endpoint through Trino's native S3 file system.

    The property names are Trino 476's (``GlueHiveMetastoreConfig``); its Glue client (the AWS SDK v2 ``glue``
    jar) is in the Hive plugin directory the cache keeps. Two settings are for the emulator (moto 5.2.5,
    measured 2026-11-25), both leaving what a query returns unchanged:

    - ``hive.metastore.glue.partitions-segments=1``: Trino lists a table's partitions with ``GetPartitions``
      split into ``Segment`` requests run in parallel (default 5). moto ignores ``Segment`` and answers each
      with every partition; Trino's union of the segments (a set) hides the duplicates, one segment avoids
      the repeated work.
    - ``hive.table-statistics-enabled=false``: the planner asks ``GetColumnStatisticsForPartition``, which moto
      does not implement (its server answers HTTP 500, ``NotImplementedError``); the AWS SDK makes 10
      attempts and the planner then goes on without statistics: 12 s of planning per query instead of 0.1 s.
    """
    return {"connector.name": "hive", "hive.metastore": "glue",
            "hive.metastore.glue.region": region, "hive.metastore.glue.endpoint-url": endpoint,
            "hive.metastore.glue.aws-access-key": access_key, "hive.metastore.glue.aws-secret-key": secret_key,
            "hive.metastore.glue.partitions-segments": "1",
            "hive.table-statistics-enabled": "false",
            "fs.native-s3.enabled": "true", "s3.endpoint": endpoint, "s3.region": region,
            "s3.path-style-access": str(path_style).lower(),
            "s3.aws-access-key": access_key, "s3.aws-secret-key": secret_key}


def glue_catalogs(endpoint: str, region: str, access_key: str, secret_key: str) -> dict[str, dict[str, str]]:
    """The session server's catalogs on the Glue emulator: ``glue`` (Trino's defaults: no metastore cache) and
    ``glue_cached`` (metastore and file-status caches on for :data:`CACHED_TTL_S`, as teams turn them on)."""
    glue = glue_catalog(endpoint, region, access_key, secret_key)
    ttl = f"{CACHED_TTL_S}s"
    cached = {**glue, "hive.metastore-cache-ttl": ttl, "hive.metastore-refresh-interval": ttl,
              "hive.file-status-cache-tables": "*", "hive.file-status-cache-expire-time": ttl}
    return {"glue": glue, "glue_cached": cached}


def default_cache_dir() -> Path:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "tableswap" / "trino"


def resolve(version: str = VERSION, cache_dir: Path | None = None) -> Path:
    """The cached server of ``version`` (lib/ and plugin/hive/), resolved with Maven the first time.

    Raises:
        DependencyError: not cached and Maven could not resolve it (no Maven, offline, ...).
    """
    cache = (cache_dir or default_cache_dir()).expanduser().resolve()
    root = cache / version
    if (root / ".complete").exists():
        return root
    coordinates = COORDINATES.format(version=version)
    mvn = find_maven(needed_for=f"the Trino server {version} ({coordinates}, cache {cache})")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=f".{version}-") as tmp:
        work = Path(tmp)
        run_maven(mvn, ["dependency:copy", f"-Dartifact={coordinates}", f"-DoutputDirectory={work}"],
                  cwd=work, what=coordinates)
        [archive] = work.glob("trino-server-*.tar.gz")
        # Whole: the archive hard-links one plugin's jars to another's.
        subprocess.run(["tar", "-xzf", str(archive), "-C", str(work)], check=True)
        archive.unlink()
        [unpacked] = [p for p in work.iterdir() if p.is_dir()]
        staged = work / "staged"
        (staged / "plugin").mkdir(parents=True)
        (unpacked / "lib").rename(staged / "lib")
        (unpacked / "plugin" / "hive").rename(staged / "plugin" / "hive")
        (staged / ".complete").write_text(coordinates + "\n")
        if root.exists():  # an incomplete earlier attempt
            shutil.rmtree(root)
        staged.rename(root)
    return root


def java_major(java: str) -> int | None:
    """The major version of a ``java`` executable, or None if it does not run."""
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r'version "(\d+)', done.stderr + done.stdout)
    return int(found.group(1)) if found else None


def find_java(minimum: int = MIN_JAVA) -> str:
    """A Java of at least ``minimum``: ``$TABLESWAP_TEST_TRINO_JAVA``, ``$JAVA_HOME``, ``java`` on PATH, or a
    JDK under /usr/lib/jvm (newest first).

    Raises:
        DependencyError: none found, with what to install.
    """
    candidates = []
    for value in (os.environ.get(JAVA_ENV), os.environ.get("JAVA_HOME")):
        if value:
            path = Path(value)
            candidates.append(str(path / "bin" / "java") if path.is_dir() else value)
    candidates += [shutil.which("java") or "java"]
    jvm = Path("/usr/lib/jvm")
    if jvm.is_dir():
        candidates += [str(p / "bin" / "java") for p in sorted(jvm.iterdir(), reverse=True)
                       if (p / "bin" / "java").exists()]
    seen = []
    for java in candidates:
        major = java_major(java)
        seen.append(f"{java}: {major or 'does not run'}")
        if major is not None and major >= minimum:
            return java
    raise DependencyError(f"the Trino server {VERSION} needs Java {minimum} or later; found {'; '.join(seen)}. "
                          f"Install one (e.g. Temurin 25) and point ${JAVA_ENV} at it")


@dataclass
class Startup:
    seconds: float
    rss_mb: float  # the server's resident memory right after it started


class TrinoServer(ServerProcess):
    """One Trino process (coordinator and worker) on a loopback port."""

    def __init__(self, home: Path, state_dir: Path, java: str, catalogs: dict[str, dict[str, str]], *,
                 heap: str = "1G", start_timeout_s: float = 300.0) -> None:
        self.home, self.state_dir, self.java = home, Path(state_dir), java
        self.catalogs, self.heap, self.start_timeout_s = catalogs, heap, start_timeout_s
        self.port = free_port()
        self.log_path = self.state_dir / "trino.log"
        self.proc: subprocess.Popen | None = None
        self.startup: Startup | None = None
        self._began = 0.0
        self._queried: set[str] = set()  # catalogs a query has run on: their nodes are announced

    def _write_config(self) -> Path:
        etc = self.state_dir / "etc"
        (etc / "catalog").mkdir(parents=True, exist_ok=True)
        config = {
            "coordinator": "true", "node-scheduler.include-coordinator": "true",
            "http-server.http.port": str(self.port), "discovery.uri": f"http://127.0.0.1:{self.port}",
            "node.environment": "tableswap_test", "node.id": "tableswap-test", "node.internal-address": "127.0.0.1",
            "query.max-memory": "256MB", "query.max-memory-per-node": "256MB",
            "task.concurrency": "2", "task.max-worker-threads": "4",
            "plugin.dir": str(self.home / "plugin"), "catalog.config-dir": str(etc / "catalog"),
        }
        _write_properties(etc / "config.properties", config)
        for name, properties in self.catalogs.items():
            _write_properties(etc / "catalog" / f"{name}.properties", properties)
        return etc

    def command(self, etc: Path) -> list[str]:
        return [self.java, f"-Xmx{self.heap}", "-Xms256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-XX:+ExitOnOutOfMemoryError", "-Djdk.attach.allowAttachSelf=true",
                "--enable-native-access=ALL-UNNAMED", f"-Dconfig={etc / 'config.properties'}",
                "-cp", str(self.home / "lib" / "*"), SERVER_CLASS]

    def start(self, *, wait: bool = True) -> "TrinoServer":
        """Launch the server; with ``wait=False`` return at once (the first :meth:`connect` waits), so that
        it boots while the test session starts Spark."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        etc = self._write_config()
        self._began = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.command(etc), stdout=log, stderr=subprocess.STDOUT,
                                         cwd=self.state_dir, start_new_session=True)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self) -> None:
        """Wait until the server accepts queries (once); raises if it exits or does not start in time."""
        if self.startup is not None:
            return
        if self.proc is None:
            raise RuntimeError("the Trino server is not running")
        while time.monotonic() < self._began + self.start_timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Trino server exited with {self.proc.returncode}:\n{self.log_tail()}")
            if self._ready():
                # Trino's own figure (from its log) is exact even when nobody was waiting.
                found = re.search(r"Server startup completed in ([\d.]+)(ms|s|m)\b",
                                  self.log_path.read_text(errors="replace"))
                seconds = (round(float(found.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[found.group(2)], 1) if found
                           else round(time.monotonic() - self._began, 1))
                self.startup = Startup(seconds, self.rss_mb())
                return
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the Trino server did not start in {self.start_timeout_s:.0f}s:\n{self.log_tail()}")

    def _ready(self) -> bool:
        """Started, and its node announced as active: before that, queries fail with NO_NODES_AVAILABLE."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/v1/info", timeout=2) as response:
                if json.load(response).get("starting") is not False:
                    return False
        except (OSError, ValueError):
            return False
        import trino

        try:
            conn = trino.dbapi.connect(host="127.0.0.1", port=self.port, user="tableswap-tests", request_timeout=30)
            try:
                cur = conn.cursor()
                cur.execute("SELECT count(*) FROM system.runtime.nodes WHERE state = 'active'")
                return cur.fetchall()[0][0] >= 1
            finally:
                conn.close()
        except Exception:  # noqa: BLE001 - not ready yet, whatever the client says
            return False

    def rss_mb(self) -> float:
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except (OSError, AttributeError):
            return 0.0
        found = re.search(r"VmRSS:\s+(\d+) kB", status)
        return round(int(found.group(1)) / 1024, 1) if found else 0.0

    def connect(self, catalog: str = "hive", schema: str | None = None):
        import trino

        self.wait_ready()
        return trino.dbapi.connect(host="127.0.0.1", port=self.port, user="tableswap-tests", catalog=catalog,
                                   schema=schema, request_timeout=120)

    def query(self, sql: str, catalog: str = "hive") -> list[list]:
        """The rows of one statement (a new connection each time: no state between tests).

        Until a first query on ``catalog`` succeeds, ``NO_NODES_AVAILABLE`` is retried for up to a minute:
        the coordinator schedules a catalog's splits only on nodes whose announcement lists that catalog,
        which can lag the node itself being active (seen once in CI on the first query after start-up).
        After that, the error is a failure like any other."""
        deadline = time.monotonic() + 60
        while True:
            conn = self.connect(catalog)
            try:
                cur = conn.cursor()
                cur.execute(sql)
                rows = cur.fetchall()
                self._queried.add(catalog)
                return rows
            except Exception as exc:  # noqa: BLE001 - only the start-up announcement's lag is retried
                if (catalog in self._queried or "NO_NODES_AVAILABLE" not in str(exc)
                        or time.monotonic() > deadline):
                    raise
            finally:
                conn.close()
            time.sleep(1)


def _write_properties(path: Path, values: dict[str, str]) -> None:
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
