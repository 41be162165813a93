"""The checks of ``tableswap doctor`` that look at storage and at what readers are told: the storage root,
what ``MSCK REPAIR TABLE`` would make of the table, the post-commit hooks and the janitor's grace against
the readers' cache TTL (:mod:`tableswap.ops.inspect.doctor` runs them, with the metastore and journal checks)."""

from __future__ import annotations

import getpass
import importlib.util
import os
import secrets
import socket
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Any

from tableswap import config, errors, storage
from tableswap.core import locations as loc
from tableswap.core.manifest import MANIFEST_NAME
from tableswap.core.catalog_port import Catalog
from tableswap.core.catalog import TableInfo

def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000, 1)


OK, WARN, FAIL, SKIP = "ok", "warn", "fail", "skip"


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail | skip
    detail: str
    fix: str | None = None
    ms: float | None = None
    facts: dict[str, Any] = field(default_factory=dict)


def _check_hooks(settings: config.Settings) -> Check:
    from tableswap import hooks as hk

    if not settings.hooks.hooks:
        return Check("hooks", SKIP, "no post-commit hooks configured ([hooks] in the config file)")
    start = time.monotonic()
    try:
        built = hk.build(settings.hooks.hooks)
    except errors.TableSwapError as exc:
        return Check("hooks", FAIL, str(exc), fix="correct [hooks] in the config file (docs/engines.md)")
    reached, failed = [], []
    for hook in built:
        try:
            reached.append(hk.check_hook(hook, min(settings.hooks.timeout_s, 15.0)))
        except Exception as exc:  # noqa: BLE001 - any failure to connect is the finding
            failed.append(f"{hk.hook_name(hook)}: {type(exc).__name__}: {exc}")
    facts = {"reached": reached, "failed": failed}
    if failed:
        return Check("hooks", FAIL, f"{len(failed)} of {len(built)} hook(s) cannot connect: " + "; ".join(failed),
                     fix="check the host, port, user and password_env of [[hooks.trino]] (or the argv of "
                         "[[hooks.command]]); swaps still commit, but these readers stay stale until their "
                         "caches expire", ms=_ms(start), facts=facts)
    return Check("hooks", OK, "; ".join(reached), ms=_ms(start), facts=facts)


def _check_lineage() -> Check:
    from tableswap.lineage import events as lineage_events

    if not lineage_events.enabled():
        return Check("lineage", SKIP, "OpenLineage not configured (OPENLINEAGE_URL, OPENLINEAGE__TRANSPORT__*, "
                                      "openlineage.yml): operations emit no lineage events")
    fix = ("see docs/operations.md#lineage: OPENLINEAGE_URL or openlineage.yml, as the openlineage-python client "
           "reads them")
    start = time.perf_counter()
    try:
        facts = lineage_events.probe()
    except RuntimeError as exc:  # the client is not installed
        return Check("lineage", FAIL, str(exc), fix="pip install 'tableswap[lineage]'")
    except Exception as exc:  # noqa: BLE001 - the client refused its configuration: that is the finding
        return Check("lineage", FAIL, f"the OpenLineage client refuses its configuration: {type(exc).__name__}: "
                                      f"{exc}", fix=fix)
    where = ", ".join(facts["urls"]) or "its transport"
    detail = (f"events go through the {facts['transport']} transport to {where} (job namespace "
              f"{facts['namespace']}, client {facts['client_version']})")
    if facts["unreachable"]:
        return Check("lineage", WARN, f"{detail}; cannot connect: " + "; ".join(facts["unreachable"]),
                     fix="start the lineage server or correct its URL; operations still commit, their events "
                         "are lost (one lineage.emit_failed warning each)", ms=_ms(start), facts=facts)
    return Check("lineage", OK, detail, ms=_ms(start), facts=facts)


def _check_grace_vs_reader_ttl(settings: config.Settings) -> Check:
    from tableswap.core.durations import DEFAULT_GRACE, format_duration, parse_duration

    ttl_text = settings.hooks.reader_cache_ttl
    if not ttl_text:
        return Check("janitor grace", SKIP, "no reader cache TTL declared ([hooks] reader_cache_ttl): engines "
                     "reading these tables with a metadata cache may see a displaced directory until it expires")
    grace = parse_duration(settings.janitor.grace) if settings.janitor.grace else DEFAULT_GRACE
    ttl = parse_duration(ttl_text)
    detail = f"janitor grace {format_duration(grace)}, longest reader cache TTL {format_duration(ttl)}"
    if grace <= ttl:
        return Check("janitor grace", WARN, detail + ": a reader whose cache still points at a displaced "
                     "directory can find it deleted (queries fail with 'File does not exist')",
                     fix=f"set [janitor] grace longer than {format_duration(ttl)} (docs/janitor.md), or shorten "
                         "the readers' cache TTL")
    return Check("janitor grace", OK, detail)


