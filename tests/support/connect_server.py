"""A local Spark Connect server for the tests: a subprocess of ``spark-submit`` from the pyspark wheel.

The server is ``org.apache.spark.sql.connect.service.SparkConnectServer`` (the jar ships in
``<pyspark>/jars``), started in the foreground with Hive support, the test metastore, its own
warehouse and Derby home, and a free loopback port. Run by hand::

    SPARK_HOME=$(python3 -c 'import pyspark,os;print(os.path.dirname(pyspark.__file__))') \\
    $SPARK_HOME/bin/spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer \\
      --conf spark.connect.grpc.binding.address=127.0.0.1 --conf spark.connect.grpc.binding.port=15002 \\
      --conf spark.sql.catalogImplementation=hive \\
      --conf spark.hadoop.hive.metastore.uris=thrift://127.0.0.1:9083
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from . import hive_client

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
READY_LINE = "Spark Connect server started at"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class ServerProcess:
    """A server subprocess started in a session of its own, logging to ``log_path``."""

    log_path: Path
    proc: subprocess.Popen | None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM, then SIGKILL after ``grace_s`` seconds (a server whose state is thrown away needs little)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            stop_process_group(proc, grace_s)  # its own session: the process and its children

    def serve_until_interrupted(self) -> None:
        """Wait while the server runs (a ``python -m tests.support.X`` started by hand), until it ends or Ctrl-C;
        stop it then."""
        try:
            while self.proc is not None and self.proc.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()


class ConnectServer(ServerProcess):
    def __init__(self, state_dir: Path, metastore_uri: str, *, start_timeout_s: float = 240.0) -> None:
        self.state_dir = Path(state_dir)
        self.metastore_uri = metastore_uri
        self.start_timeout_s = start_timeout_s
        self.port = free_port()
        self.log_path = self.state_dir / "connect-server.log"
        self.proc: subprocess.Popen | None = None
        self.startup_seconds: float | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        home = spark_home()
        warehouse = self.state_dir / "warehouse"
        derby = self.state_dir / "derby"
        warehouse.mkdir(parents=True, exist_ok=True)
        derby.mkdir(parents=True, exist_ok=True)
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.sql.catalogImplementation": "hive",
            "spark.hadoop.hive.metastore.uris": self.metastore_uri,
            "spark.sql.warehouse.dir": warehouse.as_uri(),
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.driver.extraJavaOptions": f"-Dderby.system.home={derby}",
            **hive_client.client_conf(os.environ.get("TABLESWAP_TEST_HIVE_VERSION")),
        }
        cmd = [str(home / "bin" / "spark-submit"), "--master", "local[2]", "--driver-memory", "1g",
               "--name", "tableswap-tests-connect", "--class", SERVER_CLASS]
        for key, value in conf.items():
            cmd += ["--conf", f"{key}={value}"]
        return cmd

    def start(self) -> "ConnectServer":
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
        env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1")
        self.state_dir.mkdir(parents=True, exist_ok=True)
        began = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                         cwd=self.state_dir, start_new_session=True)
        deadline = began + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited with {self.proc.returncode}:\n{self.log_tail()}")
            if READY_LINE in self.log_path.read_text(errors="replace"):
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    self.startup_seconds = round(time.monotonic() - began, 1)
                    return self
                except OSError:
                    pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the Spark Connect server did not start in {self.start_timeout_s}s:\n{self.log_tail()}")


def stop_process_group(proc: subprocess.Popen, grace_s: float = 30.0) -> None:
    """Stop a process started in a session of its own, and its children: SIGTERM, SIGKILL after ``grace_s``."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace_s)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


def remote_session(url: str):
    """A Spark Connect session that leaves this process in classic mode.

    ``SparkSession.builder.remote(url)`` would set ``SPARK_CONNECT_MODE_ENABLED`` for the whole
    process, after which :mod:`pyspark.sql.functions` builds Connect columns that the classic test
    session rejects; the Connect builder itself does not.
    """
    from pyspark.sql.connect.session import SparkSession as RemoteSparkSession

    return RemoteSparkSession.builder.remote(url).create()
