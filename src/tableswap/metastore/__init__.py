"""Hive Metastore adapter. Thrift and hmsclient types never leave this package."""

from .client import MetastoreClient, connect
from .lock import TableLock
from .model import LocationChange, LockHolder, NewPartition, PartitionInfo, TableInfo

__all__ = ["MetastoreClient", "connect", "TableLock", "TableInfo", "PartitionInfo", "NewPartition",
           "LocationChange", "LockHolder"]
