"""What differs between Hive Metastore 2.3, 3.1 and 4.x, as far as tableswap is concerned.

tableswap speaks the Hive 2.3 Thrift IDL (hmsclient). Newer servers answer it, with differences
handled here; everything is pure except :func:`server_info` (one ``getVersion`` call, cached per
connection) and :func:`call_raw` (a hand-written Thrift call, for probing methods the 2.3 IDL lacks).

Verified against HMS 2.3.10 (the jars in the pyspark wheel), 3.1.3 and 4.0.1 (standalone releases
started by ``tableswap metastore start --hive-version``; docs/metastores.md, tests/integration/test_hms_versions.py):

* **Version.** HMS 2.x and 3.1.3 answer fb303 ``getVersion`` with the hard-coded string ``"3.0"``
  (verified on 2.3.10 and 3.1.3); 4.x returns its release, e.g. ``"4.0.1"`` (verified). A ``"3.0"``
  answer is told apart by ``get_catalogs`` (3.0+; UNKNOWN_METHOD on 2.x): family "3.x" without an
  exact version. A server without the method (not a Hive Metastore) is "unknown".
* **Translated tables (Hive 4, also HDP/CDP 3.x).** A MANAGED non-ACID table created through the
  metastore is turned into ``EXTERNAL_TABLE`` with ``EXTERNAL=TRUE``, ``external.table.purge=TRUE``
  and ``TRANSLATED_TO_EXTERNAL=TRUE`` (``MetastoreDefaultTransformer``). Dropping such a table or a
  partition of it with ``deleteData`` deletes its files; ``DROP TABLE`` deletes the table directory,
  which holds tableswap's staged and displaced data. tableswap refuses such targets
  (:func:`tableswap.core.eligibility.purge_refusal`) and creates its staging table with ``external.table.purge=false``
  spelled out (:func:`staging_table_parameters`), so that dropping it never deletes data even
  on servers that default purging on.
* **Catalogs (3.0+).** Calls through the 2.3 IDL carry no catalog: a 3.x/4.x server resolves them in
  its default catalog (``metastore.catalog.default``, ``hive``). Spark's built-in Hive 2.3 client
  does the same, so both see the same table; a Spark session using a Hive 3+ client with another
  default catalog would not (:func:`tableswap.core.eligibility.catalog_refusal`).
* **Statistics.** Hive 3+ keeps ``COLUMN_STATS_ACCURATE`` as JSON and adds
  ``numFilesErasureCoded``; both are stripped on flip with the rest (``model.STATS_PARAMS``).
  ``numFilesErasureCoded`` is one of Hive 3+'s fast statistics: a partition added without it has its
  directory listed by the server to compute them (verified on 4.0.1: two S3 LISTs per added partition
  instead of one), so the staged partitions carry it (0) where no file can be erasure-coded
  (:func:`tableswap.storage.never_erasure_coded`); HMS 2.3 keeps it as a plain parameter.
* **Lock expiry.** 2.3: ``hive.txn.timeout``, reaped only with ``hive.compactor.initiator.on=true``;
  3.x/4.x: ``metastore.txn.timeout`` (alias ``hive.txn.timeout``), reaped by the housekeeping
  threads (``metastore.housekeeping.threads.on=true``) — :func:`lock_expiry_hint`.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

from thrift.Thrift import TApplicationException, TType

from tableswap import errors
from tableswap.core.catalog import PURGE_PARAM, TRANSLATED_PARAM
from tableswap.metastore.projection import exchange

class ThriftReader(Protocol):
    """What this module needs of :class:`tableswap.metastore.client.MetastoreClient` (which imports
    this module: a protocol instead of an import keeps the two free of a cycle)."""

    def read(self, what: str, fn: Callable[[Any], Any]) -> Any: ...


#: What HMS 1.x/2.x answer to getVersion (a constant in HMSHandler, not their version).
_LEGACY_VERSION_ANSWER = "3.0"

#: Parameters of the target that must not be copied onto the staging table.
_NOT_COPIED_TO_STAGING = frozenset({"transient_lastDdlTime", PURGE_PARAM, TRANSLATED_PARAM, "EXTERNAL"})


@dataclass(frozen=True)
class ServerInfo:
    """What is known about the metastore server's version."""

    family: str  # "2.x" (answers the legacy constant), "3.x", "4.x", "newer", "unknown"
    version: str | None  # the server's own version string when it reports one
    major: int | None = None
    minor: int | None = None

    @property
    def at_least_3(self) -> bool:
        return self.major is not None and self.major >= 3

    def describe(self) -> str:
        if self.family == "2.x":
            return "Hive Metastore 1.x/2.x (reports no exact version)"
        if self.family == "3.x" and not self.version:
            return "Hive Metastore 3.x (reports no exact version)"
        if self.version:
            return f"Hive Metastore {self.version}"
        return "a metastore of unknown version"


