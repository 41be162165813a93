"""The few SparkSession features tableswap uses, for classic and Spark Connect sessions alike.

tableswap only talks to Spark through the public DataFrame/Catalog/RuntimeConfig API, which both a
classic session (a JVM in this process) and a Spark Connect session (a thin gRPC client; the JVM is
the Connect server) implement. Nothing here touches ``_jvm``, ``_jsparkSession`` or the
SparkContext unconditionally (:func:`needs_refresh` asks a classic session's cache manager, and refreshes when
it cannot), and nothing imports ``pyspark.sql.connect`` (its gRPC and pandas
dependencies are optional): a session is recognised by duck typing.

Two things differ and are handled here:

* a Connect session has no ``sparkContext`` (the application id comes from ``spark.app.id``);
* column objects from :mod:`pyspark.sql.functions` follow the *process's* mode, not the
  DataFrame's (a process holding both a classic and a Connect session would build the wrong kind),
  so columns are always taken from the DataFrame itself (``df["`name`"]``).

Storage is read from this process (the staging directory walk, the janitor): with Spark Connect
the client must be able to reach the table's storage too (same file system, or object-store
credentials on both sides).
"""

from __future__ import annotations

import os
import re
from typing import Any

from tableswap import errors
from tableswap.core.eligibility import catalog_refusal


def is_connect(spark: Any) -> bool:
    """True for a Spark Connect session (the class lives in ``pyspark.sql.connect``)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def session_of(df: Any) -> Any:
    """The SparkSession a DataFrame belongs to (classic or Connect)."""
    spark = getattr(df, "sparkSession", None)
    if spark is None or not hasattr(df, "write") or not hasattr(df, "schema"):
        from tableswap.errors import InvalidInputError

        raise InvalidInputError(
            "df must be a Spark DataFrame: expected a pyspark DataFrame (classic or Spark Connect), got "
            f"{type(df).__module__}.{type(df).__name__}; for pandas data use spark.createDataFrame(...) first"
        )
    return spark


def active_session() -> Any:
    """This thread's active SparkSession, if pyspark is already loaded and one is active; else None
    (pyspark is never imported here just to look)."""
    import sys

    module = sys.modules.get("pyspark.sql")
    if module is None:
        return None
    try:
        return module.SparkSession.getActiveSession()
    except Exception:  # noqa: BLE001 - a stopped JVM, a Connect-only install, ...
        return None


def conf_get(spark: Any, key: str, default: str | None = None) -> str | None:
    """A Spark configuration value (runtime conf, falling back to the static SparkConf); ``default``
    when unset or when the session cannot answer (stopped, unreachable Connect server)."""
    if spark is None:
        return default
    try:
        value = spark.conf.get(key, default)
    except Exception:  # noqa: BLE001 - a stopped session, a Connect RPC error, ...
        return default
    return default if value is None else str(value)


def submitted_with_master() -> bool:
    """Whether this Python process runs under spark-submit (its Python runner hands the process the gateway
    of the JVM it started, with ``--master`` and ``--conf`` applied) or pyspark's launcher is given a
    ``--master`` (``PYSPARK_SUBMIT_ARGS``): then a new session takes its master from there."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT")) or "--master" in os.environ.get("PYSPARK_SUBMIT_ARGS", "")


def app_id(spark: Any) -> str | None:
    """The Spark application id (for the journal): ``sparkContext`` on classic, ``spark.app.id``
    from the server's configuration on Connect."""
    if not is_connect(spark):
        try:
            return spark.sparkContext.applicationId
        except Exception:  # noqa: BLE001 - fall back to the configuration
            pass
    return conf_get(spark, "spark.app.id")


