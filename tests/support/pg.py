"""PostgreSQL for the journal tests: one server, a fresh schema per test, dropped afterwards.

The server is ``TABLESWAP_TEST_POSTGRES_URL`` (default ``postgresql://postgres@127.0.0.1:5432/test``,
the CI service: trust auth). A test's journal URL selects its schema with
``?options=-csearch_path%3D<schema>``. An unreachable server fails the PostgreSQL tests in CI and skips
them elsewhere, saying what to install (the rule of ``tests/support/needs.py``).
"""

from __future__ import annotations

import os
import secrets
import urllib.parse

import sqlalchemy as sa

from tableswap import errors
from tableswap.journal.db import create_engine

from . import needs

PG_URL_ENV = "TABLESWAP_TEST_POSTGRES_URL"
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
SCHEMA_PREFIX = "tswap_test_"


def server_url() -> str:
    return os.environ.get(PG_URL_ENV) or DEFAULT_PG_URL


def schema_url(base: str, schema: str) -> str:
    """``base`` with its connections' search_path set to ``schema``."""
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={urllib.parse.quote(f'-csearch_path={schema}')}"


class PgServer:
    """Creates and drops the per-test schemas of one test session."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session = secrets.token_hex(4)
        self.engine = create_engine(url).execution_options(isolation_level="AUTOCOMMIT")
        self._n = 0

    def check(self) -> None:
        with self.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))

    def new_schema(self) -> str:
        self._n += 1
        name = f"{SCHEMA_PREFIX}{self.session}_{self._n}"
        with self.engine.connect() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{name}"'))
        return name

    def drop_schema(self, name: str) -> None:
        with self.engine.connect() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))

    def drop_session_schemas(self) -> list[str]:
        with self.engine.connect() as conn:
            left = [r[0] for r in conn.execute(sa.text(
                "SELECT nspname FROM pg_namespace WHERE nspname LIKE :p"), {"p": f"{SCHEMA_PREFIX}{self.session}_%"})]
        for name in left:
            self.drop_schema(name)
        return left

    def schemas(self) -> set[str]:
        with self.engine.connect() as conn:
            return {r[0] for r in conn.execute(sa.text("SELECT nspname FROM pg_namespace"))}


def start_server() -> PgServer:
    """The session's server; unreachable: a failure in CI, a skip elsewhere."""
    server = PgServer(server_url())
    try:
        server.check()
        return server
    except errors.JournalError as exc:
        problem = str(exc)
    server.engine.dispose()
    needs.missing(f"a PostgreSQL server at {server_url()} (or ${PG_URL_ENV})", problem, needs.POSTGRES_INSTALL)
