"""Settings in one place: keyword arguments > environment > config file > Spark conf / defaults.

The config file is TOML, read from ``$TABLESWAP_CONFIG`` (which must exist when set) or else
``$XDG_CONFIG_HOME/tableswap/config.toml`` (``~/.config/tableswap/config.toml``; optional)::

    metastore_uri = "thrift://hms.example:9083"
    journal_url = "postgresql://tableswap@journal-db/tableswap"

    [metastore]      # a secured metastore (docs/security.md); each key also TABLESWAP_METASTORE_<KEY>
    kerberos = true
    kerberos_service = "hive"                          # the metastore's principal hive/HOST@REALM
    kerberos_principal = "etl@EXAMPLE.COM"             # with kerberos_keytab: log in from the keytab
    kerberos_keytab = "/etc/security/keytabs/etl.keytab"
    tls = true
    tls_ca_file = "/etc/ssl/certs/hms-ca.pem"

    [swap]
    lock_timeout_s = 300
    heartbeat_s = 20
    metastore_timeout_s = 300
    connect_attempts = 4
    write_batch_size = 10000
    merge_retries = 3
    write_distribution = "auto"                        # auto | none | partition: clustered by partition first

    [janitor]
    grace = "24h"
    min_grace = "1h"
    staged_ttl = "7d"                                  # a staged swap nobody publishes is discarded then
    keep = 0
    batch_size = 100
    trash = "auto"                                     # HDFS: into the user's trash where on | always | never
    metrics_pushgateway = "http://pushgateway:9091"   # janitor run: push its metrics (tableswap[metrics])
    metrics_textfile = "/var/lib/node_exporter/textfile/tableswap_janitor.prom"

    [hdfs]           # a Kerberized HDFS: every command logs in from this keytab (docs/hdfs.md#kerberos)
    kerberos_principal = "janitor@EXAMPLE.COM"         # also TABLESWAP_HDFS_KERBEROS_PRINCIPAL
    kerberos_keytab = "/etc/security/keytabs/janitor.keytab"   # also TABLESWAP_HDFS_KERBEROS_KEYTAB
    connect_timeout_s = 30    # a NameNode that does not answer: give up after this (TABLESWAP_HDFS_CONNECT_TIMEOUT_S)

    [glue]           # glue://REGION metastore URIs: the DynamoDB table of the table leases
    lock_table = "tableswap_locks"

    [log]            # the CLI only: the library never configures logging
    format = "auto"  # auto | json | text
    level = "warning"

    [hooks]                     # after each committed swap, rollback or recovery (docs/engines.md)
    timeout_s = 30              # per hook call
    reader_cache_ttl = "10m"    # the longest metadata cache TTL of any engine reading these tables

    [[hooks.trino]]             # CALL system.flush_metadata_cache(...) for the swapped table
    host = "trino.example"
    port = 8443
    http_scheme = "https"
    user = "tableswap"
    password_env = "TRINO_PASSWORD"   # the password is read from this environment variable
    catalog = "hive"

    [[hooks.command]]           # any program; {swap_id} {db} {table} {kind} are filled in
    argv = ["notify-readers", "{db}.{table}", "{swap_id}"]

    [[hooks.prometheus]]        # the swap's duration and partition counts (docs/operations.md#metrics-prometheus)
    pushgateway = "http://pushgateway:9091"

Unknown keys and wrong types raise :class:`ConfigurationError` naming the file, the key and what is
allowed, so a typo never silently falls back to a default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from tableswap.config_file import (ENV_CONFIG, FILE_KEYS, HOOK_KEYS, LOG_FORMATS, LOG_LEVELS,  # noqa: F401 - re-exported
                                   ConfigFile, FileKey, check_option, config_path, load_file)
from tableswap.core.durations import ENV_MIN_GRACE
from tableswap.core.security import NONE as NO_SECURITY, MetastoreSecurity
from tableswap.errors import ConfigurationError


ENV_METASTORE_URI = "TABLESWAP_METASTORE_URI"
ENV_JOURNAL_URL = "TABLESWAP_JOURNAL_URL"
ENV_GLUE_LOCK_TABLE = "TABLESWAP_GLUE_LOCK_TABLE"
DEFAULT_GLUE_LOCK_TABLE = "tableswap_locks"
ENV_LOG_FORMAT = "TABLESWAP_LOG_FORMAT"
ENV_LOG_LEVEL = "TABLESWAP_LOG_LEVEL"
SPARK_METASTORE_KEYS = ("spark.hadoop.hive.metastore.uris", "hive.metastore.uris")

# Where a value came from (reported by `tableswap doctor`).
SRC_KEYWORD, SRC_DEFAULT, SRC_SPARK = "keyword argument", "default", "Spark conf"


ENV_JANITOR_MIN_GRACE = ENV_MIN_GRACE  # one name, defined beside the grace floor it sets
#: Where `tableswap janitor run` publishes its metrics (docs/janitor.md#metrics).
ENV_JANITOR_METRICS_PUSHGATEWAY = "TABLESWAP_JANITOR_METRICS_PUSHGATEWAY"
ENV_JANITOR_METRICS_TEXTFILE = "TABLESWAP_JANITOR_METRICS_TEXTFILE"


@dataclass(frozen=True)
class JanitorSettings:
    """The janitor's defaults (``[janitor]`` in the config file; the floor also from
    ``TABLESWAP_JANITOR_MIN_GRACE``). Durations stay text here: the janitor parses them."""

    grace: str | None = None  # None: 24h
    min_grace: str | None = None  # None: 1h
    staged_ttl: str | None = None  # None: 7d (how long a staged swap waits for its publish or discard)
    keep: int = 0
    batch_size: int = 100
    #: What the janitor reads for live references: "metastore" (every database), "database" (the cleaned
    #: table's) or "table" (the table and its temporary tables).
    reference_scope: str = "metastore"
    #: HDFS's trash: "auto" (move a directory into the deleting user's trash where the NameNode has it on),
    #: "always" (on HDFS, the trash or nothing) or "never" (delete).
    trash: str = "auto"
    #: How old the reference index's last full read of the metastore may be (None: 7d).
    full_scan_every: str | None = None
    #: Where `janitor run` publishes its metrics: a Pushgateway URL, a node_exporter textfile (None: nowhere).
    metrics_pushgateway: str | None = None
    metrics_textfile: str | None = None


def janitor_settings() -> JanitorSettings:
    """The janitor's settings alone (no metastore needed): env > config file > defaults."""
    file = load_file()
    get = (lambda key: file.get(f"janitor.{key}")) if file else (lambda key: None)
    keep, batch = get("keep"), get("batch_size")
    metrics = janitor_metrics_settings(file=file)
    return JanitorSettings(grace=get("grace") or None, staged_ttl=get("staged_ttl") or None,
                           min_grace=os.environ.get(ENV_JANITOR_MIN_GRACE) or get("min_grace") or None,
                           keep=0 if keep is None else keep, batch_size=batch or 100,
                           reference_scope=get("reference_scope") or "metastore",
                           trash=get("trash") or "auto", full_scan_every=get("full_scan_every") or None,
                           metrics_pushgateway=metrics["metrics_pushgateway"][0],
                           metrics_textfile=metrics["metrics_textfile"][0])


