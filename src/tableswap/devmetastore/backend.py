"""The backing database of the development metastore: embedded Derby (default) or PostgreSQL.

A backend contributes the JDBC properties of ``hive-site.xml``, any jar the server needs on its
classpath, and a preparation step run before the server starts:

* **Derby** needs nothing: the database is created inside the state directory and
  ``hive.in.test=true`` makes HMS 2.3 create its lock/transaction tables (``TxnDbUtil.prepDb``).
* **PostgreSQL** (``postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME``) needs the PostgreSQL JDBC
  driver jar (Debian/Ubuntu: ``apt-get install libpostgresql-jdbc-java``) and an existing database.
  DataNucleus creates the object tables on first start (``datanucleus.schema.autoCreateAll``); the
  lock/transaction tables are created by ``txn-schema-postgres.sql`` (idempotent), run through
  Hive's BeeLine (shipped in the pyspark wheel) over JDBC, because ``TxnDbUtil.prepDb`` only speaks
  Derby's SQL dialect.
"""

from __future__ import annotations

import dataclasses
import getpass
import importlib.resources
import os
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar
from urllib.parse import quote, unquote, urlsplit

from tableswap.core.names import hide_password
from tableswap.redact import mask_url
from tableswap.errors import TableSwapError

__all__ = [
    "Backend", "DevMetastoreError", "DerbyBackend", "ServerBackend", "PostgresBackend", "MySQLBackend",
    "JdbcDriver", "parse_backend", "find_postgres_jdbc_jar", "find_mysql_jdbc_driver",
    "JDBC_JAR_ENV", "JDBC_JAR_SEARCH_PATHS", "MYSQL_JDBC_JAR_ENV", "MYSQL_JDBC_JAR_SEARCH_PATHS", "run_sql",
]

#: Environment variable naming the PostgreSQL JDBC driver jar (wins over the search paths).
JDBC_JAR_ENV = "TABLESWAP_PG_JDBC_JAR"

#: Where the PostgreSQL JDBC driver is looked for, in order (globs allowed), when neither
#: ``--jdbc-driver`` nor ``$TABLESWAP_PG_JDBC_JAR`` names it.
JDBC_JAR_SEARCH_PATHS = (
    "/usr/share/java/postgresql.jar",            # Debian/Ubuntu libpostgresql-jdbc-java
    "/usr/share/java/postgresql-jdbc4.jar",
    "/usr/share/java/postgresql-*.jar",
    "/usr/share/java/postgresql-jdbc/postgresql*.jar",   # Fedora/RHEL postgresql-jdbc
    "/usr/local/share/java/classes/postgresql.jar",      # FreeBSD
    "/usr/local/share/java/postgresql*.jar",
    "/opt/homebrew/share/java/postgresql*.jar",
)

POSTGRES_DRIVER_CLASS = "org.postgresql.Driver"

# The persistent classes of HMS 2.3.10 (package.jdo in hive-metastore-2.3.10.jar).
_MODEL_PACKAGE = "org.apache.hadoop.hive.metastore.model"
_MODEL_CLASSES = (
    "MDatabase", "MFieldSchema", "MType", "MTable", "MConstraint", "MSerDeInfo", "MOrder",
    "MColumnDescriptor", "MStringList", "MStorageDescriptor", "MPartition", "MIndex", "MRole",
    "MRoleMap", "MGlobalPrivilege", "MDBPrivilege", "MTablePrivilege", "MPartitionPrivilege",
    "MTableColumnPrivilege", "MPartitionColumnPrivilege", "MPartitionEvent", "MMasterKey",
    "MDelegationToken", "MTableColumnStatistics", "MPartitionColumnStatistics", "MVersionTable",
    "MResourceUri", "MFunction", "MNotificationLog", "MNotificationNextId",
)
_DRIVER_ENTRY = "org/postgresql/Driver.class"
_TXN_SCHEMA = "txn-schema-postgres.sql"
_BEELINE_CLASS = "org.apache.hive.beeline.BeeLine"
_INSTALL_HINT = (
    "install it (Debian/Ubuntu: `apt-get install libpostgresql-jdbc-java`, which provides "
    "/usr/share/java/postgresql.jar; Fedora: `dnf install postgresql-jdbc`; elsewhere download "
    "postgresql-42.x.jar from https://jdbc.postgresql.org) and, if it is not in one of the searched "
    f"places, point at it with --jdbc-driver PATH or ${JDBC_JAR_ENV}"
)


