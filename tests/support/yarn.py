"""A real YARN for the tests: a ResourceManager and a NodeManager on loopback beside the suite's HDFS, from Maven
coordinates (no tarball), and what a Spark application on it needs.

The cluster is Hadoop's own ``MiniYARNCluster`` of the pyspark wheel's Hadoop release, from the same shaded
``hadoop-client-minicluster`` as the HDFS (tests/support/hdfs.py), started by a Java program of the suite's
(tests/support/jvm/MiniYarn.java, run as a single-file source program: ``MiniHadoopClusterManager`` starts YARN only through
MapReduce's cluster, whose classes that artifact does not ship). Its jars are the HDFS's plus what the
ResourceManager needs beside the shaded artifact (BouncyCastle for its web proxy's certificates, reload4j for its
logging), resolved by Maven coordinates once into the jar cache, then offline. It uses the HDFS the suite already
runs (``fs.defaultFS``): one HDFS per test session, shared by the HDFS and the YARN tests.

Settings are those of Spark's own YARN tests (``BaseYarnClusterSuite``): the disk health checker off (a full disk
would mark the node unhealthy and no container would start), the capacity scheduler's queues spelled out (the
shaded artifact leaves out ``capacity-scheduler.xml``), and sizes for a 2-core machine: 3 GB and 4 virtual cores
for containers, allocated by 256 MB, memory checks off (a container's Python workers count against it).

Its ``conf_dir`` is a ``HADOOP_CONF_DIR`` for both (the HDFS's ``core-site.xml`` and ``hdfs-site.xml``, and a
``yarn-site.xml`` with the ResourceManager's addresses). Containers run on this machine, as the user running the
tests, with this machine's Python (``spark.pyspark.python``) and the pyspark wheel's jars as ``local:`` files
(``spark.yarn.jars``: nothing uploaded per application). Run by hand::

    python3 -m tests.support.yarn          # starts an HDFS and a YARN, prints export HADOOP_CONF_DIR=..., stops on Ctrl-C
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from tableswap.devmetastore.hdfs import read_site, site_xml

from .connect_server import ServerProcess, spark_home

MAIN = Path(__file__).resolve().parent / "jvm" / "MiniYarn.java"
NODE_MEMORY_MB = 3072

#: What the ResourceManager needs beside the shaded minicluster artifact, at the versions Hadoop 3.5.0 builds with
#: (its hadoop-project POM): BouncyCastle (the web proxy's certificate authority) and reload4j (log4j 1's API,
#: which the ResourceManager logs through).
EXTRA_COORDINATES = ("org.bouncycastle:bcprov-jdk18on:1.82", "org.bouncycastle:bcpkix-jdk18on:1.82",
                     "ch.qos.reload4j:reload4j:1.2.22", "org.slf4j:slf4j-reload4j:1.7.36")

#: The cluster's configuration beyond Hadoop's defaults (Spark's BaseYarnClusterSuite, sized for 2 cores).
PROPERTIES = {
    "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": "100",
    "yarn.nodemanager.resource.memory-mb": str(NODE_MEMORY_MB),
    "yarn.nodemanager.resource.cpu-vcores": "4",
    "yarn.scheduler.minimum-allocation-mb": "256",
    "yarn.nodemanager.vmem-check-enabled": "false",
    "yarn.nodemanager.pmem-check-enabled": "false",
    "yarn.resourcemanager.hostname": "127.0.0.1",
    "yarn.scheduler.capacity.root.queues": "default",
    "yarn.scheduler.capacity.root.default.capacity": "100",
    "yarn.scheduler.capacity.root.default.maximum-capacity": "100",
    "yarn.scheduler.capacity.root.default.user-limit-factor": "1",
    "yarn.scheduler.capacity.root.default.state": "RUNNING",
    "yarn.scheduler.capacity.root.default.acl_submit_applications": "*",
    "yarn.scheduler.capacity.root.default.acl_administer_queue": "*",
    "yarn.scheduler.capacity.maximum-am-resource-percent": "1.0",
    "yarn.scheduler.capacity.node-locality-delay": "-1",
}

LOG4J = """log4j.rootLogger=WARN, console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{1}: %m%n
"""


def resolve() -> tuple[Path, ...]:
    """The class path: the HDFS minicluster's jars and the extras (raises
    :class:`tableswap.errors.DependencyError` when Maven cannot resolve them)."""
    from tableswap.jvm.jars import resolve_hdfs_minicluster_jars, resolve_jars, wheel_versions

    extras = resolve_jars(f"yarn-minicluster-extras-{wheel_versions().hadoop}", EXTRA_COORDINATES)
    extra_names = {j.name for j in extras}
    # One slf4j API: the extras' (the same 1.7 release), next to its reload4j binding.
    return tuple(j for j in resolve_hdfs_minicluster_jars() if j.name not in extra_names) + tuple(extras)


def java_home(java: str) -> str:
    """The JDK of ``java`` (the NodeManager starts containers with ``$JAVA_HOME/bin/java``)."""
    return str(Path(os.path.realpath(java)).parent.parent)


class MiniYarn(ServerProcess):
    """A ResourceManager and a NodeManager in a JVM of their own (a process group of its own) on ``hdfs``'s file
    system, state under ``state_dir``: ``target/`` (the NodeManager's local and log directories: each container's
    ``stdout`` and ``stderr`` under ``.../<application>/<container>/``), ``yarn-conf.xml`` (the configuration it
    runs with), ``conf/`` (the ``HADOOP_CONF_DIR``), ``miniyarn.log``."""

    def __init__(self, state_dir: Path, classpath: tuple[Path, ...], hdfs: Any, *,
                 start_timeout_s: float = 240.0) -> None:
        self.state_dir = Path(state_dir)
        self.classpath = classpath
        self.hdfs = hdfs
        self.start_timeout_s = start_timeout_s
        self.log_path = self.state_dir / "miniyarn.log"
        self.conf_dir = self.state_dir / "conf"
        self.proc: subprocess.Popen | None = None
        self.webapp: str | None = None  # http://host:port of the ResourceManager's web services
        self.startup_seconds: float | None = None
        self.java = shutil.which("java") or "java"

    def command(self) -> list[str]:
        properties = {**PROPERTIES, "fs.defaultFS": self.hdfs.url}
        return [self.java, "-Xmx512m", f"-Dlog4j.configuration=file:{self.state_dir / 'log4j.properties'}",
                "-cp", ":".join(str(j) for j in self.classpath), str(MAIN), str(self.state_dir),
                *(arg for k, v in properties.items() for arg in ("-D", f"{k}={v}"))]

    def environment(self) -> dict[str, str]:
        """The server's environment, which its containers start from: this process's without tableswap's settings
        and Python path (a test passes those to its application), with the JDK as ``JAVA_HOME``."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("TABLESWAP_") and k not in ("PYTHONPATH", "HADOOP_CONF_DIR")}
        env["JAVA_HOME"] = java_home(self.java)
        return env

    def start(self) -> "MiniYarn":
        self.state_dir.mkdir(parents=True, exist_ok=True)
        (self.state_dir / "log4j.properties").write_text(LOG4J)
        details = self.state_dir / "details.json"
        details.unlink(missing_ok=True)
        began = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, cwd=self.state_dir,
                                         env=self.environment(), stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = began + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the local YARN exited with {self.proc.returncode}:\n{self.log_tail()}")
            if details.exists():
                self.webapp = "http://" + json.loads(details.read_text())["webapp_address"]
                self.write_client_conf()
                self.startup_seconds = round(time.monotonic() - began, 1)
                return self
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"the local YARN did not start in {self.start_timeout_s}s:\n{self.log_tail()}")

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM (its shutdown hook stops the NodeManager, which stops the containers), SIGKILL after ``grace_s``;
        then any container process still there (a container runs in a session of its own, from under
        ``state_dir``) is killed too. After tests/integration/test_yarn.py's applications had finished, that graceful
        stop took 22.3 s (2026-11-29, 2 cores, 24 GiB, Debian 12, load average 20-30): the session's end gives it
        ``THROWAWAY_GRACE_S`` (tests/conftest.py)."""
        super().stop(grace_s)
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if str(self.state_dir).encode() in (entry / "cmdline").read_bytes():
                    os.kill(int(entry.name), signal.SIGKILL)
            except (OSError, ValueError):
                pass  # gone meanwhile, or not ours to read

    def write_client_conf(self) -> None:
        """``conf/``: the HDFS's client configuration and the ResourceManager's addresses."""
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        for name in ("core-site.xml", "hdfs-site.xml"):
            shutil.copy(Path(self.hdfs.conf_dir) / name, self.conf_dir / name)
        running = read_site(self.state_dir / "yarn-conf.xml")
        addresses = {k: v for k, v in running.items()
                     if k.startswith("yarn.resourcemanager.") and k.endswith("address") and "${" not in v}
        (self.conf_dir / "yarn-site.xml").write_text(site_xml(addresses))

    # ------------------------------------------------------------------ the ResourceManager's REST API
    def rest(self, path: str, *, method: str = "GET", body: dict | None = None) -> Any:
        """``/ws/v1/cluster/<path>`` of the ResourceManager, as JSON."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.webapp}/ws/v1/cluster/{path}", data=data, method=method,
                                         headers={"Accept": "application/json", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")

    def app(self, app_id: str) -> dict:
        """The ResourceManager's report of an application (``state``, ``finalStatus``, ``diagnostics``...)."""
        return self.rest(f"apps/{app_id}")["app"]

    def apps(self, name: str | None = None) -> list[dict]:
        """Every application the ResourceManager knows (of that name)."""
        apps = (self.rest("apps").get("apps") or {}).get("app") or []
        return [a for a in apps if name is None or a["name"] == name]

    def kill(self, app_id: str) -> None:
        """Kill an application (its containers are stopped by the NodeManager, its ApplicationMaster's first)."""
        self.rest(f"apps/{app_id}/state", method="PUT", body={"state": "KILLED"})

    def kill_container(self, container_id: str) -> None:
        """Stop one container through the ResourceManager (its NodeManager kills the process group: a lost
        ApplicationMaster, when it is one; YARN then starts the application's next attempt, if any)."""
        url = f"{self.webapp}/ws/v1/cluster/containers/{container_id}/signal/FORCEFUL_SHUTDOWN"
        request = urllib.request.Request(url, method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:  # answers "signal success", not JSON
            response.read()

    def wait_for_app(self, app_id: str, states: tuple[str, ...] = ("FINISHED", "FAILED", "KILLED"),
                     timeout_s: float = 300.0) -> dict:
        """The application's report once it is in one of ``states``."""
        deadline = time.monotonic() + timeout_s
        while True:
            report = self.app(app_id)
            if report["state"] in states:
                return report
            assert time.monotonic() < deadline, f"{app_id} still {report['state']} after {timeout_s:g}s"
            time.sleep(0.5)

    # ------------------------------------------------------------------ containers' logs (on this machine)
    def container_logs(self, app_id: str) -> dict[str, dict[str, str]]:
        """Per container of the application, its log files (``stdout``, ``stderr``...) and their text, from the
        NodeManager's log directory."""
        logs: dict[str, dict[str, str]] = {}
        for app_dir in (self.state_dir / "target").rglob(app_id):
            if "-logDir-" not in str(app_dir):
                continue
            for container in sorted(p for p in app_dir.iterdir() if p.is_dir()):
                logs[container.name] = {f.name: f.read_text(errors="replace") for f in container.iterdir()
                                        if f.is_file()}
        return logs

    # ------------------------------------------------------------------ Spark on it
    def spark_conf(self, deploy_mode: str = "client") -> dict[str, str]:
        """A Spark application's settings on this cluster: one executor, small containers, this machine's Python,
        the wheel's jars as ``local:`` files, the suite's JVM options in every container; in client mode the
        driver (here) is reached at 127.0.0.1."""
        java_options = os.environ.get("JAVA_TOOL_OPTIONS", "")
        conf = {
            "spark.yarn.jars": f"local:{spark_home() / 'jars'}/*",
            "spark.pyspark.python": sys.executable,
            "spark.executor.instances": "1",
            "spark.executor.cores": "1",
            "spark.executor.memory": "512m",
            "spark.driver.memory": "512m",
            "spark.yarn.am.memory": "512m",
            "spark.yarn.maxAppAttempts": "1",  # a killed ApplicationMaster is not started again
            "spark.ui.enabled": "false",
            "spark.sql.execution.pythonUDF.arrow.enabled": "false",  # no pyarrow needed in the containers
        }
        if deploy_mode == "client":
            conf["spark.driver.host"] = "127.0.0.1"
        if java_options:
            conf.update({"spark.executorEnv.JAVA_TOOL_OPTIONS": java_options,
                         "spark.yarn.appMasterEnv.JAVA_TOOL_OPTIONS": java_options})
        return conf

    def client_env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a Spark client of this cluster (a driver in client mode, ``spark-submit``)."""
        from .helpers import SRC

        return {**os.environ, "HADOOP_CONF_DIR": str(self.conf_dir), "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable,  # the executors' Python in client mode
                "PYTHONPATH": os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")])), **(extra or {})}


def main() -> None:
    """Start a local HDFS and YARN until Ctrl-C (python3 -m tests.support.yarn [STATE_DIR])."""
    import tempfile

    from . import hdfs

    state = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="tableswap-yarn-"))
    dfs = hdfs.MiniHdfs(state / "hdfs", hdfs.resolve()).start()
    server = MiniYarn(state / "yarn", resolve(), dfs)
    try:
        server.start()
        print(f"HDFS at {dfs.url}, YARN at {server.webapp} (started in {server.startup_seconds}s)\n"
              f"export HADOOP_CONF_DIR={server.conf_dir}", flush=True)
        server.serve_until_interrupted()
    except KeyboardInterrupt:  # during the start
        pass
    finally:
        server.stop()
        dfs.stop()


if __name__ == "__main__":
    main()
