"""``doctor``: check a tableswap setup end to end and say what to fix.

Checks, in order (a check whose prerequisite failed is skipped):

* ``config``     the effective settings and where each value came from
* ``metastore``  a Thrift round trip, the server's version, its lock-expiry settings
* ``locks``      acquire and release an EXCLUSIVE lock on ``table`` (without one: ``show_locks``)
* ``lock expiry`` whether the metastore expires abandoned locks (housekeeping / compactor initiator)
* ``journal``    opens, schema version, writable (a row written and rolled back)
* ``hdfs``       when the table's root or the metastore's warehouse is on ``hdfs://``/``viewfs://``: hdfs-native
  installed, the Hadoop configuration found (``HADOOP_CONF_DIR``), the nameservice or NameNode resolved from
  it, a NameNode connected to and answering (at most 5 s each)
* ``storage``    ``table``'s storage root exists and a probe file under ``<root>/_tableswap/`` can be
  created and removed
* ``recovery``   with ``table``: what ``MSCK REPAIR TABLE`` would make of it were its metastore entry lost
  (partitions reverting to displaced data at Spark's default paths, partitions only under ``_tableswap/``),
  and swap directories without a recovery manifest; the advice is ``tableswap repair``
* ``hooks``      each configured post-commit hook can reach what it notifies (a Trino coordinator and its
  catalog, a command on PATH)
* ``janitor grace`` the janitor's grace outlasts the longest reader cache TTL ``[hooks] reader_cache_ttl``
  declares (else a cached reader can be sent to a deleted directory)

Spark is not needed. Nothing is changed: the lock is released at once, the journal write is rolled
back, the probe file is removed.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import time
from dataclasses import asdict, dataclass
from typing import Any

import sqlalchemy as sa

from tableswap import config, errors
from tableswap.journal.store import Journal, default_url, migrations, safe_url
from tableswap.core import distribution
from tableswap.core.catalog_port import Catalog
from tableswap.core.names import parse_table_name
from tableswap.redact import known_secrets, mask_data, mask_text, mask_url
from tableswap.runtime import Runtime
from tableswap.ops.hdfs_client import configure_hdfs_client
from tableswap.ops.inspect.doctor_checks import (  # noqa: F401 (OK..SKIP, Check and the hook checks are doctor's API)
    FAIL,
    OK,
    SKIP,
    WARN,
    Check,
    _check_grace_vs_reader_ttl,
    _check_hooks,
    _check_lineage,
    _check_storage,
    _ms,
    check_hdfs,
    check_recovery,
    warehouse_location,
)

@dataclass(frozen=True)
class ConfigEntry:
    key: str
    value: Any
    source: str


@dataclass(frozen=True)
class DoctorReport:
    config: tuple[ConfigEntry, ...]
    checks: tuple[Check, ...]
    table: str | None = None

    @property
    def ok(self) -> bool:
        return not any(c.status == FAIL for c in self.checks)

    def check(self, name: str) -> Check:
        return next(c for c in self.checks if c.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "table": self.table,
                "config": [asdict(e) for e in self.config],
                "checks": [asdict(c) for c in self.checks]}


def run_doctor(
    *,
    table: str | None = None,
    metastore_uri: str | None = None,
    journal_url: str | None = None,
    lock_timeout_s: float = 10.0,
    explicit_source: str = config.SRC_KEYWORD,
) -> DoctorReport:
    checks: list[Check] = []
    entries: list[ConfigEntry] = []

    # ------------------------------------------------------------------ config
    settings: config.Settings | None = None
    file_error: errors.ConfigurationError | None = None
    path, explicit = config.config_path()
    try:
        cfg_file = config.load_file()
    except errors.ConfigurationError as exc:
        cfg_file, file_error = None, exc
    entries.append(ConfigEntry("config_file", str(path),
                               f"env {config.ENV_CONFIG}" if explicit
                               else ("found" if cfg_file else "default location (no file)")))
    if file_error is not None:
        checks.append(Check("config", FAIL, str(file_error),
                            fix=f"correct or remove {path} (every key and its type: docs/configuration.md, "
                                "'Every config file key')"))
    else:
        try:
            settings, sources = config.resolve_detailed(metastore_uri=metastore_uri, journal_url=journal_url,
                                                        explicit_source=explicit_source)
        except errors.ConfigurationError as exc:
            checks.append(Check("config", FAIL, str(exc),
                                fix=f"set --metastore-uri, {config.ENV_METASTORE_URI} or metastore_uri in {path}"))
            sources = {}
        if settings is not None:
            entries.append(ConfigEntry("metastore_uri", mask_url(settings.metastore_uri), sources["metastore_uri"]))
            journal = settings.journal_url or default_url()
            entries.append(ConfigEntry("journal_url", safe_url(journal), sources["journal_url"]))
            for option in config.SWAP_OPTIONS:
                entries.append(ConfigEntry(f"swap.{option}", getattr(settings, option), sources[option]))
            if settings.write_distribution == distribution.AUTO:  # what "auto" does, said where it is shown
                entries.append(ConfigEntry("swap.write_distribution.rule", distribution.rule(),
                                           "write_distribution = \"auto\""))
            entries.append(ConfigEntry("glue.lock_table", settings.glue_lock_table, sources["glue_lock_table"]))
            entries.extend(_security_entries(settings, sources))
            entries.extend(_janitor_entries(cfg_file))
            entries.extend(_log_entries(cfg_file))
            source = cfg_file.source if cfg_file else "no config file"
            try:  # the HDFS checks below log in and wait as every command does ([hdfs])
                configure_hdfs_client()
            except errors.ConfigurationError as exc:
                checks.append(Check("config", FAIL, str(exc), fix=f"correct [hdfs] in {path} or its environment"))
            else:
                checks.append(Check("config", OK, f"settings resolved ({source})"))

    # ------------------------------------------------------------------ metastore, locks
    catalog: Catalog | None = None
    db: str | None = None
    name: str | None = None
    if table:
        try:
            db, name = parse_table_name(table)
        except errors.TableSwapError as exc:
            checks.append(Check("table", FAIL, str(exc), fix="pass --table as DB.TABLE"))
            table = None
    if settings is None:
        for what in ("metastore", "locks", "lock expiry"):
            checks.append(Check(what, SKIP, "no metastore configured (see the config check)"))
    else:
        runtime = Runtime(settings)
        catalog, metastore_check = _check_metastore(runtime, sources.get("metastore_uri", ""))
        checks.append(metastore_check)
        if catalog is None:
            checks.append(Check("locks", SKIP, "metastore not reachable"))
            checks.append(Check("lock expiry", SKIP, "metastore not reachable"))
        else:
            checks.append(_check_locks(runtime, catalog, db, name, lock_timeout_s))
            caps = catalog.capabilities
            if caps.server_lock:
                checks.append(_check_lock_expiry(metastore_check.facts))
            else:  # a lease of tableswap's own (the Glue Data Catalog): no server setting decides its expiry
                lease_s = caps.lease_s(settings.heartbeat_s)
                checks.append(Check("lock expiry", OK,
                                    f"{caps.kind}: table locks are leases of tableswap's own; an abandoned lease is "
                                    f"taken over once unrenewed for {lease_s:g}s ({caps.lease_heartbeats} x "
                                    "heartbeat_s)", facts={"lease_s": lease_s}))

    # ------------------------------------------------------------------ journal
    if file_error is not None:
        checks.append(Check("journal", SKIP, "config file invalid (see the config check)"))
    else:
        url = settings.journal_url if settings is not None else config.resolve_journal_url(journal_url)
        checks.append(_check_journal(url or default_url(), default=not url))

    # ------------------------------------------------------------------ HDFS, storage
    hdfs = _check_hdfs_of(catalog, db, name) if catalog is not None else None
    if hdfs is not None:
        checks.append(hdfs)
    if not table:
        checks.append(Check("storage", SKIP, "no table given: pass --table DB.TABLE to check its storage root"))
    elif catalog is None:
        checks.append(Check("storage", SKIP, "metastore not reachable: the table's location is unknown"))
    elif hdfs is not None and hdfs.status == FAIL and hdfs.facts.get("table_on_hdfs"):
        # hdfs-native waits long for a NameNode it cannot reach: the storage calls would hang
        for what in ("storage", "recovery"):
            checks.append(Check(what, SKIP, "the table is on an HDFS this process cannot reach (see the hdfs check)"))
    else:
        checks.append(_check_storage(catalog, db, name))
        # db and name are None when --table did not parse: the catalog's error becomes the check's result
        checks.append(check_recovery(catalog, db, name))  # type: ignore[arg-type]  # None: see above
    if catalog is not None:
        catalog.close()

    # ------------------------------------------------------------------ hooks, janitor grace
    if settings is not None:
        checks.append(_check_hooks(settings))
        checks.append(_check_grace_vs_reader_ttl(settings))
    checks.append(_check_lineage())
    urls = (metastore_uri, journal_url, *((settings.metastore_uri, settings.journal_url) if settings else ()))
    return _masked(DoctorReport(tuple(entries), tuple(checks), table=f"{db}.{name}" if table else None),
                   known_secrets(*urls))


def _check_hdfs_of(catalog: Catalog, db: str | None, name: str | None) -> Check:
    """The ``hdfs`` check of the table's root (with ``--table``) and the metastore's warehouse."""
    locations = []
    if db is not None and name is not None:
        try:
            root = catalog.get_table(db, name).root
        except errors.TableSwapError:
            root = None  # the storage check says why
        if root:
            locations.append(root)
    warehouse = warehouse_location(catalog)
    check = check_hdfs([*locations, *([warehouse] if warehouse else [])])
    on_hdfs = check.facts.get("locations", [])
    return dataclasses.replace(check, facts={**check.facts,
                                             "table_on_hdfs": bool(locations) and locations[0] in on_hdfs})


def _masked(report: DoctorReport, secrets: set[str]) -> DoctorReport:
    """The report with no secret in it (``doctor`` prints settings and errors: :mod:`tableswap.redact`)."""
    entries = tuple(dataclasses.replace(e, value=mask_data(e.value, secrets)) for e in report.config)
    checks = tuple(dataclasses.replace(c, detail=mask_text(c.detail, secrets),
                                       fix=None if c.fix is None else mask_text(c.fix, secrets),
                                       facts=mask_data(c.facts, secrets)) for c in report.checks)
    return dataclasses.replace(report, config=entries, checks=checks)


def _janitor_entries(cfg_file: config.ConfigFile | None) -> list[ConfigEntry]:
    from tableswap.core.durations import DEFAULT_GRACE, DEFAULT_MIN_GRACE, ENV_MIN_GRACE, format_duration

    out = []
    src = cfg_file.source if cfg_file else ""
    grace = cfg_file.get("janitor.grace") if cfg_file else None
    out.append(ConfigEntry("janitor.grace", grace or format_duration(DEFAULT_GRACE),
                           src if grace else config.SRC_DEFAULT))
    env_min = os.environ.get(ENV_MIN_GRACE)
    file_min = cfg_file.get("janitor.min_grace") if cfg_file else None
    out.append(ConfigEntry("janitor.min_grace", env_min or file_min or format_duration(DEFAULT_MIN_GRACE),
                           f"env {ENV_MIN_GRACE}" if env_min else src if file_min else config.SRC_DEFAULT))
    for key, default in (("keep", 0), ("batch_size", 100)):
        value = cfg_file.get(f"janitor.{key}") if cfg_file else None
        out.append(ConfigEntry(f"janitor.{key}", default if value is None else value,
                               config.SRC_DEFAULT if value is None else src))
    # Where `janitor run` publishes its metrics (docs/janitor.md#metrics): env > file, else nowhere.
    for key, (value, source) in config.janitor_metrics_settings(file=cfg_file).items():
        out.append(ConfigEntry(f"janitor.{key}", mask_text(value) if value else "none (no metrics)", source))
    return out


def _log_entries(cfg_file: config.ConfigFile | None) -> list[ConfigEntry]:
    out = []
    for key, env, default in (("format", config.ENV_LOG_FORMAT, "auto"), ("level", config.ENV_LOG_LEVEL, "warning")):
        env_value = os.environ.get(env)
        file_value = cfg_file.get(f"log.{key}") if cfg_file else None
        out.append(ConfigEntry(f"log.{key}", env_value or file_value or default,
                               f"env {env} (or --log-{key})" if env_value
                               else cfg_file.source if cfg_file and file_value
                               else f"{config.SRC_DEFAULT} (or --log-{key})"))
    return out


def _check_metastore(runtime: Runtime, source: str) -> tuple[Catalog | None, Check]:
    uri = runtime.settings.metastore_uri
    try:
        catalog = runtime.probe_catalog()
    except errors.ConfigurationError as exc:
        return None, Check("metastore", FAIL, str(exc), fix=f"correct metastore_uri (set by {source})")
    start = time.perf_counter()
    try:
        catalog.open()
        catalog.ping()
    except errors.MetastoreAuthenticationError as exc:
        catalog.close()
        return None, Check("metastore", FAIL, str(exc),
                           fix="the error says what to change; every setting of a secured metastore: docs/security.md",
                           facts={"reason": exc.reason, "security": runtime.settings.metastore_security.describe()})
    except errors.TableSwapError as exc:
        catalog.close()
        return None, Check(
            "metastore", FAIL, str(exc),
            fix=f"start the metastore or correct metastore_uri (set by {source}); for a local one: "
                "`tableswap metastore start`; with Docker: `docker compose up --wait`",
        )
    ms = _ms(start)
    facts: dict[str, Any] = {"uri": mask_url(uri), "round_trip_ms": ms, "server_version": catalog.server_version()}
    facts["txn_timeout"] = catalog.config_value("metastore.txn.timeout") or catalog.config_value("hive.txn.timeout")
    facts["compactor_initiator_on"] = (catalog.config_value("metastore.compactor.initiator.on")
                                       or catalog.config_value("hive.compactor.initiator.on"))
    facts["housekeeping_threads_on"] = catalog.config_value("metastore.housekeeping.threads.on")
    # HMS 2.x answers getVersion with a fixed "3.0"; it is shown as the server says it.
    version = f"getVersion: {facts['server_version']}" if facts["server_version"] else "version not reported"
    uri = mask_url(uri)
    security = runtime.settings.metastore_security
    facts["authenticated_as"] = getattr(catalog, "authenticated_as", None)
    facts["tls"] = security.tls
    how = ""
    if security.kerberos:
        how = f", Kerberos: accepted as {facts['authenticated_as']}"
    if security.tls:
        how += ", over TLS"
    return catalog, Check("metastore", OK, f"{uri} answered in {ms:.0f} ms ({version}{how})", ms=ms, facts=facts)


def _security_entries(settings: config.Settings, sources: dict[str, str]) -> list[ConfigEntry]:
    """``metastore.kerberos`` and ``metastore.tls`` always, the other security settings when set (a keytab
    by its path: the file's content is never read here)."""
    security = settings.metastore_security
    default = type(security)()
    out = []
    for name in config.SECURITY_FIELDS:
        value = getattr(security, name)
        if name in ("kerberos", "tls") or value != getattr(default, name):
            out.append(ConfigEntry(f"metastore.{name}", value, sources.get(f"metastore.{name}", config.SRC_DEFAULT)))
    return out


def _check_locks(runtime: Runtime, catalog: Catalog, db: str | None, name: str | None, timeout_s: float) -> Check:
    fix = ("the metastore's lock tables are missing or broken: on Hive 3/4 run `schematool -initOrUpgradeSchema`; "
           "on the HMS 2.3 development server they need hive.in.test=true (`tableswap metastore start` sets it)")
    if db is None or name is None:  # no --table (the two are parsed together)
        start = time.perf_counter()
        try:
            count = catalog.count_locks()
        except errors.TableSwapError as exc:
            return Check("locks", FAIL, f"show_locks failed: {exc}", fix=fix)
        return Check("locks", OK, f"show_locks works ({count} lock(s) held or waiting); pass --table to take one",
                     ms=_ms(start), facts={"locks": count})
    try:
        catalog.get_table(db, name)
    except errors.TableNotFoundError as exc:
        return Check("locks", FAIL, str(exc), fix="pass an existing table to --table")
    except errors.TableSwapError as exc:
        return Check("locks", FAIL, str(exc), fix=fix)
    swap_id = f"doctor_{time.strftime('%Y%m%d_%H%M%S')}_{secrets.token_hex(4)}"
    start = time.perf_counter()
    lock = catalog.table_lock(db, name, owner=swap_id, timeout_s=timeout_s, heartbeat_s=max(timeout_s, 5.0))
    try:
        lock.acquire()
        lock_id = lock.lock_id
        lock.release()
    except errors.LockTimeoutError as exc:
        return Check("locks", WARN, f"locking works, but {db}.{name} is locked by someone else now: {exc}",
                     fix="wait for the holder to finish (see `SHOW LOCKS`), then run doctor again", ms=_ms(start))
    except errors.TableSwapError as exc:
        return Check("locks", FAIL, f"cannot lock {db}.{name}: {exc}", fix=fix)
    ms = _ms(start)
    what = "EXCLUSIVE lock" if catalog.capabilities.server_lock else "lease"
    return Check("locks", OK, f"{what} on {db}.{name} acquired and released in {ms:.0f} ms",
                 ms=ms, facts={"lock_id": lock_id})


def _check_lock_expiry(facts: dict[str, Any]) -> Check:
    timeout, initiator = facts.get("txn_timeout"), facts.get("compactor_initiator_on")
    housekeeping = facts.get("housekeeping_threads_on")
    detail = (f"txn timeout {timeout or '?'}, compactor initiator {initiator or '?'}, "
              f"housekeeping threads {housekeeping or '?'}")
    fix = ("set metastore.compactor.initiator.on=true and metastore.housekeeping.threads.on=true "
           "(Hive 2.3: hive.compactor.initiator.on=true) in the metastore's configuration, or a crashed "
           "writer's lock blocks its table until removed by hand")
    if initiator is None and housekeeping is None:
        return Check("lock expiry", WARN, f"cannot tell whether abandoned locks expire ({detail})", fix=fix)
    if str(initiator).lower() == "true" or str(housekeeping).lower() == "true":
        return Check("lock expiry", OK, f"abandoned locks expire ({detail})")
    return Check("lock expiry", WARN, f"abandoned locks may never expire ({detail})", fix=fix)


def _check_journal(url: str, *, default: bool = False) -> Check:
    safe = safe_url(url)
    if url.startswith(("sqlite:", "sqlite+")):
        fix = (f"point journal_url ({config.ENV_JOURNAL_URL}, --journal-url or the config file) at a file this "
               "process can create and write, or at the shared journal the writers use (postgresql://...)")
    else:
        # Never suggest a local file for a shared journal: history, rollback and the janitor would split
        # away from the writers, which keep recording in the shared one.
        fix = ("make this journal reachable and usable from here (the error says what to check: host and port, "
               "credentials, database, privileges; docs/configuration.md, 'The journal URL'); every writer and "
               "on-call must use this same journal, so do not switch this machine to a local SQLite file")
    start = time.perf_counter()
    try:
        journal = Journal(url)
    except errors.TableSwapError as exc:
        return Check("journal", FAIL, str(exc), fix=fix)
    try:
        version = journal.schema_version()
        latest = max(v for v, _ in migrations())
        journal.check_writable()
    except errors.TableSwapError as exc:
        return Check("journal", FAIL, str(exc), fix=fix)
    except sa.exc.SQLAlchemyError as exc:
        return Check("journal", FAIL, f"journal {safe}: {exc}", fix=fix)
    finally:
        journal.close()
    ms = _ms(start)
    facts = {"url": safe, "schema_version": version, "latest_schema_version": latest}
    if version > latest:
        return Check("journal", WARN, f"{safe}: schema version {version} is newer than this tableswap knows "
                     f"({latest})", fix="upgrade tableswap to the version the writers use", ms=ms, facts=facts)
    facts["default"] = default
    if default:
        return Check("journal", WARN, f"{safe}: the default journal, a SQLite file local to this machine (schema "
                     f"version {version}, writable); it sees only the swaps run here",
                     fix=f"if drivers on other machines swap these tables, set {config.ENV_JOURNAL_URL} (or "
                         "journal_url in the config file) on all of them and here to one shared PostgreSQL journal "
                         "(docs/configuration.md, 'The journal URL')", ms=ms, facts=facts)
    return Check("journal", OK, f"{safe}: schema version {version}, writable", ms=ms, facts=facts)




__all__ = ["check_recovery", "run_doctor", "DoctorReport", "Check", "ConfigEntry", "OK", "WARN", "FAIL", "SKIP"]
