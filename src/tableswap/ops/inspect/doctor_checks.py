"""The checks of ``tableswap doctor`` that look at storage and at what readers are told: the storage root,
what ``MSCK REPAIR TABLE`` would make of the table, the post-commit hooks and the janitor's grace against
the readers' cache TTL (:mod:`tableswap.ops.inspect.doctor` runs them, with the metastore and journal checks)."""

from __future__ import annotations

import secrets
import time
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


def _check_storage(client: Catalog, db: str | None, name: str | None) -> Check:
    try:
        info = client.get_table(db, name)  # type: ignore[arg-type]  # None: --table did not parse (doctor.py)
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


#: At most this many partitions have their default path looked at (one storage listing each).
RECOVERY_SAMPLE = 2000
_RECOVERY_FIX = ("if the table's metastore entry is ever lost (dropped and re-created, a re-deploy, a restored "
                 "metastore database), do NOT run MSCK REPAIR TABLE: run `tableswap repair {table}` (add "
                 "--from-storage if the journal is lost too); runbook: docs/operations.md")


def check_recovery(client: Catalog, db: str, name: str) -> Check:
    """What ``MSCK REPAIR TABLE`` would make of the table if its metastore entry were lost and created
    again with its DDL: partitions that would revert to the displaced data at their default paths,
    partitions that would vanish (their data only under ``_tableswap/``), and whether the recovery
    manifests that ``tableswap repair --from-storage`` replays are there."""
    try:
        info = client.get_table(db, name)
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
        parts = client.list_partitions(db, name)
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
