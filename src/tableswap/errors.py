"""The one exception root of tableswap and its subclasses.

Every error the library raises on purpose is a :class:`TableSwapError`; its message never shows a
secret (:mod:`tableswap.redact` masks URL passwords and secret parameters). Subclasses say whether the
failure is *transient* (retrying the same call may succeed: a lost race, a held lock, a metastore
that is not reachable right now) or *terminal* (the input or the target must change first).
"""

from __future__ import annotations


import warnings
from typing import TYPE_CHECKING, Any, Iterable

from tableswap.redact import mask_text


def listing(items: Iterable[str], limit: int = 5) -> str:
    """``a; b; c (+N more)``: the first ``limit`` items of a list of problems, and how many more."""
    items = list(items)
    return "; ".join(items[:limit]) + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


class TableSwapError(Exception):
    """Root of every error tableswap raises. ``retryable`` tells whether a rerun may succeed.

    Errors carry their data: ``table`` (``db.table``) and ``swap_id`` when they concern one, so that
    callers (and the CLI's ``--json``) need not parse the message. :meth:`to_dict` gives them all.
    """

    retryable: bool = False
    #: Tuple-valued attributes of a subclass that :meth:`to_dict` lists when not empty.
    listed: tuple[str, ...] = ()

    def __init__(self, message: str = "", *, table: str | None = None, swap_id: str | None = None) -> None:
        # No message carries a secret: URL passwords and secret parameters are masked (tableswap.redact).
        super().__init__(mask_text(message) if message else message)
        self.table = table
        self.swap_id = swap_id

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": str(self), "error_type": type(self).__name__, "retryable": self.retryable}
        if type(self).__name__ in FORMER_NAMES:  # for one release: scripts that match the old name
            out["deprecated_error_type"] = FORMER_NAMES[type(self).__name__]
        for name in ("table", "swap_id"):
            if getattr(self, name, None) is not None:
                out[name] = getattr(self, name)
        for name in self.listed:
            if getattr(self, name, ()):
                out[name] = list(getattr(self, name))
        return out


class TerminalError(TableSwapError):
    """The same call will fail again until its input or its target changes."""

    retryable = False


class TransientError(TableSwapError):
    """The same call may succeed when retried later."""

    retryable = True


# --- configuration and connectivity -----------------------------------------------------------


class ConfigurationError(TerminalError):
    """A required setting is missing or malformed."""


class CatalogUnavailableError(TransientError):
    """The catalog (a Hive Metastore, the AWS Glue Data Catalog) could not be reached (the message names it).
    Formerly ``MetastoreUnavailableError``, a deprecated name of this class."""


class CatalogError(TerminalError):
    """The catalog (a Hive Metastore, the AWS Glue Data Catalog) rejected a call. Formerly ``MetastoreError``,
    a deprecated name of this class."""


class UnsupportedMetastoreError(CatalogError):
    """The server does not implement a Thrift call tableswap needs (not a Hive Metastore 2.3-4.x)."""


