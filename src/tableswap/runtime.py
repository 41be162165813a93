"""The runtime: what every operation works with, built once from resolved :class:`Settings`.

    with Runtime.from_options(metastore_uri=..., journal_url=...) as rt:
        with rt.catalog() as catalog:        # pooled catalog connection, pinged first
            ...
        rt.journal                           # the swap journal (opened on first use)
        rt.table_lock(catalog, db, name, owner)  # the catalog's exclusive table lock, heartbeated

The library's entry points accept ``runtime=`` (the CLI builds one per command and passes it) or
build their own from keyword options, the environment and the config file (:func:`use`); settings
are resolved once, never again further down.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, ContextManager, Iterator

from tableswap import hooks as _hooks
from tableswap.config import Settings, resolve
from tableswap.journal.store import Journal
from tableswap.core.catalog_port import Capabilities, Catalog, CatalogLock
from tableswap.core.deprecated import warn_renamed
from tableswap.glue.catalog import GlueCatalog
from tableswap.glue.client import DEFAULT_LOCK_TABLE
from tableswap.glue.uri import is_glue_uri
from tableswap.metastore.catalog import HiveMetastoreCatalog
from tableswap.metastore.pool import POOL


def open_catalog(uri: str, *, glue_lock_table: str = DEFAULT_LOCK_TABLE, **options: Any) -> Catalog:
    """The catalog adapter a metastore URI selects (not yet connected); this is the one place that maps a
    URI to an implementation of the port. ``thrift://``: the Hive Metastore (a comma-separated list names a
    highly available one); ``glue://REGION`` or ``glue://``: the AWS Glue Data Catalog, its table leases in
    the DynamoDB table ``glue_lock_table``. Anything else is a :class:`ConfigurationError`."""
    if is_glue_uri(uri):
        options.pop("security", None)  # Glue authenticates through AWS credentials
        return GlueCatalog(uri, lock_table=glue_lock_table, **options)
    return HiveMetastoreCatalog(uri, **options)


class Runtime:
    """Catalog connections (pooled), the journal and table locks for one set of :class:`Settings`."""

    def __init__(self, settings: Settings, *, journal: Journal | None = None, create_journal: bool = True) -> None:
        """``create_journal=False``: read-only use; a journal that does not exist is an error
        (:class:`~tableswap.errors.JournalNotFoundError`), never created."""
        self.settings = settings
        self.create_journal = create_journal
        #: The post-commit hooks (tableswap.hooks), built now: a bad one is refused before anything runs.
        self.hooks = _hooks.build(settings.hooks.hooks)
        self._journal = journal
        self._owns_journal = journal is None
        self._journal_lock = threading.Lock()  # threads sharing a runtime open one journal

    @classmethod
    def from_options(cls, *, spark: Any = None, metastore_uri: str | None = None, journal_url: str | None = None,
                     **options: Any) -> "Runtime":
        """Settings resolved as everywhere: keyword > environment > config file > Spark conf / defaults."""
        return cls(resolve(spark=spark, metastore_uri=metastore_uri, journal_url=journal_url, **options))

    # ------------------------------------------------------------------ metastore
    def catalog_options(self) -> dict[str, Any]:
        s = self.settings
        options: dict[str, Any] = {"timeout_s": s.metastore_timeout_s, "connect_attempts": s.connect_attempts,
                   "write_batch_size": s.write_batch_size}
        if s.metastore_security.secured:
            options["security"] = s.metastore_security
        return options

    def new_catalog(self) -> Catalog:
        """A fresh, unpooled catalog connection (closed by its user)."""
        return open_catalog(self.settings.metastore_uri, glue_lock_table=self.settings.glue_lock_table,
                            **self.catalog_options())

    @property
    def capabilities(self) -> Capabilities:
        """The configured catalog's declared capabilities, without connecting to it."""
        return self.new_catalog().capabilities

    def probe_catalog(self, *, timeout_s: float = 15.0) -> Catalog:
        """A fresh catalog connection that connects once, with at most ``timeout_s`` per call: for diagnostics
        (``tableswap doctor``), which must answer quickly rather than retry."""
        options = {**self.catalog_options(), "connect_attempts": 1,
                   "timeout_s": min(self.settings.metastore_timeout_s, timeout_s)}
        return open_catalog(self.settings.metastore_uri, glue_lock_table=self.settings.glue_lock_table, **options)

    def catalog(self, *, ping: bool = True) -> ContextManager[Catalog]:
        """A catalog connection for one operation, reused from (and given back to) the process's
        pool; pinged first unless ``ping=False``. Pooled per URI and options. Calling it twice
        gives two connections (a swap's side connection overlaps Spark work in another thread)."""
        key = (self.settings.metastore_uri, self.settings.glue_lock_table, *sorted(self.catalog_options().items()))
        return POOL.client(key, self.new_catalog, ping=ping)

    # The former names (``client`` for the catalog port), kept for one release with a warning.
    def client(self, *, ping: bool = True) -> ContextManager[Catalog]:
        """Deprecated: :meth:`catalog`."""
        warn_renamed("Runtime.client()", "Runtime.catalog()")
        return self.catalog(ping=ping)

    def new_client(self) -> Catalog:
        """Deprecated: :meth:`new_catalog`."""
        warn_renamed("Runtime.new_client()", "Runtime.new_catalog()")
        return self.new_catalog()

    def probe_client(self, *, timeout_s: float = 15.0) -> Catalog:
        """Deprecated: :meth:`probe_catalog`."""
        warn_renamed("Runtime.probe_client()", "Runtime.probe_catalog()")
        return self.probe_catalog(timeout_s=timeout_s)

    def table_lock(self, catalog: Catalog, db: str, table: str, owner: str) -> CatalogLock:
        """The table's exclusive lock, as ``catalog`` provides it (not yet acquired: use it as a
        context manager); ``owner`` (a swap id, ``recover-<id>``, ``janitor-<run>``) is shown to other
        holders."""
        s = self.settings
        return catalog.table_lock(db, table, owner=owner, timeout_s=s.lock_timeout_s, heartbeat_s=s.heartbeat_s)

    @contextmanager
    def session(self, *, ping: bool = True) -> Iterator[tuple[Catalog, Journal]]:
        """A pooled metastore connection and the journal for one operation. The journal is opened
        first: a journal that cannot be opened is the error reported, before the metastore's."""
        journal = self.journal
        with self.catalog(ping=ping) as catalog:
            yield catalog, journal

    # ------------------------------------------------------------------ journal
    @property
    def journal(self) -> Journal:
        if self._journal is None:
            with self._journal_lock:
                if self._journal is None:
                    self._journal = Journal(self.settings.journal_url, create=self.create_journal)
        return self._journal

    def close(self) -> None:
        if self._owns_journal and self._journal is not None:
            self._journal.close()
            self._journal = None

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextmanager
def use(runtime: Runtime | None, *, spark: Any = None, metastore_uri: str | None = None,
        journal_url: str | None = None, **options: Any) -> Iterator[Runtime]:
    """``runtime`` when given (left open for its owner), else one built from the options and closed
    afterwards. Options next to a runtime are refused: the runtime's settings are final."""
    if runtime is not None:
        if metastore_uri or journal_url or options:
            from tableswap.errors import ConfigurationError

            raise ConfigurationError("pass either runtime=... or connection options, not both")
        yield runtime
        return
    with Runtime.from_options(spark=spark, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        yield rt
