"""A real HDFS with highly available NameNodes for the tests: the nameservice ``ns1``, two NameNodes (``nn0``
active, ``nn1`` standby) and one DataNode on loopback, from Maven coordinates (no tarball).

The program is tableswap's own small Java main (:mod:`tableswap.devmetastore.hdfs_ha`, compiled at first use
into the jar cache) around Hadoop's ``MiniDFSCluster``; here it runs as a child process of the test session,
stopped with it, and the tests fail it over through its standard input (:meth:`MiniHaHdfs.failover`,
:meth:`MiniHaHdfs.kill_active`). Run by hand::

    python3 -m tests.support.hdfs_ha       # starts one, prints its export HADOOP_CONF_DIR=..., stops on Ctrl-C
"""

from __future__ import annotations

import queue
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from tableswap.devmetastore import hdfs as local_hdfs
from tableswap.devmetastore import hdfs_ha

from .connect_server import ServerProcess

NAMESERVICE = hdfs_ha.NAMESERVICE


class MiniHaHdfs(ServerProcess):
    """The HA cluster in a JVM of its own (a process group of its own), state under ``state_dir``: ``data/``
    (formatted at each start), ``conf/`` (the ``HADOOP_CONF_DIR``), ``minihdfs-ha.log``."""

    def __init__(self, state_dir: Path, classpath: tuple[Path, ...], *, start_timeout_s: float = 240.0,
                 answer_timeout_s: float = 120.0) -> None:
        self.state_dir = Path(state_dir)
        self.classpath = classpath
        self.start_timeout_s = start_timeout_s
        self.answer_timeout_s = answer_timeout_s
        self.log_path = self.state_dir / "minihdfs-ha.log"
        self.conf_dir = self.state_dir / "conf"
        self.proc: subprocess.Popen | None = None
        self.namenodes: dict[str, str] = {}  # nn0/nn1 -> 127.0.0.1:PORT (RPC)
        self.startup_seconds: float | None = None
        self._answers: queue.Queue[str | None] = queue.Queue()

    @property
    def url(self) -> str:
        """``hdfs://ns1``: the file system's URI (``fs.defaultFS``)."""
        return f"hdfs://{NAMESERVICE}"

    def client_properties(self) -> dict[str, str]:
        """The Hadoop client settings of the nameservice (its ``hdfs-site.xml``), for a client whose
        configuration is not read from this ``HADOOP_CONF_DIR`` (the metastore's hive-site, a live SparkSession)."""
        return local_hdfs.read_site(self.conf_dir / "hdfs-site.xml")

    def start(self) -> "MiniHaHdfs":
        java = shutil.which("java") or "java"
        classes = hdfs_ha.compiled_main(self.classpath, java)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(hdfs_ha.command(java, classes, self.classpath, self.state_dir, {}),
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                         cwd=self.state_dir, text=True, start_new_session=True)
        threading.Thread(target=self._read_answers, daemon=True).start()
        ready = self._answer(self.start_timeout_s, "start")
        self.namenodes = hdfs_ha.parse_ready(ready) or {}
        if not self.namenodes:
            self.stop()
            raise RuntimeError(f"the HA HDFS answered {ready!r} instead of its ready line:\n{self.log_tail()}")
        self.startup_seconds = round(time.monotonic() - began, 1)
        return self

    def _read_answers(self) -> None:
        proc = self.proc
        assert proc is not None and proc.stdout is not None
        for line in proc.stdout:
            self._answers.put(line.strip())
        self._answers.put(None)

    def _answer(self, timeout: float, what: str) -> str:
        try:
            answer = self._answers.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"the HA HDFS did not answer {what!r} in {timeout}s:\n{self.log_tail()}") from None
        if answer is None:
            raise RuntimeError(f"the HA HDFS exited during {what!r}:\n{self.log_tail()}")
        return answer

    def tell(self, command: str) -> dict[str, str]:
        """Run one command (``state``, ``failover``, ``kill-active``, ``restart N``); the NameNodes' states
        after it (``{"nn0": "active", "nn1": "standby"}``; ``down`` for one shut down)."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        answer = self._answer(self.answer_timeout_s, command)
        if not answer.startswith("ok "):
            raise RuntimeError(f"the HA HDFS refused {command!r}: {answer}")
        return dict(item.split("=", 1) for item in answer[3:].split())

    def state(self) -> dict[str, str]:
        return self.tell("state")

    def failover(self) -> dict[str, str]:
        """A graceful failover: the active NameNode becomes standby, the other one active."""
        return self.tell("failover")

    def kill_active(self) -> dict[str, str]:
        """The active NameNode shut down (its port refuses connections), the other one made active."""
        return self.tell("kill-active")

    def restore(self) -> dict[str, str]:
        """Both NameNodes running again (one shut down is restarted as standby), whichever is active."""
        states = self.state()
        for i, name in enumerate(hdfs_ha.NAMENODES):
            if states[name] == "down":
                states = self.tell(f"restart {i}")
        return states

    def stop(self, grace_s: float = 30.0) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None and proc.stdin is not None:
            try:
                proc.stdin.write("stop\n")
                proc.stdin.flush()
                proc.wait(timeout=grace_s)
            except (OSError, subprocess.TimeoutExpired):
                pass
        super().stop(grace_s)


def main() -> None:
    """Start a local HA HDFS until Ctrl-C (python3 -m tests.support.hdfs_ha [STATE_DIR])."""
    import tempfile

    from . import hdfs

    state = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="tableswap-hdfs-ha-"))
    server = MiniHaHdfs(state, hdfs.resolve()).start()
    print(f"HDFS at {server.url} ({server.namenodes}, started in {server.startup_seconds}s)\n"
          f"export HADOOP_CONF_DIR={server.conf_dir}", flush=True)
    server.serve_until_interrupted()


if __name__ == "__main__":
    main()
