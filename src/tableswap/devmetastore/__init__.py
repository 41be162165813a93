"""A local development Hive Metastore (HMS 2.3 from the pyspark wheel, embedded Derby or PostgreSQL).

See :class:`DevMetastore`; the CLI front end is ``tableswap metastore start|stop|status``.
"""

from tableswap.devmetastore.launcher import DevMetastore, DevMetastoreError, MetastoreStatus

__all__ = ["DevMetastore", "DevMetastoreError", "MetastoreStatus"]