def _check_storage(catalog: Catalog, db: str | None, name: str | None) -> Check:
    try:
        info = catalog.get_table(db, name)  # type: ignore[arg-type]  # None: --table did not parse (doctor.py)
    except errors.TableSwapError as exc:
        return Check("storage", FAIL, str(exc), fix="pass an existing table to --table")
    root = info.root
    if not root:
        return Check("storage", FAIL, f"{db}.{name} has no location", fix="give the table a LOCATION")
    facts: dict[str, Any] = {"root": root}
    try:
        present = storage.exists(root)
    except errors.TableSwapError as exc:
        return Check("storage", FAIL, str(exc), fix="install the fsspec implementation named above", facts=facts)
    except Exception as exc:  # noqa: BLE001 - the file system's own error
        return Check("storage", FAIL, f"cannot reach {root}: {type(exc).__name__}: {exc}",
                     fix="check the storage credentials and endpoint of this process", facts=facts)
    if not present:
        return Check("storage", FAIL, f"table location {root} does not exist",
                     fix=f"create {root} (or correct the table's LOCATION); tableswap stages under {root}/_tableswap/",
                     facts=facts)
    start = time.perf_counter()
    probe_name = f"_doctor_probe_{secrets.token_hex(6)}"
    try:
        where = storage.probe_write(root, probe_name)
    except Exception as exc:  # noqa: BLE001 - PermissionError, a store's access error, ...
        return Check("storage", FAIL, f"cannot create a file under {root}/_tableswap/: {type(exc).__name__}: {exc}",
                     fix=f"grant this user write and delete access to {root}/_tableswap/ (staged batches and "
                         "displaced data live there)", facts=facts)
    ms = _ms(start)
    facts["probe"] = where
    return Check("storage", OK, f"{root} exists; a probe under _tableswap/ was created and removed", ms=ms,
                 facts=facts)


# --------------------------------------------------------------------------- HDFS's client
#: How long the HDFS check waits for a NameNode: to connect, then for its answer.
HDFS_TIMEOUT_S = 5.0
_HDFS_EXTRA_FIX = "pip install 'tableswap[hdfs]' (hdfs-native, a wheel: no libhdfs, no JVM, no Hadoop CLASSPATH)"


namenodes = storage.namenodes  # the NameNodes a location stands for (also named in storage's unreachable error)


def _answers(location: str) -> BaseException | None:
    """Ask the NameNode through hdfs-native whether ``location`` exists, for at most HDFS_TIMEOUT_S
    seconds (hdfs-native itself retries a NameNode that does not answer for much longer): None when it
    answered, else what went wrong (TimeoutError when it said nothing in time)."""
    answered, failure = storage.answer_within(lambda: storage.exists(location), HDFS_TIMEOUT_S, "tableswap-doctor-hdfs")
    return failure if answered else TimeoutError(f"no answer in {HDFS_TIMEOUT_S:g}s")