def parse_server_version(raw: str | None) -> ServerInfo:
    """Classify a ``getVersion`` answer (pure)."""
    if raw is None:
        return ServerInfo("unknown", None)
    text = raw.strip()
    if text == _LEGACY_VERSION_ANSWER:
        return ServerInfo("2.x", None)
    match = re.match(r"^(\d+)\.(\d+)(?:[.\-].*)?$", text)
    if not match:
        return ServerInfo("unknown", text or None)
    major, minor = int(match.group(1)), int(match.group(2))
    if major == 3:
        family = "3.x"
    elif major == 4:
        family = "4.x"
    elif major > 4:
        family = "newer"
    else:
        family = "2.x"
    return ServerInfo(family, text, major, minor)


_cache: "weakref.WeakKeyDictionary[ThriftReader, ServerInfo]" = weakref.WeakKeyDictionary()


def server_info(client: "ThriftReader", *, refresh: bool = False) -> ServerInfo:
    """The server's version, from one fb303 ``getVersion`` call (cached per client)."""
    if not refresh and client in _cache:
        return _cache[client]
    try:
        raw = client.read("getVersion", lambda c: c.getVersion())
    except errors.UnsupportedMetastoreError:
        info = ServerInfo("unknown", None)
    except errors.CatalogError:
        info = ServerInfo("unknown", None)
    else:
        info = parse_server_version(raw)
        if info.family == "2.x" and raw is not None and raw.strip() == _LEGACY_VERSION_ANSWER:
            info = _legacy_answer_family(client)
    _cache[client] = info
    return info


def _legacy_answer_family(client: "ThriftReader") -> ServerInfo:
    """2.x or 3.x, for a server answering getVersion with the constant "3.0": 3.0+ has catalogs."""
    try:
        call_raw(client, "get_catalogs")
    except errors.UnsupportedMetastoreError:
        return ServerInfo("2.x", None)
    except errors.CatalogError:
        return ServerInfo("unknown", None)
    return ServerInfo("3.x", None, 3, None)


def unknown_method_error(what: str, server_message: str) -> errors.UnsupportedMetastoreError:
    """The error for a server that does not implement a Thrift method tableswap calls."""
    return errors.UnsupportedMetastoreError(
        f"{what}: the metastore does not implement this call ({server_message}). tableswap needs a "
        "Hive Metastore 2.3, 3.1 or 4.x Thrift server (the Hive 2.3 API); check that "
        "TABLESWAP_METASTORE_URI points at a Hive Metastore and not at another Thrift service "
        "(HiveServer2, a catalog proxy) or a metastore too old or too new for that API"
    )


def is_unknown_method(exc: BaseException) -> bool:
    return isinstance(exc, TApplicationException) and exc.type == TApplicationException.UNKNOWN_METHOD


def staging_table_parameters(target_parameters: Mapping[str, str], extra: Mapping[str, str],
                             is_stats_param: Callable[[str], bool]) -> dict[str, str]:
    """Parameters of the staging table created from a target (pure): the target's own minus
    statistics, tableswap stamps and purge/translation markers, plus ``extra``, plus
    ``EXTERNAL=TRUE`` and ``external.table.purge=false`` spelled out."""
    params = {
        k: v for k, v in target_parameters.items()
        if not is_stats_param(k) and not k.startswith("tableswap.") and k not in _NOT_COPIED_TO_STAGING
    }
    params.update(extra)
    params["EXTERNAL"] = "TRUE"
    params[PURGE_PARAM] = "false"
    return params


TABLE_CAS_UNSUPPORTED_HINT = (
    "the metastore could not evaluate the table-parameter compare-and-swap (expected_parameter_key/"
    "value): HMS 4.0.x on Derby compares TABLE_PARAMS.PARAM_VALUE, a CLOB there, with '=' (Derby error "
    "42818); the alter_table is sent without it, the check made under the table lock stands"
)


