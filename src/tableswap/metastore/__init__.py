"""Hive Metastore adapter. Thrift and hmsclient types never leave this package."""

from tableswap.metastore.client import MetastoreClient, connect
from tableswap.metastore.lock import TableLock
from tableswap.core.catalog import LocationChange, LockHolder, NewPartition, PartitionInfo, TableInfo

__all__ = ["MetastoreClient", "connect", "TableLock", "TableInfo", "PartitionInfo", "NewPartition",
           "LocationChange", "LockHolder"]
