"""The download cache: one rule for what tableswap downloads once and reuses offline afterwards (the S3A
jars of :mod:`tableswap.jvm.jars`, the Hive Metastore releases of :mod:`tableswap.devmetastore.releases`).

An entry is a directory ``<cache>/<name>/``. It is **complete** when its ``manifest.json`` names the
coordinates asked for and every file it lists is there; nothing else is trusted. An entry is built in a
temporary directory beside it (``.<name>.<random>``), checked (every file the download names exists), the
manifest written last, then renamed into place: a crash leaves no half entry under the final name. A lock
file (``<cache>/.<name>.lock``, ``flock``) makes a second process wait for the first one's download and
reuse it instead of downloading the same thing again.

Entries written before this module stay valid, so that a cache filled by an earlier version is still used
offline: a jar set's ``manifest.json`` listing ``"jars"`` (names under ``jars/``), and a release's
``.complete`` holding its coordinates on one line.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from tableswap.errors import DependencyError, TableSwapError

MANIFEST = "manifest.json"
_OLD_RELEASE_MARKER = ".complete"


@dataclass(frozen=True)
class Entry:
    """A complete cache entry: its directory and the files its manifest lists (absolute, in order)."""

    directory: Path
    files: tuple[Path, ...]
    downloaded: bool = field(default=False, compare=False)  # False: found in the cache


def find(caches: Sequence[Path], name: str, coordinates: Sequence[str]) -> Entry | None:
    """The first complete entry ``name`` for ``coordinates`` in ``caches`` (searched in order), or None."""
    for cache in caches:
        entry = _complete(cache.expanduser().resolve() / name, list(coordinates))
        if entry is not None:
            return entry
    return None


def fetch(caches: Sequence[Path], name: str, coordinates: Sequence[str], download: Callable[[Path], Iterable[str]],
          *, error: type[TableSwapError] = DependencyError) -> Entry:
    """The complete entry ``name`` from ``caches``, else downloaded once into the first of them.

    Args:
        caches: where to look, in order; a download goes into the first.
        coordinates: what the entry holds (compared with a cached manifest's).
        download: fills the empty directory it is given and returns the files (paths relative to it) that
            make the entry whole; it raises when it cannot.

    Raises:
        error: the download named no file, or a file it named is missing; whatever ``download`` raises.
    """
    found = find(caches, name, coordinates)
    if found is not None:
        return found
    cache = caches[0].expanduser().resolve()
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / name
    with exclusive(cache / f".{name}.lock"):
        found = find(caches, name, coordinates)  # another process downloaded it while we waited
        if found is not None:
            return found
        work = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=cache))
        try:
            files = sorted(set(download(work)))
            missing = [f for f in files if not (work / f).is_file()]
            if not files or missing:
                raise error(f"the download of {name} ({', '.join(coordinates)}) is incomplete: "
                            + (f"missing {', '.join(missing[:5])}" if missing else "it holds no file"))
            (work / MANIFEST).write_text(json.dumps({"coordinates": list(coordinates), "files": files}, indent=2),
                                         encoding="utf-8")
            if target.exists():  # an incomplete earlier attempt (we hold the lock)
                shutil.rmtree(target)
            os.replace(work, target)
        finally:
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)
    return Entry(target, tuple(target / f for f in files), downloaded=True)


@contextmanager
def exclusive(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_file`` (made if missing) across processes (also what the
    development metastore's start and stop are serialized with)."""
    with open(lock_file, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _complete(directory: Path, coordinates: list[str]) -> Entry | None:
    recorded, files = _manifest(directory)
    if recorded != coordinates:
        return None
    paths = tuple(directory / f for f in files)
    return Entry(directory, paths) if all(p.is_file() for p in paths) else None


def _manifest(directory: Path) -> tuple[list[str] | None, list[str]]:
    """The coordinates and files a manifest records (``None``: no readable manifest)."""
    try:
        data = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    if isinstance(data, dict):
        if "files" in data:
            return list(data.get("coordinates") or []), [str(f) for f in data["files"]]
        if data.get("jars"):  # a jar set cached before this module: names under jars/
            return list(data.get("coordinates") or []), [f"jars/{n}" for n in data["jars"]]
        return None, []
    try:  # a release cached before this module: its coordinates, written last
        return [(directory / _OLD_RELEASE_MARKER).read_text(encoding="utf-8").strip()], []
    except OSError:
        return None, []