class DevMetastoreError(TableSwapError):
    """The development metastore could not be started, stopped or inspected (including its
    backing database being misconfigured or unreachable)."""


@dataclass(frozen=True)
class Backend:
    kind: str
    #: The release's ``MetastoreSchemaTool -dbType`` for this database (3.1/4.x releases).
    schematool_db_type: ClassVar[str] = ""

    def describe(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def spec(self) -> str:
        """What to record in the state directory so that the next start reuses this backend."""
        raise NotImplementedError  # pragma: no cover

    def java_options(self) -> list[str]:
        """JVM options the server needs for this backing database."""
        return []


@dataclass(frozen=True)
class DerbyBackend(Backend):
    kind: str = "derby"
    schematool_db_type = "derby"

    def describe(self) -> str:
        return "derby (embedded)"

    def spec(self) -> str:
        return "derby"

    def java_options(self) -> list[str]:
        # Derby compiles each SQL statement into Java bytecode and keeps 100 compiled statements by
        # default: fewer than one swap's metastore calls go through, so the same statements were
        # compiled again on every call (a staging table's drop cost the server 150 ms of CPU; 54 ms
        # with this cache).
        return ["-Dderby.language.statementCacheSize=1000"]

    def connection_properties(self, derby_dir: Path) -> list[tuple[str, str]]:
        """The JDBC connection (all a 3.1/4.x release needs: its schematool creates the schema)."""
        return [
            ("javax.jdo.option.ConnectionURL", f"jdbc:derby:;databaseName={derby_dir};create=true"),
            ("javax.jdo.option.ConnectionDriverName", "org.apache.derby.jdbc.EmbeddedDriver"),
        ]

    def properties(self, derby_dir: Path) -> list[tuple[str, str]]:
        return [
            *self.connection_properties(derby_dir),
            # Lock support: autoCreateAll does not create HIVE_LOCKS, NEXT_LOCK_ID, TXNS, ...;
            # on 2.3 hive.in.test=true makes TxnHandler create them (TxnDbUtil.prepDb, Derby SQL).
            # Side effect: every LockComponent must carry operationType (e.g. NO_TXN).
            ("hive.in.test", "true"),
        ]


@dataclass(frozen=True)
class ServerBackend(Backend):
    """A database server reached by URL: ``SCHEME://USER[:PASSWORD]@HOST[:PORT]/DBNAME[?k=v]``."""

    host: str = "localhost"
    port: int = 0
    database: str = ""
    user: str = ""
    password: str | None = field(default=None, repr=False)
    query: str = ""  # passed through to the JDBC URL (e.g. sslmode=require)
    kind: str = ""

    def _address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}/{quote(self.database, safe='')}"

    def jdbc_address(self, scheme: str, *options: str) -> str:
        """``jdbc:SCHEME://HOST:PORT/DBNAME`` with the URL's query and ``options`` appended."""
        query = "&".join(q for q in (self.query, *options) if q)
        url = f"jdbc:{scheme}://{self._address()}"
        return f"{url}?{query}" if query else url

    def _url(self, password: str) -> str:
        auth = quote(self.user, safe="") + (f":{password}" if self.password else "")
        query = f"?{self.query}" if self.query else ""
        return f"{self.kind}://{auth}@{self._address()}{query}"

    def describe(self) -> str:
        """The URL without its password or secret parameters (:func:`tableswap.redact.mask_url`)."""
        return mask_url(self._url("***"))

    def spec(self) -> str:
        return self._url(quote(self.password or "", safe=""))

    def with_database(self, database: str):
        return dataclasses.replace(self, database=database)


