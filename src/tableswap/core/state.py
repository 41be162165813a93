"""State tokens: what a read-modify-write job saw of a table, to check at commit that it has not changed.

A token is an opaque, versioned string (``tswap1.`` + compressed, URL-safe data) made by
:func:`tableswap.table_state` or carried by :attr:`tableswap.SwapResult.state_token`. It holds, for the
table and for each partition it covers, a short fingerprint of what the metastore already says about
it: its location and the swap-id stamp tableswap writes on everything it flips (an object tableswap
never flipped is fingerprinted by its location and the metastore's ``transient_lastDdlTime`` instead,
which Hive and Spark update when they rewrite it in place). No extra metastore call is needed to check
it: a swap compares it with the state it reads under the table lock anyway.

A token covers either every partition of the table (``complete``: a partition absent from it was
absent then) or only the partitions it was taken for (a partition it does not name is not checked).
Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import zlib
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Iterable, Mapping

from tableswap.core import locations as loc
from tableswap.errors import InvalidInputError
from tableswap.core.catalog import SWAP_ID_PARAM
from tableswap.core.records import SwapKind

VERSION = 1
PREFIX = "tswap"
ABSENT = "-"  # the fingerprint of a partition that did not exist
TABLE = ""  # the entry name of an unpartitioned table's own state
DDL_TIME_PARAM = "transient_lastDdlTime"
_TABLE_KIND, _PARTITIONS_KIND = SwapKind.TABLE.value, SwapKind.PARTITIONS.value


def fingerprint(location: str | None, stamp: str | None, ddl_time: str | None = None) -> str:
    """A short digest of one partition's (or unpartitioned table's) state: its location and the swap
    id tableswap stamped on it, or, never flipped by tableswap, its location and DDL time."""
    where = loc.key(location) if location else ""  # one spelling of one store: one fingerprint
    what = f"s:{stamp}" if stamp else f"d:{ddl_time or ''}"
    digest = hashlib.blake2b(f"{where}\0{what}".encode(), digest_size=9).digest()
    return base64.urlsafe_b64encode(digest).decode()


def fingerprint_of(obj: Any) -> str:
    """:func:`fingerprint` of a ``PartitionInfo``/``TableInfo`` (anything with ``location`` and
    ``parameters``), or :data:`ABSENT` for ``None``."""
    if obj is None:
        return ABSENT
    params = obj.parameters or {}
    return fingerprint(obj.location, params.get(SWAP_ID_PARAM), params.get(DDL_TIME_PARAM))


@dataclass(frozen=True)
class TableState:
    """The decoded content of a state token."""

    table: str  # db.table
    partitioned: bool
    complete: bool  # covers every partition of the table (partitioned tables only)
    entries: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def encode(self) -> str:
        body = {"t": self.table, "k": _PARTITIONS_KIND if self.partitioned else _TABLE_KIND,
                "c": self.complete, "e": dict(sorted(self.entries.items()))}
        raw = zlib.compress(json.dumps(body, separators=(",", ":")).encode(), 6)
        return f"{PREFIX}{VERSION}." + base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @classmethod
    def decode(cls, token: Any) -> "TableState":
        """Parse a token; :class:`InvalidInputError` if it is not one this version of tableswap made."""
        if not isinstance(token, str):
            raise InvalidInputError(
                f"if_unchanged_since must be a state token string from tableswap.table_state() or "
                f"SwapResult.state_token, got {type(token).__name__}; nothing was changed")
        head, dot, data = token.strip().partition(".")
        if head.startswith(PREFIX) and head[len(PREFIX):].isdigit() and int(head[len(PREFIX):]) != VERSION:
            raise InvalidInputError(
                f"the state token is of version {head[len(PREFIX):]}, this tableswap reads version {VERSION} "
                "only; take a new one with tableswap.table_state(). Nothing was changed")
        try:
            if head != f"{PREFIX}{VERSION}" or not dot:
                raise ValueError("no tswap1. prefix")
            body = json.loads(zlib.decompress(base64.urlsafe_b64decode(data + "=" * (-len(data) % 4))))
            table, kind, complete, entries = body["t"], body["k"], body["c"], body["e"]
            if (not isinstance(table, str) or kind not in (_TABLE_KIND, _PARTITIONS_KIND)
                    or not isinstance(complete, bool) or not isinstance(entries, dict)
                    or not all(isinstance(k, str) and isinstance(v, str) for k, v in entries.items())):
                raise ValueError("unexpected content")
        except (ValueError, KeyError, TypeError, zlib.error, binascii.Error) as exc:
            shown = token if len(token) <= 40 else token[:40] + "..."
            raise InvalidInputError(
                f"{shown!r} is not a tableswap state token ({exc}); pass the string tableswap.table_state() "
                "or SwapResult.state_token returned, unchanged. Nothing was changed") from None
        return cls(table, kind == _PARTITIONS_KIND, complete, MappingProxyType(entries))

    def require_for(self, table: str, *, partitioned: bool) -> "TableState":
        """This state, if it was taken of ``table`` (``db.table``) of that shape; else
        :class:`InvalidInputError`."""
        if self.table != table:
            raise InvalidInputError(
                f"the state token was taken of {self.table}, not of {table}; pass a token of the table you "
                "swap into. Nothing was changed")
        if self.partitioned != partitioned:
            shape = "a partitioned" if self.partitioned else "an unpartitioned"
            needs = "swap_partitions takes a token of a partitioned" if partitioned else \
                "swap_table takes a token of an unpartitioned"
            raise InvalidInputError(
                f"the state token describes {self.table} as {shape} table; {needs} table (if the table was "
                "recreated since, take a new token). Nothing was changed")
        return self

    def covers(self, name: str) -> bool:
        return self.complete or name in self.entries

    def then(self, name: str) -> str:
        """The fingerprint of partition ``name`` (``""``: the table) when the token was taken."""
        return self.entries.get(name, ABSENT)


def partition_state(table: str, partitions: Iterable[tuple[str, Any]], *, complete: bool) -> TableState:
    """The state of a partitioned table: ``partitions`` are ``(name, PartitionInfo or None)``."""
    return TableState(table, True, complete,
                      MappingProxyType({name: fingerprint_of(p) for name, p in partitions}))


def table_only_state(table: str, info: Any) -> TableState:
    """The state of an unpartitioned table (its location and stamp)."""
    return TableState(table, False, True, MappingProxyType({TABLE: fingerprint_of(info)}))


def describe_change(name: str, before: str, now: Any) -> str:
    """One line of a conflict: how partition ``name`` (``""``: the table) differs from the token."""
    what = name or "the table"
    if before == ABSENT:
        return f"{what} was added since the state token was taken (now at {now.location})"
    if now is None:
        return f"{what} was dropped since the state token was taken"
    stamp = (now.parameters or {}).get(SWAP_ID_PARAM)
    by = f", by swap {stamp}" if stamp else ""
    return f"{what} changed since the state token was taken (now at {now.location}{by})"


def state_after(plan: Any) -> TableState | None:
    """The state a committed :class:`~tableswap.core.plan.SwapPlan` leaves what it flipped in: a token
    covering exactly those partitions (or the table), computed without reading the metastore again
    (each flipped object carries the plan's location and swap-id stamp). None when nothing flipped."""
    table = f"{plan.db}.{plan.table}"
    if plan.table_change is not None:
        return TableState(table, False, True,
                          MappingProxyType({TABLE: fingerprint(plan.table_change.new_location, plan.swap_id)}))
    if not plan.partition_keys or not plan.touched:
        return None
    return TableState(table, True, False, MappingProxyType(
        {a.name: fingerprint(a.new_location, plan.swap_id) if a.new_location else ABSENT for a in plan.touched}))
