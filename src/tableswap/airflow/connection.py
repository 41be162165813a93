"""The ``tableswap`` Airflow connection's fields, read and checked without Airflow (docs/airflow.md#the-connection).

A connection of type ``tableswap`` carries tableswap's settings in its ``extra`` (JSON)::

    {"metastore_uri": "thrift://hms.prod:9083",
     "journal_url": "postgresql://tableswap@journal-db/tableswap",
     "config_file": "/etc/tableswap/config.toml",
     "lock_timeout_s": 300}

and the journal database's password, if any, in its ``password`` field (Airflow masks it), put into the
journal URL when that URL names a user but no password. Every field is optional: one left out comes, as for
the library and the CLI, from the environment (``TABLESWAP_METASTORE_URI``, ``TABLESWAP_JOURNAL_URL``), the
config file, or the default. Unknown keys and wrong types raise :class:`~tableswap.errors.ConfigurationError`
naming the connection, the key and what is allowed: a typo never falls back to a default silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from tableswap.config import FILE_KEYS, SWAP_OPTIONS, FileKey
from tableswap.errors import ConfigurationError

#: The connection's extra keys besides the swap options: key -> what is allowed (for errors and docs).
EXTRA_KEYS: dict[str, str] = {
    "metastore_uri": "a string thrift://HOST:PORT (a comma-separated list for several), or glue://REGION",
    "journal_url": "a string, an SQLAlchemy URL (sqlite:///..., postgresql://USER@HOST/DB)",
    "config_file": "a string, the path of a tableswap config file (TOML) on the worker",
}
#: The swap options a connection may set: key -> the config file's [swap] key it stands for (its kind:
#: ``integer``, ``number``, or ``choice`` with its ``choices``; ``allowed``: what is allowed, for errors and docs).
OPTION_KEYS: dict[str, FileKey] = {name: FILE_KEYS[f"swap.{name}"] for name in SWAP_OPTIONS}


@dataclass(frozen=True)
class ConnectionSettings:
    """What a ``tableswap`` connection sets; ``None`` leaves a setting to the environment or the config file."""

    conn_id: str
    metastore_uri: str | None = None
    journal_url: str | None = None
    config_file: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


def from_connection(conn_id: str, extra: Mapping[str, Any] | None, password: str | None = None) -> ConnectionSettings:
    """Read a connection's ``extra`` (already parsed from JSON) and ``password``.

    Raises:
        ConfigurationError: an unknown key, a value of the wrong type, or a password for a journal URL
            that has no user to go with it or a password of its own.
    """
    extra = dict(extra or {})
    # Airflow's forms before 2.3 stored custom fields as extra__<conn type>__<field>: read those too.
    prefix = "extra__tableswap__"
    for key in [k for k in extra if k.startswith(prefix)]:
        extra.setdefault(key[len(prefix):], extra.pop(key))

    def bad(key: str, allowed: str) -> ConfigurationError:
        return ConfigurationError(f"Airflow connection {conn_id!r}: extra {key!r} = {extra[key]!r} is not "
                                  f"{allowed}")

    unknown = sorted(set(extra) - set(EXTRA_KEYS) - set(OPTION_KEYS))
    if unknown:
        raise ConfigurationError(
            f"Airflow connection {conn_id!r}: unknown extra key(s) {', '.join(map(repr, unknown))}; allowed: "
            f"{', '.join([*EXTRA_KEYS, *OPTION_KEYS])}")
    strings: dict[str, str | None] = {}
    for key, allowed in EXTRA_KEYS.items():
        value = extra.get(key)
        if value is not None and not isinstance(value, str):
            raise bad(key, allowed)
        strings[key] = value.strip() or None if isinstance(value, str) else None
    options: dict[str, Any] = {}
    for key, spec in OPTION_KEYS.items():
        value = extra.get(key)
        if value is None:
            continue
        if spec.kind == "choice":  # a text field holding one of the choices, as in the config file
            if not isinstance(value, str) or value.strip() not in spec.choices:
                raise bad(key, spec.allowed)
            options[key] = value.strip()
            continue
        integer = spec.kind == "integer"
        if isinstance(value, str):  # the form's text fields and environment-variable connections give strings
            try:
                value = int(value) if integer else float(value)
            except ValueError:
                raise bad(key, "an integer" if integer else "a number") from None
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or (integer and not float(value).is_integer())):
            raise bad(key, "an integer" if integer else "a number")
        if not math.isfinite(value):
            raise bad(key, "a finite number")
        options[key] = int(value) if integer else float(value)
    journal_url = strings["journal_url"]
    if password:
        journal_url = _with_password(conn_id, journal_url, password)
    return ConnectionSettings(conn_id, strings["metastore_uri"], journal_url, strings["config_file"], options)


def _with_password(conn_id: str, journal_url: str | None, password: str) -> str:
    """``journal_url`` with ``password`` as its password (the URL names the user, the password field holds the
    secret)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    if not journal_url:
        raise ConfigurationError(f"Airflow connection {conn_id!r} has a password but no journal_url in its extra: "
                                 "the password is the journal database's")
    try:
        url = make_url(journal_url)
    except ArgumentError as exc:
        raise ConfigurationError(f"Airflow connection {conn_id!r}: journal_url is not an SQLAlchemy URL: {exc}") \
            from None
    if not url.username or url.password:
        raise ConfigurationError(
            f"Airflow connection {conn_id!r} has a password, but its journal_url "
            + ("has a password of its own" if url.password else "names no user")
            + ": give the user in the URL (postgresql://USER@HOST/DB) and the password in the password field")
    return url.set(password=password).render_as_string(hide_password=False)
