"""A database with a random name on a server the tests administer, dropped afterwards (PostgreSQL- and
MySQL-backed metastores: tests/pg_metastore.py, tests/mysql_metastore.py)."""

from __future__ import annotations

import socket
import uuid
from contextlib import contextmanager
from typing import Callable, Iterator, TypeVar

from tableswap.devmetastore.backend import DevMetastoreError, ServerBackend

B = TypeVar("B", bound=ServerBackend)


@contextmanager
def throwaway_database(server: B, run: Callable[[B, str], object], prefix: str, *, end: str = "",
                       drop_options: str = "", create: Callable[[str], None] | None = None) -> Iterator[B]:
    """Create ``PREFIX_<random>`` on ``server`` with ``run(server, statement)`` (or ``create(name)``); yield
    ``server`` on it; drop it afterwards (``drop_options`` e.g. ``WITH (FORCE)``; ``end`` closes each
    statement, e.g. ``;``)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        if create is not None:
            create(name)
        else:
            run(server, f"CREATE DATABASE {name}{end}")
        yield server.with_database(name)
    finally:
        run(server, f"DROP DATABASE IF EXISTS {name}{drop_options}{end}")


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
