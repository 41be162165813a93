"""A 3.1/4.x release's metastore schema made once per (release, backend) and copied into each metastore the
tests start, instead of running the release's schematool ``-initSchema`` for each.

What each start still does: the launcher's own schema step (``tableswap.devmetastore.schema.ensure_schema``)
runs the release's ``schematool -info`` on a PostgreSQL or MySQL database, which fails unless the schema is
there and its version is the release's; and the server starts with ``metastore.schema.verification`` on,
which checks the schema version again. Only ``-initSchema`` (6-25 s a time on this 2-core machine; Derby's is
the slowest) moves here, into the making of the template, which is that same release's schematool run
through the launcher's own ``schema_tool`` on a database or Derby directory of its own:

* **PostgreSQL**: a database ``tswap_tmpl_<version>_postgres_<digest>``, copied by ``CREATE DATABASE x
  TEMPLATE t`` (a fraction of a second). It is built as ``..._wip``, renamed when complete and then closed to
  connections (a copy needs a template nobody is connected to), so a half-made template is never copied.
* **MySQL/MariaDB**: a dump (``mariadb-dump``: tables, keys, foreign keys, the rows schematool seeds) of a
  database schematool initialized, in a file of the cache below; a copy loads it into the fresh database.
* **Derby** (a release on embedded Derby, e.g. the lock-expiry test's): an initialized ``metastore_db``
  directory in the cache below, copied into the state directory before the start (the launcher runs no
  schematool on a Derby database that exists).

``<digest>`` covers the release, the backend's schematool type and every file of the release's schema scripts
for it (``scripts/metastore/upgrade/<type>/``) plus :data:`FORMAT`: another release build or another way of
making templates gets another template. A template is made under an exclusive lock per template (PostgreSQL's advisory lock on its server, a file
lock in the cache for the others: two pytest processes that race, one makes it, the other waits and copies it) and then reused by every later test,
pytest run and CI run on this machine (the cache: ``$TABLESWAP_TEST_SCHEMA_CACHE``, else
``~/.cache/tableswap/test-metastore-schemas``; PostgreSQL's templates live on the server). Delete the cache
directory, or drop the ``tswap_tmpl_%`` databases, to make them again.

The 2.3 metastore (the pyspark wheel's) is not served here: its schema comes from DataNucleus at the server's
start (and, on PostgreSQL, tableswap's lock-table script), not from a schematool run (docs/metastores.md).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

from tableswap.devmetastore import DevMetastore, process, schema, siteconf
from tableswap.devmetastore.backend import DerbyBackend, MySQLBackend, PostgresBackend
from tableswap.devmetastore.releases import parse_hive_version
from tableswap.jvm.downloads import exclusive

#: Changes when the way templates are made changes (then none made before is used).
FORMAT = "1"
CACHE_ENV = "TABLESWAP_TEST_SCHEMA_CACHE"
PREFIX = "tswap_tmpl_"
_DEFAULT_CACHE = Path.home() / ".cache" / "tableswap" / "test-metastore-schemas"  # fixed at import: tests
# change $TABLESWAP_STATE_DIR and $XDG_* for themselves


def cache_dir() -> Path:
    directory = Path(os.environ.get(CACHE_ENV) or _DEFAULT_CACHE)
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def applies(hive_version: str | None) -> bool:
    """Whether ``hive_version`` names a standalone release (whose schema schematool makes)."""
    return parse_hive_version(hive_version) is not None


def _probe(version: str, db: str, state_dir: Path) -> DevMetastore:
    """A metastore (never started) of ``version`` on ``db``, its configuration written as the launcher writes it
    before its schema step."""
    ms = DevMetastore(state_dir=state_dir, db=db, hive_version=version)
    for directory in (ms.conf_dir, ms.warehouse_dir, ms.tmp_dir):
        directory.mkdir(parents=True, exist_ok=True)
    process.write_atomic(ms.metastore_site_file, ms.render_metastore_site(), private=True)
    process.write_atomic(ms.conf_dir / siteconf.LOG4J2_PROPERTIES, siteconf.read_resource(siteconf.LOG4J2_PROPERTIES))
    return ms


def _init_schema(version: str, db: str, state_dir: Path) -> DevMetastore:
    """The launcher's own schema step on ``db``, an empty database or no Derby directory yet: the release's
    schematool ``-info`` fails (server databases), then its ``-initSchema`` runs (raises with the log's tail if
    it fails). The path a start on an empty database takes; test_the_release_runs_on_mysql takes it in every
    run too (its database is an empty one, not a template's copy)."""
    ms = _probe(version, db, state_dir)
    schema.ensure_schema(ms, process.find_java(None))
    assert ms.schema_file.is_file(), f"no schema made on {ms.backend.describe()}"
    return ms


@functools.cache
def name(version: str, backend_kind: str) -> str:
    """The template's name: release, backend and the digest of what makes its schema."""
    release = parse_hive_version(version)
    assert release is not None, f"{version} is not a standalone release"
    db_type = {"postgresql": PostgresBackend, "mysql": MySQLBackend, "derby": DerbyBackend}[backend_kind].schematool_db_type
    with tempfile.TemporaryDirectory(prefix="tswap-tmpl-") as tmp:
        home = DevMetastore(state_dir=tmp, hive_version=version).distribution().home
    scripts = home / "scripts" / "metastore" / "upgrade" / db_type
    digest = hashlib.sha256(f"{FORMAT}\0{release.version}\0{db_type}\0".encode())
    for path in sorted(scripts.iterdir()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{PREFIX}{re.sub(r'[^0-9a-z]', '_', release.version.lower())}_{db_type}_{digest.hexdigest()[:12]}"


def _lock(template: str) -> Path:
    return cache_dir() / f"{template}.lock"


# ------------------------------------------------------------------------------------------- PostgreSQL
def _pg_connect(admin: PostgresBackend) -> psycopg.Connection:
    return psycopg.connect(host=admin.host, port=admin.port, user=admin.user, password=admin.password or None,
                           dbname=admin.database, autocommit=True, connect_timeout=10)


def pg_execute(admin: PostgresBackend, statement: str, *params) -> list[tuple]:
    """One statement on ``admin``'s database (autocommit, as CREATE/DROP DATABASE need)."""
    with _pg_connect(admin) as connection:
        cursor = connection.execute(statement, params or None)
        return cursor.fetchall() if cursor.description else []


def pg_exists(admin: PostgresBackend, database: str) -> bool:
    return bool(pg_execute(admin, "SELECT 1 FROM pg_database WHERE datname = %s", database))


def pg_template(admin: PostgresBackend, version: str) -> str:
    """The name of the release's template database on ``admin``'s server, made first if missing."""
    template = name(version, "postgresql")
    if pg_exists(admin, template):
        return template
    # The server's own lock (held by this connection until it closes): every process that uses this server,
    # whatever its cache directory or host, makes the template one at a time.
    with _pg_connect(admin) as holder:
        holder.execute("SELECT pg_advisory_lock(hashtext(%s))", (template,))
        if pg_exists(admin, template):
            return template
        wip = f"{template}_wip"  # a crashed maker's leftover: made again
        pg_execute(admin, f"DROP DATABASE IF EXISTS {wip} WITH (FORCE)")
        pg_execute(admin, f"CREATE DATABASE {wip}")
        with tempfile.TemporaryDirectory(prefix="tswap-tmpl-") as tmp:
            _init_schema(version, admin.with_database(wip).spec(), Path(tmp))
        pg_execute(admin, f"ALTER DATABASE {wip} RENAME TO {template}")
        pg_execute(admin, f"ALTER DATABASE {template} WITH ALLOW_CONNECTIONS false")
    return template


def pg_create(admin: PostgresBackend, database: str, version: str | None) -> None:
    """Create ``database``: empty, or (a standalone release) a copy of its template."""
    if not applies(version):
        pg_execute(admin, f"CREATE DATABASE {database}")
        return
    assert version is not None
    template = pg_template(admin, version)
    for attempt in range(20):  # "being accessed by other users": someone connected to it for a moment
        try:
            pg_execute(admin, f"CREATE DATABASE {database} TEMPLATE {template}")
            return
        except psycopg.errors.ObjectInUse:
            if attempt == 19:
                raise
            time.sleep(0.5)


# ------------------------------------------------------------------------------------------- MySQL/MariaDB
def _mysql_env(server: MySQLBackend) -> dict[str, str]:
    return {**os.environ, "MYSQL_PWD": server.password or ""}


def _mysql_args(server: MySQLBackend) -> list[str]:
    return ["-h", server.host, "-P", str(server.port), "-u", server.user]


def mysql_dump(admin: MySQLBackend, version: str, run_sql) -> Path:
    """The release's schema as a dump file in the cache, made first if missing (``run_sql(backend, text)``
    runs a statement on the server)."""
    template = name(version, "mysql")
    dump = cache_dir() / f"{template}.sql"
    if dump.is_file():
        return dump
    with exclusive(_lock(template)):
        if dump.is_file():
            return dump
        wip = f"{template}_wip_{uuid.uuid4().hex[:8]}"
        run_sql(admin, f"CREATE DATABASE {wip}")
        try:
            with tempfile.TemporaryDirectory(prefix="tswap-tmpl-") as tmp:
                _init_schema(version, admin.with_database(wip).spec(), Path(tmp))
            dumper = shutil.which("mariadb-dump") or shutil.which("mysqldump")
            assert dumper is not None, "no mariadb-dump or mysqldump on PATH"
            partial = dump.with_name(f"{dump.name}.{uuid.uuid4().hex[:8]}.tmp")
            with open(partial, "wb") as out:
                subprocess.run([dumper, *_mysql_args(admin), "--skip-comments", "--skip-dump-date",
                                "--single-transaction", "--routines", "--triggers", wip],
                               stdout=out, env=_mysql_env(admin), check=True, timeout=300)
            os.replace(partial, dump)
        finally:
            run_sql(admin, f"DROP DATABASE IF EXISTS {wip}")
    return dump


def mysql_load(database: MySQLBackend, dump: Path) -> None:
    """Load ``dump`` into ``database`` (an empty one)."""
    client = shutil.which("mariadb") or shutil.which("mysql")
    assert client is not None, "no mariadb or mysql client"
    with open(dump, "rb") as source:
        subprocess.run([client, *_mysql_args(database), database.database], stdin=source,
                       env=_mysql_env(database), check=True, timeout=300)


# ------------------------------------------------------------------------------------------- Derby
def derby_template(version: str) -> Path:
    """An initialized Derby ``metastore_db`` of the release in the cache, made first if missing."""
    template = name(version, "derby")
    directory = cache_dir() / template
    if directory.is_dir():
        return directory
    with exclusive(_lock(template)):
        if directory.is_dir():
            return directory
        with tempfile.TemporaryDirectory(prefix="tswap-tmpl-", dir=cache_dir()) as tmp:
            ms = _init_schema(version, "derby", Path(tmp) / "state")
            os.replace(ms.derby_dir, directory)  # whole or not at all
    return directory


def prepare_derby(ms: DevMetastore) -> None:
    """Give a new state directory of a standalone release on Derby the release's initialized database (its
    launcher then runs no schematool); anything else is left as it is."""
    if ms.release is None or not isinstance(ms.backend, DerbyBackend) or ms.derby_dir.exists():
        return
    ms.state_dir.mkdir(parents=True, exist_ok=True)
    shutil.copytree(derby_template(ms.hive_version), ms.derby_dir)
