"""A Spark standalone cluster on loopback for the cluster tests and the cluster benchmark.

The pyspark wheel carries Spark's standalone cluster manager: one master and two workers are started as
JVMs of their own (``bin/spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), each
worker offering two one-core executor slots with small memory, so that two applications (a test's driver
and a crashing writer's) can hold an executor on each worker at once. Drivers connect in client mode with
:func:`client_conf`; executors write to ``file://`` paths, which every JVM of this machine shares.

Run by hand (what :class:`StandaloneCluster` does)::

    SPARK_HOME=$(python3 -c 'import pyspark,os;print(os.path.dirname(pyspark.__file__))')
    SPARK_LOCAL_IP=127.0.0.1 $SPARK_HOME/bin/spark-class org.apache.spark.deploy.master.Master \\
      --host 127.0.0.1 --port 7077 --webui-port 8080
    SPARK_LOCAL_IP=127.0.0.1 $SPARK_HOME/bin/spark-class org.apache.spark.deploy.worker.Worker \\
      --host 127.0.0.1 --cores 2 --memory 1g --work-dir /tmp/w1 spark://127.0.0.1:7077
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from .connect_server import free_port, spark_home, stop_process_group

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
WORKERS = 2
WORKER_CORES = 2  # two one-core executor slots per worker: one for each of two applications
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "512m"
#: ``$TABLESWAP_TEST_SPARK_MASTER``: when set, the test suite's ``spark`` fixture connects to this master
#: (client mode, :func:`client_conf`) instead of running ``local[2]``.
MASTER_ENV = "TABLESWAP_TEST_SPARK_MASTER"


def client_conf(*, speculation: bool = True) -> dict[str, str]:
    """Spark settings of a client-mode driver on this cluster: one one-core executor on each worker,
    executors running this Python; with ``speculation``, slow tasks get speculative copies early (a task
    running 1.5 times the median of half of its stage's finished tasks, and at least 1 s)."""
    conf = {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.cores": "1",
        "spark.cores.max": str(WORKERS),
        "spark.executor.memory": EXECUTOR_MEMORY,
        "spark.pyspark.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "spark.task.maxFailures": "4",
        # Executors are lost on purpose: no blacklisting of the worker they ran on.
        "spark.excludeOnFailure.enabled": "false",
    }
    if speculation:
        conf.update({"spark.speculation": "true", "spark.speculation.interval": "100ms",
                     "spark.speculation.quantile": "0.5", "spark.speculation.multiplier": "1.5",
                     "spark.speculation.minTaskRuntime": "1s"})
    return conf


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update(SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1",
               SPARK_DAEMON_MEMORY="256m", PYSPARK_PYTHON=sys.executable)
    return env


class StandaloneCluster:
    """A master and :data:`WORKERS` workers, each a JVM in a process group of its own under ``state_dir``."""

    def __init__(self, state_dir: Path, *, start_timeout_s: float = 180.0) -> None:
        self.state_dir = Path(state_dir)
        self.start_timeout_s = start_timeout_s
        self.port = free_port()
        self.procs: dict[str, subprocess.Popen] = {}
        self.startup_seconds: float | None = None
        self._began = time.monotonic()

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, args: list[str], host: str = "127.0.0.1") -> Path:
        log_path = self.state_dir / f"{name}.log"
        with open(log_path, "wb") as log:
            self.procs[name] = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args], stdout=log, stderr=subprocess.STDOUT,
                env={**_env(), "SPARK_LOCAL_IP": host}, cwd=self.state_dir, start_new_session=True)
        return log_path

    def _wait_for(self, name: str, log_path: Path, line: str, deadline: float) -> None:
        """Until ``line`` is in the process's log (looked for first: the caller may come after the deadline,
        when the cluster started long ago), the process exits, or the deadline passes."""
        while True:
            if self.procs[name].poll() is not None:
                raise RuntimeError(f"the Spark {name} exited with {self.procs[name].returncode}:\n"
                                   f"{self.log_tail(name)}")
            if line in log_path.read_text(errors="replace"):
                return
            if time.monotonic() >= deadline:
                raise RuntimeError(f"the Spark {name} did not start in {self.start_timeout_s:.0f}s:\n"
                                   f"{self.log_tail(name)}")
            time.sleep(0.3)

    def start(self, *, wait: bool = True) -> "StandaloneCluster":
        """Start the master (and wait until it leads), then the workers; with ``wait``, until each worker
        has registered (else call :meth:`wait_ready`: drivers may connect before, their executors come
        when the workers do)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._began = time.monotonic()
        deadline = self._began + self.start_timeout_s
        try:
            log = self._spawn("master", [MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port),
                                         "--webui-port", str(free_port())])
            self._wait_for("master", log, "I have been elected leader", deadline)
            for n in range(1, WORKERS + 1):
                work = self.state_dir / f"worker{n}"
                work.mkdir(exist_ok=True)
                # Each worker on a loopback address of its own, as if on its own machine: Spark never
                # runs a speculative copy of a task on the host of its first attempt.
                host = f"127.0.0.{n}"
                self._spawn(
                    f"worker{n}", [WORKER_CLASS, "--host", host, "--cores", str(WORKER_CORES),
                                   "--memory", WORKER_MEMORY, "--work-dir", str(work),
                                   "--webui-port", str(free_port()), self.master_url], host)
        except BaseException:
            self.stop()
            raise
        return self.wait_ready() if wait else self

    def wait_ready(self) -> "StandaloneCluster":
        """Wait until every worker has registered with the master."""
        deadline = self._began + self.start_timeout_s
        try:
            for n in range(1, WORKERS + 1):
                self._wait_for(f"worker{n}", self.state_dir / f"worker{n}.log", "Successfully registered with master",
                               deadline)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = round(time.monotonic() - self._began, 1)
        return self

    def log_tail(self, name: str, lines: int = 30) -> str:
        try:
            return "\n".join((self.state_dir / f"{name}.log").read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace_s: float = 30.0) -> None:
        """Workers first (they kill their executors), then the master; each SIGTERMed, SIGKILLed after ``grace_s``."""
        for name in sorted(self.procs, key=lambda n: n == "master"):
            stop_process_group(self.procs.pop(name), grace_s)


def executors() -> dict[tuple[str, str], int]:
    """The executor JVMs running on this machine: (application id, executor id) → process id."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = [a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0")]
        except OSError:
            continue
        if EXECUTOR_CLASS in args and "--app-id" in args and "--executor-id" in args:
            found[(args[args.index("--app-id") + 1], args[args.index("--executor-id") + 1])] = int(entry.name)
    return found
