"""The development metastore's configuration files: ``hive-site.xml`` (2.3) and
``metastore-site.xml`` (3.1/4.x), rendered from the package's templates, and the server's Java
options. Pure text: no processes, no files written (see :mod:`.launcher`)."""

from __future__ import annotations

import importlib.resources
import string
from pathlib import Path
from xml.sax.saxutils import escape as _xml_escape

from tableswap.devmetastore.backend import (
    Backend,
    DerbyBackend,
    DevMetastoreError,
    JdbcDriver,
    MySQLBackend,
    PostgresBackend,
)
from tableswap.devmetastore.releases import Distribution, HiveRelease
from tableswap.jvm.jars import S3Access

PACKAGE = "tableswap.devmetastore"
HIVE_SITE_TEMPLATE = "hive-site.xml.template"
METASTORE_SITE_TEMPLATE = "metastore-site.xml.template"
LOG4J2_PROPERTIES = "metastore-log4j2.properties"
#: The defaults of ``metastore.task.threads.always`` in 3.1.x and 4.0.x (MetastoreConf). Only those
#: the release's jars hold are configured: HiveProtoEventsCleanerTask (4.x) and DumpDirCleanerTask
#: (3.1) live in hive-exec, not in the standalone release; with them, 4.0.1 logs "class not found"
#: and starts none of these tasks, 3.1.3 does not start at all.
_ALWAYS_TASKS = (
    "org.apache.hadoop.hive.metastore.events.EventCleanerTask",
    "org.apache.hadoop.hive.metastore.RuntimeStatsCleanerTask",
    "org.apache.hadoop.hive.metastore.repl.DumpDirCleanerTask",
    "org.apache.hadoop.hive.metastore.metrics.AcidMetricService",
    "org.apache.hadoop.hive.metastore.metrics.AcidMetricLogger",
    "org.apache.hadoop.hive.metastore.HiveProtoEventsCleanerTask",
    "org.apache.hadoop.hive.metastore.ScheduledQueryExecutionsMaintTask",
    "org.apache.hadoop.hive.metastore.ReplicationMetricsMaintTask",
)
#: The task that deletes locks whose holder stopped heartbeating (and times out transactions).
_LOCK_REAPER_TASK = "org.apache.hadoop.hive.metastore.txn.AcidHouseKeeperService"
#: Writes the notification log; in the cache of 3.1.x releases (see releases._listener_dep).
_NOTIFICATION_LISTENER = "org.apache.hive.hcatalog.listener.DbNotificationListener"
JAVA_OPTIONS = "java-options.txt"

#: How often the 2.3 timed-out txn/lock reaper runs (seconds).  An abandoned lock disappears
#: between ``lock_timeout`` and ``lock_timeout + REAPER_INTERVAL_SECONDS`` after its last
#: heartbeat.
REAPER_INTERVAL_SECONDS = 5



def read_resource(name: str) -> str:
    return importlib.resources.files(PACKAGE).joinpath(name).read_text(encoding="utf-8")


def java_options() -> list[str]:
    """The server's JVM options from the package's ``java-options.txt`` (comments dropped)."""
    return [line.strip() for line in read_resource(JAVA_OPTIONS).splitlines()
            if line.strip() and not line.strip().startswith("#")]


def properties_block(comment: str, properties: list[tuple[str, str]]) -> str:
    block = [f"  <!-- {_xml_escape(comment).replace('--', '- -')} -->"]
    for name, value in properties:
        block.append(f"  <property>\n    <name>{_xml_escape(name)}</name>\n"
                     f"    <value>{_xml_escape(value)}</value>\n  </property>")
    return "\n".join(block)