def needs_refresh(spark: Any, *, table_location_changed: bool) -> bool:
    """Whether ``spark`` must refresh its cache of a table the catalog just changed under it (Spark's
    ``refreshTable``: a Hive Metastore lookup and an analysis, 30-40 ms, on the caller's path).

    False only where nothing of the session can be stale: the table's location is unchanged (partitions were
    added, repointed or dropped: Spark lists a partitioned table's partitions from the metastore for every query
    when it manages them there, ``spark.sql.hive.manageFilesourcePartitions``, the default, and a repointed
    partition's new directory was never listed before), and a classic session's cache of data
    (``CACHE TABLE``, ``DataFrame.cache()``, shared by the sessions of one application) holds nothing at all. A
    changed table location (its relation, cached, names it), a Spark Connect session (its cache is the
    server's) or one that cannot say: True."""
    if table_location_changed or is_connect(spark):
        return True
    if (conf_get(spark, "spark.sql.hive.manageFilesourcePartitions", "true") or "").lower() == "false":
        return True  # partitions listed once and kept with the cached relation
    try:
        return not bool(spark._jsparkSession.sharedState().cacheManager().isEmpty())
    except Exception:  # noqa: BLE001 - a session that cannot say: refresh, as before
        return True


def column(df: Any, name: str) -> Any:
    """The column ``name`` of ``df``, of the DataFrame's own kind (classic or Connect)."""
    return df["`" + name.replace("`", "``") + "`"]


def literal(spark: Any, value: str | None, type_name: str) -> Any:
    """A nullable column holding ``value`` (``None``: NULL) cast to ``type_name`` (a Spark DDL type such
    as ``date``), of the session's own kind (classic or Connect).

    Built from column objects, never from SQL text: Spark substitutes ``${...}`` (``${env:HOME}``,
    ``${system:...}``, any conf) in SQL text it parses, so data must never be spliced into an expression
    string. ``nullif(lit(v), NULL)`` keeps the column nullable, as a table's partition columns are."""
    lit: Any  # the Connect or the classic function (their declared types differ)
    nullif: Any
    if is_connect(spark):
        from pyspark.sql.connect import functions as cf  # present whenever a Connect session exists

        lit, nullif = cf.lit, cf.nullif
    else:
        from pyspark.sql import functions as f

        # The classic implementations: the public ones dispatch on the *process's* mode (see above).
        lit, nullif = (getattr(fn, "__wrapped__", fn) for fn in (f.lit, f.nullif))
    col = lit(None) if value is None else nullif(lit(value), lit(None))
    return col.cast(type_name)


_JAVA_EXCEPTION = re.compile(r"^(?:Caused by: )?(?:[\w$]+\.)+[\w$]*(?:Exception|Error)\b.*")


def java_cause(text: str, limit: int = 600) -> str | None:
    """The innermost Java exception line of a Py4J error's text (``Caused by: ...``), e.g. the S3 client's
    ``NoSuchBucketException`` under Spark's ``o112.save``; None when there is none."""
    found = [m.group(0) for m in map(_JAVA_EXCEPTION.match, (ln.strip() for ln in text.splitlines())) if m]
    if not found:
        return None
    cause = found[-1].removeprefix("Caused by: ")
    return cause if len(cause) <= limit else cause[:limit] + "..."


def require_hive_catalog(spark: Any) -> None:
    """Refuse a session without Hive support, or one whose metastore client reads another catalog."""
    impl = conf_get(spark, "spark.sql.catalogImplementation", "hive")
    if impl != "hive":
        where = "the Spark Connect server" if is_connect(spark) else "the SparkSession"
        raise errors.ConfigurationError(
            f"{where} has no Hive support (spark.sql.catalogImplementation="
            f"{impl}); build it with SparkSession.builder.enableHiveSupport() (Spark Connect: start the server "
            "with --conf spark.sql.catalogImplementation=hive) and spark.hadoop.hive.metastore.uris pointing at "
            "your metastore"
        )

    def conf(key: str) -> str | None:
        try:
            return spark.conf.get(key, None)
        except Exception:  # noqa: BLE001 - a setting the session cannot read counts as unset
            return None

    refusal = catalog_refusal(conf)
    if refusal is not None:
        raise errors.ConfigurationError(refusal)
