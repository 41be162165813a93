"""``tableswap jars s3``: resolve the S3A jars matching the installed pyspark and print the Spark conf."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import click

from ..jvm.jars import ENV_JARS_DIR, S3Access, resolve_s3_jars, s3a_spark_conf
from .common import handle_errors, json_option
from .output import Output

EPILOG = """\b
Examples:
  tableswap jars s3
  tableswap jars s3 --s3-endpoint http://127.0.0.1:9000 --s3-path-style > s3a.conf
  pyspark $(tableswap jars s3 --format spark-submit)
  tableswap jars s3 --offline --json | jq -r '.conf["spark.jars"]'
"""


def s3_access_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--s3-endpoint, --s3-access-key, --s3-secret-key, --s3-path-style, --s3-region, --jars-dir."""
    options = [
        click.option("--s3-endpoint", metavar="URL", default=None,
                     help="S3 endpoint of an S3-compatible store, e.g. http://127.0.0.1:9000 (default: AWS)."),
        click.option("--s3-access-key", metavar="KEY", default=None, envvar="TABLESWAP_S3_ACCESS_KEY",
                     help="Access key (env TABLESWAP_S3_ACCESS_KEY; default: S3A's own credential chain)."),
        click.option("--s3-secret-key", metavar="SECRET", default=None, envvar="TABLESWAP_S3_SECRET_KEY",
                     help="Secret key (env TABLESWAP_S3_SECRET_KEY)."),
        click.option("--s3-path-style", is_flag=True,
                     help="Path-style requests (http://host/bucket/key), as most S3-compatible servers need."),
        click.option("--s3-region", metavar="REGION", default=None, help="The endpoint's region."),
        click.option("--jars-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help=f"Cache of resolved jars (else env {ENV_JARS_DIR}, else $TABLESWAP_STATE_DIR/jars, "
                          "else ~/.cache/tableswap/jars)."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def s3_access(endpoint: str | None, access_key: str | None, secret_key: str | None, path_style: bool,
              region: str | None) -> S3Access:
    access = S3Access(endpoint=endpoint, access_key=access_key, secret_key=secret_key, path_style=path_style,
                      region=region)
    access.hadoop_properties()  # both keys or neither: say so now
    return access


@click.group("jars")
def jars() -> None:
    """JVM parts Spark and the development metastore need for object stores."""


@jars.command("s3", epilog=EPILOG)
@s3_access_options
@click.option("--committer", type=click.Choice(["magic", "file"]), default="magic", show_default=True,
              help="magic: the S3A magic committer (no copy at commit); file: Hadoop's default committer, "
                   "which copies each file at task and job commit.")
@click.option("--offline", is_flag=True, help="Never reach the network: use the cache or Maven's local repository.")
@click.option("--mvn", default=None, metavar="PATH",
              help="The Maven executable (default: env TABLESWAP_MVN, else mvn on PATH).")
@click.option("--format", "fmt", type=click.Choice(["properties", "spark-submit"]), default="properties",
              show_default=True, help="properties: key=value lines (spark-defaults.conf takes them with a space); "
                                      "spark-submit: --conf key=value arguments.")
@json_option
@handle_errors
def s3_command(s3_endpoint: str | None, s3_access_key: str | None, s3_secret_key: str | None, s3_path_style: bool,
               s3_region: str | None, jars_dir: Path | None, committer: str, offline: bool, mvn: str | None,
               fmt: str, out: Output) -> None:
    """Resolve the S3A jars matching the installed pyspark; print the Spark conf to add.

    \b
    Resolved by Maven coordinates (Maven's own repositories and settings):
      org.apache.hadoop:hadoop-aws:<the wheel's Hadoop version> with the AWS SDK
      bundle it declares, and org.apache.spark:spark-hadoop-cloud_<scala> of the
      wheel's Spark version (else the newest published one of that major version).
    The first run downloads them (Maven needed, ~600 MB, mostly the AWS SDK bundle)
    into the cache; later runs reuse it offline and need no Maven.
    """
    access = s3_access(s3_endpoint, s3_access_key, s3_secret_key, s3_path_style, s3_region)
    resolved = resolve_s3_jars(jars_dir, offline=offline, mvn=mvn)
    conf = s3a_spark_conf(resolved, access, committer=committer)
    lines = [f"--conf {key}={value}" if fmt == "spark-submit" else f"{key}={value}" for key, value in conf.items()]
    out.result({"ok": True, **resolved.to_dict(), "conf": conf}, "\n".join(lines) if lines else None)


def register(main: click.Group) -> None:
    main.add_command(jars)
