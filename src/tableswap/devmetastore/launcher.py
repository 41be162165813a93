"""Launch a local development Hive Metastore backed by embedded Derby or PostgreSQL.

By default it is the Hive 2.3 server whose jars ship inside the pyspark wheel; ``hive_version``
selects a standalone 3.1.x or 4.x release instead, resolved by Maven coordinates into a cache
(:mod:`tableswap.devmetastore.releases`) whose schema is created by the release's own schematool.
This module runs the server as a detached ``java`` process whose state (Derby database,
warehouse, configuration, log, pid and port files) lives in one *state directory*::

    <state_dir>/
        conf/hive-site.xml      generated from hive-site.xml.template on every start (2.3);
                                3.1/4.x: conf/metastore-site.xml (metastore-site.xml.template)
                                and conf/metastore-log4j2.properties
        metastore.version       the server release this state directory holds ("2.3" or e.g.
                                "4.0.1"); a Derby database is never reopened by another release
        metastore_db/           embedded Derby database (Derby backend only)
        metastore.backend       the backing database last used ("derby" or a postgresql:// URL,
                                mode 0600), reused by the next start unless one is given
        warehouse/              hive.metastore.warehouse.dir (the "default" database)
        tmp/                    java.io.tmpdir of the server
        metastore.log           server stdout + stderr (appended)
        derby.log               Derby's own log
        metastore.pid           pid of the running server
        metastore.port          port the server listens on (kept after stop, reused on start)
        metastore.s3            present when the last start had S3 support (--with-s3)
        .launcher.lock          serializes start/stop between processes

Nothing is written into the caller's working directory: the server runs with the state
directory as its working directory.

Note: HMS 2.3 has no bind-address setting; the server listens on all interfaces of the
chosen port, without authentication (3.1/4.x bind to ``host``).  It is a development tool.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.resources
import os
import shutil
import signal
import socket
import string
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import IO
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape as _xml_escape

from tableswap.config import user_dir
from tableswap.errors import TableSwapError
from tableswap.jvmjars import S3Access, resolve_s3_jars
from tableswap.maven import pyspark_jars_dir
from tableswap.devmetastore.backend import (
    Backend,
    DerbyBackend,
    DevMetastoreError,
    PostgresBackend,
    find_postgres_jdbc_jar,
    parse_backend,
    prepare_postgres,
)
from tableswap.devmetastore.releases import (
    BUILTIN_VERSION,
    Distribution,
    HiveRelease,
    parse_hive_version,
    resolve,
)

__all__ = ["DevMetastore", "DevMetastoreError", "MetastoreStatus", "default_state_dir"]

MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"

_PACKAGE = "tableswap.devmetastore"
_HIVE_SITE_TEMPLATE = "hive-site.xml.template"
_METASTORE_SITE_TEMPLATE = "metastore-site.xml.template"
_LOG4J2_PROPERTIES = "metastore-log4j2.properties"
#: The defaults of ``metastore.task.threads.always`` in 3.1.x and 4.0.x (MetastoreConf). Only those
#: the release's jars hold are configured: HiveProtoEventsCleanerTask (4.x) and DumpDirCleanerTask
#: (3.1) live in hive-exec, not in the standalone release; with them, 4.0.1 logs "class not found"
#: and starts none of these tasks, 3.1.3 does not start at all.
_ALWAYS_TASKS = (
    "org.apache.hadoop.hive.metastore.events.EventCleanerTask",
    "org.apache.hadoop.hive.metastore.RuntimeStatsCleanerTask",
    "org.apache.hadoop.hive.metastore.repl.DumpDirCleanerTask",
    "org.apache.hadoop.hive.metastore.metrics.AcidMetricService",
    "org.apache.hadoop.hive.metastore.metrics.AcidMetricLogger",
    "org.apache.hadoop.hive.metastore.HiveProtoEventsCleanerTask",
    "org.apache.hadoop.hive.metastore.ScheduledQueryExecutionsMaintTask",
    "org.apache.hadoop.hive.metastore.ReplicationMetricsMaintTask",
)
#: The task that deletes locks whose holder stopped heartbeating (and times out transactions).
_LOCK_REAPER_TASK = "org.apache.hadoop.hive.metastore.txn.AcidHouseKeeperService"
#: Writes the notification log; in the cache of 3.1.x releases (see releases._listener_dep).
_NOTIFICATION_LISTENER = "org.apache.hive.hcatalog.listener.DbNotificationListener"
#: Java the pyspark wheel's jars (Spark 4, the default 2.3 metastore) need.
_BUILTIN_MIN_JAVA = 17
_JAVA_OPTIONS = "java-options.txt"

#: How often the 2.3 timed-out txn/lock reaper runs (seconds).  An abandoned lock disappears
#: between ``lock_timeout`` and ``lock_timeout + _REAPER_INTERVAL_SECONDS`` after its last
#: heartbeat.
_REAPER_INTERVAL_SECONDS = 5

_LOG_TAIL_LINES = 30

# The server is started through a throw-away /bin/sh that backgrounds java and prints its
# pid, so java is *not* a child of the calling Python process: it outlives it (CLI use), never
# lingers as our zombie after stop() (in-process use) and Python never warns about a
# "subprocess still running".  The shell is a new session leader (start_new_session), so
# the server ignores the caller terminal's Ctrl-C and hang-up.
_DETACH_SCRIPT = '"$@" </dev/null >&2 & echo $!'


@dataclass(frozen=True)
class MetastoreStatus:
    """A snapshot of a development metastore's state."""

    running: bool
    uri: str | None  # "thrift://127.0.0.1:PORT" when running
    pid: int | None
    port: int | None
    state_dir: Path
    log_file: Path
    warehouse_dir: Path
    backend: str = "derby (embedded)"  # the backing database (a PostgreSQL URL without password)
    hive_version: str = BUILTIN_VERSION  # the server release ("2.3": the pyspark wheel's)

    def to_dict(self) -> dict[str, object]:
        """JSON-friendly form (paths as strings)."""
        return {
            "running": self.running,
            "uri": self.uri,
            "pid": self.pid,
            "port": self.port,
            "state_dir": str(self.state_dir),
            "log_file": str(self.log_file),
            "warehouse_dir": str(self.warehouse_dir),
            "backend": self.backend,
            "hive_version": self.hive_version,
        }