def backend_block(backend: Backend, derby_dir: Path, s3: S3Access | None, *, connection_only: bool,
                  driver: JdbcDriver | None = None) -> str:
    """The backing database's ``<property>`` block: the JDBC connection alone (3.1/4.x, whose
    schematool creates the schema) or with the 2.3 schema settings; with S3A's settings when ``s3``.
    A MySQL backend (3.1/4.x only) is addressed through ``driver``."""
    if isinstance(backend, MySQLBackend):
        if driver is None:
            raise DevMetastoreError("a MySQL-backed metastore needs its JDBC driver")  # pragma: no cover
        properties = backend.connection_properties(driver)
        comment = f"Backing database: MySQL/MariaDB, {backend.describe()}, through {driver.driver_class}"
    elif isinstance(backend, PostgresBackend):
        properties = backend.connection_properties() if connection_only else backend.properties()
        comment = f"Backing database: PostgreSQL, {backend.describe()}"
    else:
        derby = DerbyBackend()
        properties = derby.connection_properties(derby_dir) if connection_only else derby.properties(derby_dir)
        comment = "Backing database: embedded Derby inside the state directory"
    if s3 is not None:
        properties = [*properties, *s3.hadoop_properties().items()]
        comment += "; s3a:// locations through S3A"
    return properties_block(comment, properties)


def render_metastore_site(*, release: HiveRelease, distribution: Distribution, warehouse_dir: Path, host: str,
                          lock_timeout: int, backend_properties: str, warehouse_uri: str | None = None) -> str:
    """The ``metastore-site.xml`` text of a 3.1/4.x release (``warehouse_uri``: the warehouse when it is not
    ``warehouse_dir``, e.g. on the local HDFS)."""
    template = string.Template(read_resource(METASTORE_SITE_TEMPLATE))
    values = {
        "hive_version": release.version,
        "warehouse_uri": warehouse_uri or "file://" + warehouse_dir.as_posix(),
        "bind_host": host,
        "lock_timeout": str(lock_timeout),
        "reaper_interval": str(REAPER_INTERVAL_SECONDS),
    }
    extra: list[tuple[str, str]] = []
    if release.major == 3:
        # 3.1's default (metastore.expression.proxy) is PartitionExpressionForMetastore, which lives
        # in hive-exec: without this the server does not start ("Error loading PartitionExpressionProxy").
        extra.append(("metastore.expression.proxy", "org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy"))
    always = [c for c in _ALWAYS_TASKS if distribution.has_class(c)]
    if release.major == 3:
        # 3.1 starts its lock reaper (AcidHouseKeeperService, a "remote only" task) only after the
        # compactor Initiator, a hive-exec class: without hive-exec no abandoned lock ever expires.
        # As an always-on task it runs every metastore.timedout.txn.reaper.interval.
        always.append(_LOCK_REAPER_TASK)
    extra.append(("metastore.task.threads.always", ",".join(always)))
    if distribution.has_class(_NOTIFICATION_LISTENER):
        # The notification log (NOTIFICATION_LOG), which replication and cache-invalidation tools read.
        extra.append(("metastore.transactional.event.listeners", _NOTIFICATION_LISTENER))
    try:
        escaped = {k: _xml_escape(v) for k, v in values.items()}
        return template.substitute(
            escaped, backend_properties=backend_properties,
            extra_properties=properties_block(
                "What the release's defaults name but only hive-exec (not the standalone release) holds", extra))
    except (KeyError, ValueError) as exc:  # pragma: no cover - packaging error
        raise DevMetastoreError(f"broken {METASTORE_SITE_TEMPLATE} template: {exc}") from exc


def render_hive_site(*, warehouse_dir: Path, lock_timeout: int, backend_properties: str,
                     warehouse_uri: str | None = None) -> str:
    """The ``hive-site.xml`` text of the 2.3 server (``warehouse_uri``: as for :func:`render_metastore_site`)."""
    template = string.Template(read_resource(HIVE_SITE_TEMPLATE))
    values = {
        "warehouse_uri": warehouse_uri or "file://" + warehouse_dir.as_posix(),
        "lock_timeout": str(lock_timeout),
        "reaper_interval": str(REAPER_INTERVAL_SECONDS),
    }
    try:
        escaped = {k: _xml_escape(v) for k, v in values.items()}
        return template.substitute(escaped, backend_properties=backend_properties)
    except (KeyError, ValueError) as exc:  # pragma: no cover - packaging error
        raise DevMetastoreError(f"broken {HIVE_SITE_TEMPLATE} template: {exc}") from exc
