"""A database with a random name on a server the tests administer, dropped afterwards (PostgreSQL- and
MySQL-backed metastores: tests/support/pg_metastore.py, tests/support/mysql_metastore.py)."""

from __future__ import annotations

import socket
import uuid
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

from tableswap.devmetastore.backend import DevMetastoreError, ServerBackend

B = TypeVar("B", bound=ServerBackend)


@contextmanager
def throwaway_database(server: B, run: Callable[[B, str], object], prefix: str, *, create: Callable[[str], None],
                       drop_options: str = "") -> Iterator[B]:
    """Create ``PREFIX_<random>`` on ``server`` with ``create(name)``; yield ``server`` on it; drop it afterwards
    with ``run(server, statement)`` (``drop_options`` e.g. ``WITH (FORCE)``)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        create(name)
        yield server.with_database(name)
    finally:
        run(server, f"DROP DATABASE IF EXISTS {name}{drop_options}")


def unreachable_or_missing(server: ServerBackend, what: str, env: str, find_driver: Callable[[], object],
                           *, missing: str | None = None) -> str | None:
    """Why tests on ``server`` cannot run here (not listening, ``missing`` if given, no JDBC driver), or None."""
    try:
        with socket.create_connection((server.host, server.port), timeout=2):
            pass
    except OSError as exc:
        return f"no {what} server at {server.host}:{server.port} ({exc}); set {env}"
    if missing is not None:
        return missing
    try:
        find_driver()
    except DevMetastoreError as exc:
        return str(exc)
    return None