def check_hdfs(locations: list[str]) -> Check:
    """Whether this process can reach the HDFS that ``locations`` (the table's root, the metastore's
    warehouse) are on: hdfs-native installed, the Hadoop configuration found, each location's nameservice or
    NameNode resolved from it, a NameNode accepting connections and answering (with simple authentication, as
    ``HADOOP_USER_NAME`` or this process's user). Skipped when none is on ``hdfs://`` or ``viewfs://``."""
    on_hdfs = [x for x in dict.fromkeys(locations)
               if storage.protocol_of(loc.split(x)[0]) in storage.HDFS_PROTOCOLS]
    if not on_hdfs:
        return Check("hdfs", SKIP, "neither the table nor the metastore's warehouse is on hdfs:// or viewfs://")
    start = time.perf_counter()
    facts: dict[str, Any] = {"locations": on_hdfs}
    if importlib.util.find_spec("hdfs_native") is None:
        return Check("hdfs", FAIL, f"{on_hdfs[0]} is on HDFS and tableswap's HDFS client, hdfs-native, is not "
                                   "installed: the janitor, repair and the staged batch's listing cannot reach it",
                     fix=_HDFS_EXTRA_FIX, facts=facts)
    conf_dir, found_by = storage.hadoop_conf_source()
    conf: dict[str, str] = {}
    notes = []
    if conf_dir is None:
        notes.append("HADOOP_CONF_DIR is not set (nor HADOOP_HOME): hdfs-native uses Hadoop's defaults only")
    elif not os.path.isdir(conf_dir):
        return Check("hdfs", FAIL, f"{found_by} is {conf_dir}, which is not a directory",
                     fix="point HADOOP_CONF_DIR at the directory holding the cluster's core-site.xml and "
                         "hdfs-site.xml (often /etc/hadoop/conf)", facts=facts)
    else:
        try:
            conf, read = storage.read_hadoop_conf(conf_dir, strict=True)
        except (OSError, ET.ParseError) as exc:
            return Check("hdfs", FAIL, f"cannot read the Hadoop configuration in {conf_dir}: {exc}",
                         fix="correct core-site.xml and hdfs-site.xml there", facts=facts)
        facts["conf_dir"], facts["conf_files"] = conf_dir, read
        if not read:
            notes.append(f"{conf_dir} ({found_by}) has neither core-site.xml nor hdfs-site.xml")
    facts["user"] = os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
    facts["authentication"] = conf.get("hadoop.security.authentication", "simple")
    reached = []
    for location in on_hdfs:
        if loc.split(location)[0] == "viewfs":
            mount = loc.split(location)[1] or conf.get("fs.viewfs.mounttable.default.name.key", "default")
            if not any(k.startswith(f"fs.viewfs.mounttable.{mount}.") for k in conf):
                return Check("hdfs", FAIL, f"{location}: no viewfs mount table {mount} in the Hadoop configuration",
                             fix="set HADOOP_CONF_DIR to the configuration that defines fs.viewfs.mounttable."
                                 f"{mount}.*", facts=facts)
            reached.append(f"{location}: viewfs mount table {mount}")
            continue
        try:
            what, addresses = namenodes(location, conf)
        except ValueError as exc:
            return Check("hdfs", FAIL, str(exc), fix="set HADOOP_CONF_DIR to the cluster's client configuration",
                         facts=facts)
        facts.setdefault("namenodes", {})[location] = [f"{h}:{p}" for h, p in addresses]
        failures = []
        for host, port in addresses:
            try:
                socket.create_connection((host, port), timeout=HDFS_TIMEOUT_S).close()
                break
            except OSError as exc:
                failures.append(f"{host}:{port} ({exc})")
        else:
            unresolved = "" if what.startswith("nameservice") or conf_dir else \
                " (without HADOOP_CONF_DIR a nameservice reads as a host name)"
            return Check("hdfs", FAIL, f"{location}: cannot connect to the {what}'s NameNode(s): "
                                       f"{'; '.join(failures)}{unresolved}",
                         fix="check HADOOP_CONF_DIR (the nameservice's NameNodes and their RPC addresses) and that "
                             "this machine reaches them", facts=facts)
        problem = _answers(location)
        if problem is not None:
            return Check("hdfs", FAIL, f"{location}: the {what} accepted a connection but did not answer as a "
                                       f"NameNode: {storage.error_text(problem)}",
                         fix="check the RPC address (dfs.namenode.rpc-address, not the HTTP one) and, on a "
                             "Kerberized cluster, this process's ticket", facts=facts)
        reached.append(f"{location}: {what} answered")
    detail = "; ".join(reached) + f" (as {facts['user']}, {facts['authentication']} authentication)"
    if notes:
        return Check("hdfs", WARN, f"{detail}; {'; '.join(notes)}",
                     fix="export HADOOP_CONF_DIR=<the cluster's client configuration> (nameservices, HA NameNodes, "
                         "viewfs mounts, Kerberos: hdfs-native reads them there)", ms=_ms(start), facts=facts)
    return Check("hdfs", OK, detail, ms=_ms(start), facts=facts)


def warehouse_location(catalog: Catalog) -> str | None:
    """The metastore's warehouse directory, as a location (a bare path is on its ``fs.defaultFS``, which
    this process reads from its own Hadoop configuration); None when the server does not tell it."""
    warehouse = catalog.config_value("hive.metastore.warehouse.dir") or catalog.config_value("metastore.warehouse.dir")
    if not warehouse or "://" in warehouse:
        return warehouse
    conf_dir = storage.hadoop_conf_dir()
    try:
        default = storage.read_hadoop_conf(conf_dir, strict=True)[0].get("fs.defaultFS", "") if conf_dir else ""
    except (OSError, ET.ParseError):
        return None
    return loc.join(default, warehouse.lstrip("/")) if default else None


