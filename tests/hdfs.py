"""A real HDFS for the tests: a NameNode and a DataNode on loopback, from Maven coordinates (no tarball).

Hadoop's own ``MiniDFSCluster``, in one JVM, started by the command-line class the shaded
``hadoop-client-minicluster`` artifact ships (``org.apache.hadoop.mapreduce.MiniHadoopClusterManager -nomr``),
of the Hadoop release inside the pyspark wheel; its jars are resolved once by
:func:`tableswap.jvmjars.resolve_hdfs_minicluster_jars` into the jar cache and reused offline. Run by hand::

    python3 -m tests.hdfs          # starts one, prints its export HADOOP_CONF_DIR=..., stops on Ctrl-C

The server binds 127.0.0.1 only, with ports it picks. Once up it writes the whole configuration it runs
with (``minicluster-conf.xml``) and the port (``details.json``, the ready signal); from them this module
writes a ``HADOOP_CONF_DIR`` a client reads: ``core-site.xml`` (``fs.defaultFS``) and ``hdfs-site.xml`` (the
NameNode's RPC and HTTP addresses, one replica). HDFS permissions are on (Hadoop's default); the trash is
off unless ``properties`` turn it on (``{"fs.trash.interval": "60"}``: the NameNode tells its clients, which
move deleted paths into ``/user/<user>/.Trash/Current``).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from xml.sax.saxutils import escape

from .connect_server import ServerProcess

MAIN_CLASS = "org.apache.hadoop.mapreduce.MiniHadoopClusterManager"
HOST = "127.0.0.1"


def resolve() -> tuple[Path, ...]:
    """The minicluster's class path (raises :class:`tableswap.errors.DependencyError` when Maven cannot
    resolve it)."""
    from tableswap.jvmjars import resolve_hdfs_minicluster_jars

    return resolve_hdfs_minicluster_jars()


def site_xml(properties: dict[str, str]) -> str:
    body = "".join(f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
                   for k, v in properties.items())
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


def read_site(path: Path) -> dict[str, str]:
    """The properties of a Hadoop configuration file."""
    return {p.findtext("name") or "": p.findtext("value") or "" for p in ET.parse(path).getroot().iter("property")}


class MiniHdfs(ServerProcess):
    """One NameNode and one DataNode in a JVM of their own (a process group of its own), state under
    ``state_dir``: ``data/`` (the NameNode's and DataNode's directories, formatted at each start),
    ``conf/`` (the ``HADOOP_CONF_DIR``), ``minihdfs.log``."""

    def __init__(self, state_dir: Path, classpath: tuple[Path, ...], *, start_timeout_s: float = 180.0,
                 properties: dict[str, str] | None = None) -> None:
        self.state_dir = Path(state_dir)
        self.properties = dict(properties or {})  # the cluster's configuration beyond Hadoop's defaults
        self.classpath = classpath
        self.start_timeout_s = start_timeout_s
        self.log_path = self.state_dir / "minihdfs.log"
        self.conf_dir = self.state_dir / "conf"
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.http_address: str | None = None
        self.startup_seconds: float | None = None

    @property
    def url(self) -> str:
        """``hdfs://127.0.0.1:PORT``: the file system's URI (``fs.defaultFS``)."""
        return f"hdfs://{HOST}:{self.port}"

    def command(self) -> list[str]:
        data = self.state_dir / "data"
        java = shutil.which("java") or "java"
        return [java, "-Xmx512m", f"-Dtest.build.data={data}", "-cp", ":".join(str(j) for j in self.classpath),
                MAIN_CLASS, "-nomr", "-format", "-datanodes", "1",
                "-D", f"hdfs.minidfs.basedir={data}",
                "-writeConfig", str(self.state_dir / "minicluster-conf.xml"),
                "-writeDetails", str(self.state_dir / "details.json"),
                *(arg for k, v in self.properties.items() for arg in ("-D", f"{k}={v}"))]

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
            if details.exists() and details.stat().st_size:
                try:  # written once the cluster is up (and whole: a JSON object)
                    port = int(json.loads(details.read_text())["namenode_port"])
                except (ValueError, KeyError):
                    port = None
                if port is not None:
                    socket.create_connection((HOST, port), timeout=5).close()
                    self.port = port
                    self._write_conf_dir()
                    self.startup_seconds = round(time.monotonic() - began, 1)
                    return self
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"the local HDFS did not start in {self.start_timeout_s}s:\n{self.log_tail()}")

    def _write_conf_dir(self) -> None:
        """A client's ``HADOOP_CONF_DIR``, from the configuration the server wrote: its NameNode's RPC and
        HTTP ports, spelled with the address it binds (``127.0.0.1``, not ``localhost``)."""
        running = read_site(self.state_dir / "minicluster-conf.xml")
        http_port = running["dfs.namenode.http-address"].rpartition(":")[2]
        self.http_address = f"{HOST}:{http_port}"
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "core-site.xml").write_text(site_xml({"fs.defaultFS": self.url, **{
            k: v for k, v in self.properties.items() if k.startswith("fs.trash.")}}))
        (self.conf_dir / "hdfs-site.xml").write_text(site_xml({
            "dfs.namenode.rpc-address": f"{HOST}:{self.port}",
            "dfs.namenode.http-address": self.http_address,
            "dfs.replication": "1",
        }))


def main() -> None:
    """Start a local HDFS until Ctrl-C (python3 -m tests.hdfs [STATE_DIR])."""
    import tempfile

    state = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="tableswap-hdfs-"))
    server = MiniHdfs(state, resolve()).start()
    print(f"HDFS at {server.url} (started in {server.startup_seconds}s)\nexport HADOOP_CONF_DIR={server.conf_dir}",
          flush=True)
    try:
        while server.proc is not None and server.proc.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
