"""Launch a local development Hive Metastore backed by embedded Derby or PostgreSQL.

By default it is the Hive 2.3 server whose jars ship inside the pyspark wheel; ``hive_version``
selects a standalone 3.1.x or 4.x release instead, resolved by Maven coordinates into a cache
(:mod:`tableswap.devmetastore.releases`) whose schema is created by the release's own schematool.
The server runs as a detached ``java`` process whose files live in one *state directory*
(:mod:`.state`); processes and ports: :mod:`.process`; configuration files: :mod:`.siteconf`.

Note: HMS 2.3 has no bind-address setting; the server listens on all interfaces of the
chosen port, without authentication (3.1/4.x bind to ``host``).  It is a development tool.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from tableswap.jvm.downloads import exclusive
from tableswap.errors import TableSwapError
from tableswap.jvm.jars import S3Access, resolve_s3_jars
from tableswap.jvm.maven import pyspark_jars_dir
from tableswap.devmetastore import preflight, process, schema, siteconf
from tableswap.devmetastore.hdfs import LocalHdfs
from tableswap.devmetastore.security import CORE_SITE, ServerSecurity
from tableswap.devmetastore.state import MetastoreStatus, StateDir, default_state_dir
from tableswap.devmetastore.backend import (
    Backend,
    DerbyBackend,
    DevMetastoreError,
    MySQLBackend,
    PostgresBackend,
    find_mysql_jdbc_driver,
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


class DevMetastore(StateDir):
    """A local Hive Metastore Thrift server backed by embedded Derby, PostgreSQL or (3.1/4.x) MySQL/MariaDB.

    ``hive_version``: ``None`` reuses the release this state directory holds, else 2.3 (the
    pyspark wheel's); ``"3.1.3"``, ``"4.0.1"``... a standalone release resolved by Maven
    coordinates into ``cache_dir`` (default: :func:`tableswap.devmetastore.releases.default_cache_dir`)
    the first time.

    ``db``: ``"derby"``, ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME`` or (a 3.1/4.x release)
    ``mysql://USER[:PASSWORD]@HOST[:PORT]/DBNAME`` (an existing database); ``None`` reuses the backend
    this state directory used last, else Derby.
    ``jdbc_driver``: the database's JDBC driver jar (default: ``$TABLESWAP_PG_JDBC_JAR`` or
    ``$TABLESWAP_MYSQL_JDBC_JAR``, else the places in :mod:`tableswap.devmetastore.backend`'s search paths).
    ``s3``: accept ``s3a://`` locations: the S3A jars (:mod:`tableswap.jvm.jars`, resolved into
    ``jars_dir`` on first use) go on the server's classpath and the endpoint and keys into its
    ``hive-site.xml`` (the metastore checks and creates table and partition directories itself).
    ``hadoop_properties``: Hadoop client settings added to the server's ``hive-site.xml`` (its Hadoop
    client reads them): an HDFS nameservice and its NameNodes, so that it accepts ``hdfs://ns1/...``
    locations (docs/hdfs.md).

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
        security: ServerSecurity | None = None,
        hdfs: bool = False,
        hadoop_properties: dict[str, str] | None = None,
    ) -> None:
        if port is not None and not (0 < int(port) < 65536):
            raise DevMetastoreError(f"invalid port {port!r}: expected 1..65535")
        if int(lock_timeout_seconds) < 3:  # tableswap.metastore.lock.safe_heartbeat refuses less
            raise DevMetastoreError(
                f"invalid lock_timeout_seconds {lock_timeout_seconds!r}: expected >= 3 (a lock is heartbeated "
                "at most every second, at least three times per timeout)"
            )
        super().__init__(state_dir)
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
        #: Kerberos (SASL/GSSAPI) and/or TLS on the Thrift port (None: plain Thrift, no authentication).
        self.security = security
        #: ``--with-hdfs``: a local HDFS started beside the server, the warehouse on it.
        self._hdfs = hdfs
        self.local_hdfs = LocalHdfs(self.state_dir / "hdfs", java=java)
        self._warehouse_uri: str | None = None
        self._hadoop_properties = dict(hadoop_properties or {})

    @property
    def release(self) -> HiveRelease | None:
        """The requested server release, else the one this state directory holds; ``None`` is
        the pyspark wheel's 2.3."""
        if self._release_given:
            return self._requested_release
        return self._recorded_release()

    @property
    def java(self) -> str | None:
        """The ``java`` asked for (a path or a name on PATH); None: ``$JAVA_HOME``, else ``java`` on PATH."""
        return self._java

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

    # ------------------------------------------------------------------ public API
    @property
    def port(self) -> int | None:
        """The port this metastore uses: the requested one, else the recorded one."""
        if self._requested_port is not None:
            return self._requested_port
        return process.read_int(self.port_file)

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
        pid = process.read_int(self.pid_file)
        port = process.read_int(self.port_file)
        hdfs = self.local_hdfs.url()  # the local HDFS of --with-hdfs, while it runs
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
            hive_version=(self.recorded_version() or BUILTIN_VERSION) if running else self.hive_version,
            hdfs_url=hdfs,
            hadoop_conf_dir=self.local_hdfs.conf_dir if hdfs else None,
            warehouse_uri=f"{hdfs}/warehouse" if hdfs else None,
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
        with exclusive(self._lock_file):
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
                if self._hdfs and current.hdfs_url is None:
                    raise DevMetastoreError(
                        f"the development metastore in {self.state_dir} is already running without a local "
                        "HDFS; stop it first to start it --with-hdfs"
                    )
                if self._s3 is not None and not self._s3_file.exists():
                    raise DevMetastoreError(
                        f"the development metastore in {self.state_dir} is already running without S3 "
                        "support; stop it first to start it --with-s3"
                    )
                running_version = self.recorded_version() or BUILTIN_VERSION
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
            if not self._hdfs:
                return self._launch(wait_timeout, probe)
            # The local HDFS first: the warehouse is on it (the server creates database directories there).
            self._warehouse_uri = f"{self.local_hdfs.start(wait_timeout)}/warehouse"
            try:
                return self._launch(wait_timeout, probe)
            except BaseException:
                self.local_hdfs.stop()
                raise

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the server: SIGTERM, wait up to ``timeout`` seconds, then SIGKILL.

        Returns True if a server process was running.  The pid file is removed; the port
        file is kept so that the next start reuses the port.
        """
        if not self.state_dir.exists():
            return False
        with exclusive(self._lock_file):
            pid = process.read_int(self.pid_file)
            was_running = pid is not None and self._is_our_process(pid)
            if was_running:
                assert pid is not None
                process.terminate(pid, timeout)
            self.pid_file.unlink(missing_ok=True)
            self.local_hdfs.stop(timeout)  # the local HDFS of --with-hdfs, if it runs
            # A server that was just killed may still hold its port for a moment: wait, so that the
            # next start() gets the same port (clients keep their URI).
            port = process.read_int(self.port_file) if pid is not None else None
            deadline = time.monotonic() + timeout
            while port is not None and self._port_open(port) and time.monotonic() < deadline:
                time.sleep(0.1)
            return was_running

    # ------------------------------------------------------------------ launching
    def build_command(self, port: int) -> list[str]:
        """The full ``java`` command line used to run the server on ``port``."""
        java = process.find_java(self._java)
        return [java, *self.server_java_options(), "-cp", self.classpath(), MAIN_CLASS, "-p", str(port)]

    def server_java_options(self) -> list[str]:
        options = siteconf.java_options()
        options += [
            f"-Djava.io.tmpdir={self.tmp_dir}",
            f"-Dhive.log.dir={self.state_dir}",
            f"-Dderby.system.home={self.state_dir}",
            f"-Dderby.stream.error.file={self.derby_log_file}",
            *self.backend.java_options(),
            *(self.security.java_options() if self.security else ()),
        ]
        if self.release is not None:
            options.append(f"-Dlog4j.configurationFile={self.conf_dir / siteconf.LOG4J2_PROPERTIES}")
        return options

    def classpath(self) -> str:
        if self.release is None:
            entries = [str(self.conf_dir), str(self._pyspark_jars_dir() / "*")]
        else:
            distribution = self.distribution()
            entries = [str(self.conf_dir), *(str(j) for j in distribution.hadoop_jars()),
                       str(distribution.lib_dir / "*")]
        if isinstance(self.backend, PostgresBackend):
            entries.append(str(find_postgres_jdbc_jar(self._jdbc_driver)))
        elif isinstance(self.backend, MySQLBackend):
            entries.append(str(find_mysql_jdbc_driver(self._jdbc_driver).jar))
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
        backend = self.backend
        driver = find_mysql_jdbc_driver(self._jdbc_driver) if isinstance(backend, MySQLBackend) else None
        block = siteconf.backend_block(backend, self.derby_dir, self._s3, connection_only=connection_only,
                                       driver=driver)
        if self.security is not None:
            block += "\n" + siteconf.properties_block(
                f"Security of the Thrift port: {self.security.describe()}",
                self.security.properties(standalone=self.release is not None))
        if self._hadoop_properties:
            block += "\n" + siteconf.properties_block(
                "Hadoop client settings (HDFS nameservices, viewfs mount tables)",
                sorted(self._hadoop_properties.items()))
        return block

    def render_metastore_site(self) -> str:
        """The ``metastore-site.xml`` text of a 3.1/4.x release for this state directory."""
        release = self.release
        if release is None:
            raise DevMetastoreError("the default 2.3 metastore is configured by hive-site.xml, not metastore-site.xml")
        return siteconf.render_metastore_site(
            release=release, distribution=self.distribution(), warehouse_dir=self.warehouse_dir, host=self.host,
            lock_timeout=self.lock_timeout_seconds, backend_properties=self._backend_block(connection_only=True),
            warehouse_uri=self._warehouse_uri)

    def render_hive_site(self) -> str:
        """The ``hive-site.xml`` text for this state directory."""
        return siteconf.render_hive_site(warehouse_dir=self.warehouse_dir, lock_timeout=self.lock_timeout_seconds,
                                         backend_properties=self._backend_block(connection_only=False),
                                         warehouse_uri=self._warehouse_uri)

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
        preflight.refuse_what_cannot_start(self)  # before anything is resolved or started
        backend = self.backend
        release = self.release
        port = self._choose_port()
        command = self.build_command(port)
        for directory in (self.conf_dir, self.warehouse_dir, self.tmp_dir):
            directory.mkdir(parents=True, exist_ok=True)
        if release is None:
            if isinstance(backend, PostgresBackend):
                # Reachable? Lock/transaction tables present? (idempotent; a few seconds of BeeLine)
                prepare_postgres(command[0], self._pyspark_jars_dir(),
                                 find_postgres_jdbc_jar(self._jdbc_driver), backend)
            # hive-site.xml may hold the database password: readable by the owner only.
            process.write_atomic(self.hive_site_file, self.render_hive_site(), private=True)
            self.metastore_site_file.unlink(missing_ok=True)
        else:
            process.write_atomic(self.metastore_site_file, self.render_metastore_site(), private=True)
            process.write_atomic(self.conf_dir / siteconf.LOG4J2_PROPERTIES,
                                 siteconf.read_resource(siteconf.LOG4J2_PROPERTIES))
            self.hive_site_file.unlink(missing_ok=True)
            schema.ensure_schema(self, command[0])
        core_site = self.security.core_site_properties() if self.security else []
        if core_site:
            process.write_atomic(self.conf_dir / CORE_SITE, "<?xml version=\"1.0\"?>\n<configuration>\n"
                                 + siteconf.properties_block("Hadoop security (tableswap dev metastore)", core_site)
                                 + "\n</configuration>\n")
        else:
            (self.conf_dir / CORE_SITE).unlink(missing_ok=True)
        process.write_atomic(self.backend_file, backend.spec() + "\n", private=True)
        process.write_atomic(self.version_file, self.hive_version + "\n")
        process.write_atomic(self.port_file, f"{port}\n")
        if self._s3 is not None:
            process.write_atomic(self._s3_file, "s3a support: the S3A jars are on the classpath\n")
        else:
            self._s3_file.unlink(missing_ok=True)

        deadline = time.monotonic() + wait_timeout
        with open(self.log_file, "ab") as log:
            log_offset = log.tell()
            header = (
                f"\n===== tableswap dev metastore starting {time.strftime('%Y-%m-%d %H:%M:%S')}"
                f" on port {port} =====\n{process.shell_join(command)}\n"
            )
            log.write(header.encode())
            log.flush()
            pid = self._spawn_detached(command, log)
        process.write_atomic(self.pid_file, f"{pid}\n")
        try:
            self._wait_ready(pid, port, deadline, probe, log_offset)
        except BaseException:
            process.terminate(pid, timeout=10.0)
            self.pid_file.unlink(missing_ok=True)
            raise
        return self.status()

    def _spawn_detached(self, command: list[str], log: IO[bytes]) -> int:
        """Run ``command`` in the background (stdout+stderr to ``log``); return its pid."""
        pid, said = process.spawn_detached(command, self.state_dir, process.child_env(), log)
        if pid is None:
            raise self.failure(f"could not start {command[0]!r} ({said})", None)
        return pid

    def _wait_ready(self, pid: int | None, port: int, deadline: float, probe: Callable[[str], None] | None,
                    log_offset: int | None) -> None:
        process.wait_ready(pid, self.host, port, self._uri_for(port), deadline, probe,
                           lambda message: self.failure(message, log_offset))

    def failure(self, message: str, log_offset: int | None) -> DevMetastoreError:
        return process.failure(self.log_file, message, log_offset)

    def _choose_port(self) -> int:
        if self._requested_port is not None:
            if self._port_open(self._requested_port) or not process.port_bindable(self._requested_port):
                raise DevMetastoreError(
                    f"port {self._requested_port} is already in use by another process"
                )
            return self._requested_port
        recorded = process.read_int(self.port_file)
        if recorded is not None and not self._port_open(recorded) and process.port_bindable(recorded):
            return recorded
        return process.free_port()

    def _clean_stale(self) -> None:
        """Remove leftovers of a server that is not (fully) running any more."""
        pid = process.read_int(self.pid_file)
        if pid is not None and self._is_our_process(pid):
            # Alive but not accepting connections (hung, or killed half-way through a start
            # by another process): get rid of it so that Derby is free again.
            process.terminate(pid, timeout=10.0)
        self.pid_file.unlink(missing_ok=True)

    # ------------------------------------------------------------------ processes
    def _is_our_process(self, pid: int) -> bool:
        """The pid is alive and (where it can be checked) is this state dir's metastore."""
        if not process.pid_alive(pid):
            return False
        cmdline = process.process_cmdline(pid)
        if cmdline is None:  # cannot inspect: trust the pid file
            return True
        return MAIN_CLASS in cmdline and str(self.conf_dir) in cmdline

    @staticmethod
    def _pyspark_jars_dir() -> Path:
        """The pyspark wheel's jars: the Hive 2.3 metastore and the Hadoop client the default server runs."""
        return pyspark_jars_dir(error=DevMetastoreError)

    # ------------------------------------------------------------------ helpers
    def _uri_for(self, port: int) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"thrift://{host}:{port}"

    def _port_open(self, port: int) -> bool:
        return process.port_open(self.host, port)

    def __repr__(self) -> str:
        return f"DevMetastore(state_dir={str(self.state_dir)!r}, port={self.port!r})"
