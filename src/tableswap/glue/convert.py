"""Glue's table and partition structures (the dicts of its API) → the catalog's values
(:mod:`tableswap.core.catalog`), the inputs its writes take, and the snapshot a locked caller reads."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping

from tableswap.core.catalog import BucketSpec, Column, PartitionInfo, TableInfo

# What TableInput / PartitionInput / StorageDescriptor accept (GetTable's output has more: ids, times).
_TABLE_INPUT_KEYS = ("Name", "Description", "Owner", "LastAccessTime", "LastAnalyzedTime", "Retention",
                     "StorageDescriptor", "PartitionKeys", "ViewOriginalText", "ViewExpandedText", "TableType",
                     "Parameters", "TargetTable", "ViewDefinition")
_PARTITION_INPUT_KEYS = ("Values", "LastAccessTime", "StorageDescriptor", "Parameters", "LastAnalyzedTime")


@dataclass(frozen=True)
class GlueSnapshot:
    """A table and some of its partitions, read together under the table's lock; the raw Glue structures
    stay private to the adapter (the table's ``VersionId`` among them: the fence of a table repoint)."""

    table: TableInfo
    partitions: Mapping[tuple[str, ...], PartitionInfo]
    _raw_table: Any = field(repr=False, compare=False)
    _raw_partitions: Mapping[tuple[str, ...], Any] = field(repr=False, compare=False)


def _columns(cols: Any) -> tuple[Column, ...]:
    return tuple(Column(c["Name"].lower(), (c.get("Type") or "").lower()) for c in (cols or []))


def table_info(raw: Mapping[str, Any], region: str | None) -> TableInfo:
    """The table ``raw`` (GetTable's ``Table``) read in ``region``."""
    sd = raw.get("StorageDescriptor") or {}
    account = raw.get("CatalogId")
    serde = sd.get("SerdeInfo") or {}
    return TableInfo(
        db=raw["DatabaseName"].lower(),
        name=raw["Name"].lower(),
        table_type=raw.get("TableType") or "",
        location=sd.get("Location"),
        columns=_columns(sd.get("Columns")),
        partition_keys=_columns(raw.get("PartitionKeys")),
        parameters=dict(raw.get("Parameters") or {}),
        serde_parameters=dict(serde.get("Parameters") or {}),
        serde_lib=serde.get("SerializationLibrary"),
        input_format=sd.get("InputFormat"),
        output_format=sd.get("OutputFormat"),
        hive_buckets=_buckets(sd),
        catalog_arn=f"arn:aws:glue:{region}:{account}" if region and account else None,
    )


def _buckets(sd: Mapping[str, Any]) -> BucketSpec | None:
    n = sd.get("NumberOfBuckets") or 0
    cols = sd.get("BucketColumns") or []
    if n <= 0 or not cols:
        return None
    return BucketSpec(n, tuple(c.lower() for c in cols),
                      tuple(s["Column"].lower() for s in sd.get("SortColumns") or []), hive=True)


def partition_info(raw: Mapping[str, Any]) -> PartitionInfo:
    sd = raw.get("StorageDescriptor") or {}
    return PartitionInfo(
        values=tuple(raw.get("Values") or ()),
        location=sd.get("Location"),
        parameters=dict(raw.get("Parameters") or {}),
        serde_lib=(sd.get("SerdeInfo") or {}).get("SerializationLibrary"),
        input_format=sd.get("InputFormat"),
    )


def table_input(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The ``TableInput`` that recreates ``raw`` (a deep copy: the caller changes it freely)."""
    return copy.deepcopy({k: raw[k] for k in _TABLE_INPUT_KEYS if k in raw})


def partition_input(raw: Mapping[str, Any]) -> dict[str, Any]:
    return copy.deepcopy({k: raw[k] for k in _PARTITION_INPUT_KEYS if k in raw})


def partition_sd_template(raw_table: Mapping[str, Any]) -> dict[str, Any]:
    """The table's storage descriptor as a new partition's, without the datasource ``path`` (a table-level
    serde property)."""
    sd = copy.deepcopy(dict(raw_table.get("StorageDescriptor") or {}))
    serde = sd.get("SerdeInfo")
    if serde and "path" in (serde.get("Parameters") or {}):
        serde["Parameters"] = {k: v for k, v in serde["Parameters"].items() if k != "path"}
    return sd