class MetastoreAuthenticationError(TerminalError):
    """The security handshake with a secured metastore (Kerberos SASL/GSSAPI, TLS) failed before any call was
    sent: nothing was read, changed or locked. ``reason`` says which failure (a short code, also in ``--json``);
    ``principal``: the client principal configured (None: the ticket cache's); ``service_principal``: the
    metastore's principal the client asked a ticket for; ``uri``: the metastore's URI."""

    def __init__(self, message: str = "", *, reason: str = "", principal: str | None = None,
                 service_principal: str | None = None, uri: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.principal = principal
        self.service_principal = service_principal
        self.uri = uri

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for name in ("reason", "principal", "service_principal", "uri"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        return out


class KerberosTicketError(MetastoreAuthenticationError):
    """This process has no usable Kerberos credentials: no ticket, an expired one, an unreadable keytab, or a
    client principal the KDC does not accept (``reason``: ``no_ticket``, ``expired_ticket``,
    ``keytab_unreadable``, ``client_rejected``)."""


class KerberosServicePrincipalError(MetastoreAuthenticationError):
    """The metastore's service principal is not the one asked for: unknown to the KDC (a wrong service name,
    host or realm: ``unknown_service``) or not the one the server runs as (``rejected``)."""


class KerberosSetupError(MetastoreAuthenticationError, ConfigurationError):
    """Kerberos is configured but the Python packages it needs are missing (``reason``:
    ``missing_dependency``)."""


class MetastoreTlsError(MetastoreAuthenticationError):
    """The TLS handshake failed: an untrusted certificate (``untrusted``), a plain Thrift port reached with TLS
    (``not_tls``), a server (or the TLS proxy in front of it) that requires a client certificate
    (``client_certificate_required``) or does not trust this one (``client_certificate_refused``), TLS files
    that cannot be used (``files``, ``key_encrypted``) or another handshake failure (``handshake``)."""


class MetastoreSecurityMismatchError(MetastoreAuthenticationError):
    """The client and the server disagree on the transport: a Kerberos (SASL) client at a plain port
    (``not_sasl``), or a plain client at a SASL or TLS port (``secured_server``)."""


class StorageError(TransientError):
    """The table's storage (a file system, an object store's endpoint) could not be read or written; the
    message names the location."""


class StorageAuthenticationError(TerminalError):
    """A Kerberized HDFS refused tableswap's HDFS client before any call was served: nothing was read, deleted or
    changed there. ``reason``: ``no_ticket``, ``expired_ticket``, ``rejected`` (another GSSAPI failure),
    ``principal_not_in_keytab``, ``unknown_principal`` or ``keytab_login_failed`` (a keytab login,
    ``[hdfs] kerberos_keytab``), ``no_kinit``; ``principal``: the keytab login's principal (None: the ticket
    cache's); ``location``: where tableswap was going."""

    def __init__(self, message: str = "", *, reason: str = "", principal: str | None = None,
                 location: str | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.principal = principal
        self.location = location

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for name in ("reason", "principal", "location"):
            if getattr(self, name):
                out[name] = getattr(self, name)
        return out


class DependencyError(ConfigurationError):
    """A JVM part tableswap needs (the S3A jars, say) is missing and could not be resolved."""


class JournalError(TerminalError):
    """The swap journal could not be opened or written."""


class JournalNotFoundError(JournalError):
    """A read-only command found no journal at the configured URL (a missing SQLite file or directory, or a
    database without the journal's tables); nothing was created. ``url``: the journal's URL, masked."""

    def __init__(self, message: str = "", *, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.url:
            out["journal_url"] = self.url
        return out


# --- bad input: nothing was changed ------------------------------------------------------------


class InvalidInputError(TerminalError):
    """The request cannot be carried out as given; nothing was changed."""


class TableNotFoundError(InvalidInputError):
    """The database or table does not exist."""

    @classmethod
    def of(cls, db: str, name: str, *, database_exists: bool = True) -> "TableNotFoundError":
        """``table DB.NAME does not exist``, or ``database 'DB' does not exist`` when that is why."""
        if not database_exists:
            return cls(f"database {db!r} does not exist", table=f"{db}.{name}")
        return cls(f"table {db}.{name} does not exist", table=f"{db}.{name}")


class UnsupportedTableError(InvalidInputError):
    """The target is a view, a MANAGED table, or uses a storage format tableswap does not handle."""


class PartitioningMismatchError(InvalidInputError):
    """A partitioned target given to ``swap_table`` or an unpartitioned one to ``swap_partitions``."""


class SchemaMismatchError(InvalidInputError):
    """The DataFrame's columns do not match the target's columns by name and type."""


class InvalidPartitionValueError(InvalidInputError):
    """A partition value cannot be stored by the Hive Metastore."""


class ScopeViolationError(InvalidInputError):
    """The batch has rows outside the swap's ``replace_where`` scope; nothing was changed.
    ``outside``: those partitions' names."""

    listed = ("outside",)

    def __init__(self, message: str = "", *, table: str | None = None, swap_id: str | None = None,
                 outside: Iterable[str] = ()) -> None:
        super().__init__(message, table=table, swap_id=swap_id)
        self.outside = tuple(outside)


class DuplicateKeyError(InvalidInputError):
    """``merge_partitions``: some key (the ``on`` columns) occurs more than once in the updates, so which row
    wins would be arbitrary; nothing was changed. ``keys``: a few of those keys, each as ``col=value, ...``."""

    listed = ("keys",)

    def __init__(self, message: str = "", *, table: str | None = None, swap_id: str | None = None,
                 keys: Iterable[str] = ()) -> None:
        super().__init__(message, table=table, swap_id=swap_id)
        self.keys = tuple(keys)


class EmptyBatchError(InvalidInputError):
    """The batch holds no rows; swapping it in would silently wipe data."""


# --- swap-time failures --------------------------------------------------------------------------


class StagingWriteError(TerminalError):
    """Spark failed to write the batch into the staging location; the target is untouched."""


class CompactionMismatchError(StagingWriteError):
    """``compact_partitions``: the rewritten files do not hold the same rows as the files they would replace
    (row count or content checksum differ); the staged data was discarded and nothing was changed."""


class SwapConflictError(TransientError):
    """The target changed since the swap was planned (compare-and-swap failed); nothing was changed.

    Rerun the swap: it plans again against the current state. ``conflicts``: one line per partition
    (or the table location) that is not where the plan expected it.
    """

    def __init__(self, message: str = "", *, table: str | None = None, swap_id: str | None = None,
                 conflicts: Iterable[str] = ()) -> None:
        super().__init__(message, table=table, swap_id=swap_id)
        self.conflicts = tuple(conflicts)

    @classmethod
    def of(cls, table: str, conflicts: Iterable[str], *, since: str, then: str, changed: str = "nothing was changed",
           swap_id: str | None = None) -> "SwapConflictError":
        """``<table> changed <since>; <changed>. <then>. Conflicts: a; b (+N more)``."""
        conflicts = tuple(conflicts)
        return cls(f"{table} changed {since}; {changed}. {then}. Conflicts: {listing(conflicts)}",
                   table=table, swap_id=swap_id, conflicts=conflicts)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.conflicts:
            out["conflicts"] = list(self.conflicts)
        return out


class LockTimeoutError(TransientError):
    """The table lock could not be acquired in time; the message names the current holder."""


class LockLostError(LockTimeoutError):
    """The table lock was held, then lost: the server expired it (no heartbeat within its
    ``hive.txn.timeout``) or another client removed it. Raised before a write is sent under it, so
    when raised before the flip nothing was changed; rerun the operation."""


class CommitStateUnknownError(TableSwapError):
    """The flip's outcome could not be determined; run ``tableswap recover`` before anything else."""

    retryable = False


class CommitNotRecordedError(CommitStateUnknownError):
    """The flip landed (readers see the new data), but the journal could not record the commit: the
    entry is still ``pending``, the displaced data not yet queued for the janitor, the temporary table
    still there. ``tableswap recover`` records it and cleans up; the cause is ``__cause__``."""


class AuditFailedError(TerminalError):
    """An audit (``audit=`` on a swap) refused the staged batch: nothing a reader sees changed. ``check``: the
    name of the check that refused it; ``kept``: the staged data was kept for inspection as a staged swap
    (``tableswap staged``, then ``tableswap publish`` or ``tableswap discard``); the check's own exception, if
    it raised one, is ``__cause__``."""

    def __init__(self, message: str = "", *, table: str | None = None, swap_id: str | None = None,
                 check: str | None = None, kept: bool = False) -> None:
        super().__init__(message, table=table, swap_id=swap_id)
        self.check = check
        self.kept = kept

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "check": self.check, "kept": self.kept}


class NotStagedError(TerminalError):
    """A publish or discard named a swap that is not (or no longer) staged: already published, discarded, or
    never staged. ``state``: its journal state. Nothing was changed."""

    def __init__(self, message: str = "", *, table: str | None = None, swap_id: str | None = None,
                 state: str | None = None) -> None:
        super().__init__(message, table=table, swap_id=swap_id)
        self.state = state

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "state": self.state}


class UnsafeOperationError(TerminalError):
    """An operation was refused because it could lose data (for example a rollback to a deleted path)."""


class StagedBatchChangedError(UnsafeOperationError):
    """A publish found its staged swap no longer as it was staged: its staging directory's data files differ
    from those journaled when it was staged (deleted, added, resized), or its target's format or columns
    differ from those the batch was written for (a table dropped and re-created meanwhile). Nothing was
    changed; the swap is still staged. ``differences``: one line per difference."""

    listed = ("differences",)

    def __init__(self, message: str = "", *, table: str | None = None, swap_id: str | None = None,
                 differences: Iterable[str] = ()) -> None:
        super().__init__(message, table=table, swap_id=swap_id)
        self.differences = tuple(differences)


class SqlStatementRefusedError(UnsafeOperationError):
    """``tableswap sql`` refused a statement it cannot run as a swap with Spark's own semantics (IF NOT EXISTS,
    a column list, a table of another catalog, ...). Raised before any statement of the script runs, so
    nothing ran. ``statement``: its 1-based number in the script."""

    def __init__(self, message: str = "", *, table: str | None = None, statement: int | None = None) -> None:
        super().__init__(message, table=table)
        self.statement = statement

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "statement": self.statement}


class SqlStatementFailedError(TerminalError):
    """A statement of a ``tableswap sql`` script failed in Spark. The statements before it ran (each swap
    committed); the failed one and those after it did not change anything tableswap swaps. ``statement``:
    its 1-based number; ``completed``: how many ran before it."""

    def __init__(self, message: str = "", *, statement: int | None = None, completed: int = 0) -> None:
        super().__init__(message)
        self.statement = statement
        self.completed = completed

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "statement": self.statement, "completed": self.completed}


