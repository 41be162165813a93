"""OpenLineage dataset names of a table, as Spark's own OpenLineage integration gives them (pure, no I/O).

So that lineage graphs join, the events tableswap emits (:mod:`tableswap.lineage.events`) name a table
exactly as ``openlineage-spark`` names the same table when a Spark job reads or writes it: the dataset is
the table's storage location, and a ``symlinks`` facet names the table in its catalog. The rules below are
copied from the OpenLineage repository (github.com/OpenLineage/OpenLineage, read at commit 8f02abfb7,
2026-08-20):

* the location → (namespace, name): ``client/java/src/main/java/io/openlineage/client/utils/filesystem/``
  ``FilesystemDatasetUtils.java`` and its extractors ``LocalFilesystemDatasetExtractor`` (``file`` or no
  scheme: namespace ``file``, name the path), ``ObjectStorageDatasetExtractor`` (``s3*`` → ``s3``, ``gs``,
  ``abfs*`` → ``abfss``, ``wasb*`` → ``wasbs``: namespace ``scheme://authority``, name the path without its
  leading slash) and ``GenericFilesystemDatasetExtractor`` (anything else, e.g. ``hdfs``: namespace
  ``scheme://authority``, name the path), each dropping a trailing slash and naming an empty path ``/``;
* the table's symlink: ``integration/spark/shared/src/main/java/io/openlineage/spark/agent/util/PathUtils.java``
  (``fromTableIdentifier``): with a Hive metastore, namespace ``hive://host:port`` of the first URI of
  ``hive.metastore.uris`` (``SparkConfUtils.getMetastoreUri``, ``PathUtils.prepareHiveUri``) and name
  ``db.table``; with Glue, namespace ``arn:aws:glue:REGION:ACCOUNT`` and name ``table/db/table``
  (``AwsUtils.getGlueArn``); type ``TABLE``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from tableswap.core import locations as loc

#: The object stores' schemes (matched by prefix, as the Java extractors do) and the scheme they are named by.
OBJECT_STORES: tuple[tuple[str, str], ...] = (("s3", "s3"), ("gs", "gs"), ("abfs", "abfss"), ("wasb", "wasbs"))


@dataclass(frozen=True)
class DatasetName:
    """An OpenLineage dataset identifier."""

    namespace: str
    name: str


def _strip_last_slash(text: str) -> str:
    return text.rstrip("/")


def _non_empty(path: str) -> str:
    return path or "/"


def location_dataset(location: str) -> DatasetName:
    """The dataset Spark's integration names for a storage ``location`` (``FilesystemDatasetUtils.fromLocation``).

    >>> location_dataset("s3a://bucket/warehouse/events/")
    DatasetName(namespace='s3://bucket', name='warehouse/events')
    >>> location_dataset("file:/tmp/wh/events")
    DatasetName(namespace='file', name='/tmp/wh/events')
    >>> location_dataset("hdfs://nn:8020/wh/events")
    DatasetName(namespace='hdfs://nn:8020', name='/wh/events')
    """
    parts = urlsplit(location.strip())
    scheme = parts.scheme.lower()
    path = unquote(parts.path)  # java.net.URI.getPath() decodes
    if not scheme or scheme == "file":
        return DatasetName("file", _non_empty(_strip_last_slash(path)))
    for prefix, canonical in OBJECT_STORES:
        if scheme.startswith(prefix):
            return DatasetName(f"{canonical}://{parts.netloc}", _non_empty(_strip_last_slash(path.lstrip("/"))))
    # java.net.URI(scheme, authority, "/") without an authority is ``scheme:/``: stripped to ``scheme``
    return DatasetName(f"{scheme}://{parts.netloc}" if parts.netloc else scheme, _non_empty(_strip_last_slash(path)))


def hive_symlink(metastore_uri: str, db: str, table: str) -> DatasetName:
    """The table's symlink with a Hive metastore: ``hive://host:port`` of the first of the (comma-separated)
    metastore URIs, and ``db.table``.

    >>> hive_symlink("thrift://hms-a:9083,thrift://hms-b:9083", "sales", "events")
    DatasetName(namespace='hive://hms-a:9083', name='sales.events')
    """
    first = metastore_uri.split(",")[0].strip()
    return DatasetName(f"hive://{urlsplit(first).netloc}", f"{db}.{table}")


def glue_symlink(region: str, account: str, db: str, table: str) -> DatasetName:
    """The table's symlink with the AWS Glue Data Catalog (its ARN's prefix, then ``table/db/table``).

    >>> glue_symlink("eu-west-1", "123456789012", "sales", "events")
    DatasetName(namespace='arn:aws:glue:eu-west-1:123456789012', name='table/sales/events')
    """
    return glue_arn_symlink(f"arn:aws:glue:{region}:{account}", db, table)


def glue_arn_symlink(catalog_arn: str, db: str, table: str) -> DatasetName:
    """The table's symlink in the Glue Data Catalog of ``catalog_arn`` (``arn:aws:glue:REGION:ACCOUNT``)."""
    return DatasetName(catalog_arn, f"table/{db}/{table}")


@dataclass(frozen=True)
class ReadSource:
    """What a DataFrame reads, as its plan says: a storage location, and the catalog table when it is one
    (``db``, ``table``; ``None`` for files read by path)."""

    location: str
    db: str | None = None
    table: str | None = None


def read_datasets(sources: Iterable[ReadSource], *, db: str, table: str, root: str | None,
                  limit: int = 100) -> tuple[ReadSource, ...]:
    """The inputs a swap of ``db.table`` (stored under ``root``) reports for what its batch read: each source once,
    in the plan's order, at most ``limit``. Files read by path below the target's own ``root`` (a merge reads the
    partitions it rewrites at their locations) are the target table itself, as one input.

    >>> read_datasets([ReadSource("file:/wh/t/dt=1"), ReadSource("file:/wh/t/dt=2"), ReadSource("file:/in/x")],
    ...               db="d", table="t", root="file:/wh/t")
    (ReadSource(location='file:/wh/t', db='d', table='t'), ReadSource(location='file:/in/x', db=None, table=None))
    """
    out: dict[tuple[str, str | None, str | None], ReadSource] = {}
    for source in sources:
        if source.table is None and root and loc.is_within(source.location, root):
            source = ReadSource(root, db, table)
        key = (loc.key(source.location), source.db, source.table)
        if key not in out and len(out) < limit:
            out[key] = source
    return tuple(out.values())


def parse_parent(value: str | None) -> tuple[str, str, str] | None:
    """``namespace/job/run_id`` (``OPENLINEAGE_PARENT_ID``, ``OPENLINEAGE_ROOT_PARENT_ID``) as its three parts,
    or ``None`` when it is not exactly three (the dbt integration's rule: ``integration/common/src/openlineage/``
    ``common/provider/dbt/utils.py``, ``get_parent_run_metadata``)."""
    if not value:
        return None
    parts = value.split("/")
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 and all(parts) else None


__all__ = ["DatasetName", "ReadSource", "glue_arn_symlink", "glue_symlink", "hive_symlink", "location_dataset",
           "parse_parent", "read_datasets"]