def table_cas_unsupported(server_message: str) -> bool:
    """Whether an ``alter_table`` error is the server failing to evaluate the table-parameter
    compare-and-swap itself (pure): HMS 4.0.1 backed by Derby runs ``update "TABLE_PARAMS" set
    "PARAM_VALUE"=? where ... and "PARAM_VALUE"=?`` on a CLOB column, which Derby rejects (42818)
    inside the transaction, so nothing is written. PostgreSQL (``text``) evaluates it."""
    return "42818" in server_message and "TABLE_PARAMS" in server_message


def charset_refusal(what: str, server_message: str) -> errors.InvalidPartitionValueError | None:
    """MySQL/MariaDB refusing to compare text outside a column's character set ("Illegal mix of
    collations"): Hive's MySQL schema keeps partition names (``PARTITIONS.PART_NAME``) in latin1, so a
    partition value such as ``日本`` can be neither looked up nor stored there (seen on 4.0.1 over MariaDB
    10.11). None for any other message."""
    if "Illegal mix of collations" not in server_message:
        return None
    cause = server_message.rsplit("Root cause:", 1)[-1].strip().splitlines()[0]
    return errors.InvalidPartitionValueError(
        f"{what}: the metastore's database cannot hold these partition names: Hive's schema on MySQL/MariaDB "
        "keeps them in latin1, and a partition value with other characters (e.g. '日本') can be neither "
        "looked up nor stored there. Use Latin-1 partition values, or a metastore on PostgreSQL "
        f"(the database said: {cause})"
    )


def lock_expiry_hint(info: ServerInfo | None) -> str:
    """Which server settings make an abandoned lock expire, for error messages."""
    if info is not None and info.at_least_3:
        return ("metastore.txn.timeout, with the housekeeping threads on: "
                "metastore.housekeeping.threads.on=true")
    return "hive.txn.timeout, with hive.compactor.initiator.on=true on Hive 2.3"


#: Hive's time units (HiveConf / MetastoreConf ``TimeValidator`` suffixes), in seconds.
_TIME_UNITS = {
    "ns": 1e-9, "nsec": 1e-9, "nanosecond": 1e-9, "nanoseconds": 1e-9,
    "us": 1e-6, "usec": 1e-6, "microsecond": 1e-6, "microseconds": 1e-6,
    "ms": 1e-3, "msec": 1e-3, "millisecond": 1e-3, "milliseconds": 1e-3,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}
#: The server settings that make an unheartbeated lock expire: 3.x/4.x name first (2.3 refuses to
#: reveal it: not a ``hive.*`` key), then 2.3's (an alias on 3.x/4.x).
LOCK_TIMEOUT_KEYS = ("metastore.txn.timeout", "hive.txn.timeout")


def parse_time_value(raw: str | None) -> float | None:
    """A Hive time setting (``"300"``, ``"60s"``, ``"5m"``, ``"1500ms"``; no unit: seconds, the unit
    of ``hive.txn.timeout``) in seconds; None when absent, unparsable, not finite or not positive."""
    if raw is None:
        return None
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", raw)
    if not match:
        return None
    unit = match.group(2).lower() or "s"
    if unit not in _TIME_UNITS:
        return None
    value = float(match.group(1)) * _TIME_UNITS[unit]
    return value if 0 < value < float("inf") else None


def server_lock_timeout(client: Any) -> float | None:
    """Seconds after which the server expires a lock nobody heartbeats (``metastore.txn.timeout`` /
    ``hive.txn.timeout``, read with ``get_config_value``), or None where the server does not reveal it.
    ``client``: a :class:`~tableswap.metastore.client.MetastoreClient` (its ``config_value``)."""
    for key in LOCK_TIMEOUT_KEYS:
        try:
            value = parse_time_value(client.config_value(key))
        except errors.TableSwapError:
            return None  # unreachable now: the lock's own calls will say so
        if value is not None:
            return value
    return None


def call_raw(client: "ThriftReader", method: str) -> None:
    """Call ``method`` with no arguments over the client's connection and discard the result;
    raises the server's exception (e.g. :class:`TApplicationException` UNKNOWN_METHOD). Used to
    probe methods the Hive 2.3 IDL lacks."""

    def no_args(oprot: Any) -> None:
        oprot.writeStructBegin(f"{method}_args")
        oprot.writeFieldStop()
        oprot.writeStructEnd()

    client.read(method, lambda c: exchange(c, method, no_args, lambda iprot: iprot.skip(TType.STRUCT)))
