"""A development metastore's state directory: where each file lives and what the last start
recorded there (release, backing database, port).

The layout::

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
        hdfs/                   the local HDFS of --with-hdfs (devmetastore/hdfs.py): hdfs/conf/ is its
                                HADOOP_CONF_DIR, hdfs/hdfs.log its log; the warehouse is then on it
        .launcher.lock          serializes start/stop between processes

Nothing is written into the caller's working directory: the server runs with the state
directory as its working directory.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tableswap.dirs import user_path
from tableswap.devmetastore.backend import Backend, DevMetastoreError, parse_backend
from tableswap.devmetastore.releases import BUILTIN_VERSION, HiveRelease, parse_hive_version


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
    hdfs_url: str | None = None  # "hdfs://127.0.0.1:PORT" while the local HDFS of --with-hdfs runs
    hadoop_conf_dir: Path | None = None  # its HADOOP_CONF_DIR, while it runs
    warehouse_uri: str | None = None  # the warehouse when not warehouse_dir (on the local HDFS)

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
            "hdfs_url": self.hdfs_url,
            "hadoop_conf_dir": str(self.hadoop_conf_dir) if self.hadoop_conf_dir else None,
            "warehouse_uri": self.warehouse_uri or "file://" + self.warehouse_dir.as_posix(),
        }


def default_state_dir() -> Path:
    """``$TABLESWAP_STATE_DIR/metastore``, else ``$XDG_STATE_HOME/tableswap/metastore``,
    else ``~/.local/state/tableswap/metastore``."""
    return user_path("metastore", "state")


class StateDir:
    """The files of one state directory (``None``: :func:`default_state_dir`)."""

    def __init__(self, state_dir: str | Path | None = None) -> None:
        base = Path(state_dir) if state_dir is not None else default_state_dir()
        self.state_dir: Path = base.expanduser().resolve()

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
    def _s3_file(self) -> Path:
        """Present while the server was started with S3 support."""
        return self.state_dir / "metastore.s3"

    @property
    def _lock_file(self) -> Path:
        return self.state_dir / ".launcher.lock"

    def recorded_version(self) -> str | None:
        try:
            return self.version_file.read_text(encoding="utf-8").strip() or None
        except OSError:
            return None

    def _recorded_release(self) -> HiveRelease | None:
        try:
            return parse_hive_version(self.recorded_version())
        except DevMetastoreError:
            return None

    def _recorded_backend(self) -> Backend | None:
        try:
            recorded = self.backend_file.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        try:
            return parse_backend(recorded or None)
        except DevMetastoreError:
            return None
