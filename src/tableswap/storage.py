"""File-system access through fsspec (``file://`` built in; s3a/s3, hdfs, gs, abfs with extras)."""

from __future__ import annotations

from typing import Any

import fsspec

from . import locations as loc

_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "wasbs": "abfs", "abfss": "abfs", "wasb": "abfs", "gcs": "gs"}
_EXTRAS = {"s3": "s3fs", "gs": "gcsfs", "abfs": "adlfs", "hdfs": "pyarrow"}


def filesystem(location: str) -> tuple[Any, str]:
    """The fsspec filesystem and the path inside it for a metastore location."""
    norm = loc.normalize(location)
    scheme, _, rest = norm.partition("://")
    if scheme == "file":
        return fsspec.filesystem("file"), rest
    protocol = _SCHEME_ALIASES.get(scheme, scheme)
    try:
        # url_to_fs puts the host (a namenode, an account) into the filesystem where needed.
        fs, path = fsspec.core.url_to_fs(f"{protocol}://{rest}")
    except (ImportError, ValueError) as exc:
        from .errors import ConfigurationError

        raise ConfigurationError(
            f"cannot open {scheme}:// storage through fsspec ({exc}); install "
            f"{_EXTRAS.get(protocol, 'the fsspec implementation for ' + protocol)}"
        ) from exc
    return fs, path


def exists(location: str) -> bool:
    fs, path = filesystem(location)
    return bool(fs.exists(path))


def delete_tree(location: str) -> None:
    fs, path = filesystem(location)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def remove_empty_dir(location: str) -> bool:
    fs, path = filesystem(location)
    if fs.isdir(path) and not fs.ls(path, detail=False):
        fs.rmdir(path)
        return True
    return False


def probe_write(root: str, name: str) -> str:
    """Create and remove the file ``<root>/_tableswap/<name>``: proves the writer can stage there.

    The ``_tableswap`` directory is removed again if this call created it. Returns the probe's
    location; raises the file system's error (``PermissionError``, ...) if it cannot be written.
    """
    fs, path = filesystem(root)
    base = path.rstrip("/") + "/_tableswap"
    probe = f"{base}/{name}"
    created_dir = not fs.exists(base)
    fs.makedirs(base, exist_ok=True)
    try:
        with fs.open(probe, "wb") as fh:
            fh.write(b"tableswap doctor write probe\n")
    finally:
        try:
            if fs.exists(probe):
                fs.rm(probe)
        finally:
            if created_dir:
                try:
                    if fs.isdir(base) and not fs.ls(base, detail=False):
                        fs.rmdir(base)
                except OSError:
                    pass
    return loc.join(loc.normalize(root), f"_tableswap/{name}")


def list_dirs(location: str) -> list[str]:
    """Names of the directories directly below ``location``."""
    fs, path = filesystem(location)
    if not fs.isdir(path):
        return []
    return sorted(
        entry["name"].rstrip("/").rsplit("/", 1)[-1]
        for entry in fs.ls(path, detail=True)
        if entry.get("type") == "directory"
    )


# --- janitor helpers: listing, sizes, batched deletes ------------------------------------------


def _location_of(location: str, fs: Any, path: str, child: str) -> str:
    """The location (same scheme and host as ``location``) of ``child``, a path ``fs`` returned."""
    norm = loc.normalize(location)
    child = child.rstrip("/")
    if norm.startswith("file://"):
        return "file://" + child
    base = norm[: len(norm) - len(path.rstrip("/"))] if norm.endswith(path.rstrip("/")) else None
    if base is None:
        return loc.join(norm, child.rsplit("/", 1)[-1])
    return base + child


def children(location: str) -> list[tuple[str, bool]]:
    """``(location, is_dir)`` of every entry directly below ``location`` (nothing if it is missing)."""
    fs, path = filesystem(location)
    try:
        entries = fs.ls(path, detail=True)
    except FileNotFoundError:
        return []
    out = []
    for entry in entries:
        name = entry["name"].rstrip("/")
        if name == path.rstrip("/"):
            continue  # some filesystems list a file as itself
        out.append((_location_of(location, fs, path, name), entry.get("type") == "directory"))
    return sorted(out)


def size(location: str) -> int:
    """Bytes of all files at or below ``location`` (0 if it is missing)."""
    fs, path = filesystem(location)
    try:
        if not fs.exists(path):
            return 0
        if fs.isfile(path):
            return int(fs.size(path) or 0)
        return int(fs.du(path, total=True, withdirs=False) or 0)
    except FileNotFoundError:
        return 0


def newest_mtime(location: str) -> float | None:
    """Epoch seconds of the most recent modification at or below ``location`` (None if missing)."""
    fs, path = filesystem(location)
    try:
        infos = [fs.info(path)]
        if infos[0].get("type") == "directory":
            infos.extend(fs.find(path, withdirs=True, detail=True).values())
    except FileNotFoundError:
        return None
    times = []
    for info in infos:
        raw = info.get("mtime", info.get("LastModified", info.get("last_modified")))
        if raw is None:
            continue
        times.append(raw.timestamp() if hasattr(raw, "timestamp") else float(raw))
    return max(times) if times else None


def delete_many(locations: list[str]) -> dict[str, BaseException]:
    """Delete files and directory trees, one ``fs.rm`` call per filesystem (object stores batch it).

    Missing paths are not an error. Returns the locations that could not be deleted with the
    error, after retrying the failed batch path by path.
    """
    failures: dict[str, BaseException] = {}
    groups: dict[int, tuple[Any, list[tuple[str, str]]]] = {}
    for location in locations:
        fs, path = filesystem(location)
        groups.setdefault(id(fs), (fs, []))[1].append((location, path))
    for fs, items in groups.values():
        present = [(location, path) for location, path in items if fs.exists(path)]
        if not present:
            continue
        try:
            fs.rm([path for _, path in present], recursive=True)
        except Exception:  # noqa: BLE001 - find out which ones failed
            for location, path in present:
                try:
                    if fs.exists(path):
                        fs.rm(path, recursive=True)
                except FileNotFoundError:
                    pass  # deleted meanwhile
                except Exception as exc:  # noqa: BLE001 - reported per path
                    failures[location] = exc
    return failures


def has_data_files(location: str) -> bool:
    """True if any file at or below ``location`` is a data file: not ``_SUCCESS``-like nor hidden."""
    fs, path = filesystem(location)
    try:
        found = fs.find(path, detail=False)
    except FileNotFoundError:
        return False
    return any(not name.rstrip("/").rsplit("/", 1)[-1].startswith(("_", ".")) for name in found)
