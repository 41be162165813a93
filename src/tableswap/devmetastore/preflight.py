"""What the development metastore refuses before it resolves or starts anything: each refusal says what
to change."""

from __future__ import annotations

from tableswap.devmetastore import process, schema
from tableswap.devmetastore.backend import DerbyBackend, DevMetastoreError, MySQLBackend
from tableswap.devmetastore.schema import DevMetastore

#: The oldest Java the default 2.3 metastore runs on (the pyspark wheel's Spark 4 jars).
BUILTIN_MIN_JAVA = 17


def refuse_what_cannot_start(dm: DevMetastore) -> None:
    """A state directory Derby cannot use, another release's Derby database, MySQL without a standalone
    release, a Java outside what the server runs on: each a :class:`DevMetastoreError`."""
    backend = dm.backend
    if isinstance(backend, DerbyBackend) and ";" in str(dm.state_dir):
        raise DevMetastoreError(
            f"state directory {dm.state_dir} contains ';', which a Derby JDBC URL "
            "cannot hold; choose another --state-dir"
        )
    schema.check_same_release(dm)
    release = dm.release
    if release is None and isinstance(backend, MySQLBackend):
        raise DevMetastoreError(
            f"a MySQL/MariaDB-backed metastore ({backend.describe()}) needs a standalone release, whose "
            "schematool creates the schema: add --hive-version 4.0.1 (or 3.1.x); the default 2.3 runs "
            "on Derby or PostgreSQL")
    if isinstance(backend, MySQLBackend) and not backend.password:
        raise DevMetastoreError(
            f"{backend.describe()} gives no password: the metastore's configuration reads an empty password as "
            "unset and sends its default instead, which MySQL refuses (\"Access denied ... using password: YES\"); "
            "give the user a password (mysql://USER:PASSWORD@..., or $MYSQL_PWD)")
    java = process.find_java(dm.java)
    if release is None:
        process.check_java(java, BUILTIN_MIN_JAVA,
                           "the default metastore (Hive 2.3 jars of the pyspark wheel, Spark 4)")
    else:
        process.check_java(java, release.min_java, f"Hive Metastore {release.version}", maximum=release.max_java,
                           why_newest=" (its Hadoop calls Subject.getSubject, which Java 23 and newer refuse)")
