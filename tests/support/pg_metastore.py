"""A throw-away PostgreSQL database per test session, for PostgreSQL-backed metastores.

The server is ``$TABLESWAP_TEST_POSTGRES`` (an admin URL, default
``postgresql://postgres@127.0.0.1:5432/postgres``: local server, trust auth). Databases are created,
dropped and inspected with psycopg, tableswap's own PostgreSQL driver (through Hive's BeeLine, a JVM's start,
each statement took ~6 s on this 2-core machine; BeeLine stays the launcher's own path, which the tests take
whenever they start a 2.3 metastore on PostgreSQL). A database for a standalone release (3.1/4.x) is a copy
of that release's schema template (tests/support/schema_templates.py).
"""

from __future__ import annotations

import os
from typing import ContextManager

from tableswap.devmetastore.backend import PostgresBackend, find_postgres_jdbc_jar, parse_backend

from . import needs, schema_templates
from .throwaway_db import throwaway_database, unreachable_or_missing

ADMIN_URL_ENV = "TABLESWAP_TEST_POSTGRES"
DEFAULT_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def admin() -> PostgresBackend:
    backend = parse_backend(os.environ.get(ADMIN_URL_ENV, DEFAULT_ADMIN_URL))
    assert isinstance(backend, PostgresBackend)
    return backend


def unavailable_reason() -> str | None:
    """Why PostgreSQL-backed metastore tests cannot run here, or None."""
    return unreachable_or_missing(admin(), "PostgreSQL", ADMIN_URL_ENV, find_postgres_jdbc_jar)


def skip_or_fail_if_unavailable() -> None:
    """A failure in CI, a skip elsewhere (``tests/support/needs.py``), when PostgreSQL or its driver is missing."""
    reason = unavailable_reason()
    if reason is not None:
        needs.missing("PostgreSQL and its JDBC driver", reason,
                      f"{needs.POSTGRES_INSTALL}; apt-get install libpostgresql-jdbc-java")


def sql(backend: PostgresBackend, text: str) -> str:
    """Run one statement on ``backend``'s database; its rows as BeeLine's tsv2 prints them (tab separated, no
    header, NULL for null)."""
    rows = schema_templates.pg_execute(backend, text)
    return "".join("\t".join("NULL" if v is None else str(v) for v in row) + "\n" for row in rows)


def fresh_database(prefix: str = "tswap_test", hive_version: str | None = None) -> ContextManager[PostgresBackend]:
    """Create a database with a random name; drop it (even if still connected) afterwards. For a standalone
    release (``hive_version`` 3.1.x/4.x) it holds the release's schema, copied from its template; empty
    otherwise (the 2.3 server makes its own)."""
    server = admin()
    return throwaway_database(server, schema_templates.pg_execute, prefix, drop_options=" WITH (FORCE)",
                              create=lambda name: schema_templates.pg_create(server, name, hive_version))


def database_exists(name: str) -> bool:
    return schema_templates.pg_exists(admin(), name)
