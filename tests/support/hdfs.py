"""A real HDFS for the tests: a NameNode and a DataNode on loopback, from Maven coordinates (no tarball).

The command line and the client configuration are the development metastore's local HDFS's
(:mod:`tableswap.devmetastore.hdfs`: Hadoop's own ``MiniDFSCluster`` of the pyspark wheel's Hadoop release,
started by ``org.apache.hadoop.mapreduce.MiniHadoopClusterManager -nomr``); here it runs as a child process of
the test session, stopped with it. Run by hand::

    python3 -m tests.support.hdfs          # starts one, prints its export HADOOP_CONF_DIR=..., stops on Ctrl-C

The trash is off unless ``properties`` turn it on (``{"fs.trash.interval": "60"}``: the NameNode tells its
clients, which move deleted paths into ``/user/<user>/.Trash/Current``).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from tableswap.devmetastore import hdfs as local_hdfs

from .connect_server import ServerProcess

HOST = local_hdfs.HOST


def resolve() -> tuple[Path, ...]:
    """The minicluster's class path (raises :class:`tableswap.errors.DependencyError` when Maven cannot
    resolve it)."""
    from tableswap.jvm.jars import resolve_hdfs_minicluster_jars

    return resolve_hdfs_minicluster_jars()


class MiniHdfs(ServerProcess):
    """One NameNode and one DataNode in a JVM of their own (a process group of its own), state under
    ``state_dir``: ``data/`` (the NameNode's and DataNode's directories, formatted at each start),
    ``conf/`` (the ``HADOOP_CONF_DIR``), ``minihdfs.log``."""

    def __init__(self, state_dir: Path, classpath: tuple[Path, ...], *, start_timeout_s: float = 180.0,
                 properties: dict[str, str] | None = None, datanodes: int = 1,
                 core_site: dict[str, str] | None = None) -> None:
        self.state_dir = Path(state_dir)
        self.properties = dict(properties or {})  # the cluster's configuration beyond Hadoop's defaults
        # What the JVM's every Configuration reads (a core-site.xml on its class path), for what a -D property
        # does not reach: the users' groups (Hadoop's Groups is made once a JVM, from a default Configuration).
        self.core_site = dict(core_site or {})
        self.classpath = classpath
        self.datanodes = datanodes
        self.start_timeout_s = start_timeout_s
        self.log_path = self.state_dir / "minihdfs.log"
        self.conf_dir = self.state_dir / "conf"
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.startup_seconds: float | None = None

    @property
    def url(self) -> str:
        """``hdfs://127.0.0.1:PORT``: the file system's URI (``fs.defaultFS``)."""
        return f"hdfs://{HOST}:{self.port}"

    def command(self) -> list[str]:
        classpath = self.classpath
        if self.core_site:
            site = self.state_dir / "jvm-conf"
            site.mkdir(parents=True, exist_ok=True)
            (site / "core-site.xml").write_text(local_hdfs.site_xml(self.core_site))
            classpath = (site, *classpath)
        return local_hdfs.command(shutil.which("java") or "java", classpath, self.state_dir, self.properties,
                                  datanodes=self.datanodes)

    def start(self) -> "MiniHdfs":
        self.state_dir.mkdir(parents=True, exist_ok=True)
        details = self.state_dir / "details.json"
        details.unlink(missing_ok=True)
        began = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, cwd=self.state_dir,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = began + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the local HDFS exited with {self.proc.returncode}:\n{self.log_tail()}")
            port = local_hdfs.started_port(self.state_dir)
            if port is not None:
                socket.create_connection((HOST, port), timeout=5).close()
                self.port = port
                local_hdfs.write_client_conf(self.state_dir, self.conf_dir, port, self.properties)
                self.startup_seconds = round(time.monotonic() - began, 1)
                return self
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"the local HDFS did not start in {self.start_timeout_s}s:\n{self.log_tail()}")


#: The ``viewfs://`` mount table of the viewfs tests (tests/integration/test_hdfs_viewfs.py) and where it mounts
#: the HDFS's ``/warehouse``: ``viewfs://tswap/vdata/...`` is ``hdfs://HOST:PORT/warehouse/...``.
VIEWFS_TABLE, VIEWFS_MOUNT = "tswap", "/vdata"


def viewfs_properties(url: str) -> dict[str, str]:
    """Hadoop client settings of a ``viewfs://`` mount table mapping :data:`VIEWFS_MOUNT` onto ``url``'s
    ``/warehouse`` (Hadoop's ``ViewFileSystem``: ``fs.viewfs.mounttable.<table>.link.<path>``), every other
    path onto the same path of ``url`` (``linkFallback``: hdfs-native 0.14 makes no client for a mount table
    without one, ``InvalidArgument("No viewfs fallback mount found")``)."""
    return {f"fs.viewfs.mounttable.{VIEWFS_TABLE}.link.{VIEWFS_MOUNT}": f"{url}/warehouse",
            f"fs.viewfs.mounttable.{VIEWFS_TABLE}.linkFallback": f"{url}/"}


def write_viewfs_conf(server: MiniHdfs, conf_dir: Path) -> Path:
    """A ``HADOOP_CONF_DIR`` at ``conf_dir``: ``server``'s client configuration plus the mount table of
    :func:`viewfs_properties` in its ``core-site.xml``."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    core = local_hdfs.read_site(server.conf_dir / "core-site.xml")
    (conf_dir / "core-site.xml").write_text(local_hdfs.site_xml({**core, **viewfs_properties(server.url)}))
    shutil.copy(server.conf_dir / "hdfs-site.xml", conf_dir / "hdfs-site.xml")
    return conf_dir


def create_encryption_zone(server: MiniHdfs, path: str, key: str) -> None:
    """Make ``path`` (made if missing, and empty) an encryption zone of ``key``, a key of the key management
    server ``server``'s NameNode names (``hadoop.security.key.provider.path``), as ``hdfs crypto -createZone``
    does (Hadoop's ``CryptoAdmin``, in a JVM of its own, as the superuser: this process's user): with its trash,
    ``<path>/.Trash`` (mode 1777)."""
    import subprocess

    from hdfs_native import Client

    Client(server.url).mkdirs(path, 0o755, True)
    done = subprocess.run([shutil.which("java") or "java", "-cp", ":".join(str(j) for j in server.classpath),
                           "org.apache.hadoop.hdfs.tools.CryptoAdmin", "-fs", server.url,
                           "-createZone", "-keyName", key, "-path", path],
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    if done.returncode != 0 or "Added encryption zone" not in done.stdout:
        raise RuntimeError(f"hdfs crypto -createZone {path} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")


def main() -> None:
    """Start a local HDFS until Ctrl-C (python3 -m tests.support.hdfs [STATE_DIR])."""
    import tempfile

    state = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="tableswap-hdfs-"))
    server = MiniHdfs(state, resolve()).start()
    print(f"HDFS at {server.url} (started in {server.startup_seconds}s)\nexport HADOOP_CONF_DIR={server.conf_dir}",
          flush=True)
    server.serve_until_interrupted()


if __name__ == "__main__":
    main()