#: The keytab login of tableswap's HDFS client on a Kerberized HDFS (docs/hdfs.md#kerberos).
ENV_HDFS_KERBEROS_PRINCIPAL = "TABLESWAP_HDFS_KERBEROS_PRINCIPAL"
ENV_HDFS_KERBEROS_KEYTAB = "TABLESWAP_HDFS_KERBEROS_KEYTAB"
#: How long tableswap waits for an HDFS's NameNode(s) to answer when it first reaches that HDFS (docs/hdfs.md).
ENV_HDFS_CONNECT_TIMEOUT_S = "TABLESWAP_HDFS_CONNECT_TIMEOUT_S"
DEFAULT_HDFS_CONNECT_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class HdfsSettings:
    """How tableswap's HDFS client reaches an HDFS (``[hdfs]`` in the config file, each key also
    ``TABLESWAP_HDFS_<KEY>``): with both Kerberos keys set, every command (and the janitor's library entry) logs in
    as ``kerberos_principal`` from ``kerberos_keytab``, else the ticket cache ``kinit`` filled (``KRB5CCNAME``) is
    used; ``connect_timeout_s``: how long it waits for a NameNode's first answer before it gives up."""

    kerberos_principal: str | None = None
    kerberos_keytab: str | None = None
    connect_timeout_s: float = DEFAULT_HDFS_CONNECT_TIMEOUT_S

    def __post_init__(self) -> None:
        if not self.connect_timeout_s > 0:
            raise ConfigurationError(
                f"[hdfs] connect_timeout_s ({ENV_HDFS_CONNECT_TIMEOUT_S}) must be a number of seconds > 0, not "
                f"{self.connect_timeout_s!r}; nothing was changed")
        if bool(self.kerberos_principal) != bool(self.kerberos_keytab):
            raise ConfigurationError(
                "an HDFS keytab login needs both kerberos_principal and kerberos_keytab ([hdfs] in the config file, "
                f"or {ENV_HDFS_KERBEROS_PRINCIPAL} and {ENV_HDFS_KERBEROS_KEYTAB}); only one is set. Nothing was "
                "changed. Set both, or neither to use the ticket cache `kinit` filled")


