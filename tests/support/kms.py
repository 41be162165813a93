"""A real Hadoop key management server (KMS) for HDFS's encryption zones, from Maven coordinates (no tarball).

Hadoop's own ``MiniKMS`` (the ``tests`` jar of ``org.apache.hadoop:hadoop-kms``) in a JVM of its own, run by a
small Java main (tests/support/jvm/MiniKms.java), its keys in a Java key store under its state directory. The
NameNode asks it for each new file's encrypted data key; Spark's Hadoop client and hdfs-native ask it to decrypt
one (both find it through ``hadoop.security.key.provider.path``: :attr:`MiniKms.provider_uri`). Simple
authentication, every user allowed.

Maven Central has no ``hadoop-kms`` of the wheel's Hadoop (3.5.0): the server is 3.4.1's, the last release that
has one. It speaks the same REST API (``/kms/v1/...``) to the 3.5.0 NameNode and clients.

Run by hand::

    python3 -m tests.support.kms            # starts one, prints its provider URI, stops on Ctrl-C
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from .connect_server import ServerProcess, free_port

MAIN = Path(__file__).resolve().parent / "jvm" / "MiniKms.java"
HADOOP_KMS = "3.4.1"
COORDINATES = (f"org.apache.hadoop:hadoop-kms:{HADOOP_KMS}", f"org.apache.hadoop:hadoop-kms:{HADOOP_KMS}:tests")
#: The key the suite's encryption zones are made with (created in the key store before the server starts).
KEY = "tableswap-key"


def resolve() -> tuple[Path, ...]:
    """The server's class path (raises :class:`tableswap.errors.DependencyError` when Maven cannot resolve it)."""
    from tableswap.jvm.jars import resolve_jars

    return resolve_jars(f"hadoop-kms-{HADOOP_KMS}", COORDINATES)


class MiniKms(ServerProcess):
    """One KMS on 127.0.0.1, state under ``state_dir``: ``conf/`` (its ``kms-site.xml``), ``kms.keystore``
    (its keys: :data:`KEY`), ``details.json`` (the ready signal), ``minikms.log``."""

    def __init__(self, state_dir: Path, classpath: tuple[Path, ...], *, start_timeout_s: float = 180.0) -> None:
        self.state_dir = Path(state_dir)
        self.classpath = classpath
        self.start_timeout_s = start_timeout_s
        self.log_path = self.state_dir / "minikms.log"
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.began: float | None = None
        self.began_at = 0.0
        self.startup_seconds: float | None = None

    @property
    def provider_uri(self) -> str:
        """``kms://http@127.0.0.1:PORT/kms``: the value of ``hadoop.security.key.provider.path`` (a NameNode's
        and a client's)."""
        return f"kms://http@127.0.0.1:{self.port}/kms"

    def start(self, *, wait: bool = True) -> "MiniKms":
        """Start the server; with ``wait`` False return at once (:meth:`wait` waits for it): its address is
        known before it listens, so HDFS can start meanwhile."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "details.json").unlink(missing_ok=True)
        java = shutil.which("java") or "java"
        # Jersey 1's JAXB needs java.lang opened on Java 9 and later, as Hadoop's own build passes it.
        command = [java, "-Xmx256m", "--add-opens", "java.base/java.lang=ALL-UNNAMED",
                   "-cp", ":".join(str(j) for j in self.classpath), str(MAIN), str(self.state_dir), str(self.port), KEY]
        self.began = time.monotonic()
        self.began_at = time.time()  # its start took until it wrote details.json (whenever wait() looks)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=self.state_dir,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        return self.wait() if wait else self

    def wait(self) -> "MiniKms":
        """Wait until the server listens (it wrote ``details.json``)."""
        assert self.proc is not None and self.began is not None, "start() first"
        deadline = self.began + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the KMS exited with {self.proc.returncode}:\n{self.log_tail()}")
            details = self.state_dir / "details.json"
            try:
                json.loads(details.read_text())
            except (OSError, ValueError):
                time.sleep(0.25)
                continue
            socket.create_connection(("127.0.0.1", self.port), timeout=5).close()
            if self.startup_seconds is None:
                self.startup_seconds = round(details.stat().st_mtime - self.began_at, 1)
            return self
        self.stop()
        raise RuntimeError(f"the KMS did not start in {self.start_timeout_s}s:\n{self.log_tail()}")


def main() -> None:
    """Start a KMS until Ctrl-C (python3 -m tests.support.kms [STATE_DIR])."""
    import tempfile

    state = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="tableswap-kms-"))
    server = MiniKms(state, resolve()).start()
    print(f"KMS at {server.provider_uri} (started in {server.startup_seconds}s), key {KEY}", flush=True)
    server.serve_until_interrupted()


if __name__ == "__main__":
    main()