class NotFoundError(TerminalError):
    """A swap, partition or journal entry named by the caller does not exist."""


class PastDataMissingError(NotFoundError):
    """A past state of a table cannot be read: data it referenced was deleted by the janitor or is
    no longer on storage. ``missing``: those locations."""

    listed = ("missing",)

    def __init__(self, message: str = "", *, table: str | None = None, swap_id: str | None = None,
                 missing: Iterable[str] = ()) -> None:
        super().__init__(message, table=table, swap_id=swap_id)
        self.missing = tuple(missing)


class BackfillFailedError(TerminalError):
    """Some units of a backfill failed (the others ran). ``report``: the
    :class:`~tableswap.ops.write.backfill.BackfillReport`; rerun the same backfill to retry the units not done."""

    def __init__(self, message: str = "", *, table: str | None = None, report: Any = None) -> None:
        super().__init__(message, table=table)
        self.report = report

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        if self.report is not None:
            out["backfill"] = self.report.status.to_dict()
        return out


#: The classes renamed because they are raised for every catalog (one name per concept), by their new name:
#: the old one. For one release ``tableswap.errors.<old name>`` is the same class, with a ``DeprecationWarning``.
FORMER_NAMES = {"CatalogError": "MetastoreError", "CatalogUnavailableError": "MetastoreUnavailableError"}
_DEPRECATED = {old: new for new, old in FORMER_NAMES.items()}


if TYPE_CHECKING:  # the type checker sees the old names as the aliases they are; at run time they warn (below)
    MetastoreError = CatalogError
    MetastoreUnavailableError = CatalogUnavailableError
else:
    def __getattr__(name: str) -> Any:
        if name in _DEPRECATED:
            new = _DEPRECATED[name]
            warnings.warn(f"tableswap.errors.{name} is deprecated: it is {new} (the same class), raised for "
                          f"every catalog; the old name is kept for one release only", DeprecationWarning,
                          stacklevel=2)
            return globals()[new]
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