@dataclass(frozen=True)
class PostgresBackend(ServerBackend):
    port: int = 5432
    kind: str = "postgresql"
    schematool_db_type = "postgres"

    @property
    def jdbc_url(self) -> str:
        return self.jdbc_address("postgresql")

    def connection_properties(self) -> list[tuple[str, str]]:
        """The JDBC connection (all a 3.1/4.x release needs: its schematool creates the schema)."""
        return [
            ("javax.jdo.option.ConnectionURL", self.jdbc_url),
            ("javax.jdo.option.ConnectionDriverName", POSTGRES_DRIVER_CLASS),
            ("javax.jdo.option.ConnectionUserName", self.user),
            ("javax.jdo.option.ConnectionPassword", self.password or ""),
        ]

    def properties(self) -> list[tuple[str, str]]:
        return [
            *self.connection_properties(),
            # TxnDbUtil.prepDb speaks Derby only; the lock tables come from txn-schema-postgres.sql.
            ("hive.in.test", "false"),
            # Create every object table when the server starts. Left lazy, DataNucleus creates a
            # table (e.g. TBL_PRIVS, whose foreign key references TBLS) on a second connection in
            # the middle of the transaction that first needs it (create_table with privileges,
            # which already holds a lock on TBLS): on PostgreSQL that DDL waits for the
            # transaction, which waits for the DDL — the metastore hangs. Derby is not affected.
            ("datanucleus.autoStartMechanism", "Classes"),
            ("datanucleus.autoStartClassNames", ",".join(f"{_MODEL_PACKAGE}.{c}" for c in _MODEL_CLASSES)),
        ]


@dataclass(frozen=True)
class JdbcDriver:
    """A JDBC driver jar found for a backing database, and how to address the database through it."""

    jar: Path
    driver_class: str
    scheme: str  # jdbc:SCHEME://...
    options: tuple[str, ...] = ()  # appended to the URL's query


@dataclass(frozen=True)
class MySQLBackend(ServerBackend):
    """MySQL or MariaDB (``mysql://`` or ``mariadb://``), for the 3.1.x/4.x releases, whose schematool
    creates the schema (``-dbType mysql``)."""

    port: int = 3306
    kind: str = "mysql"
    schematool_db_type = "mysql"

    def connection_properties(self, driver: JdbcDriver) -> list[tuple[str, str]]:
        return [
            ("javax.jdo.option.ConnectionURL", self.jdbc_address(driver.scheme, *driver.options)),
            ("javax.jdo.option.ConnectionDriverName", driver.driver_class),
            ("javax.jdo.option.ConnectionUserName", self.user),
            ("javax.jdo.option.ConnectionPassword", self.password or ""),
        ]


#: Environment variable naming the MySQL/MariaDB JDBC driver jar (wins over the search paths).
MYSQL_JDBC_JAR_ENV = "TABLESWAP_MYSQL_JDBC_JAR"

#: Where a MySQL or MariaDB JDBC driver is looked for, in order (globs allowed).
MYSQL_JDBC_JAR_SEARCH_PATHS = (
    "/usr/share/java/mariadb-java-client.jar",      # Debian/Ubuntu libmariadb-java
    "/usr/share/java/mariadb-java-client-*.jar",
    "/usr/share/java/mysql-connector-j*.jar",       # MySQL Connector/J (e.g. Ubuntu's mysql-connector-j)
    "/usr/share/java/mysql-connector-java*.jar",
    "/usr/share/java/mysql.jar",
)

# Either driver speaks to MySQL and MariaDB servers. The metastore tells its database apart by the
# product name the driver reports: MariaDB's driver reports "MariaDB" unless told to say "MySQL",
# which DataNucleus and Hive's transaction handler both know.
_MYSQL_DRIVERS = {
    "org/mariadb/jdbc/Driver.class": ("org.mariadb.jdbc.Driver", "mariadb", ("useMysqlMetadata=true",)),
    "com/mysql/cj/jdbc/Driver.class": ("com.mysql.cj.jdbc.Driver", "mysql", ()),
}
_MYSQL_INSTALL_HINT = (
    "install one (Debian/Ubuntu: `apt-get install libmariadb-java`, which provides "
    "/usr/share/java/mariadb-java-client.jar; or MySQL Connector/J) and, if it is not in one of the searched "
    f"places, point at it with --jdbc-driver PATH or ${MYSQL_JDBC_JAR_ENV}"
)


