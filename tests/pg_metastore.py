"""A throw-away PostgreSQL database per test session, for PostgreSQL-backed metastores.

The server is ``$TABLESWAP_TEST_POSTGRES`` (an admin URL, default
``postgresql://postgres@127.0.0.1:5432/postgres``: local server, trust auth). Databases are created
and dropped through Hive's BeeLine over JDBC (the same path the launcher uses), so the tests need
no Python PostgreSQL driver.
"""

from __future__ import annotations

import os
from typing import ContextManager

from tableswap.devmetastore import DevMetastore, process
from tableswap.devmetastore.backend import PostgresBackend, find_postgres_jdbc_jar, parse_backend, run_sql

from . import needs
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
    """A failure in CI, a skip elsewhere (``tests/needs.py``), when PostgreSQL or its driver is missing."""
    reason = unavailable_reason()
    if reason is not None:
        needs.missing("PostgreSQL and its JDBC driver", reason,
                      f"{needs.POSTGRES_INSTALL}; apt-get install libpostgresql-jdbc-java")


def sql(backend: PostgresBackend, text: str) -> str:
    return run_sql(process.find_java(None), DevMetastore._pyspark_jars_dir(), find_postgres_jdbc_jar(),
                   backend, text)


def fresh_database(prefix: str = "tswap_test") -> ContextManager[PostgresBackend]:
    """Create a database with a random name; drop it (even if still connected) afterwards."""
    return throwaway_database(admin(), sql, prefix, end=";", drop_options=" WITH (FORCE)")


def database_exists(name: str) -> bool:
    out = sql(admin(), f"SELECT count(*) FROM pg_database WHERE datname = '{name}';")
    return out.split()[-1] == "1"
