"""A throw-away MySQL/MariaDB database per test, for MySQL-backed metastores (3.1/4.x releases).

The server is ``$TABLESWAP_TEST_MYSQL`` (an admin URL, default
``mysql://tableswap:tableswap@127.0.0.1:3306/mysql``: a
local server with a user allowed to create databases, what ``.ci/run`` sets up). Databases
are created and dropped with the server's own command-line client (``mariadb`` or ``mysql``), so the
tests need no Python MySQL driver.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import ContextManager

from tableswap.devmetastore.backend import MySQLBackend, find_mysql_jdbc_driver, parse_backend

from . import needs, schema_templates
from .throwaway_db import throwaway_database, unreachable_or_missing

ADMIN_URL_ENV = "TABLESWAP_TEST_MYSQL"
DEFAULT_ADMIN_URL = "mysql://tableswap:tableswap@127.0.0.1:3306/mysql"
INSTALL = ("apt-get install mariadb-server libmariadb-java, start it (service mariadb start) and create a user "
           "tableswap identified by tableswap with all privileges (what .ci/run does)")


def admin() -> MySQLBackend:
    backend = parse_backend(os.environ.get(ADMIN_URL_ENV, DEFAULT_ADMIN_URL))
    assert isinstance(backend, MySQLBackend), f"${ADMIN_URL_ENV} must be a mysql:// URL"
    return backend


def _client() -> str | None:
    return shutil.which("mariadb") or shutil.which("mysql")


def unavailable_reason() -> str | None:
    """Why MySQL-backed metastore tests cannot run here, or None: no server listening, no command-line client,
    no JDBC driver, or a server that refuses the admin user (a MariaDB without the user .ci/run creates)."""
    missing = None if _client() is not None else "no mariadb or mysql command-line client on PATH"
    return (unreachable_or_missing(admin(), "MySQL/MariaDB", ADMIN_URL_ENV, find_mysql_jdbc_driver, missing=missing)
            or _refused(admin()))


def _refused(backend: MySQLBackend) -> str | None:
    done = _run(backend, "SELECT 1")
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return f"{backend.describe()} refused the login ({said}); set {ADMIN_URL_ENV}"
    return None


def skip_or_fail_if_unavailable() -> None:
    """A failure in CI, a skip elsewhere (``tests/support/needs.py``), when MySQL/MariaDB or its driver is missing."""
    __tracebackhide__ = True  # the skip is reported at the test that needs it
    reason = unavailable_reason()
    if reason is not None:
        needs.missing("MySQL or MariaDB and a JDBC driver for it", reason, INSTALL)


def sql(backend: MySQLBackend, text: str) -> str:
    """Run ``text`` on ``backend``'s database; what the queries printed (tab separated, no headers)."""
    done = _run(backend, text)
    assert done.returncode == 0, f"{text!r} on {backend.describe()}: {done.stderr.strip()}"
    return done.stdout


def _run(backend: MySQLBackend, text: str) -> subprocess.CompletedProcess:
    client = _client()
    assert client is not None, "no mariadb or mysql client"
    env = {**os.environ, "MYSQL_PWD": backend.password or ""}
    return subprocess.run([client, "-h", backend.host, "-P", str(backend.port), "-u", backend.user, "--batch",
                           "--skip-column-names", "-e", text, backend.database],
                          capture_output=True, text=True, timeout=60, env=env, check=False)


def fresh_database(prefix: str = "tswap_test", hive_version: str | None = None) -> ContextManager[MySQLBackend]:
    """Create a database with a random name; drop it afterwards. For a standalone release (``hive_version``
    3.1.x/4.x) it holds the release's schema, loaded from its template's dump (tests/support/schema_templates.py)."""
    server = admin()

    def create(name: str) -> None:
        sql(server, f"CREATE DATABASE {name}")
        if schema_templates.applies(hive_version):
            assert hive_version is not None
            schema_templates.mysql_load(server.with_database(name),
                                        schema_templates.mysql_dump(server, hive_version, sql))

    return throwaway_database(server, sql, prefix, create=create)


def database_exists(name: str) -> bool:
    return sql(admin(), f"SELECT count(*) FROM information_schema.schemata WHERE schema_name = '{name}'").split() == ["1"]
