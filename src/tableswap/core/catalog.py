"""Plain, frozen descriptions of catalog objects (tables, partitions, locks): the vocabulary the metastore
adapter returns and the layers above it speak. Pure; no Thrift type ever leaves the adapter."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from tableswap.core import partitions as pn

EXTERNAL_TABLE = "EXTERNAL_TABLE"
MANAGED_TABLE = "MANAGED_TABLE"
VIRTUAL_VIEW = "VIRTUAL_VIEW"
MATERIALIZED_VIEW = "MATERIALIZED_VIEW"

# Parameters tableswap writes on the objects it flips.
SWAP_ID_PARAM = "tableswap.swap_id"
ROOT_PARAM = "tableswap.root"
TEMP_FOR_PARAM = "tableswap.temp_for"
TEMP_CREATED_PARAM = "tableswap.created_at"

# Hive 4 (and HDP/CDP 3.x) mark a MANAGED table translated to EXTERNAL with these; purge: a drop deletes data.
PURGE_PARAM = "external.table.purge"
TRANSLATED_PARAM = "TRANSLATED_TO_EXTERNAL"

# Statistics that describe the files of one location; they go stale when the location changes.
STATS_PARAMS = frozenset(
    {"numFiles", "totalSize", "numRows", "rawDataSize", "COLUMN_STATS_ACCURATE", "numFilesErasureCoded"}
)
FAST_STATS_PARAMS = ("numFiles", "totalSize", "numFilesErasureCoded")  # the last: Hive 3+, where known
SPARK_STATS_PREFIX = "spark.sql.statistics."  # Spark's own copies (sizes, row counts, column stats)


def is_stats_param(key: str) -> bool:
    """Statistics of one location's files, Hive's or Spark's: stale once the location changes."""
    return key in STATS_PARAMS or key.startswith(SPARK_STATS_PREFIX)