def parse_backend(text: str | None) -> Backend:
    """``None``/``"derby"`` → Derby; ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME[?k=v]`` →
    PostgreSQL (``postgres://`` and SQLAlchemy's ``postgresql+DRIVER://`` are accepted too; the password
    may also come from ``$PGPASSWORD``, the port defaults to 5432); ``mysql://`` or ``mariadb://`` (also
    ``mysql+DRIVER://``) → MySQL/MariaDB (password also from ``$MYSQL_PWD``, port 3306). The user
    defaults to the login name, the host to ``localhost``."""
    if text is None or text.strip().lower() == "derby":
        return DerbyBackend()
    raw = text.strip()
    parts = urlsplit(raw)
    scheme = parts.scheme.lower().split("+", 1)[0]
    expected = ("expected 'derby', postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME or "
                "mysql://USER[:PASSWORD]@HOST[:PORT]/DBNAME")
    kind: type[ServerBackend]
    if scheme in ("postgresql", "postgres"):
        kind, password_env = PostgresBackend, "PGPASSWORD"
    elif scheme in ("mysql", "mariadb"):
        kind, password_env = MySQLBackend, "MYSQL_PWD"
    else:
        raise DevMetastoreError(f"unsupported metastore database {hide_password(raw)!r}: {expected}")
    database = unquote(parts.path.lstrip("/"))
    if not database or "/" in database:
        raise DevMetastoreError(f"metastore database URL {hide_password(raw)!r} names no database: {expected}")
    try:
        port = parts.port or kind.port
    except ValueError:
        raise DevMetastoreError(f"metastore database URL {hide_password(raw)!r} has an invalid port") from None
    password = unquote(parts.password) if parts.password is not None else os.environ.get(password_env)
    return kind(
        host=parts.hostname or "localhost",
        port=port,
        database=database,
        user=unquote(parts.username) if parts.username else _login_name(),
        password=password or None,
        query=parts.query,
    )