def hdfs_settings() -> HdfsSettings:
    """The HDFS client's Kerberos login and connection timeout: env > config file > defaults."""
    file = load_file()
    get = (lambda key: file.get(f"hdfs.{key}")) if file else (lambda key: None)
    raw_timeout = os.environ.get(ENV_HDFS_CONNECT_TIMEOUT_S) or get("connect_timeout_s")
    try:
        timeout = float(raw_timeout) if raw_timeout not in (None, "") else DEFAULT_HDFS_CONNECT_TIMEOUT_S
    except ValueError:
        raise ConfigurationError(
            f"{ENV_HDFS_CONNECT_TIMEOUT_S} is {raw_timeout!r}, not a number of seconds; nothing was changed") from None
    return HdfsSettings(
        kerberos_principal=os.environ.get(ENV_HDFS_KERBEROS_PRINCIPAL) or get("kerberos_principal") or None,
        kerberos_keytab=os.environ.get(ENV_HDFS_KERBEROS_KEYTAB) or get("kerberos_keytab") or None,
        connect_timeout_s=timeout)


def janitor_metrics_settings(pushgateway: str | None = None, textfile: str | None = None,
                             explicit_source: str = SRC_KEYWORD, *,
                             file: Any = None) -> dict[str, tuple[str | None, str]]:
    """Where `janitor run` publishes its metrics, each ``(value, source)``: option > env
    (``TABLESWAP_JANITOR_METRICS_PUSHGATEWAY``, ``..._TEXTFILE``) > ``[janitor] metrics_pushgateway`` /
    ``metrics_textfile`` > ``(None, "default")`` (not published)."""
    if file is None:
        file = load_file()
    out: dict[str, tuple[str | None, str]] = {}
    for key, given, env in (("metrics_pushgateway", pushgateway, ENV_JANITOR_METRICS_PUSHGATEWAY),
                            ("metrics_textfile", textfile, ENV_JANITOR_METRICS_TEXTFILE)):
        out[key] = _first(
            (given, explicit_source),
            (os.environ.get(env), f"env {env}"),
            (file.get(f"janitor.{key}") if file else None, file.source if file else ""),
        )
    return out