def default_state_dir() -> Path:
    """``$TABLESWAP_STATE_DIR/metastore``, else ``$XDG_STATE_HOME/tableswap/metastore``,
    else ``~/.local/state/tableswap/metastore``."""
    return user_dir("metastore", xdg_var="XDG_STATE_HOME", fallback=Path.home() / ".local" / "state")


class DevMetastore:
    """A local Hive Metastore Thrift server backed by embedded Derby or PostgreSQL.

    ``hive_version``: ``None`` reuses the release this state directory holds, else 2.3 (the
    pyspark wheel's); ``"3.1.3"``, ``"4.0.1"``... a standalone release resolved by Maven
    coordinates into ``cache_dir`` (default: :func:`tableswap.devmetastore.releases.default_cache_dir`)
    the first time.

    ``db``: ``"derby"`` or ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME`` (an existing
    database); ``None`` reuses the backend this state directory used last, else Derby.
    ``jdbc_driver``: the PostgreSQL JDBC driver jar (default: ``$TABLESWAP_PG_JDBC_JAR``, else the
    places in :data:`tableswap.devmetastore.backend.JDBC_JAR_SEARCH_PATHS`).
    ``s3``: accept ``s3a://`` locations: the S3A jars (:mod:`tableswap.jvmjars`, resolved into
    ``jars_dir`` on first use) go on the server's classpath and the endpoint and keys into its
    ``hive-site.xml`` (the metastore checks and creates table and partition directories itself).

    >>> ms = DevMetastore()                    # doctest: +SKIP
    >>> ms.start().uri                         # doctest: +SKIP
    'thrift://127.0.0.1:40213'
    >>> ms.stop()                              # doctest: +SKIP
    True

    ``start`` is idempotent and safe to call from several processes at once (they are
    serialized with a file lock in the state directory).
    """

    def __init__(
        self,
        state_dir: str | Path | None = None,
        port: int | None = None,
        host: str = "127.0.0.1",
        lock_timeout_seconds: int = 120,
        java: str | None = None,
        db: str | None = None,
        jdbc_driver: str | Path | None = None,
        s3: S3Access | None = None,
        jars_dir: str | Path | None = None,
        hive_version: str | None = None,
        cache_dir: str | Path | None = None,
    ) -> None:
        if port is not None and not (0 < int(port) < 65536):
            raise DevMetastoreError(f"invalid port {port!r}: expected 1..65535")
        if int(lock_timeout_seconds) < 1:
            raise DevMetastoreError(
                f"invalid lock_timeout_seconds {lock_timeout_seconds!r}: expected >= 1"
            )
        base = Path(state_dir) if state_dir is not None else default_state_dir()
        self.state_dir: Path = base.expanduser().resolve()
        self.host = host
        self.lock_timeout_seconds = int(lock_timeout_seconds)
        self._requested_port = int(port) if port is not None else None
        self._java = java
        self._requested_backend = parse_backend(db) if db is not None else None
        self._jdbc_driver = jdbc_driver
        self._s3 = s3
        self._jars_dir = Path(jars_dir) if jars_dir is not None else None
        self._s3_jars: tuple[Path, ...] | None = None
        self._requested_release: HiveRelease | None = parse_hive_version(hive_version)
        self._release_given = hive_version is not None
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None
        self._distribution: Distribution | None = None

    # ------------------------------------------------------------------ paths
    @property
    def conf_dir(self) -> Path:
        return self.state_dir / "conf"

    @property
    def hive_site_file(self) -> Path:
        return self.conf_dir / "hive-site.xml"

    @property
    def derby_dir(self) -> Path:
        return self.state_dir / "metastore_db"

    @property
    def warehouse_dir(self) -> Path:
        return self.state_dir / "warehouse"

    @property
    def tmp_dir(self) -> Path:
        return self.state_dir / "tmp"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "metastore.log"

    @property
    def derby_log_file(self) -> Path:
        return self.state_dir / "derby.log"

    @property
    def pid_file(self) -> Path:
        return self.state_dir / "metastore.pid"

    @property
    def port_file(self) -> Path:
        return self.state_dir / "metastore.port"

    @property
    def backend_file(self) -> Path:
        return self.state_dir / "metastore.backend"

    @property
    def version_file(self) -> Path:
        return self.state_dir / "metastore.version"

    @property
    def metastore_site_file(self) -> Path:
        return self.conf_dir / "metastore-site.xml"

    @property
    def schema_file(self) -> Path:
        """Records the backend whose schema the release's schematool created."""
        return self.state_dir / "metastore.schema"

    @property
    def release(self) -> HiveRelease | None:
        """The requested server release, else the one this state directory holds; ``None`` is
        the pyspark wheel's 2.3."""
        if self._release_given:
            return self._requested_release
        return self._recorded_release()

    def _recorded_version(self) -> str | None:
        try:
            return self.version_file.read_text(encoding="utf-8").strip() or None
        except OSError:
            return None

    def _recorded_release(self) -> HiveRelease | None:
        try:
            return parse_hive_version(self._recorded_version())
        except DevMetastoreError:
            return None

    @property
    def hive_version(self) -> str:
        release = self.release
        return release.version if release is not None else BUILTIN_VERSION

    @property
    def backend(self) -> Backend:
        """The requested backing database, else the one recorded by the last start, else Derby."""
        if self._requested_backend is not None:
            return self._requested_backend
        return self._recorded_backend() or DerbyBackend()

    def _recorded_backend(self) -> Backend | None:
        try:
            recorded = self.backend_file.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        try:
            return parse_backend(recorded or None)
        except DevMetastoreError:
            return None

    @property
    def _s3_file(self) -> Path:
        """Present while the server was started with S3 support."""
        return self.state_dir / "metastore.s3"

    @property
    def _lock_file(self) -> Path:
        return self.state_dir / ".launcher.lock"

    # ------------------------------------------------------------------ public API
    @property
    def port(self) -> int | None:
        """The port this metastore uses: the requested one, else the recorded one."""
        if self._requested_port is not None:
            return self._requested_port
        return self._read_int(self.port_file)

    @property
    def uri(self) -> str:
        """``thrift://HOST:PORT`` of this metastore (whether or not it is running)."""
        port = self.port
        if port is None:
            raise DevMetastoreError(
                f"no port chosen yet for the development metastore in {self.state_dir}; "
                "call start() first or pass port="
            )
        return self._uri_for(port)

    def status(self) -> MetastoreStatus:
        """Whether the server is running (pid alive and port accepting connections)."""
        pid = self._read_int(self.pid_file)
        port = self._read_int(self.port_file)
        running = (
            pid is not None
            and port is not None
            and self._is_our_process(pid)
            and self._port_open(port)
        )
        return MetastoreStatus(
            running=running,
            uri=self._uri_for(port) if running and port is not None else None,
            pid=pid if running else None,
            port=port,
            state_dir=self.state_dir,
            log_file=self.log_file,
            warehouse_dir=self.warehouse_dir,
            backend=(self._recorded_backend() or DerbyBackend()).describe() if running
            else self.backend.describe(),
            hive_version=(self._recorded_version() or BUILTIN_VERSION) if running else self.hive_version,
        )

    def start(
        self,
        wait_timeout: float = 180.0,
        probe: Callable[[str], None] | None = None,
    ) -> MetastoreStatus:
        """Start the server unless it is already running; return its status.

        Waits until the port accepts connections and, if ``probe`` is given, until
        ``probe(uri)`` returns without raising (it is retried until ``wait_timeout``).
        On failure the process is killed and :class:`DevMetastoreError` carries the tail
        of the log.
        """
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with self._exclusive():
            current = self.status()
            if current.running:
                if self._requested_port is not None and current.port != self._requested_port:
                    raise DevMetastoreError(
                        f"the development metastore in {self.state_dir} is already running on "
                        f"port {current.port}, not {self._requested_port}; stop it first"
                    )
                running_backend = self._recorded_backend() or DerbyBackend()
                if self._requested_backend is not None and running_backend != self._requested_backend:
                    raise DevMetastoreError(
                        f"the development metastore in {self.state_dir} is already running on "
                        f"{running_backend.describe()}, not {self._requested_backend.describe()}; "
                        "stop it first"
                    )
                if self._s3 is not None and not self._s3_file.exists():
                    raise DevMetastoreError(
                        f"the development metastore in {self.state_dir} is already running without S3 "
                        "support; stop it first to start it --with-s3"
                    )
                running_version = self._recorded_version() or BUILTIN_VERSION
                if self._release_given and running_version != self.hive_version:
                    raise DevMetastoreError(
                        f"the development metastore in {self.state_dir} is already running Hive "
                        f"Metastore {running_version}, not {self.hive_version}; stop it first"
                    )
                if probe is not None:
                    self._wait_ready(None, current.port or 0, time.monotonic() + wait_timeout,
                                     probe, log_offset=None)
                return current
            self._clean_stale()
            return self._launch(wait_timeout, probe)

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the server: SIGTERM, wait up to ``timeout`` seconds, then SIGKILL.

        Returns True if a server process was running.  The pid file is removed; the port
        file is kept so that the next start reuses the port.
        """
        if not self.state_dir.exists():
            return False
        with self._exclusive():
            pid = self._read_int(self.pid_file)
            was_running = pid is not None and self._is_our_process(pid)
            if was_running:
                assert pid is not None
                self._terminate(pid, timeout)
            self.pid_file.unlink(missing_ok=True)
            # A server that was just killed may still hold its port for a moment: wait, so that the
            # next start() gets the same port (clients keep their URI).
            port = self._read_int(self.port_file) if pid is not None else None
            deadline = time.monotonic() + timeout
            while port is not None and self._port_open(port) and time.monotonic() < deadline:
                time.sleep(0.1)
            return was_running

    # ------------------------------------------------------------------ launching
    def build_command(self, port: int) -> list[str]:
        """The full ``java`` command line used to run the server on ``port``."""
        java = self._find_java()
        return [java, *self._server_java_options(), "-cp", self._classpath(), MAIN_CLASS, "-p", str(port)]

    def _server_java_options(self) -> list[str]:
        options = self._java_options()
        options += [
            f"-Djava.io.tmpdir={self.tmp_dir}",
            f"-Dhive.log.dir={self.state_dir}",
            f"-Dderby.system.home={self.state_dir}",
            f"-Dderby.stream.error.file={self.derby_log_file}",
            *self.backend.java_options(),
        ]
        if self.release is not None:
            options.append(f"-Dlog4j.configurationFile={self.conf_dir / _LOG4J2_PROPERTIES}")
        return options

    def _classpath(self) -> str:
        jars = self._pyspark_jars_dir() if self.release is None else self.distribution().lib_dir
        entries = [str(self.conf_dir), str(jars / "*")]
        if isinstance(self.backend, PostgresBackend):
            entries.append(str(find_postgres_jdbc_jar(self._jdbc_driver)))
        entries.extend(str(j) for j in self._s3_classpath())
        return os.pathsep.join(entries)

    def distribution(self) -> Distribution:
        """The cached standalone release (resolved by Maven coordinates on first use)."""
        release = self.release
        if release is None:
            raise DevMetastoreError("the default 2.3 metastore runs from the pyspark wheel, not a release")
        if self._distribution is None or self._distribution.release != release:
            self._distribution = resolve(release, self._cache_dir)
        return self._distribution

    def _backend_block(self, *, connection_only: bool) -> str:
        """The backing database's ``<property>`` block: the JDBC connection alone (3.1/4.x, whose
        schematool creates the schema) or with the 2.3 schema settings."""
        backend = self.backend
        if isinstance(backend, PostgresBackend):
            properties = backend.connection_properties() if connection_only else backend.properties()
            comment = f"Backing database: PostgreSQL, {backend.describe()}"
        else:
            derby = DerbyBackend()
            properties = (derby.connection_properties(self.derby_dir) if connection_only
                          else derby.properties(self.derby_dir))
            comment = "Backing database: embedded Derby inside the state directory"
        if self._s3 is not None:
            properties = [*properties, *self._s3.hadoop_properties().items()]
            comment += "; s3a:// locations through S3A"
        return _properties_block(comment, properties)

    def render_metastore_site(self) -> str:
        """The ``metastore-site.xml`` text of a 3.1/4.x release for this state directory."""
        template = string.Template(_read_resource(_METASTORE_SITE_TEMPLATE))
        values = {
            "hive_version": self.hive_version,
            "warehouse_uri": "file://" + self.warehouse_dir.as_posix(),
            "bind_host": self.host,
            "lock_timeout": str(self.lock_timeout_seconds),
            "reaper_interval": str(_REAPER_INTERVAL_SECONDS),
        }
        extra: list[tuple[str, str]] = []
        release = self.release
        if release is not None and release.major == 3:
            # 3.1's default (metastore.expression.proxy) is PartitionExpressionForMetastore, which lives
            # in hive-exec: without this the server does not start ("Error loading PartitionExpressionProxy").
            extra.append(("metastore.expression.proxy",
                          "org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy"))
        if release is not None:
            dist = self.distribution()
            always = [c for c in _ALWAYS_TASKS if dist.has_class(c)]
            if release.major == 3:
                # 3.1 starts its lock reaper (AcidHouseKeeperService, a "remote only" task) only after the
                # compactor Initiator, a hive-exec class: without hive-exec no abandoned lock ever expires.
                # As an always-on task it runs every metastore.timedout.txn.reaper.interval.
                always.append(_LOCK_REAPER_TASK)
            extra.append(("metastore.task.threads.always", ",".join(always)))
            if dist.has_class(_NOTIFICATION_LISTENER):
                # The notification log (NOTIFICATION_LOG), which replication and cache-invalidation tools read.
                extra.append(("metastore.transactional.event.listeners", _NOTIFICATION_LISTENER))
        try:
            escaped = {k: _xml_escape(v) for k, v in values.items()}
            return template.substitute(
                escaped, backend_properties=self._backend_block(connection_only=True),
                extra_properties=_properties_block(
                    "What the release's defaults name but only hive-exec (not the standalone release) holds",
                    extra)
                if extra else "")
        except (KeyError, ValueError) as exc:  # pragma: no cover - packaging error
            raise DevMetastoreError(f"broken {_METASTORE_SITE_TEMPLATE} template: {exc}") from exc

    def render_hive_site(self) -> str:
        """The ``hive-site.xml`` text for this state directory."""
        template = string.Template(_read_resource(_HIVE_SITE_TEMPLATE))
        values = {
            "warehouse_uri": "file://" + self.warehouse_dir.as_posix(),
            "lock_timeout": str(self.lock_timeout_seconds),
            "reaper_interval": str(_REAPER_INTERVAL_SECONDS),
        }
        try:
            escaped = {k: _xml_escape(v) for k, v in values.items()}
            return template.substitute(escaped, backend_properties=self._backend_block(connection_only=False))
        except (KeyError, ValueError) as exc:  # pragma: no cover - packaging error
            raise DevMetastoreError(f"broken {_HIVE_SITE_TEMPLATE} template: {exc}") from exc

    def _s3_classpath(self) -> tuple[Path, ...]:
        """The S3A jars when s3 support is asked for (resolved once per instance)."""
        if self._s3 is None:
            return ()
        if self._s3_jars is None:
            try:
                # S3A must match the Hadoop the server runs: the wheel's for 2.3, the release's own otherwise.
                hadoop = None if self.release is None else self.distribution().hadoop_version
                self._s3_jars = resolve_s3_jars(self._jars_dir, hadoop_version=hadoop).jars
            except TableSwapError as exc:
                raise DevMetastoreError(f"cannot give the metastore S3 support: {exc}") from exc
        return self._s3_jars

    def _launch(
        self, wait_timeout: float, probe: Callable[[str], None] | None
    ) -> MetastoreStatus:
        backend = self.backend
        if isinstance(backend, DerbyBackend) and ";" in str(self.state_dir):
            raise DevMetastoreError(
                f"state directory {self.state_dir} contains ';', which a Derby JDBC URL "
                "cannot hold; choose another --state-dir"
            )
        release = self.release
        self._check_same_release()
        port = self._choose_port()
        command = self.build_command(port)
        _check_java(command[0], release.min_java if release is not None else _BUILTIN_MIN_JAVA,
                    f"Hive Metastore {release.version}" if release is not None
                    else "the default metastore (Hive 2.3 jars of the pyspark wheel, Spark 4)")
        for directory in (self.conf_dir, self.warehouse_dir, self.tmp_dir):
            directory.mkdir(parents=True, exist_ok=True)
        if release is None:
            if isinstance(backend, PostgresBackend):
                # Reachable? Lock/transaction tables present? (idempotent; a few seconds of BeeLine)
                prepare_postgres(command[0], self._pyspark_jars_dir(),
                                 find_postgres_jdbc_jar(self._jdbc_driver), backend)
            # hive-site.xml may hold the database password: readable by the owner only.
            _write_atomic(self.hive_site_file, self.render_hive_site(), private=True)
            self.metastore_site_file.unlink(missing_ok=True)
        else:
            _write_atomic(self.metastore_site_file, self.render_metastore_site(), private=True)
            _write_atomic(self.conf_dir / _LOG4J2_PROPERTIES, _read_resource(_LOG4J2_PROPERTIES))
            self.hive_site_file.unlink(missing_ok=True)
            self._ensure_schema(command[0])
        _write_atomic(self.backend_file, backend.spec() + "\n", private=True)
        _write_atomic(self.version_file, self.hive_version + "\n")
        _write_atomic(self.port_file, f"{port}\n")
        if self._s3 is not None:
            _write_atomic(self._s3_file, "s3a support: the S3A jars are on the classpath\n")
        else:
            self._s3_file.unlink(missing_ok=True)

        deadline = time.monotonic() + wait_timeout
        with open(self.log_file, "ab") as log:
            log_offset = log.tell()
            header = (
                f"\n===== tableswap dev metastore starting {time.strftime('%Y-%m-%d %H:%M:%S')}"
                f" on port {port} =====\n{_shell_join(command)}\n"
            )
            log.write(header.encode())
            log.flush()
            pid = self._spawn_detached(command, log)
        _write_atomic(self.pid_file, f"{pid}\n")
        try:
            self._wait_ready(pid, port, deadline, probe, log_offset)
        except BaseException:
            self._terminate(pid, timeout=10.0)
            self.pid_file.unlink(missing_ok=True)
            raise
        return self.status()

    def _check_same_release(self) -> None:
        """A Derby database is only ever opened by the release that created it."""
        recorded = self._recorded_version()
        if recorded is None or recorded == self.hive_version:
            return
        if isinstance(self.backend, DerbyBackend) and self.derby_dir.exists():
            raise DevMetastoreError(
                f"the state directory {self.state_dir} holds the Derby database of Hive Metastore "
                f"{recorded}, not {self.hive_version}: start {recorded} there (--hive-version {recorded}) "
                "or choose another --state-dir"
            )

    def _ensure_schema(self, java: str) -> None:
        """Create the metastore schema with the release's own schematool unless it exists."""
        release = self.release
        assert release is not None
        backend = self.backend
        marker = f"{release.version} {backend.describe()}"
        try:
            if self.schema_file.read_text(encoding="utf-8").strip() == marker:
                return
        except OSError:
            pass
        db_type = "postgres" if isinstance(backend, PostgresBackend) else "derby"
        exists = isinstance(backend, DerbyBackend) and self.derby_dir.exists()
        if isinstance(backend, PostgresBackend):
            exists = self._schema_tool(java, db_type, "-info", check=False) == 0
        if not exists:
            self._schema_tool(java, db_type, "-initSchema", check=True)
        _write_atomic(self.schema_file, marker + "\n", private=True)

    def _schema_tool(self, java: str, db_type: str, action: str, *, check: bool) -> int:
        release = self.release
        assert release is not None
        dist = self.distribution()
        command = [java, *self._server_java_options(), "-cp", self._classpath(), release.schema_tool_class,
                   "-dbType", db_type, action]
        env = self._child_env()
        env["METASTORE_HOME"] = str(dist.home)
        with open(self.log_file, "ab") as log:
            offset = log.tell()
            log.write(f"\n===== tableswap dev metastore: schematool {action} "
                      f"{time.strftime('%Y-%m-%d %H:%M:%S')} =====\n{_shell_join(command)}\n".encode())
            log.flush()
            try:
                done = subprocess.run(command, cwd=self.state_dir, stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=log, env=env, timeout=600, check=False)
            except (OSError, subprocess.SubprocessError) as exc:
                raise DevMetastoreError(f"could not run Hive Metastore {release.version}'s schematool: {exc}") from exc
        if check and done.returncode != 0:
            raise self._failure(
                f"Hive Metastore {release.version}'s schematool {action} failed (exit code {done.returncode}) "
                f"on {self.backend.describe()}", offset)
        return done.returncode

    def _spawn_detached(self, command: list[str], log: IO[bytes]) -> int:
        """Run ``command`` in the background (stdout+stderr to ``log``); return its pid."""
        try:
            shell = subprocess.Popen(
                ["/bin/sh", "-c", _DETACH_SCRIPT, "sh", *command],
                cwd=self.state_dir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
                close_fds=True,
                env=self._child_env(),
            )
            out, _ = shell.communicate(timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            raise DevMetastoreError(f"could not run {command[0]!r}: {exc}") from exc
        try:
            return int(out.decode().strip())
        except ValueError:
            raise self._failure(
                f"could not start {command[0]!r} (launcher shell exited with code "
                f"{shell.returncode} and printed {out!r})",
                None,
            ) from None

    def _wait_ready(
        self,
        pid: int | None,
        port: int,
        deadline: float,
        probe: Callable[[str], None] | None,
        log_offset: int | None,
    ) -> None:
        uri = self._uri_for(port)
        last_probe_error: BaseException | None = None
        port_seen = False
        while True:
            if pid is not None and not _pid_alive(pid):
                raise self._failure(
                    f"the development metastore (pid {pid}) exited during startup", log_offset
                )
            if port_seen or self._port_open(port):
                port_seen = True
                if probe is None:
                    return
                try:
                    probe(uri)
                    return
                except Exception as exc:  # the probe decides what "ready" means
                    last_probe_error = exc
            if time.monotonic() >= deadline:
                if not port_seen:
                    what = f"port {port} did not accept connections"
                else:
                    what = f"the readiness probe kept failing (last error: {last_probe_error!r})"
                raise self._failure(
                    f"the development metastore was not ready in time: {what}", log_offset
                )
            time.sleep(0.25)

    def _failure(self, message: str, log_offset: int | None) -> DevMetastoreError:
        tail = _tail(self.log_file, _LOG_TAIL_LINES, log_offset)
        if "UnsupportedClassVersionError" in _tail(self.log_file, 10_000, log_offset):
            message += (
                "\nhint: the java in use is too old; the Hive/Spark jars need Java 17 or "
                "newer (set JAVA_HOME to a Java 17 installation)"
            )
        text = f"{message}\n--- last lines of {self.log_file} ---\n{tail}".rstrip()
        text += f"\n--- full log: {self.log_file} ---"
        return DevMetastoreError(text)

    def _choose_port(self) -> int:
        if self._requested_port is not None:
            if self._port_open(self._requested_port) or not _port_bindable(self._requested_port):
                raise DevMetastoreError(
                    f"port {self._requested_port} is already in use by another process"
                )
            return self._requested_port
        recorded = self._read_int(self.port_file)
        if recorded is not None and not self._port_open(recorded) and _port_bindable(recorded):
            return recorded
        return _free_port()

    def _clean_stale(self) -> None:
        """Remove leftovers of a server that is not (fully) running any more."""
        pid = self._read_int(self.pid_file)
        if pid is not None and self._is_our_process(pid):
            # Alive but not accepting connections (hung, or killed half-way through a start
            # by another process): get rid of it so that Derby is free again.
            self._terminate(pid, timeout=10.0)
        self.pid_file.unlink(missing_ok=True)

    # ------------------------------------------------------------------ processes
    def _terminate(self, pid: int, timeout: float) -> None:
        self._signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _pid_alive(pid):
                return
            time.sleep(0.1)
        self._signal(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and _pid_alive(pid):
            time.sleep(0.1)

    @staticmethod
    def _signal(pid: int, sig: signal.Signals) -> None:
        try:
            # The server leads its own session (start_new_session=True): signal the group.
            if os.getpgid(pid) == pid:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            pass

    def _is_our_process(self, pid: int) -> bool:
        """The pid is alive and (where it can be checked) is this state dir's metastore."""
        if not _pid_alive(pid):
            return False
        cmdline = _process_cmdline(pid)
        if cmdline is None:  # cannot inspect: trust the pid file
            return True
        return MAIN_CLASS in cmdline and str(self.conf_dir) in cmdline

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        # Keep the server's configuration to what we generate.
        for name in ("CLASSPATH", "HADOOP_CONF_DIR", "HIVE_CONF_DIR"):
            env.pop(name, None)
        return env

    def _find_java(self) -> str:
        if self._java:
            candidate = shutil.which(self._java) or self._java
            if not os.path.isfile(candidate) or not os.access(candidate, os.X_OK):
                raise DevMetastoreError(
                    f"java executable {self._java!r} not found; install Java 17 "
                    "(e.g. `apt-get install openjdk-17-jre-headless`)"
                )
            return candidate
        java_home = os.environ.get("JAVA_HOME")
        if java_home:
            candidate = os.path.join(java_home, "bin", "java")
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return candidate
            raise DevMetastoreError(
                f"JAVA_HOME={java_home} has no bin/java; point JAVA_HOME at a Java 17 "
                "installation or unset it to use `java` from PATH"
            )
        found = shutil.which("java")
        if found is None:
            raise DevMetastoreError(
                "no `java` found (JAVA_HOME is unset and `java` is not on PATH); the "
                "development metastore needs Java 17: install it (e.g. "
                "`apt-get install openjdk-17-jre-headless` or `brew install openjdk@17`) "
                "or set JAVA_HOME"
            )
        return found

    @staticmethod
    def _pyspark_jars_dir() -> Path:
        """The pyspark wheel's jars: the Hive 2.3 metastore and the Hadoop client the default server runs."""
        return pyspark_jars_dir(error=DevMetastoreError)

    @staticmethod
    def _java_options() -> list[str]:
        options = []
        for line in _read_resource(_JAVA_OPTIONS).splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                options.append(line)
        return options

    # ------------------------------------------------------------------ helpers
    def _uri_for(self, port: int) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"thrift://{host}:{port}"

    def _port_open(self, port: int) -> bool:
        try:
            with socket.create_connection((self.host, port), timeout=0.5):
                return True
        except OSError:
            return False

    @staticmethod
    def _read_int(path: Path) -> int | None:
        try:
            return int(path.read_text().strip())
        except (OSError, ValueError):
            return None

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """Serialize start/stop across processes with an flock on the state dir."""
        with open(self._lock_file, "a+") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def __repr__(self) -> str:
        return f"DevMetastore(state_dir={str(self.state_dir)!r}, port={self.port!r})"


# ---------------------------------------------------------------------- module helpers
def _properties_block(comment: str, properties: list[tuple[str, str]]) -> str:
    block = [f"  <!-- {_xml_escape(comment).replace('--', '- -')} -->"]
    for name, value in properties:
        block.append(f"  <property>\n    <name>{_xml_escape(name)}</name>\n"
                     f"    <value>{_xml_escape(value)}</value>\n  </property>")
    return "\n".join(block)


def java_major_version(java: str) -> int | None:
    """The feature release of ``java`` (8, 11, 17, 25...) from ``java -version``; None if unknown."""
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    import re

    match = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr + done.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8.0_402" is Java 8


def _check_java(java: str, minimum: int, what: str) -> None:
    found = java_major_version(java)
    if found is not None and found < minimum:
        raise DevMetastoreError(
            f"{java} is Java {found}, too old for {what}, which needs Java {minimum} or newer: set "
            f"JAVA_HOME to a Java {max(minimum, 17)} installation (e.g. `apt-get install openjdk-17-jre-headless`)"
        )


def _read_resource(name: str) -> str:
    return importlib.resources.files(_PACKAGE).joinpath(name).read_text(encoding="utf-8")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by init) still answers kill(pid, 0); treat it as dead.
    # Careful: the leader of a multi-threaded process shows "Z" as soon as its main thread
    # is done while the other threads still run, so also require that no thread is left.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] != "Z":
            return True
        return len(os.listdir(f"/proc/{pid}/task")) > 1
    except FileNotFoundError:
        return not Path("/proc/self").exists()
    except (OSError, IndexError):
        return True


def _process_cmdline(pid: int) -> str | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        return raw.replace(b"\0", b" ").decode(errors="replace")
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return ""  # /proc works, the process is gone
    except OSError:
        return None
    if sys.platform == "win32":  # pragma: no cover
        return None
    try:
        out = subprocess.run(
            ["ps", "-ww", "-o", "command=", "-p", str(pid)],
            capture_output=True, text=True, timeout=5, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


def _port_bindable(port: int) -> bool:
    # HMS 2.3 binds the wildcard address, so check that one.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


def _write_atomic(path: Path, text: str, private: bool = False) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    if private:
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
    else:
        tmp.write_text(text)
    os.replace(tmp, path)


def _tail(path: Path, lines: int, offset: int | None) -> str:
    try:
        with open(path, "rb") as handle:
            if offset:
                handle.seek(offset)
            last = deque(handle, maxlen=lines)
    except OSError as exc:
        return f"(log not readable: {exc})"
    return b"".join(last).decode(errors="replace")


def _shell_join(command: list[str]) -> str:
    import shlex

    return shlex.join(command)
