"""The config file: where it is, its schema, and its validation (see :mod:`tableswap.config` for the
file's layout and how its values rank against keyword arguments, the environment and the Spark conf).

Unknown keys and wrong types raise :class:`ConfigurationError` naming the file, the key and what is
allowed, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tableswap.core.distribution import WRITE_DISTRIBUTIONS
from tableswap.dirs import user_path
from tableswap.errors import ConfigurationError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ENV_CONFIG = "TABLESWAP_CONFIG"
LOG_FORMATS = ("auto", "json", "text")
LOG_LEVELS = ("debug", "info", "warning", "error")

#: What each kind of hook of the config file takes: key -> (allowed types, required, description).
HOOK_KEYS: dict[str, dict[str, tuple[tuple[type, ...], bool, str]]] = {
    "trino": {
        "host": ((str,), True, "a host name"),
        "port": ((int,), False, "a port number (default 8080)"),
        "http_scheme": ((str,), False, '"http" or "https" (default "http")'),
        "user": ((str,), False, 'a user name (default "tableswap")'),
        "password_env": ((str,), False, "the name of an environment variable holding the password"),
        "catalog": ((str,), False, 'the Hive catalog reading these tables (default "hive")'),
        "verify": ((bool, str), False, "true, false, or a CA bundle path (https)"),
        "name": ((str,), False, "a label for logs and history"),
    },
    "command": {
        "argv": ((list,), True, 'a list of strings, e.g. ["notify", "{db}.{table}", "{swap_id}"]'),
        "name": ((str,), False, "a label for logs and history"),
    },
    "prometheus": {
        "pushgateway": ((str,), False, "a Pushgateway URL, e.g. http://pushgateway:9091"),
        "textfile": ((str,), False, "a path ending in .prom (node_exporter's textfile collector)"),
        "name": ((str,), False, "a label for logs and history"),
    },
}


# --------------------------------------------------------------------------- the file's schema
@dataclass(frozen=True)
class FileKey:
    kind: str  # string | number | integer | duration | choice | boolean
    allowed: str  # what is allowed, for error messages and docs
    minimum: float | None = None
    choices: tuple[str, ...] = ()


FILE_KEYS: dict[str, FileKey] = {
    "metastore_uri": FileKey("string", "a string thrift://HOST:PORT, or glue://REGION for the AWS Glue Data Catalog"),
    "journal_url": FileKey("string", "a string, an SQLAlchemy URL (sqlite:///..., postgresql://...)"),
    "swap.lock_timeout_s": FileKey("number", "a number of seconds > 0", minimum=0),
    "swap.heartbeat_s": FileKey("number", "a number of seconds > 0", minimum=0),
    "swap.metastore_timeout_s": FileKey("number", "a number of seconds > 0", minimum=0),
    "swap.connect_attempts": FileKey("integer", "an integer >= 1", minimum=1),
    "swap.write_batch_size": FileKey("integer", "an integer >= 1", minimum=1),
    "swap.merge_retries": FileKey("integer", "an integer >= 0", minimum=0),
    "swap.write_distribution": FileKey("choice", "one of " + ", ".join(WRITE_DISTRIBUTIONS),
                                       choices=WRITE_DISTRIBUTIONS),
    "janitor.grace": FileKey("duration", 'a duration string like "24h", "30m", "7d"'),
    "janitor.min_grace": FileKey("duration", 'a duration string like "1h"'),
    "janitor.staged_ttl": FileKey("duration", 'a duration string like "7d"'),
    "janitor.full_scan_every": FileKey("duration", 'a duration string like "7d"'),
    "janitor.keep": FileKey("integer", "an integer >= 0", minimum=0),
    "janitor.batch_size": FileKey("integer", "an integer >= 1", minimum=1),
    "janitor.reference_scope": FileKey("choice", "one of metastore, database, table",
                                       choices=("metastore", "database", "table")),
    "janitor.trash": FileKey("choice", "one of auto, always, never", choices=("auto", "always", "never")),
    "janitor.metrics_pushgateway": FileKey("string", 'a string, a Pushgateway URL ("http://pushgateway:9091")'),
    "janitor.metrics_textfile": FileKey("string", 'a string, the path of a node_exporter textfile ("....prom")'),
    "metastore.kerberos": FileKey("boolean", "true or false (Kerberos: SASL/GSSAPI, docs/security.md)"),
    "metastore.kerberos_service": FileKey("string",
                                          'a string, the service of the metastore\'s principal (default "hive")'),
    "metastore.kerberos_host": FileKey("string",
                                       "a string, the host of the metastore's principal (default: the URI's)"),
    "metastore.kerberos_principal": FileKey("string", 'a string, the principal to log in as ("etl@EXAMPLE.COM")'),
    "metastore.kerberos_keytab": FileKey("string", "a string, the path of the keytab to log in with"),
    "metastore.tls": FileKey("boolean", "true or false (TLS on the Thrift port, docs/security.md)"),
    "metastore.tls_ca_file": FileKey("string", "a string, the path of a PEM file of CA certificates"),
    "metastore.tls_cert_file": FileKey("string", "a string, the path of the client certificate (PEM)"),
    "metastore.tls_key_file": FileKey("string", "a string, the path of the client certificate's key (PEM)"),
    "metastore.tls_server_name": FileKey("string", "a string, the name the server's certificate must carry"),
    "hdfs.kerberos_principal": FileKey("string", 'a string, a Kerberos principal ("janitor@EXAMPLE.COM")'),
    "hdfs.kerberos_keytab": FileKey("string", 'a string, the path of a keytab holding the principal\'s keys'),
    "hdfs.connect_timeout_s": FileKey("number", "a number of seconds > 0", minimum=0),
    "glue.lock_table": FileKey("string", "a string, the name of a DynamoDB table"),
    "log.format": FileKey("choice", "one of " + ", ".join(LOG_FORMATS), choices=LOG_FORMATS),
    "log.level": FileKey("choice", "one of " + ", ".join(LOG_LEVELS), choices=LOG_LEVELS),
    "hooks.timeout_s": FileKey("number", "a number of seconds > 0", minimum=0),
    "hooks.reader_cache_ttl": FileKey("duration", 'a duration string like "10m" (the longest reader cache TTL)'),
    "hooks.trino": FileKey("hooks", "an array of tables [[hooks.trino]] with keys " + ", ".join(HOOK_KEYS["trino"])),
    "hooks.command": FileKey("hooks", "an array of tables [[hooks.command]] with keys "
                             + ", ".join(HOOK_KEYS["command"])),
    "hooks.prometheus": FileKey("hooks", "an array of tables [[hooks.prometheus]] with keys "
                                + ", ".join(HOOK_KEYS["prometheus"])),
}
SECTIONS = ("metastore", "swap", "janitor", "hdfs", "glue", "log", "hooks")


def _describe_keys() -> str:
    top = [k for k in FILE_KEYS if "." not in k]
    parts = [", ".join(top)]
    for section in SECTIONS:
        keys = [k.split(".", 1)[1] for k in FILE_KEYS if k.startswith(section + ".")]
        parts.append(f"[{section}] {', '.join(keys)}")
    return "; ".join(parts)


@dataclass(frozen=True)
class ConfigFile:
    path: Path
    values: dict[str, Any]  # dotted key -> validated value

    def get(self, key: str) -> Any:
        return self.values.get(key)

    @property
    def source(self) -> str:
        return f"config file {self.path}"


def config_path() -> tuple[Path, bool]:
    """The config file's path, and whether it was named explicitly (``$TABLESWAP_CONFIG``)."""
    explicit = os.environ.get(ENV_CONFIG)
    if explicit:
        return Path(explicit).expanduser(), True
    return user_path("config.toml", "config"), False