#: At most this many partitions have their default path looked at (one storage listing each).
RECOVERY_SAMPLE = 2000
_RECOVERY_FIX = ("if the table's metastore entry is ever lost (dropped and re-created, a re-deploy, a restored "
                 "metastore database), do NOT run MSCK REPAIR TABLE: run `tableswap repair {table}` (add "
                 "--from-storage if the journal is lost too); runbook: docs/operations.md")


def check_recovery(catalog: Catalog, db: str, name: str) -> Check:
    """What ``MSCK REPAIR TABLE`` would make of the table if its metastore entry were lost and created
    again with its DDL: partitions that would revert to the displaced data at their default paths,
    partitions that would vanish (their data only under ``_tableswap/``), and whether the recovery
    manifests that ``tableswap repair --from-storage`` replays are there."""
    try:
        info = catalog.get_table(db, name)
    except errors.TableSwapError as exc:
        return Check("recovery", SKIP, f"cannot read {db}.{name}: {exc}")
    root, location = info.root, info.location
    if not root or not location:
        return Check("recovery", SKIP, f"{db}.{name} has no location")
    staging = loc.join(root, loc.STAGING_DIR)
    fix = _RECOVERY_FIX.format(table=info.qualified_name)
    start = time.perf_counter()
    try:
        if not info.is_partitioned:
            return _recovery_of_table(info, staging, fix, start)
        keys = info.partition_key_names
        parts = catalog.list_partitions(db, name)
        reverts, vanishes, swap_dirs = [], [], set()
        for part in parts[:RECOVERY_SAMPLE]:
            if not part.location or not loc.is_within(part.location, staging):
                continue
            swap_id = loc.key(part.location)[len(loc.key(staging)) + 1:].split("/", 1)[0]
            swap_dirs.add(loc.join(staging, swap_id))
            default = loc.join(location, part.name(keys))
            if storage.has_data_files(default):
                reverts.append(f"{part.name(keys)} (to {default})")
            else:
                vanishes.append(part.name(keys))
        unmanifested = sorted(d for d in swap_dirs if not storage.exists(loc.join(d, MANIFEST_NAME)))
    except errors.TableSwapError as exc:
        return Check("recovery", WARN, f"could not look at {root}: {exc}")
    except Exception as exc:  # noqa: BLE001 - the file system's own error
        return Check("recovery", WARN, f"could not look at {root}: {type(exc).__name__}: {exc}")
    facts: dict[str, Any] = {"reverts": reverts, "vanishes": vanishes, "without_manifest": unmanifested,
                             "partitions": len(parts), "checked": min(len(parts), RECOVERY_SAMPLE)}
    sampled = (f" (the first {RECOVERY_SAMPLE} of {len(parts)} partitions looked at)"
               if len(parts) > RECOVERY_SAMPLE else "")
    if not reverts and not vanishes:
        return Check("recovery", OK, f"no partition lives under _tableswap/: MSCK REPAIR TABLE would find "
                     f"the current data{sampled}", ms=_ms(start), facts=facts)
    detail = (f"if the table were re-created, MSCK REPAIR TABLE would revert {len(reverts)} partition(s) to "
              f"displaced data at their default paths{_examples(reverts)} and lose {len(vanishes)} whose data "
              f"lives only under _tableswap/{_examples(vanishes)}{sampled}")
    if unmanifested:
        detail += (f"; {len(unmanifested)} swap directory(ies) of live partitions have no recovery manifest "
                   f"(written before tableswap had them){_examples(unmanifested)}: only the journal can repair those")
    return Check("recovery", WARN, detail, fix=fix, ms=_ms(start), facts=facts)


def _recovery_of_table(info: TableInfo, staging: str, fix: str, start: float) -> Check:
    location = info.location or ""
    if not loc.is_within(location, staging):
        return Check("recovery", OK, "the table's location is not under _tableswap/: re-creating it finds the "
                     "current data", ms=_ms(start))
    stale = [c for c, is_dir in storage.children(info.root or "")
             if not is_dir and not c.rstrip("/").rsplit("/", 1)[-1].startswith(("_", "."))]
    manifest = storage.exists(loc.join(location, MANIFEST_NAME))
    detail = (f"the table's data lives under _tableswap/ ({location}): re-created with its DDL location "
              f"{info.root}, it would read {'the displaced files left there' if stale else 'no data'}"
              + ("" if manifest else "; its swap directory has no recovery manifest: only the journal can repair it"))
    return Check("recovery", WARN, detail, fix=fix, ms=_ms(start),
                 facts={"stale_files": len(stale), "manifest": manifest})


def _examples(items: list[str], n: int = 3) -> str:
    if not items:
        return ""
    more = f", ... {len(items) - n} more" if len(items) > n else ""
    return f" ({', '.join(items[:n])}{more})"
