"""``tableswap metastore start|stop|status``: a local development Hive Metastore.

The group is registered on the main ``tableswap`` CLI group; it can also be used alone::

    from tableswap.cli.metastore import metastore
    main.add_command(metastore)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import click

from tableswap.devmetastore import DevMetastore, MetastoreStatus

from tableswap.cli.common import EXIT_FAILURE, handle_errors
from tableswap.cli.output import Output, output_option
from tableswap.cli.jars import s3_access, s3_access_options

#: Exit code of ``tableswap metastore status`` when the metastore is not running: the common
#: "failure" (3 means "not found" everywhere else).
EXIT_NOT_RUNNING = EXIT_FAILURE


def readiness_probe() -> Callable[[str], None] | None:
    """Hook: the check ``metastore start`` runs before it reports the server as ready.

    Return a callable taking the ``thrift://`` URI that raises while the metastore cannot
    yet answer a real Thrift call (it is retried until the start timeout), or ``None`` to
    only wait for the TCP port to accept connections.  It is the metastore adapter's ping.
    """
    from tableswap.metastore.client import probe

    return probe


_STATE_DIR_OPTION = click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory holding the metastore's Derby database, warehouse, config, log and pid "
    "file.  Default: $TABLESWAP_STATE_DIR/metastore, else "
    "$XDG_STATE_HOME/tableswap/metastore, else ~/.local/state/tableswap/metastore.",
)
#: ``--json``: one line, sorted keys (the other commands indent theirs, in the document's order).
_JSON_OPTION = output_option(help="Print one JSON object instead of text.", indent=None, sort_keys=True)


@click.group("metastore")
def metastore() -> None:
    """Run a local development Hive Metastore (no Docker, no cluster).

    It is the Hive 2.3 metastore shipped inside the pyspark wheel (default) or a standalone
    Hive Metastore 3.1.x / 4.x release (--hive-version, fetched once with Maven into a cache),
    backed by an embedded Derby database (default) or a PostgreSQL database (--db), running
    as a background Java 17 process.

    \b
    Example:
      tableswap metastore start
      eval "$(tableswap metastore start | grep ^export)"
      tableswap metastore status
      tableswap metastore stop
      tableswap metastore start --db postgresql://hive@127.0.0.1:5432/metastore
      tableswap metastore start --hive-version 4.0.1 --state-dir /tmp/hms4
    """


@metastore.command("start")
@click.option("--port", type=click.IntRange(1, 65535), default=None,
              help="Port to listen on.  Default: the port used last time, else a free one.")
@_STATE_DIR_OPTION
@click.option("--lock-timeout", "lock_timeout", type=click.IntRange(min=3), default=120,
              show_default=True, metavar="SECONDS",
              help="Seconds without heartbeat after which the metastore drops an abandoned "
              "lock (hive.txn.timeout); at least 3: a swap heartbeats its lock at most every second and "
              "at least three times per timeout (a heartbeat_s above a third of it is lowered).")
@click.option("--db", "db", metavar="URL", default=None, envvar="TABLESWAP_METASTORE_DB",
              help="Backing database: 'derby' (embedded, inside the state directory), "
              "postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME (an existing database; password "
              "also from $PGPASSWORD) or, with --hive-version 3.1.x/4.x, "
              "mysql://USER:PASSWORD@HOST[:PORT]/DBNAME (MySQL or MariaDB; password also from $MYSQL_PWD).  "
              "Env: TABLESWAP_METASTORE_DB.  Default: the database this state directory used last, else derby.")
@click.option("--jdbc-driver", "jdbc_driver", default=None, metavar="JAR",
              type=click.Path(dir_okay=False, path_type=Path), envvar="TABLESWAP_PG_JDBC_JAR",
              help="JDBC driver jar of the --db database.  Env: TABLESWAP_PG_JDBC_JAR (PostgreSQL), "
              "TABLESWAP_MYSQL_JDBC_JAR (MySQL/MariaDB).  Default: /usr/share/java/postgresql.jar "
              "(Debian/Ubuntu: apt-get install libpostgresql-jdbc-java), "
              "/usr/share/java/mariadb-java-client.jar (apt-get install libmariadb-java) or the other "
              "places listed in docs/cli.md.")
@click.option("--with-s3", "with_s3", is_flag=True,
              help="Accept s3a:// table and partition locations: put the S3A jars on the server's classpath "
              "(resolved with Maven on first use, see `tableswap jars s3`) and the --s3-* settings into its "
              "hive-site.xml.")
@s3_access_options
@click.option("--with-hdfs", "with_hdfs", is_flag=True,
              help="Start a local HDFS beside it (a NameNode and a DataNode on 127.0.0.1: Hadoop's MiniDFSCluster of "
              "the pyspark wheel's Hadoop release, resolved with Maven on first use, about 100 MB) and put the "
              "warehouse on it; prints its `export HADOOP_CONF_DIR=...`. Its data lives while it runs; `stop` stops "
              "it. See docs/hdfs.md.")
@click.option("--hive-version", "hive_version", metavar="VERSION", default=None,
              envvar="TABLESWAP_METASTORE_HIVE_VERSION",
              help="Server release: 2.3 (the one inside the pyspark wheel), 3.1.x or 4.x (e.g. 4.0.1: "
              "resolved by Maven coordinates the first time, into $TABLESWAP_HMS_CACHE, else "
              "$TABLESWAP_STATE_DIR/hive-metastore, else ~/.cache/tableswap/hive-metastore; needs `mvn` once, "
              "then works offline).  Env: "
              "TABLESWAP_METASTORE_HIVE_VERSION.  Default: the release this state directory holds, "
              "else 2.3.  See docs/metastores.md.")
@click.option("--timeout", "wait_timeout", type=click.FloatRange(min=1), default=180.0,
              show_default=True, metavar="SECONDS",
              help="How long to wait for the metastore to become ready.")
@_JSON_OPTION
@handle_errors
def start_command(port: int | None, state_dir: Path | None, lock_timeout: int, db: str | None,
                  jdbc_driver: Path | None, with_s3: bool, s3_endpoint: str | None, s3_access_key: str | None,
                  s3_secret_key: str | None, s3_path_style: bool, s3_region: str | None, jars_dir: Path | None,
                  with_hdfs: bool, hive_version: str | None, wait_timeout: float,
                  out: Output) -> None:
    """Start the development metastore in the background (no-op if it is running).

    Prints the metastore URI and an `export TABLESWAP_METASTORE_URI=...` line.  The first
    start creates the metastore's tables (in Derby, or in the PostgreSQL database given with
    --db) and takes a few seconds longer.

    \b
    Example:
      tableswap metastore start --port 9083 --lock-timeout 60
      export TABLESWAP_METASTORE_URI=thrift://127.0.0.1:9083
      createdb -h 127.0.0.1 -U postgres hms && \\
        tableswap metastore start --db postgresql://postgres@127.0.0.1:5432/hms
      tableswap metastore start --with-s3 --s3-endpoint http://127.0.0.1:9000 \\
        --s3-path-style --s3-access-key KEY --s3-secret-key SECRET
      eval "$(tableswap metastore start --with-hdfs | grep ^export)"
    """
    s3 = s3_access(s3_endpoint, s3_access_key, s3_secret_key, s3_path_style, s3_region) if with_s3 else None
    dev = DevMetastore(state_dir=state_dir, port=port, lock_timeout_seconds=lock_timeout,
                       db=db, jdbc_driver=jdbc_driver, s3=s3, jars_dir=jars_dir,
                       hive_version=hive_version, hdfs=with_hdfs)
    already_running = dev.status().running
    began = time.monotonic()
    status = dev.start(wait_timeout=wait_timeout, probe=readiness_probe())
    elapsed = time.monotonic() - began
    out.result(lambda: {**status.to_dict(), "already_running": already_running,
                        "startup_seconds": None if already_running else round(elapsed, 1)},
               lambda: "\n".join(["Development metastore already running." if already_running
                                  else f"Development metastore started in {elapsed:.1f}s.",
                                  *_status_lines(status), f"export TABLESWAP_METASTORE_URI={status.uri}",
                                  *([f"export HADOOP_CONF_DIR={status.hadoop_conf_dir}"] if status.hadoop_conf_dir
                                    else [])]))


@metastore.command("stop")
@_STATE_DIR_OPTION
@_JSON_OPTION
@handle_errors
def stop_command(state_dir: Path | None, out: Output) -> None:
    """Stop the development metastore (its data stays in the state directory), and its local HDFS (--with-hdfs).

    \b
    Example:
      tableswap metastore stop
      tableswap metastore stop --state-dir /tmp/my-metastore --json
    """
    dev = DevMetastore(state_dir=state_dir)
    stopped = dev.stop()
    status = dev.status()
    out.result(lambda: {**status.to_dict(), "stopped": stopped},
               "Development metastore stopped." if stopped else "Development metastore was not running.")


@metastore.command("status")
@_STATE_DIR_OPTION
@_JSON_OPTION
@handle_errors
def status_command(state_dir: Path | None, out: Output) -> None:
    """Show whether the development metastore runs; exit code 1 if it does not.

    \b
    Example:
      tableswap metastore status || tableswap metastore start
      tableswap metastore status --json
    """
    status = DevMetastore(state_dir=state_dir).status()
    out.result(status.to_dict, lambda: "\n".join(_status_lines(status)))
    if not status.running:
        raise SystemExit(EXIT_NOT_RUNNING)


def _status_lines(status: MetastoreStatus) -> list[str]:
    rows: list[tuple[str, object]] = [("metastore", "running" if status.running else "not running")]
    if status.running:
        rows += [("uri", status.uri), ("pid", status.pid)]
    elif status.port is not None:
        rows.append(("port", f"{status.port} (last used)"))
    rows += [
        ("hive", status.hive_version),
        ("database", status.backend),
        ("state dir", status.state_dir),
        ("log", status.log_file),
        ("warehouse", status.warehouse_uri or status.warehouse_dir),
    ]
    if status.hdfs_url:
        rows.insert(-1, ("hdfs", f"{status.hdfs_url} (HADOOP_CONF_DIR {status.hadoop_conf_dir})"))
    return [f"{name + ':':<11}{value}" for name, value in rows]
