"""A local HDFS with highly available NameNodes: one nameservice, ``ns1``, two NameNodes (``nn0`` active,
``nn1`` standby) and one DataNode on loopback, from Maven coordinates (no tarball, no Docker).

Hadoop's command-line class (``MiniHadoopClusterManager``, :mod:`tableswap.devmetastore.hdfs`) starts a single
NameNode only, so this is a small Java program of tableswap's own, ``java/MiniHaDfs.java`` beside this module:
Hadoop's ``MiniDFSCluster`` with an HA topology, in one JVM. Its source ships with the package; the JDK's
``javac`` compiles it at first use against the ``hadoop-client-minicluster`` jars
(:func:`tableswap.jvm.jars.resolve_hdfs_minicluster_jars`) into the jar cache, beside those jars, and the class
is reused from there (a new source or Hadoop release compiles again).

The program writes a client's ``HADOOP_CONF_DIR`` (``<state dir>/conf``: ``fs.defaultFS`` ``hdfs://ns1``, the
nameservice, its NameNodes' RPC and HTTP addresses, ``ConfiguredFailoverProxyProvider``), prints
``ready nn0=HOST:PORT nn1=HOST:PORT``, then takes commands on its standard input, one a line, each answered with
one line (``ok ...`` / ``error ...``): ``state``, ``failover`` (graceful: the active becomes standby, the other
active), ``kill-active`` (the active NameNode shut down, the other made active), ``restart N``, ``stop``.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tableswap.devmetastore.backend import DevMetastoreError

MAIN_CLASS = "MiniHaDfs"
SOURCE = Path(__file__).parent / "java" / f"{MAIN_CLASS}.java"
NAMESERVICE = "ns1"
NAMENODES = ("nn0", "nn1")
#: The line the program prints once the cluster is up: each NameNode's RPC address.
READY = re.compile(r"^ready((?: nn\d+=[^ =]+:\d+)+)$")


def find_javac(java: str) -> str:
    """The ``javac`` beside ``java`` (the same JDK), else the one on ``PATH``.

    Raises:
        DevMetastoreError: no ``javac`` (a JRE without the JDK's compiler).
    """
    resolved = shutil.which(java)
    if resolved:
        beside = Path(resolved).resolve().parent / "javac"
        if beside.exists():
            return str(beside)
    found = shutil.which("javac")
    if found:
        return found
    raise DevMetastoreError(f"no javac beside {java} nor on PATH: the HA HDFS is a small Java program compiled at "
                            "first use; install a JDK (Debian: openjdk-17-jdk-headless), not only a JRE")


def compiled_main(classpath: tuple[Path, ...], java: str = "java") -> Path:
    """The directory holding ``MiniHaDfs.class``, compiled once against ``classpath`` into the jar cache
    (beside the minicluster's jar set: ``<jar cache>/hdfs-ha-main-<digest>``), then reused.

    Raises:
        DevMetastoreError: no ``javac``, or the compilation failed (its output in the message).
    """
    jars_dir = classpath[0].parent
    source = SOURCE.read_bytes()
    digest = hashlib.sha256(source + "\0".join(j.name for j in classpath).encode()).hexdigest()[:16]
    target = jars_dir.parent.parent / f"hdfs-ha-main-{digest}"
    if (target / f"{MAIN_CLASS}.class").exists():
        return target
    javac = find_javac(java)
    work = Path(tempfile.mkdtemp(prefix=".hdfs-ha-main-", dir=target.parent))
    try:
        done = subprocess.run([javac, "-nowarn", "-d", str(work), "-cp", ":".join(str(j) for j in classpath),
                               str(SOURCE)], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise DevMetastoreError(f"javac could not compile {SOURCE.name} against the minicluster jars "
                                    f"(exit {done.returncode}): {(done.stdout + done.stderr)[-2000:]}")
        try:
            work.rename(target)
        except OSError:  # compiled meanwhile by another process: theirs is the same class
            if not (target / f"{MAIN_CLASS}.class").exists():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def command(java: str, classes: Path, classpath: tuple[Path, ...], state_dir: Path,
            properties: dict[str, str]) -> list[str]:
    """The command line of the HA cluster whose data and configuration are under ``state_dir`` (``data/``,
    ``conf/``), with ``properties`` on top of Hadoop's defaults."""
    return [java, "-Xmx640m", f"-Dtest.build.data={state_dir / 'data'}",
            "-cp", ":".join([str(classes), *(str(j) for j in classpath)]),
            MAIN_CLASS, str(state_dir), *(f"{k}={v}" for k, v in properties.items())]


def parse_ready(line: str) -> dict[str, str] | None:
    """``{"nn0": "127.0.0.1:PORT", "nn1": ...}`` from the program's ready line, else None."""
    match = READY.match(line.strip())
    if match is None:
        return None
    return dict(item.split("=", 1) for item in match.group(1).split())


__all__ = ["MAIN_CLASS", "NAMENODES", "NAMESERVICE", "SOURCE", "command", "compiled_main", "find_javac",
           "parse_ready"]
