"""Storage locations: normalization, containment and the staging layout (pure functions).

A location is a Hadoop path, ``scheme://authority/path``, not a URL: ``#`` and ``?`` are ordinary
characters of a directory name (Hadoop's ``Path`` keeps them; a partition moved by hand to
``.../x#1`` lives there, not at ``.../x``), so locations are split by hand (:func:`split`), never
with ``urllib``.

The metastore stores a location exactly as given (``file:///x`` and ``file:/x`` are different
strings), so every comparison goes through :func:`normalize` (the form tableswap writes and shows:
the scheme is kept as given, so ``s3a://`` stays ``s3a://`` for Spark) or :func:`key` (the identity
used to compare, never stored: the spellings of one store are made one —

* ``s3a://``, ``s3n://`` and ``s3://`` (Hadoop's S3 connectors all read S3);
* ``abfs://``, ``abfss://``, ``wasb://`` and ``wasbs://`` (one Azure storage account, TLS or not,
  through its ``dfs`` or ``blob`` endpoint);
* ``gs://`` and ``gcs://``;
* an HDFS authority without a port and the same one with the NameNode's default port 8020;

— and host names compare case-insensitively; buckets, other ports and paths are compared exactly,
segment by segment). A live ``s3://b/t/x`` partition thereby protects ``s3a://b/t/x`` from the janitor.
"""

from __future__ import annotations

import posixpath
import re
from functools import lru_cache

STAGING_DIR = "_tableswap"

#: Hadoop's URI scheme syntax; a scheme is only recognised before the first ``/``.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def split(location: str) -> tuple[str, str, str]:
    """``(scheme, authority, path)`` of a location, as Hadoop's ``Path`` reads it: the scheme is what
    precedes the first ``:`` when no ``/`` comes before it, the authority what follows ``//`` up to
    the next ``/``; everything else, ``#`` and ``?`` included, is the path. Missing parts are ``""``."""
    match = _SCHEME.match(location)
    scheme, rest = (match.group(1), location[match.end():]) if match else ("", location)
    authority = ""
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
    return scheme, authority, rest


@lru_cache(maxsize=1 << 16)  # pure; the janitor asks about the same locations many times
def normalize(location: str) -> str:
    """Canonical form of a location: scheme and host lower-cased, ``file:/x`` → ``file:///x``,
    ``.``/``..`` and duplicate slashes resolved, no trailing slash. A bare path becomes ``file://``.
    ``#`` and ``?`` stay part of the path."""
    if not location:
        raise ValueError("empty location")
    scheme, authority, path = split(location)
    scheme = (scheme or "file").lower()
    path = path or "/"
    if not path.startswith("/"):
        path = "/" + path
    path = posixpath.normpath(path)
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    if scheme == "file":
        return f"file://{path}"
    return f"{scheme}://{authority.lower()}{path}"


#: Schemes that address the same storage as another one.
SAME_STORAGE = {"s3a": "s3", "s3n": "s3", "abfss": "abfs", "wasb": "abfs", "wasbs": "abfs", "gcs": "gs"}
#: Authorities spelled differently for the same store: (scheme of the key, suffix, its equivalent).
_AZURE_BLOB, _AZURE_DFS = ".blob.core.windows.net", ".dfs.core.windows.net"
#: The port a scheme's authority means when it names none.
DEFAULT_PORTS = {"hdfs": 8020}


def _authority_key(scheme: str, authority: str) -> str:
    if scheme == "abfs" and authority.endswith(_AZURE_BLOB):
        return authority[: -len(_AZURE_BLOB)] + _AZURE_DFS
    port = DEFAULT_PORTS.get(scheme)
    if port is not None and authority and not re.search(r":\d*$", authority.rpartition("]")[2]):
        return f"{authority}:{port}"
    return authority


@lru_cache(maxsize=1 << 16)
def key(location: str) -> str:
    """The identity of a location for comparisons: :func:`normalize`, with the spellings of one store
    made one (see the module's docstring). Never stored nor written back anywhere."""
    scheme, authority, path = split(normalize(location))
    scheme = SAME_STORAGE.get(scheme, scheme)
    return f"{scheme}://{_authority_key(scheme, authority)}{path}"


def same(a: str | None, b: str | None) -> bool:
    """True when two locations name the same storage path (see :func:`key`)."""
    if a is None or b is None:
        return a is b
    return key(a) == key(b)


def is_within(path: str, root: str) -> bool:
    """True when ``path`` is ``root`` or lies below it (by :func:`key`; whole segments only,
    so ``s3a://b/tx`` is not within ``s3a://b/t``; no ``..`` escapes)."""
    p, r = key(path), key(root)
    return p == r or p.startswith(r.rstrip("/") + "/")


def path_of(location: str) -> str:
    """The path part of a location as given (no normalization; ``#`` and ``?`` included)."""
    return split(location)[2]


def join(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])


def staging_location(table_root: str, swap_id: str) -> str:
    """Fresh directory for one batch: ``<table root>/_tableswap/<swap id>``.

    Spark ignores directories starting with ``_`` when it lists a table, and a plain Spark INSERT
    OVERWRITE never deletes them, so staged and rolled-back data are safe here.
    """
    return join(table_root, STAGING_DIR, swap_id)


def to_local_path(location: str) -> str | None:
    """The local file-system path of a ``file:`` location, else ``None``."""
    norm = normalize(location)
    return norm[len("file://"):] if norm.startswith("file://") else None
