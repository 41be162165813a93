"""The ``tableswap`` connection type's hook: a :class:`~tableswap.runtime.Runtime` from an Airflow connection.

The operators (:mod:`tableswap.airflow.operators`) use it; a ``@task`` can too::

    from tableswap.airflow.hooks import TableswapHook
    from tableswap.ops.restore.rollback import plan_rollback

    with TableswapHook("tableswap_prod").runtime(read_only=True) as rt:
        print(plan_rollback("sales.events", runtime=rt).describe())
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Iterator

try:  # Airflow 3.1+: the task SDK's names
    from airflow.sdk import BaseHook
except ImportError:  # pragma: no cover - Airflow 2.x and 3.0
    from airflow.hooks.base import BaseHook

from tableswap import errors
from tableswap.airflow.connection import ConnectionSettings, from_connection
from tableswap.config import ENV_CONFIG, resolve
from tableswap.redact import mask_url
from tableswap.runtime import Runtime


class TableswapHook(BaseHook):
    """tableswap's settings from the Airflow connection ``tableswap_conn_id`` (type ``tableswap``).

    The connection's fields (docs/airflow.md#the-connection) come first; a field it leaves out comes from
    the worker's environment (``TABLESWAP_METASTORE_URI``, ``TABLESWAP_JOURNAL_URL``), then the config file
    (the connection's ``config_file``, else ``TABLESWAP_CONFIG``, else ``~/.config/tableswap/config.toml``),
    then the default, as for the library and the CLI.
    """

    conn_name_attr = "tableswap_conn_id"
    default_conn_name = "tableswap_default"
    conn_type = "tableswap"
    hook_name = "tableswap"

    def __init__(self, tableswap_conn_id: str = default_conn_name, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tableswap_conn_id = tableswap_conn_id
        self._settings: ConnectionSettings | None = None

    def get_conn(self) -> ConnectionSettings:
        """The connection's settings, read and checked once (raises ``ConfigurationError`` on a bad field)."""
        if self._settings is None:
            conn = self.get_connection(self.tableswap_conn_id)
            self._settings = from_connection(self.tableswap_conn_id, conn.extra_dejson, conn.password)
        return self._settings

    @contextmanager
    def config_file(self) -> Iterator[None]:
        """While inside: the connection's ``config_file`` is the config file tableswap reads (through
        ``TABLESWAP_CONFIG``, restored afterwards; a task runs in a process of its own)."""
        path = self.get_conn().config_file
        if path is None:
            yield
            return
        before = os.environ.get(ENV_CONFIG)
        os.environ[ENV_CONFIG] = path
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(ENV_CONFIG, None)
            else:
                os.environ[ENV_CONFIG] = before

    @contextmanager
    def runtime(self, *, read_only: bool = False) -> Iterator[Runtime]:
        """A runtime with the connection's settings (the config file's, inside :meth:`config_file`).

        ``read_only``: the caller only reads the journal unless there is something to do, so a journal that
        does not exist is an error (``JournalNotFoundError``), never created empty (as the CLI's ``rollback``
        and ``repair`` do)."""
        s = self.get_conn()
        with self.config_file():
            rt = Runtime(resolve(metastore_uri=s.metastore_uri, journal_url=s.journal_url, **s.options),
                         create_journal=not read_only)
            try:
                if read_only:
                    rt.journal  # noqa: B018 - opened first: a missing journal is the error, before any metastore call
                yield rt
            finally:
                rt.close()

    def test_connection(self) -> tuple[bool, str]:
        """Airflow's "Test" button: the settings resolve, the journal opens and the metastore answers."""
        try:
            with self.runtime(read_only=True) as rt, rt.probe_catalog(timeout_s=10) as catalog:
                catalog.ping()
                return True, f"the journal and the metastore {mask_url(rt.settings.metastore_uri)} answered"
        except errors.TableSwapError as exc:
            return False, f"{type(exc).__name__}: {exc}"
