"""A local HDFS beside the development metastore (``tableswap metastore start --with-hdfs``): one NameNode and
one DataNode on loopback, from Maven coordinates (no tarball, no Docker).

It is Hadoop's own ``MiniDFSCluster`` of the Hadoop release inside the pyspark wheel, in one JVM, started by the
command-line class the shaded ``hadoop-client-minicluster`` artifact ships
(``org.apache.hadoop.mapreduce.MiniHadoopClusterManager -nomr``); its jars are resolved once by
:func:`tableswap.jvm.jars.resolve_hdfs_minicluster_jars` into the jar cache and reused offline. The server binds
127.0.0.1 with ports it picks; once up it writes the whole configuration it runs with (``minicluster-conf.xml``)
and its NameNode's port (``details.json``, the ready signal); from them :func:`write_client_conf` writes a
``HADOOP_CONF_DIR`` a client reads (``core-site.xml``: ``fs.defaultFS``; ``hdfs-site.xml``: the NameNode's RPC
and HTTP addresses, one replica). HDFS permissions are on (Hadoop's default); the trash is off unless the
properties turn it on (``fs.trash.interval``). The file system is formatted at each start: its data lives as
long as the server runs.

The test suite runs the same command line in a process of its own (tests/support/hdfs.py); :class:`LocalHdfs` runs it
detached, with its state in a directory of the development metastore's (``<state dir>/hdfs``).
"""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from xml.sax.saxutils import escape

from tableswap.devmetastore import process
from tableswap.devmetastore.backend import DevMetastoreError

MAIN_CLASS = "org.apache.hadoop.mapreduce.MiniHadoopClusterManager"
HOST = "127.0.0.1"


def site_xml(properties: dict[str, str]) -> str:
    """A Hadoop configuration file holding ``properties``."""
    body = "".join(f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
                   for k, v in properties.items())
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


def read_site(path: Path) -> dict[str, str]:
    """The properties of a Hadoop configuration file."""
    return {p.findtext("name") or "": p.findtext("value") or "" for p in ET.parse(path).getroot().iter("property")}


def command(java: str, classpath: tuple[Path, ...], state_dir: Path, properties: dict[str, str], *,
            datanodes: int = 1) -> list[str]:
    """The command line of a NameNode and ``datanodes`` DataNodes whose data, configuration and details are
    under ``state_dir`` (``data/``, ``minicluster-conf.xml``, ``details.json``), with ``properties`` on top of
    Hadoop's defaults (an erasure-coding policy needs as many DataNodes as its data and parity blocks:
    ``XOR-2-1-1024k`` three)."""
    data = state_dir / "data"
    return [java, "-Xmx512m", f"-Dtest.build.data={data}", "-cp", ":".join(str(j) for j in classpath),
            MAIN_CLASS, "-nomr", "-format", "-datanodes", str(datanodes),
            "-D", f"hdfs.minidfs.basedir={data}",
            "-writeConfig", str(state_dir / "minicluster-conf.xml"),
            "-writeDetails", str(state_dir / "details.json"),
            *(arg for k, v in properties.items() for arg in ("-D", f"{k}={v}"))]


