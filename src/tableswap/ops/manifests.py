"""Recovery manifests on storage: written by the commit protocol, read by ``tableswap repair --from-storage``.

The format and the crash semantics are in :mod:`tableswap.core.manifest`. Here: the two writes the
commit protocol makes (:func:`write_intent` before the flip, :func:`finish` after the journal's commit)
and the read of every manifest under a table's root (:func:`read_all`).

A local file is written to a temporary name and renamed, so a reader never sees half a manifest; an
object store's PUT replaces the object whole.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

from fsspec.implementations.local import LocalFileSystem

from tableswap import errors, storage
from tableswap.core import locations as loc
from tableswap.core import manifest as mf
from tableswap.core.names import SWAP_ID_RE
from tableswap.core.plan import SwapPlan
from tableswap.core.records import SwapKind, SwapRecord
from tableswap.journal.store import utcnow
from tableswap.logs import get_logger
from tableswap.core.catalog import TableInfo

log = get_logger("tableswap.manifest")


def write(manifest: mf.Manifest) -> str:
    """Write ``manifest`` at its place under its table root; returns the location."""
    location = mf.manifest_location(manifest.table_root, manifest.swap_id)
    fs, path = storage.filesystem(location)
    data = manifest.to_json().encode()
    parent = path.rsplit("/", 1)[0]
    if not storage.is_object_store(fs):
        fs.makedirs(parent, exist_ok=True)
        temp = f"{parent}/._tableswap.json.{secrets.token_hex(4)}"
        with fs.open(temp, "wb") as fh:
            fh.write(data)
        if isinstance(fs, LocalFileSystem):
            os.replace(temp, path)  # atomic: a reader sees the old manifest or the new one
        else:
            storage.replace_file(fs, temp, path)  # HDFS: one rename, replacing the intent
    else:
        with fs.open(path, "wb") as fh:
            fh.write(data)
    return location


def write_intent(table: TableInfo, plan: SwapPlan, kind: SwapKind, label: str) -> mf.Manifest | None:
    """Before the flip: the ``intent`` manifest of ``plan``, an operation of ``kind`` (``label``: how its
    errors name it). None (nothing written) for a plan that changes nothing or a table without a storage
    root. Raises :class:`StorageError` when it cannot be written: the flip has not started, so nothing was
    changed."""
    root = table.root
    if plan.is_noop or not root:
        return None
    record = SwapRecord(plan.swap_id, table.db, table.name, kind, "pending", root)
    manifest = mf.from_record(record, table.partition_key_names, plan.changes(), intent_at=utcnow())
    try:
        location = write(manifest)
    except Exception as exc:  # noqa: BLE001 - the file system's own errors
        raise errors.StorageError(
            f"cannot write the recovery manifest of {label} {plan.swap_id} under {root}/_tableswap "
            f"({type(exc).__name__}: {exc}); nothing was changed. Check that this user can write there"
        ) from exc
    log.info("manifest.intent_written", swap_id=plan.swap_id, location=location)
    return manifest


def finish(root: str | None, swap_id: str, manifest: mf.Manifest | None = None) -> bool:
    """After the journal's commit: mark the manifest ``committed`` (``manifest``: the intent written by
    this process, else read back from storage, as ``tableswap recover`` does). Never raises: the swap is
    committed; a manifest left at ``intent`` only makes a replay from storage claim less. True if done."""
    if not root:
        return False
    location = mf.manifest_location(root, swap_id)
    try:
        if manifest is None:
            manifest = read(location)
            if manifest is None:
                return False
        write(manifest.committed(utcnow()))
    except Exception as exc:  # noqa: BLE001 - committed already: warn, never fail
        log.warning("manifest.finish_failed", swap_id=swap_id, location=location, error=str(exc))
        return False
    return True


def discard(root: str | None, swap_id: str) -> None:
    """Remove the ``intent`` manifest of an operation that failed before its flip and staged nothing
    else (a rollback, a repair): its directory goes with it if left empty. Best effort: the janitor's
    orphan sweep removes what is left."""
    if not root:
        return
    location = mf.manifest_location(root, swap_id)
    try:
        fs, path = storage.filesystem(location)
        if fs.exists(path):
            fs.rm(path)
        storage.remove_empty_dir(loc.staging_location(root, swap_id))
    except Exception as exc:  # noqa: BLE001 - the first error is the one to report
        log.warning("manifest.discard_failed", swap_id=swap_id, location=location, error=str(exc))


def read(location: str) -> mf.Manifest | None:
    """The manifest at ``location``, None if there is none; :class:`InvalidInputError` if unreadable."""
    fs, path = storage.filesystem(location)
    try:
        with fs.open(path, "rb") as fh:
            text = fh.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    return mf.parse(text, location)


@dataclass(frozen=True)
class Found:
    """What :func:`read_all` found under a root: the manifests, and those it could not read."""

    manifests: tuple[mf.Manifest, ...]
    unreadable: tuple[tuple[str, str], ...]  # (location, why)


def read_all(root: str) -> Found:
    """Every manifest under ``<root>/_tableswap/<swap id>/``, in flip order (intent time, then swap id)."""
    base = loc.join(root, loc.STAGING_DIR)
    out: list[mf.Manifest] = []
    bad: list[tuple[str, str]] = []
    for name in storage.list_dirs(base):
        if not SWAP_ID_RE.match(name):
            continue
        location = loc.join(base, name, mf.MANIFEST_NAME)
        try:
            found = read(location)
        except errors.InvalidInputError as exc:
            bad.append((location, str(exc)))
            continue
        if found is not None:
            out.append(found)
    out.sort(key=lambda m: (m.intent_at, m.swap_id))
    return Found(tuple(out), tuple(bad))