@dataclass(frozen=True)
class HookSpec:
    """A post-commit hook of the config file: its kind (``trino``, ``command``) and its keys."""

    kind: str
    options: tuple[tuple[str, Any], ...]

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.options).get(key, default)


@dataclass(frozen=True)
class HookSettings:
    """``[hooks]``: what runs after a commit (specs from the file, or the objects given as ``hooks=``),
    each call's time limit, and the longest reader cache TTL (a duration text) the janitor must outlast."""

    hooks: tuple[Any, ...] = ()
    timeout_s: float = 30.0
    reader_cache_ttl: str | None = None


def hook_settings(file: "ConfigFile | None" = None, hooks: Any = None) -> HookSettings:
    """The hooks: ``hooks`` (a keyword argument: hook objects or callables; ``[]`` for none) else the
    config file's; with the file's timeout and declared reader cache TTL."""
    if file is None:
        file = load_file()
    get = (lambda key: file.get(f"hooks.{key}")) if file else (lambda key: None)
    if hooks is None:
        specs = [HookSpec(kind, tuple(sorted(entry.items()))) for kind in HOOK_KEYS for entry in get(kind) or ()]
        hooks = tuple(specs)
    elif callable(hooks) or isinstance(hooks, (str, bytes)):
        raise ConfigurationError("hooks= takes a list of hooks (tableswap.hooks.TrinoFlushHook, CommandHook, "
                                 "SparkRefreshHook, or any callable taking the commit event); [] for none")
    timeout = get("timeout_s")
    return HookSettings(hooks=tuple(hooks), timeout_s=30.0 if timeout is None else timeout,
                        reader_cache_ttl=get("reader_cache_ttl"))


@dataclass(frozen=True)
class Settings:
    metastore_uri: str
    journal_url: str | None = None  # None: the default SQLite file (see journal.default_url)
    lock_timeout_s: float = 300.0  # how long to wait for another swap's table lock
    heartbeat_s: float = 20.0  # lock heartbeat interval; lowered to a third of the server's lock timeout
    metastore_timeout_s: float = 300.0  # socket timeout of one metastore call
    connect_attempts: int = 4  # tries for a metastore read before it is reported unreachable
    write_batch_size: int = 10_000  # partitions per add_partitions / alter_partitions call
    #: merge_partitions: reruns (a fresh read each) after a swap of the same partitions committed between
    #: the merge's read and its flip; then SwapConflictError.
    merge_retries: int = 3
    #: How the batch is laid out before its staging write: "auto", one of the two below chosen per swap
    #: (tableswap.core.distribution.choose); "none", as it comes; "partition", clustered by the target's partition
    #: columns (Spark's rebalance hint: about one file per partition and advisory size).
    write_distribution: str = "auto"
    #: The DynamoDB table of the Glue catalog's table leases (glue:// metastore URIs only).
    glue_lock_table: str = DEFAULT_GLUE_LOCK_TABLE
    janitor: JanitorSettings = field(default_factory=JanitorSettings)
    hooks: HookSettings = field(default_factory=HookSettings)
    #: Kerberos and TLS on the metastore's Thrift port (docs/security.md); the default: plain Thrift.
    metastore_security: MetastoreSecurity = NO_SECURITY

    def __post_init__(self) -> None:
        # Whatever built them (resolve, or a caller constructing Settings itself): numbers finite and in
        # their range, choices one of their values (the config file's rules, config_file.FILE_KEYS).
        for name in SWAP_OPTIONS:
            check_option(name, getattr(self, name))


#: The swap options: keyword arguments of the swap entry points and ``[swap]`` keys of the config file, each
#: held to its ``swap.<name>`` entry of :data:`FILE_KEYS` wherever it comes from.
SWAP_OPTIONS = ("lock_timeout_s", "heartbeat_s", "metastore_timeout_s", "connect_attempts", "write_batch_size",
                "merge_retries", "write_distribution")