def find_postgres_jdbc_jar(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The PostgreSQL JDBC driver jar: ``explicit``, else ``$TABLESWAP_PG_JDBC_JAR``, else the
    first of :data:`JDBC_JAR_SEARCH_PATHS` that exists. Raises :class:`DevMetastoreError` naming the
    package to install when there is none, or when the named file is not a JDBC driver jar."""
    return _find_jar(explicit, JDBC_JAR_ENV, JDBC_JAR_SEARCH_PATHS, (_DRIVER_ENTRY,), "PostgreSQL",
                     _INSTALL_HINT)[0]


def find_mysql_jdbc_driver(explicit: str | os.PathLike[str] | None = None) -> JdbcDriver:
    """A MySQL or MariaDB JDBC driver: ``explicit``, else ``$TABLESWAP_MYSQL_JDBC_JAR``, else the first of
    :data:`MYSQL_JDBC_JAR_SEARCH_PATHS` holding one; the same errors as :func:`find_postgres_jdbc_jar`."""
    jar, entry = _find_jar(explicit, MYSQL_JDBC_JAR_ENV, MYSQL_JDBC_JAR_SEARCH_PATHS, tuple(_MYSQL_DRIVERS),
                           "MySQL/MariaDB", _MYSQL_INSTALL_HINT)
    driver_class, scheme, options = _MYSQL_DRIVERS[entry]
    return JdbcDriver(jar=jar, driver_class=driver_class, scheme=scheme, options=options)


def _find_jar(explicit: str | os.PathLike[str] | None, env: str, search_paths: tuple[str, ...],
              entries: tuple[str, ...], what: str, hint: str) -> tuple[Path, str]:
    """The jar (and the driver class entry it holds): named, else from ``$env``, else searched."""
    named = explicit if explicit is not None else os.environ.get(env) or None
    if named is not None:
        path = Path(named).expanduser()
        source = "--jdbc-driver" if explicit is not None else f"${env}"
        if not path.is_file():
            raise DevMetastoreError(f"{what} JDBC driver {path} ({source}) does not exist; {hint}")
        entry = _driver_entry(path, entries)
        if entry is None:
            raise DevMetastoreError(f"{path} ({source}) is not a {what} JDBC driver jar (no "
                                    f"{' or '.join(entries)} inside); {hint}")
        return path.resolve(), entry
    for pattern in search_paths:
        for candidate in sorted(Path("/").glob(pattern.lstrip("/"))) if "*" in pattern else [Path(pattern)]:
            entry = _driver_entry(candidate, entries) if candidate.is_file() else None
            if entry is not None:
                return candidate.resolve(), entry
    raise DevMetastoreError(
        f"the {what}-backed metastore needs the {what} JDBC driver, which was not found in "
        f"{', '.join(search_paths)}; {hint}"
    )


def _driver_entry(path: Path, entries: tuple[str, ...]) -> str | None:
    try:
        with zipfile.ZipFile(path) as jar:
            names = set(jar.namelist())
    except (OSError, zipfile.BadZipFile):
        return None
    return next((entry for entry in entries if entry in names), None)


def txn_schema_sql() -> str:
    return importlib.resources.files("tableswap.devmetastore").joinpath(_TXN_SCHEMA).read_text("utf-8")


def run_sql(java: str, jars_dir: Path, driver_jar: Path, backend: PostgresBackend, sql: str,
            *, timeout: float = 120.0) -> str:
    """Run ``sql`` (statements ending with ';') on ``backend`` through Hive's BeeLine, a JDBC
    command-line client shipped in the pyspark wheel; return what the queries printed (tab
    separated, no headers). Raises :class:`DevMetastoreError` with BeeLine's message on failure."""
    with tempfile.TemporaryDirectory(prefix="tableswap-sql-") as tmp:
        script = Path(tmp) / "script.sql"
        script.write_text(sql, encoding="utf-8")
        command = [
            java, "-Xmx256m", "-cp", os.pathsep.join([str(jars_dir / "*"), str(driver_jar)]), _BEELINE_CLASS,
            "-u", backend.jdbc_url, "-d", POSTGRES_DRIVER_CLASS, "-n", backend.user,
            "--silent=true", "--showHeader=false", "--outputformat=tsv2", "--autoCommit=true",
            "-f", str(script),
        ]
        if backend.password:
            secret = Path(tmp) / "password"
            secret.touch(mode=0o600)
            secret.write_text(backend.password, encoding="utf-8")
            command[command.index("-f"):command.index("-f")] = ["-w", str(secret)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL, cwd=tmp, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            raise DevMetastoreError(f"could not run BeeLine to reach {backend.describe()}: {exc}") from exc
    if done.returncode != 0:
        errors = [line.strip() for line in (done.stderr + done.stdout).splitlines()
                  if line.strip().startswith("Error:") or "FATAL" in line or "ERROR:" in line]
        detail = "; ".join(dict.fromkeys(errors)) or (done.stderr.strip()[-800:] or "no output")
        hint = ""
        if "does not exist" in detail and "database" in detail:
            hint = (f"\nhint: create it first, e.g. `createdb -h {backend.host} -p {backend.port} "
                    f"-U {backend.user} {backend.database}`")
        elif "Connection refused" in detail or "Connection to" in detail:
            hint = f"\nhint: is PostgreSQL running and listening on {backend.host}:{backend.port}?"
        elif "password authentication failed" in detail or "no password" in detail:
            hint = "\nhint: put the password in the URL (postgresql://USER:PASSWORD@...) or in $PGPASSWORD"
        raise DevMetastoreError(f"PostgreSQL at {backend.describe()} refused the metastore: {detail}{hint}")
    return done.stdout


def prepare_postgres(java: str, jars_dir: Path, driver_jar: Path, backend: PostgresBackend) -> None:
    """Check that the database is reachable and create the lock/transaction tables if missing."""
    run_sql(java, jars_dir, driver_jar, backend, txn_schema_sql())


def _login_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # pragma: no cover - no passwd entry
        return "postgres"