def load_file(path: Path | None = None) -> ConfigFile | None:
    """Read and validate the config file; ``None`` if there is none (and none was required)."""
    if path is None:
        path, required = config_path()
    else:
        required = True
    if not path.exists():
        if required:
            raise ConfigurationError(
                f"config file {path} does not exist (named by {ENV_CONFIG}); create it or unset {ENV_CONFIG}"
            )
        return None
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"config file {path} is not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigurationError(f"cannot read config file {path}: {exc}") from exc
    return ConfigFile(path, _validate(path, data))


def _validate(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if key in SECTIONS:
            if not isinstance(value, dict):
                raise ConfigurationError(f"config file {path}: {key!r} must be a table ([{key}]), "
                                         f"got {_typename(value)}")
            for sub, subvalue in value.items():
                flat[f"{key}.{sub}"] = subvalue
        else:
            flat[key] = value
    out: dict[str, Any] = {}
    for key, value in flat.items():
        spec = FILE_KEYS.get(key)
        if spec is None:
            hint = ""
            if "." not in key and f"swap.{key}" in FILE_KEYS:
                hint = " (put it under [swap])"
            elif "." not in key and f"janitor.{key}" in FILE_KEYS:
                hint = " (put it under [janitor])"
            raise ConfigurationError(
                f"config file {path}: unknown key {_display(key)!r}{hint}; allowed: {_describe_keys()}"
            )
        out[key] = _check_hooks(path, key, value) if spec.kind == "hooks" else _check_file_value(path, key, spec, value)
    return out


def _check_hooks(path: Path, key: str, value: Any) -> tuple[dict[str, Any], ...]:
    """``[[hooks.<kind>]]`` entries: tables with the kind's keys, of the right types, the required ones set."""
    kind = key.split(".", 1)[1]
    where = f"config file {path}: [[{key}]]"
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ConfigurationError(f"{where} must be an array of tables ([[{key}]] blocks), got {_typename(value)}")
    allowed = HOOK_KEYS[kind]
    for n, entry in enumerate(value, start=1):
        for name, item in entry.items():
            if name not in allowed:
                raise ConfigurationError(f"{where} #{n}: unknown key {name!r}; allowed: {', '.join(allowed)}")
            types, _, described = allowed[name]
            ok = isinstance(item, types) and not (isinstance(item, bool) and bool not in types)
            if name == "argv":
                ok = ok and bool(item) and all(isinstance(a, str) and a for a in item)
            elif name == "http_scheme":
                ok = ok and item in ("http", "https")
            elif name == "port":
                ok = ok and 0 < item < 65536
            elif isinstance(item, str):
                ok = ok and bool(item.strip())
            if not ok:
                raise ConfigurationError(f"{where} #{n}: key {name!r} must be {described}, got {item!r}")
        missing = [name for name, (_, required, _) in allowed.items() if required and name not in entry]
        if missing:
            raise ConfigurationError(f"{where} #{n}: missing {', '.join(repr(m) for m in missing)} "
                                     f"({allowed[missing[0]][2]})")
    return tuple(value)


def _display(key: str) -> str:
    section, _, name = key.partition(".")
    return f"[{section}] {name}" if name else key


def _typename(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array",
            dict: "a table"}.get(type(value), type(value).__name__)


def _check(spec: FileKey, value: Any, bad: Callable[[], ConfigurationError]) -> Any:
    """``value`` if it satisfies ``spec`` (numbers as float), else ``bad()`` is raised."""
    if spec.kind == "hooks":
        return value  # checked by _check_hooks, which names the entry and the key
    if spec.kind == "boolean":
        if not isinstance(value, bool):
            raise bad()
        return value
    if spec.kind in ("string", "choice", "duration"):
        if not isinstance(value, str) or not value.strip():
            raise bad()
        if spec.kind == "choice" and value not in spec.choices:
            raise bad()
        if spec.kind == "duration":
            from tableswap.core.durations import parse_duration  # lazily: durations reads tableswap.config

            try:
                parse_duration(value)
            except Exception as exc:  # noqa: BLE001 - InvalidInputError with the reason
                raise bad() from exc
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad()
    if spec.kind == "integer" and not isinstance(value, int):
        raise bad()
    if not math.isfinite(value):  # TOML and Python both have inf and nan; neither is a setting
        raise bad()
    if spec.minimum is not None:
        too_small = value < spec.minimum if spec.kind == "integer" else value <= spec.minimum
        if too_small:
            raise bad()
    return float(value) if spec.kind == "number" else value


def _check_file_value(path: Path, key: str, spec: FileKey, value: Any) -> Any:
    return _check(spec, value, lambda: ConfigurationError(
        f"config file {path}: key {_display(key)!r} must be {spec.allowed}, got {value!r} ({_typename(value)})"
    ))


def check_option(name: str, value: Any) -> Any:
    """A keyword option / command-line value, held to the same rules as the file's ``swap.*`` keys (a
    number in its range, or for a choice such as ``write_distribution`` one of its values)."""
    spec = FILE_KEYS[f"swap.{name}"]
    return _check(spec, value, lambda: ConfigurationError(
        f"option {name}={value!r} is invalid: it must be {spec.allowed}"
    ))
