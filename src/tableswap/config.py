"""Settings: keyword arguments win over environment variables, which win over Spark's configuration."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from .errors import ConfigurationError

ENV_METASTORE_URI = "TABLESWAP_METASTORE_URI"
ENV_JOURNAL_URL = "TABLESWAP_JOURNAL_URL"
SPARK_METASTORE_KEYS = ("spark.hadoop.hive.metastore.uris", "hive.metastore.uris")


@dataclass(frozen=True)
class Settings:
    metastore_uri: str
    journal_url: str | None = None  # None: the default SQLite file (see journal.default_url)
    lock_timeout_s: float = 300.0  # how long to wait for another swap's table lock
    heartbeat_s: float = 20.0  # lock heartbeat interval; keep well below hive.txn.timeout
    metastore_timeout_s: float = 300.0  # socket timeout of one metastore call
    connect_attempts: int = 4  # tries for a metastore read before it is reported unreachable
    write_batch_size: int = 10_000  # partitions per add_partitions / alter_partitions call


def spark_metastore_uri(spark: Any) -> str | None:
    from .sparkapi import conf_get

    for key in SPARK_METASTORE_KEYS:
        value = conf_get(spark, key)
        if value:
            return value
    return None


def resolve(
    *,
    spark: Any = None,
    metastore_uri: str | None = None,
    journal_url: str | None = None,
    **options: Any,
) -> Settings:
    uri = metastore_uri or os.environ.get(ENV_METASTORE_URI) or spark_metastore_uri(spark)
    if not uri:
        raise ConfigurationError(
            "no Hive Metastore configured: pass metastore_uri=..., set "
            f"{ENV_METASTORE_URI}=thrift://HOST:PORT, or configure the SparkSession with "
            "spark.hadoop.hive.metastore.uris (for a local one: `tableswap metastore start`)"
        )
    unknown = set(options) - set(Settings.__dataclass_fields__)
    if unknown:
        raise ConfigurationError(f"unknown tableswap option(s): {', '.join(sorted(unknown))}")
    return Settings(
        metastore_uri=uri,
        journal_url=journal_url or os.environ.get(ENV_JOURNAL_URL) or None,
        **{k: v for k, v in options.items() if v is not None},
    )
