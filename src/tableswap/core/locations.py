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

One HDFS has more spellings than its URI shows: a nameservice (``hdfs://ns1/...``), each of its NameNodes'
``host:port``, a host's fully qualified or short name. Which of them are one file system only a Hadoop
configuration says; :class:`HdfsNames` holds what it says (passed in as data: ``storage.hdfs_names`` reads
``$HADOOP_CONF_DIR``), and :func:`key`, :func:`same` and :func:`is_within` given one compare every spelling of
one HDFS as that HDFS. Two ``hdfs://`` authorities that differ where the configuration does not place one of
them are not known to be one file system nor two: :meth:`HdfsNames.cannot_tell`.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping

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
def key(location: str, names: HdfsNames | None = None) -> str:
    """The identity of a location for comparisons: :func:`normalize`, with the spellings of one store
    made one (see the module's docstring; ``names``: the HDFS spellings a configuration makes one).
    Never stored nor written back anywhere."""
    scheme, authority, path = split(normalize(location))
    if scheme == "viewfs" and names is not None:
        target = names.through_mounts(location)
        if target is not None:
            scheme, authority, path = split(normalize(target))
    scheme = SAME_STORAGE.get(scheme, scheme)
    identity = names.identity(authority) if names is not None and scheme == "hdfs" else None
    return f"{scheme}://{identity or _authority_key(scheme, authority)}{path}"


def same(a: str | None, b: str | None, names: HdfsNames | None = None) -> bool:
    """True when two locations name the same storage path (see :func:`key`)."""
    if a is None or b is None:
        return a is b
    return key(a, names) == key(b, names)


def is_within(path: str, root: str, names: HdfsNames | None = None) -> bool:
    """True when ``path`` is ``root`` or lies below it (by :func:`key`; whole segments only,
    so ``s3a://b/tx`` is not within ``s3a://b/t``; no ``..`` escapes)."""
    p, r = key(path, names), key(root, names)
    return p == r or p.startswith(r.rstrip("/") + "/")


#: An identity :meth:`HdfsNames.identity` gives a nameservice (never a host name: a host has no ``@``).
_NAMESERVICE = "nameservice@"


@dataclass(frozen=True)
class HdfsNames:
    """The spellings of HDFS file systems a Hadoop client configuration declares (pure data; build it with
    :meth:`from_properties` from ``core-site.xml`` and ``hdfs-site.xml``'s properties).

    ``nameservices``: each nameservice (``dfs.nameservices``) with its NameNodes' RPC addresses
    (``dfs.namenode.rpc-address.<ns>.<nn>``); ``namenodes``: NameNodes of no nameservice
    (``dfs.namenode.rpc-address``, ``fs.defaultFS``'s ``host:port``). An authority names a file system when it
    is a nameservice, or one of these addresses spelled with its host as written, in another case, without its
    port (8020), or by its host's short name (``nn1`` for ``nn1.example.com``, when no other configured host
    shortens to it) or its fully qualified name (``nn1.example.com:8020`` for a configured ``nn1:8020``, when
    it is the only configured host of that short name). Nothing is looked up in DNS.
    """

    nameservices: tuple[tuple[str, tuple[str, ...]], ...] = ()
    namenodes: tuple[str, ...] = ()
    #: ``viewfs://`` mount tables: each table's name (lower case) with its links ``(mount point, target)``
    #: (``fs.viewfs.mounttable.<table>.link.<path>``) and its fallback target for every other path
    #: (``.linkFallback``, or ``.linkMergeSlash`` for the whole tree), ``""`` without one.
    mounts: tuple[tuple[str, tuple[tuple[str, str], ...], str], ...] = ()
    default_mount_table: str = "default"  # the table of viewfs:/// (fs.viewfs.mounttable.default.name.key)

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> HdfsNames:
        """The spellings ``properties`` (a client's Hadoop configuration) declare."""
        services = []
        for ns in _list(properties.get("dfs.nameservices", "")):
            ids = _list(properties.get(f"dfs.ha.namenodes.{ns}", ""))
            addresses = [properties.get(f"dfs.namenode.rpc-address.{ns}.{nn}", "") for nn in ids] if ids else [
                properties.get(f"dfs.namenode.rpc-address.{ns}", "")]
            services.append((ns.lower(), tuple(_with_port(a) for a in addresses if a.strip())))
        single = [properties.get("dfs.namenode.rpc-address", "")]
        scheme, authority, _ = split(properties.get("fs.defaultFS", ""))
        if scheme.lower() == "hdfs" and authority and authority.lower() not in {ns for ns, _ in services}:
            single.append(authority)
        return cls(tuple(services), tuple(dict.fromkeys(_with_port(a) for a in single if a.strip())),
                   _mount_tables(properties),
                   properties.get("fs.viewfs.mounttable.default.name.key", "").strip().lower() or "default")

    def through_mounts(self, location: str) -> str | None:
        """The location a ``viewfs://`` ``location`` stands for by its mount table (its authority's, or the
        default table's for ``viewfs:///``), as Hadoop's ``ViewFileSystem`` resolves it: the target of the
        deepest link at or above its path with the rest of the path appended, else the fallback's; None when
        the configuration has no such table or neither (a link type not read here: ``linkMerge``, ``linkNfly``,
        ``linkRegx``)."""
        scheme, authority, path = split(normalize(location))
        if scheme != "viewfs":
            return None
        table = authority or self.default_mount_table
        for name, links, fallback in self.mounts:
            if name != table:
                continue
            best = max((link for link in links if is_within(path, link[0])), key=lambda link: len(link[0]),
                       default=None)
            if best is not None:
                return join(best[1], path[len(best[0].rstrip("/")):])
            return join(fallback, path) if fallback else None
        return None

    def identity(self, authority: str) -> str | None:
        """The file system ``authority`` names (the same for every spelling of it), or None when the
        configuration does not place it."""
        return _identity(self, authority.lower())

    def cannot_tell(self, a: str, b: str) -> bool:
        """True when ``a`` and ``b`` are ``hdfs://`` paths of which one is within the other by their paths alone,
        on authorities that are not known to be one file system and not known to be two (one of them is not
        in the configuration): they may be one path of one HDFS spelled two ways. A ``viewfs://`` path counts
        as the path its mount table maps it to; one the configuration cannot map (no such mount table, no link
        for its path) is unplaced, as such an authority is."""
        a, b = self.through_mounts(a) or a, self.through_mounts(b) or b
        sa, aa, pa = split(normalize(a))
        sb, ab, pb = split(normalize(b))
        if sa not in ("hdfs", "viewfs") or sb not in ("hdfs", "viewfs") or key(a, self) == key(b, self):
            return False
        placed_a = sa == "hdfs" and self.identity(aa) is not None
        placed_b = sb == "hdfs" and self.identity(ab) is not None
        if placed_a and placed_b:
            return False  # two file systems the configuration names
        return is_within(pa, pb) or is_within(pb, pa)


_MOUNT_KEY = re.compile(r"^fs\.viewfs\.mounttable\.(?P<table>[^.]+)\."
                        r"(?P<kind>link|linkFallback|linkMergeSlash)(?:\.(?P<path>/.*))?$")


def _mount_tables(properties: Mapping[str, str]) -> tuple[tuple[str, tuple[tuple[str, str], ...], str], ...]:
    tables: dict[str, tuple[list[tuple[str, str]], list[str]]] = {}
    for name, value in properties.items():
        found = _MOUNT_KEY.match(name)
        if found is None or not value.strip():
            continue
        links, fallback = tables.setdefault(found["table"].lower(), ([], []))
        if found["kind"] == "link" and found["path"]:
            links.append((posixpath.normpath(found["path"]), value.strip()))
        elif found["kind"] != "link" and not found["path"]:
            fallback.append(value.strip())
    return tuple((table, tuple(sorted(links)), fallback[0] if fallback else "")
                 for table, (links, fallback) in sorted(tables.items()))


def _list(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _with_port(address: str) -> str:
    address = address.strip().lower()
    return address if re.search(r":\d+$", address.rpartition("]")[2]) else f"{address}:{DEFAULT_PORTS['hdfs']}"


def _short(host: str) -> str:
    return host if re.fullmatch(r"[\d.]+|\[.*\]", host) else host.split(".", 1)[0]


@lru_cache(maxsize=1 << 12)
def _identity(names: HdfsNames, authority: str) -> str | None:
    if not authority:
        return None
    for ns, _ in names.nameservices:
        if authority == ns:
            return _NAMESERVICE + ns
    owners = [(_NAMESERVICE + ns, address) for ns, addresses in names.nameservices for address in addresses]
    owners += [(address, address) for address in names.namenodes]
    address = _with_port(authority)
    for owner, known in owners:
        if address == known:
            return owner
    host, _, port = address.rpartition(":")
    by_short = [(owner, known) for owner, known in owners
                if known.rpartition(":")[2] == port and _short(known.rpartition(":")[0]) == _short(host)]
    hosts = {known.rpartition(":")[0] for _, known in by_short}
    if len(hosts) == 1 and (host == _short(host) or next(iter(hosts)) == _short(next(iter(hosts)))):
        return by_short[0][0]  # a short name for a configured FQDN, or an FQDN for a configured short name
    return None


def on_hdfs(location: str) -> bool:
    """True for an ``hdfs://`` or a ``viewfs://`` location (a mount table's, usually onto HDFS)."""
    return split(location)[0].lower() in ("hdfs", "viewfs")


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