# --------------------------------------------------------------------------- resolution
def _spark_conf(spark: Any, key: str) -> str | None:
    """A setting of a SparkSession, read through its ``conf``, which classic and Connect sessions both have
    (nothing of Spark is imported here); None when unset, or when the session cannot answer."""
    try:
        value = spark.conf.get(key, None)
    except Exception:  # noqa: BLE001 - a stopped session, a Connect RPC error, ...
        return None
    return str(value) if value else None


def spark_metastore_uri(spark: Any) -> str | None:
    """The metastore a SparkSession is configured with, if any."""
    if spark is None:
        return None
    return next((uri for uri in (_spark_conf(spark, key) for key in SPARK_METASTORE_KEYS) if uri), None)


#: Set by YARN's NodeManager in every container's environment: ``container_<cluster>_<application>_...``.
ENV_YARN_CONTAINER = "CONTAINER_ID"


def _ephemeral_process(spark: Any) -> str | None:
    """Why this process's local disk goes with it, if it does: it runs in a YARN container, or it is a Spark
    driver in cluster mode (on YARN, in the ApplicationMaster's container). None otherwise; a Spark Connect
    session's deploy mode is its server's, not this process's."""
    container = os.environ.get(ENV_YARN_CONTAINER, "")
    if container.startswith("container_"):
        return f"this process runs in the YARN container {container}"
    if spark is None or type(spark).__module__.startswith("pyspark.sql.connect"):
        return None
    if _spark_conf(spark, "spark.submit.deployMode") == "cluster":
        return ("this Spark driver runs in cluster mode (spark.submit.deployMode=cluster; on YARN, in the "
                "ApplicationMaster's container)")
    return None


def local_journal_refusal(journal_url: str | None, spark: Any = None) -> str | None:
    """The error for a SQLite journal (``journal_url`` None: the default SQLite file) in a process whose local
    disk does not outlive it (:func:`_ephemeral_process`), else None. The journal would go with the container,
    and with it what ``tableswap recover`` and the janitor need of the swap."""
    if journal_url is not None and journal_url.split(":", 1)[0].split("+", 1)[0].lower() != "sqlite":
        return None
    why = _ephemeral_process(spark)
    if why is None:
        return None
    which = "the default SQLite journal (a file in the user's state directory)" if journal_url is None \
        else f"the SQLite journal {journal_url}"
    return (f"{why}, whose local disk goes with it: {which} would be lost with the container, and with it the record "
            "of the swap that `tableswap recover` and the janitor read. Nothing was written. Use a journal every "
            f"process reaches (PostgreSQL): set {ENV_JOURNAL_URL}=postgresql://USER@HOST/DB (in YARN cluster mode: "
            f"--conf spark.yarn.appMasterEnv.{ENV_JOURNAL_URL}=...), journal_url in the config file, or "
            "journal_url=... (docs/hdfs.md#spark-on-yarn)")