def _frozen(mapping: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class Column:
    name: str
    type: str


@dataclass(frozen=True)
class BucketSpec:
    """How a table's files are bucketed: ``num_buckets`` files per partition (at most, per writer
    task), rows placed by a hash of ``columns``, each file sorted by ``sort_columns``. ``hive``:
    Hive bucketing (Hive's hash, ``00000_0``-style names) rather than Spark datasource bucketing
    (Murmur3, ``_00000`` bucket ids in the names)."""

    num_buckets: int
    columns: tuple[str, ...]
    sort_columns: tuple[str, ...]
    hive: bool

    def describe(self) -> str:
        sort = f" SORTED BY ({', '.join(self.sort_columns)})" if self.sort_columns else ""
        kind = "Hive" if self.hive else "Spark datasource"
        return f"CLUSTERED BY ({', '.join(self.columns)}){sort} INTO {self.num_buckets} BUCKETS ({kind} bucketing)"


@dataclass(frozen=True)
class TableInfo:
    db: str
    name: str
    table_type: str
    location: str | None
    columns: tuple[Column, ...]
    partition_keys: tuple[Column, ...]
    parameters: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    serde_parameters: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    serde_lib: str | None = None
    input_format: str | None = None
    output_format: str | None = None
    #: Hive bucketing from the storage descriptor (a datasource table keeps its own in parameters).
    hive_buckets: BucketSpec | None = None
    #: The catalog holding the table, for lineage: ``arn:aws:glue:REGION:ACCOUNT`` for the Glue Data Catalog
    #: (None for a Hive metastore, named by its URI).
    catalog_arn: str | None = None

    @property
    def bucket_spec(self) -> BucketSpec | None:
        """The table's bucketing, Spark datasource (from Spark's parameters) or Hive (from the
        storage descriptor), or None for an unbucketed table."""
        params = self.parameters
        key = "spark.sql.sources.schema."
        if self.provider and self.provider != "hive":
            try:
                n = int(params.get(key + "numBuckets", "0"))
                cols = tuple(params[f"{key}bucketCol.{i}"].lower()
                             for i in range(int(params.get(key + "numBucketCols", "0"))))
                sort = tuple(params[f"{key}sortCol.{i}"].lower()
                             for i in range(int(params.get(key + "numSortCols", "0"))))
            except (KeyError, ValueError):
                return None
            return BucketSpec(n, cols, sort, hive=False) if n > 0 else None
        return self.hive_buckets

    @property
    def qualified_name(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def is_view(self) -> bool:
        return self.table_type in (VIRTUAL_VIEW, MATERIALIZED_VIEW)

    @property
    def is_external(self) -> bool:
        return self.table_type == EXTERNAL_TABLE or (
            str(self.parameters.get("EXTERNAL", "")).upper() == "TRUE"
        )

    @property
    def purges_on_drop(self) -> bool:
        """Hive 4 marks converted managed tables ``external.table.purge=true``: a drop deletes data."""
        return str(self.parameters.get(PURGE_PARAM, "")).strip().lower() == "true"

    @property
    def is_plain_external(self) -> bool:
        """EXTERNAL and not purged on drop: dropping it or a partition keeps the files (what every change
        tableswap makes relies on; :mod:`tableswap.core.eligibility` says why a table is not)."""
        return self.is_external and not self.purges_on_drop

    @property
    def is_partitioned(self) -> bool:
        return bool(self.partition_keys)

    @property
    def partition_key_names(self) -> tuple[str, ...]:
        return tuple(c.name.lower() for c in self.partition_keys)

    @property
    def provider(self) -> str | None:
        """Spark datasource provider (``parquet``, ``orc``...) or ``None`` for a Hive-format table."""
        value = self.parameters.get("spark.sql.sources.provider")
        return value.lower() if value else None

    @property
    def storage_format(self) -> str | None:
        """``parquet``, ``orc``, another provider name, or ``None`` when it cannot be told."""
        if self.provider and self.provider != "hive":
            return self.provider.rsplit(".", 1)[-1]
        hints = " ".join(filter(None, [self.serde_lib, self.input_format])).lower()
        for fmt in ("parquet", "orc", "avro", "text", "sequencefile", "rcfile", "json"):
            if fmt in hints:
                return fmt
        return None

    @property
    def root(self) -> str | None:
        """The table's storage root: where staged batches live and beyond which nothing is deleted."""
        return self.parameters.get(ROOT_PARAM) or self.location

    @property
    def swap_id(self) -> str | None:
        return self.parameters.get(SWAP_ID_PARAM)


_COMPRESSION_PARAMS = {"parquet.compression": "compression", "orc.compress": "compression"}


def storage_options(table: TableInfo) -> dict[str, str]:
    """The table's own options for reading and writing its files (datasource OPTIONS, Hive compression
    properties)."""
    opts = {k: v for k, v in table.serde_parameters.items() if k not in ("path", "serialization.format")}
    for param, option in _COMPRESSION_PARAMS.items():
        if param in table.parameters:
            opts.setdefault(option, table.parameters[param])
    return opts


_SCHEMA_PARAM = "spark.sql.sources.schema"
_CHAR_VARCHAR = "__CHAR_VARCHAR_TYPE_STRING"
#: Spark's JSON type names that differ from their SQL names (the metastore's column types).
_JSON_TYPE_NAMES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}


def stored_spark_schema(table: TableInfo) -> dict[str, Any] | None:
    """The Spark schema (its JSON, a ``struct``) a Spark-created table stores in its parameters, the one
    Spark itself reads the table's schema from; None when it is absent, unreadable, or disagrees with the
    metastore's own columns (e.g. columns changed by Hive afterwards; Spark then falls back to the
    metastore's columns too). Saves asking Spark to resolve the table."""
    params = table.parameters
    text = params.get(_SCHEMA_PARAM)
    if text is None and f"{_SCHEMA_PARAM}.numParts" in params:  # written in parts (older Spark, long schemas)
        try:
            text = "".join(params[f"{_SCHEMA_PARAM}.part.{i}"] for i in range(int(params[f"{_SCHEMA_PARAM}.numParts"])))
        except (KeyError, ValueError):
            return None
    if not text:
        return None
    try:
        schema: dict[str, Any] = json.loads(text)
        fields = schema["fields"]
        types = [(f["name"], (f.get("metadata") or {}).get(_CHAR_VARCHAR) or _type_name(f["type"])) for f in fields]
    except (ValueError, TypeError, KeyError, AttributeError):  # unreadable: let Spark resolve the table instead
        return None
    hive = [*table.columns, *table.partition_keys]
    if schema.get("type") != "struct" or len(types) != len(hive):
        return None
    for (name, spark_type), column in zip(types, hive):
        if (name.lower() != column.name.lower()
                or spark_type.replace(" ", "").lower() != column.type.replace(" ", "").lower()):
            return None
    return schema


def _type_name(spark_json: Any) -> str:
    """The SQL name of a Spark type given as JSON (what ``DataType.simpleString()`` says)."""
    if isinstance(spark_json, str):
        return _JSON_TYPE_NAMES.get(spark_json, spark_json)
    kind = spark_json["type"]
    if kind == "array":
        return f"array<{_type_name(spark_json['elementType'])}>"
    if kind == "map":
        return f"map<{_type_name(spark_json['keyType'])},{_type_name(spark_json['valueType'])}>"
    if kind == "struct":
        return "struct<" + ",".join(f"{f['name']}:{_type_name(f['type'])}" for f in spark_json["fields"]) + ">"
    raise ValueError(f"unknown Spark type {kind!r}")


@dataclass(frozen=True)
class PartitionInfo:
    values: tuple[str, ...]
    location: str | None
    parameters: Mapping[str, str] = field(default_factory=lambda: _frozen({}))
    #: The partition's own storage format (Hive allows one per partition): serde, input format.
    serde_lib: str | None = field(default=None, compare=False)
    input_format: str | None = field(default=None, compare=False)

    def name(self, keys: tuple[str, ...]) -> str:
        return pn.partition_name(keys, self.values)

    @property
    def swap_id(self) -> str | None:
        return self.parameters.get(SWAP_ID_PARAM)

    def fast_stats(self) -> dict[str, str]:
        return {k: self.parameters[k] for k in FAST_STATS_PARAMS if k in self.parameters}


@dataclass(frozen=True)
class NewPartition:
    """A partition to add: values, location and extra parameters (statistics of the new files)."""

    values: tuple[str, ...]
    location: str
    parameters: Mapping[str, str] = field(default_factory=lambda: _frozen({}))


@dataclass(frozen=True)
class LocationChange:
    """Repoint one existing partition from ``expected_location`` to ``new_location``."""

    values: tuple[str, ...]
    expected_location: str | None
    new_location: str
    parameters: Mapping[str, str] = field(default_factory=lambda: _frozen({}))


@dataclass(frozen=True)
class LockHolder:
    lock_id: int | str
    state: str
    user: str | None
    hostname: str | None
    agent_info: str | None
    acquired_at_ms: int | None
    last_heartbeat_ms: int | None

    def describe(self) -> str:
        who = f"{self.user or '?'}@{self.hostname or '?'}"
        agent = f" ({self.agent_info})" if self.agent_info else ""
        return f"lock {self.lock_id} {self.state.lower()} by {who}{agent}"
