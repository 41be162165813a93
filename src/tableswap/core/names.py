"""Names tableswap makes and reads: swap ids, temporary table names, table names. Pure."""

from __future__ import annotations

import datetime as dt
import re
import secrets

from tableswap import errors
from tableswap.redact import mask_url

IDENTIFIER = re.compile(r"^[A-Za-z0-9_]+$")
#: A swap id: its UTC start time and a random suffix, e.g. ``20260603_031502_9f3a1c2e``.
SWAP_ID_RE = re.compile(r"^(\d{8}_\d{6})_[0-9a-f]{4,}$")
#: Between a target's name and the swap id in the name of a swap's temporary table.
TEMP_MARKER = "__tswap_"


def new_swap_id() -> str:
    now = dt.datetime.now(dt.timezone.utc)
    return f"{now:%Y%m%d_%H%M%S}_{secrets.token_hex(4)}"


def swap_id_time(swap_id: str) -> dt.datetime | None:
    """When the swap started, from its id (``None`` for anything else)."""
    match = SWAP_ID_RE.match(swap_id)
    if not match:
        return None
    try:
        return dt.datetime.strptime(match.group(1), "%Y%m%d_%H%M%S").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None


def temp_table_name(table: str, swap_id: str) -> str:
    """The temporary (staging) table of swap ``swap_id`` of ``table`` (a table name without its db)."""
    return f"{table[:80]}{TEMP_MARKER}{swap_id}"


def parse_table_name(name: str, default_db: str | None = None) -> tuple[str, str]:
    """``db.table`` → ``(db, table)``, lower-cased; only Hive-safe identifiers are accepted."""
    if not isinstance(name, str):
        raise errors.InvalidInputError(f"table name must be a string like 'db.table', got {type(name).__name__}")
    parts = [p.strip().strip("`") for p in name.split(".")]
    if len(parts) == 1 and default_db:
        parts = [default_db, parts[0]]
    if len(parts) != 2 or not all(IDENTIFIER.match(p) for p in parts):
        raise errors.InvalidInputError(
            f"bad table name {name!r}: expected DB.TABLE made of letters, digits and underscores"
        )
    return parts[0].lower(), parts[1].lower()


def quoted(db: str, table: str) -> str:
    """```db`.`table``` for Spark SQL."""
    return f"`{db}`.`{table}`"


def hide_password(url: str) -> str:
    """``url`` with its password and secret parameters shown as ``***``, for messages (as given when it
    has none): :func:`tableswap.redact.mask_url`."""
    return mask_url(url)
