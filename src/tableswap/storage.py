"""File-system access through fsspec (``file://`` built in; s3a/s3, hdfs, gs, abfs with extras)."""

from __future__ import annotations

from typing import Any

import fsspec

from . import locations as loc

_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "wasbs": "abfs", "abfss": "abfs"}


def filesystem(location: str) -> tuple[Any, str]:
    """The fsspec filesystem and the path inside it for a metastore location."""
    norm = loc.normalize(location)
    scheme, _, rest = norm.partition("://")
    if scheme == "file":
        return fsspec.filesystem("file"), rest
    fs = fsspec.filesystem(_SCHEME_ALIASES.get(scheme, scheme))
    return fs, rest


def exists(location: str) -> bool:
    fs, path = filesystem(location)
    return bool(fs.exists(path))


def is_empty_dir(location: str) -> bool:
    fs, path = filesystem(location)
    return fs.isdir(path) and not fs.ls(path, detail=False)


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
