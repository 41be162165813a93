"""Thrift objects → the metastore model (:mod:`.model`), and the snapshot a locked caller reads. Only
the adapter uses this module."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from hmsclient.genthrift.hive_metastore import ttypes as tt

from tableswap.core.catalog import BucketSpec, Column, PartitionInfo, TableInfo


@dataclass(frozen=True)
class TableSnapshot:
    """A table and some of its partitions, read together (by a caller holding the table lock).

    Handing it back to the flip calls saves re-reading what was just read and checked: the
    compare-and-swap expectations are verified against exactly this state. The raw metastore
    objects stay private to this adapter.
    """

    table: TableInfo
    partitions: Mapping[tuple[str, ...], PartitionInfo]
    _raw_table: Any = field(repr=False, compare=False)
    _raw_partitions: Mapping[tuple[str, ...], Any] = field(repr=False, compare=False)


def _partition_sd_template(raw_table: tt.Table) -> tt.StorageDescriptor:
    """The table's storage descriptor as the template of a new partition's: a shallow copy, without
    the datasource ``path`` (a table-level property) in its serde parameters."""
    sd = copy.copy(raw_table.sd)
    if sd.serdeInfo is not None and sd.serdeInfo.parameters and "path" in sd.serdeInfo.parameters:
        serde = copy.copy(sd.serdeInfo)
        serde.parameters = {k: v for k, v in serde.parameters.items() if k != "path"}
        sd.serdeInfo = serde
    return sd


def _columns(fields: Sequence[tt.FieldSchema] | None) -> tuple[Column, ...]:
    return tuple(Column(f.name.lower(), (f.type or "").lower()) for f in (fields or []))


def _table_info(raw: tt.Table) -> TableInfo:
    sd = raw.sd or tt.StorageDescriptor()
    serde = sd.serdeInfo or tt.SerDeInfo()
    return TableInfo(
        db=raw.dbName.lower(),
        name=raw.tableName.lower(),
        table_type=raw.tableType or "",
        location=sd.location,
        columns=_columns(sd.cols),
        partition_keys=_columns(raw.partitionKeys),
        parameters=dict(raw.parameters or {}),
        serde_parameters=dict(serde.parameters or {}),
        serde_lib=serde.serializationLib,
        input_format=sd.inputFormat,
        output_format=sd.outputFormat,
        hive_buckets=_hive_buckets(sd),
    )


def _hive_buckets(sd: tt.StorageDescriptor) -> BucketSpec | None:
    if not sd.numBuckets or sd.numBuckets <= 0 or not sd.bucketCols:
        return None
    return BucketSpec(sd.numBuckets, tuple(c.lower() for c in sd.bucketCols),
                      tuple(o.col.lower() for o in (sd.sortCols or [])), hive=True)


def _partition_info(raw: tt.Partition) -> PartitionInfo:
    return PartitionInfo(
        values=tuple(raw.values or ()),
        location=raw.sd.location if raw.sd else None,
        parameters=dict(raw.parameters or {}),
        serde_lib=raw.sd.serdeInfo.serializationLib if raw.sd and raw.sd.serdeInfo else None,
        input_format=raw.sd.inputFormat if raw.sd else None,
    )