def resolve_detailed(
    *,
    spark: Any = None,
    metastore_uri: str | None = None,
    journal_url: str | None = None,
    explicit_source: str = SRC_KEYWORD,
    hooks: Any = None,
    security: MetastoreSecurity | None = None,
    **options: Any,
) -> tuple[Settings, dict[str, str]]:
    """The settings and, per setting, where its value came from. ``hooks``: post-commit hooks replacing
    the config file's (``[]``: none); ``security``: the metastore's Kerberos and TLS settings, replacing
    the environment's and the config file's."""
    unknown = set(options) - set(SWAP_OPTIONS)
    if unknown:
        raise ConfigurationError(
            f"unknown tableswap option(s): {', '.join(sorted(unknown))}; allowed: {', '.join(SWAP_OPTIONS)}"
        )
    # A given keyword option is checked before anything else, an empty or wrong one never falls back to the file.
    checked = {name: check_option(name, value) for name, value in options.items() if value is not None}
    file = load_file()
    sources: dict[str, str] = {}

    uri, sources["metastore_uri"] = metastore_setting(metastore_uri, explicit_source, spark=spark, file=file)
    if not uri:
        raise ConfigurationError(
            "no Hive Metastore configured: pass metastore_uri=... (--metastore-uri), set "
            f"{ENV_METASTORE_URI}=thrift://HOST:PORT (or glue://REGION for the AWS Glue Data Catalog), put "
            "metastore_uri in the config file "
            f"({config_path()[0]}), or configure the SparkSession with spark.hadoop.hive.metastore.uris "
            "(for a local one: `tableswap metastore start`)"
        )
    journal, sources["journal_url"] = journal_setting(journal_url, explicit_source, file=file)
    refusal = local_journal_refusal(journal, spark)
    if refusal is not None:
        raise ConfigurationError(refusal)
    values: dict[str, Any] = {}
    for name in SWAP_OPTIONS:
        value, source = _first(
            (checked.get(name), explicit_source),
            (file.get(f"swap.{name}") if file else None, file.source if file else ""),
        )
        if value is not None:
            values[name] = value
        sources[name] = source
    sources["hooks"] = explicit_source if hooks is not None else (file.source if file and any(
        file.get(f"hooks.{kind}") for kind in HOOK_KEYS) else SRC_DEFAULT)
    lock_table, sources["glue_lock_table"] = _first(
        (os.environ.get(ENV_GLUE_LOCK_TABLE), f"env {ENV_GLUE_LOCK_TABLE}"),
        (file.get("glue.lock_table") if file else None, file.source if file else ""),
        (DEFAULT_GLUE_LOCK_TABLE, SRC_DEFAULT),
    )
    metastore_security, security_sources = security_settings(security, explicit_source, file=file)
    sources.update(security_sources)
    settings = Settings(metastore_uri=uri, journal_url=journal or None, janitor=janitor_settings(),
                        hooks=hook_settings(file, hooks), glue_lock_table=lock_table,
                        metastore_security=metastore_security, **values)
    return settings, sources


_UNSET: Any = object()


def metastore_setting(metastore_uri: str | None = None, explicit_source: str = SRC_KEYWORD, *, spark: Any = None,
                      file: Any = _UNSET) -> tuple[str | None, str]:
    """The metastore URI alone and where it came from, ``(None, "default")`` when none is configured
    (no error: for commands that can work without one)."""
    if file is _UNSET:
        file = load_file()
    return _first(
        (metastore_uri, explicit_source),
        (os.environ.get(ENV_METASTORE_URI), f"env {ENV_METASTORE_URI}"),
        (file.get("metastore_uri") if file else None, file.source if file else ""),
        (spark_metastore_uri(spark), SRC_SPARK),
    )


#: The secured metastore's settings: the field of MetastoreSecurity, its environment variable (the config
#: file's key is ``[metastore] <field>``).
SECURITY_FIELDS = ("kerberos", "kerberos_service", "kerberos_host", "kerberos_principal", "kerberos_keytab",
                   "tls", "tls_ca_file", "tls_cert_file", "tls_key_file", "tls_server_name")
ENV_SECURITY = {name: f"TABLESWAP_METASTORE_{name.upper()}" for name in SECURITY_FIELDS}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def _env_bool(name: str, value: str) -> bool:
    if value.strip().lower() in _TRUE:
        return True
    if value.strip().lower() in _FALSE:
        return False
    raise ConfigurationError(f"{name}={value!r}: expected true or false")


