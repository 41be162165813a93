"""Durations (``30m``, ``24h``, ``1h30m``, ``7d``) and times: the one parser the janitor, recover and
the CLI share, and the janitor's grace floor. Pure."""

from __future__ import annotations

import datetime as dt
import math
import re

from tableswap import errors

DEFAULT_GRACE = dt.timedelta(hours=24)
DEFAULT_MIN_GRACE = dt.timedelta(hours=1)
#: How long a staged swap waits for its publish or discard before the janitor discards it ([janitor] staged_ttl).
DEFAULT_STAGED_TTL = dt.timedelta(days=7)
#: The environment variable that sets the floor (read by :mod:`tableswap.config`; named here for messages).
ENV_MIN_GRACE = "TABLESWAP_JANITOR_MIN_GRACE"

_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(w|d|h|m|s)")
_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
#: The longest duration accepted: 100 years (36500d). Callers subtract durations from the current
#: time (``now - grace``), which must stay a valid datetime.
MAX_DURATION = dt.timedelta(days=36500)
_MAX_TEXT = "36500d (about 100 years)"


# --------------------------------------------------------------------------- durations


def parse_duration(text: str | int | float | dt.timedelta) -> dt.timedelta:
    """``30m``, ``24h``, ``7d``, ``1h30m``, ``90s``, ``2w`` or ``0`` → timedelta.

    Raises:
        InvalidInputError: not a duration, negative, not finite (``nan``, ``inf``) or longer than
            :data:`MAX_DURATION`.
    """
    if isinstance(text, dt.timedelta):
        value = text
    elif isinstance(text, (int, float)) and not isinstance(text, bool):
        if isinstance(text, float) and not math.isfinite(text):
            raise errors.InvalidInputError(f"bad duration {text!r}: not a finite number of seconds")
        value = _seconds(text, text)
    else:
        raw = str(text).strip().lower()
        if raw == "0":
            return dt.timedelta(0)
        compact = raw.replace(" ", "")
        pieces = _DURATION_RE.findall(compact)
        if not compact or not pieces or "".join(n + u for n, u in pieces) != compact:
            raise errors.InvalidInputError(
                f"bad duration {text!r}: use a number with a unit, e.g. 30m, 24h, 7d or 1h30m "
                "(units: s, m, h, d, w)"
            )
        value = _seconds(sum(float(n) * _UNITS[u] for n, u in pieces), text)
    if value < dt.timedelta(0):
        raise errors.InvalidInputError(f"duration {text!r} is negative")
    if value > MAX_DURATION:
        raise errors.InvalidInputError(f"duration {text!r} is too long: the maximum is {_MAX_TEXT}")
    return value


def _seconds(seconds: float, text: object) -> dt.timedelta:
    if not math.isfinite(seconds) or abs(seconds) > MAX_DURATION.total_seconds():
        raise errors.InvalidInputError(f"duration {text!r} is too long: the maximum is {_MAX_TEXT}")
    return dt.timedelta(seconds=seconds)


def format_duration(value: dt.timedelta) -> str:
    seconds = int(value.total_seconds())
    if seconds == 0:
        return "0s"
    out = []
    for unit in ("d", "h", "m", "s"):
        n, seconds = divmod(seconds, _UNITS[unit])
        if n:
            out.append(f"{n}{unit}")
    return "".join(out)


def check_grace(grace: dt.timedelta, min_grace: dt.timedelta, force_short_grace: bool) -> None:
    """Refuse a grace period below the floor unless forced (like Delta's VACUUM retention check)."""
    if grace < min_grace and not force_short_grace:
        raise errors.UnsafeOperationError(
            f"grace period {format_duration(grace)} is below the safety floor of {format_duration(min_grace)}: "
            "readers that started before a swap may still be reading the displaced data, and "
            "rollback to it would become impossible. Use a longer --grace, or pass --force-short-grace "
            f"if you are sure (the floor is set by {ENV_MIN_GRACE})."
        )


def parse_time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)