def started_port(state_dir: Path) -> int | None:
    """The NameNode's port once the server wrote its details (the ready signal), else None."""
    details = state_dir / "details.json"
    try:
        return int(json.loads(details.read_text())["namenode_port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not yet written, or not whole yet


#: Where a client finds the key management server of HDFS's encryption zones (``kms://http@host:port/kms``).
KEY_PROVIDER = "hadoop.security.key.provider.path"


def write_client_conf(state_dir: Path, conf_dir: Path, port: int, properties: dict[str, str]) -> None:
    """A client's ``HADOOP_CONF_DIR`` for the server under ``state_dir`` (its NameNode on ``port``), from the
    configuration the server wrote: the NameNode's RPC and HTTP ports, spelled with the address it binds
    (``127.0.0.1``, not ``localhost``), and the trash settings and the key provider (an encryption zone's key
    management server) among ``properties``."""
    running = read_site(state_dir / "minicluster-conf.xml")
    http_port = running["dfs.namenode.http-address"].rpartition(":")[2]
    conf_dir.mkdir(parents=True, exist_ok=True)
    trash = {k: v for k, v in properties.items() if k.startswith("fs.trash.") or k == KEY_PROVIDER}
    (conf_dir / "core-site.xml").write_text(site_xml({"fs.defaultFS": f"hdfs://{HOST}:{port}", **trash}))
    (conf_dir / "hdfs-site.xml").write_text(site_xml({
        "dfs.namenode.rpc-address": f"{HOST}:{port}",
        "dfs.namenode.http-address": f"{HOST}:{http_port}",
        "dfs.replication": "1",
    }))


class LocalHdfs:
    """The development metastore's HDFS, a detached process with its state in ``state_dir``: ``data/``,
    ``conf/`` (the ``HADOOP_CONF_DIR``), ``hdfs.log``, ``hdfs.pid``, ``details.json``."""

    def __init__(self, state_dir: Path, *, java: str | None = None,
                 properties: dict[str, str] | None = None) -> None:
        self.state_dir = Path(state_dir)
        self.conf_dir = self.state_dir / "conf"
        self.log_file = self.state_dir / "hdfs.log"
        self.pid_file = self.state_dir / "hdfs.pid"
        self._java = java
        self.properties = dict(properties or {})

    def port(self) -> int | None:
        """The NameNode's port while the server runs (its process alive and the port open), else None."""
        pid = process.read_int(self.pid_file)
        port = started_port(self.state_dir)
        if pid is None or port is None or not process.pid_alive(pid) or not process.port_open(HOST, port):
            return None
        return port

    def url(self) -> str | None:
        """``hdfs://127.0.0.1:PORT`` while it runs."""
        port = self.port()
        return f"hdfs://{HOST}:{port}" if port is not None else None

    def start(self, wait_timeout: float = 180.0) -> str:
        """Start it unless it runs; returns its URL (``fs.defaultFS``). Its jars are resolved by Maven
        coordinates on first use (:class:`tableswap.errors.DependencyError` when Maven cannot)."""
        running = self.url()
        if running is not None:
            return running
        from tableswap.jvm.jars import resolve_hdfs_minicluster_jars

        classpath = resolve_hdfs_minicluster_jars()
        self.stop()  # a dead server's leftovers
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "details.json").unlink(missing_ok=True)
        line = command(process.find_java(self._java), classpath, self.state_dir, self.properties)
        with open(self.log_file, "ab") as log:
            offset = log.tell()
            log.write(f"\n===== local HDFS starting {time.strftime('%Y-%m-%d %H:%M:%S')} =====\n".encode())
            log.flush()
            pid, said = process.spawn_detached(line, self.state_dir, process.child_env(), log)
        if pid is None:
            raise process.failure(self.log_file, f"could not start the local HDFS ({said})", offset)
        process.write_atomic(self.pid_file, f"{pid}\n")
        deadline = time.monotonic() + wait_timeout
        while time.monotonic() < deadline:
            if not process.pid_alive(pid):
                self.pid_file.unlink(missing_ok=True)
                raise process.failure(self.log_file, "the local HDFS exited while starting", offset)
            port = started_port(self.state_dir)
            if port is not None and process.port_open(HOST, port):
                write_client_conf(self.state_dir, self.conf_dir, port, self.properties)
                return f"hdfs://{HOST}:{port}"
            time.sleep(0.25)
        self.stop()
        raise process.failure(self.log_file, f"the local HDFS did not start in {wait_timeout:g}s", offset)

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop it (SIGTERM, then SIGKILL after ``timeout`` seconds); True if it was running."""
        pid = process.read_int(self.pid_file)
        was_running = pid is not None and process.pid_alive(pid) and "MiniHadoopClusterManager" in (
            process.process_cmdline(pid) or "")
        if was_running:
            assert pid is not None
            process.terminate(pid, timeout)
        self.pid_file.unlink(missing_ok=True)
        return was_running


__all__ = ["LocalHdfs", "DevMetastoreError", "command", "write_client_conf", "started_port", "site_xml",
           "read_site"]