def security_settings(security: MetastoreSecurity | None = None, explicit_source: str = SRC_KEYWORD, *,
                      file: Any = _UNSET) -> tuple[MetastoreSecurity, dict[str, str]]:
    """The metastore's Kerberos and TLS settings and, per key (``metastore.kerberos``, ...), where each
    came from: ``security`` (a keyword argument, all of it) > environment (``TABLESWAP_METASTORE_KERBEROS``,
    ...) per key > config file ``[metastore]`` per key > defaults (plain Thrift)."""
    if security is not None:
        if not isinstance(security, MetastoreSecurity):
            raise ConfigurationError("security= takes a tableswap.MetastoreSecurity(...)")
        return security, {f"metastore.{name}": explicit_source for name in SECURITY_FIELDS}
    if file is _UNSET:
        file = load_file()
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in SECURITY_FIELDS:
        env = ENV_SECURITY[name]
        raw = os.environ.get(env)
        env_value: Any = None
        if raw is not None and raw != "":
            env_value = _env_bool(env, raw) if name in ("kerberos", "tls") else raw
        value, source = _first((env_value, f"env {env}"),
                               (file.get(f"metastore.{name}") if file else None, file.source if file else ""))
        if value is not None:
            values[name] = value
        sources[f"metastore.{name}"] = source
    return MetastoreSecurity(**values), sources


def journal_setting(journal_url: str | None = None, explicit_source: str = SRC_KEYWORD, *,
                    file: Any = _UNSET) -> tuple[str | None, str]:
    """The journal URL and where it came from; ``(None, "default")`` means the default SQLite file."""
    if file is _UNSET:
        file = load_file()
    return _first(
        (journal_url, explicit_source),
        (os.environ.get(ENV_JOURNAL_URL), f"env {ENV_JOURNAL_URL}"),
        (file.get("journal_url") if file else None, file.source if file else ""),
    )


def _first(*candidates: tuple[Any, str]) -> tuple[Any, str]:
    for value, source in candidates:
        if value is not None and value != "":
            return value, source
    return None, SRC_DEFAULT


def resolve(
    *,
    spark: Any = None,
    metastore_uri: str | None = None,
    journal_url: str | None = None,
    hooks: Any = None,
    security: MetastoreSecurity | None = None,
    **options: Any,
) -> Settings:
    """Keyword arguments > environment > config file > Spark conf / built-in defaults."""
    return resolve_detailed(spark=spark, metastore_uri=metastore_uri, journal_url=journal_url, hooks=hooks,
                            security=security, **options)[0]


def resolve_journal_url(journal_url: str | None = None) -> str | None:
    """The journal URL alone (no metastore needed): keyword > env > config file > None (default file)."""
    if journal_url:
        return journal_url
    if os.environ.get(ENV_JOURNAL_URL):
        return os.environ[ENV_JOURNAL_URL]
    file = load_file()
    return file.get("journal_url") if file else None


def file_setting(key: str) -> tuple[Any, str]:
    """A value of the config file by dotted key (``"janitor.grace"``) and its source, or ``(None, "")``."""
    if key not in FILE_KEYS:
        raise KeyError(key)
    file = load_file()
    if file is None or file.get(key) is None:
        return None, ""
    return file.get(key), file.source


def log_settings(fmt: str | None = None, level: str | None = None) -> tuple[str, str]:
    """The CLI's log format and level: option > env > config file > auto / warning."""
    env_fmt, env_level = os.environ.get(ENV_LOG_FORMAT), os.environ.get(ENV_LOG_LEVEL)
    for name, value, allowed in ((ENV_LOG_FORMAT, env_fmt, LOG_FORMATS), (ENV_LOG_LEVEL, env_level, LOG_LEVELS)):
        if value and value.lower() not in allowed:
            raise ConfigurationError(f"{name}={value!r} is not one of {', '.join(allowed)}")
    file = None
    if not (fmt or env_fmt) or not (level or env_level):
        file = load_file()
    out_fmt = fmt or (env_fmt or "").lower() or (file.get("log.format") if file else None) or "auto"
    out_level = level or (env_level or "").lower() or (file.get("log.level") if file else None) or "warning"
    return out_fmt, out_level
