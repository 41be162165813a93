"""File-system access through fsspec (``file://`` built in; s3a/s3, hdfs, gs, abfs with extras).

``hdfs://`` (and ``viewfs://``) locations are reached through hdfs-native (the ``hdfs`` extra), a client of
HDFS's own RPC protocol installed as a wheel: no ``libhdfs.so``, no JVM, no Hadoop ``CLASSPATH``. It reads
``core-site.xml`` and ``hdfs-site.xml`` from ``$HADOOP_CONF_DIR`` (nameservices, HA NameNodes, viewfs mount
tables) the way Hadoop's client does. fsspec's other HDFS implementation (pyarrow's, which needs libhdfs and
a Hadoop CLASSPATH) is never used. :func:`delete_tree` and :func:`delete_many` delete; the janitor moves an
HDFS directory into its user's trash first where the NameNode has the trash on (:func:`move_to_trash`).

Object stores (S3 through s3fs; GCS and Azure alike) have no directories: a "directory" is a key
prefix, possibly with zero-byte marker objects (``x/``) that Hadoop's S3A connector and consoles
create. Everything here treats them accordingly:

* a marker is never a file, a child or data; a prefix holding only markers (or only ``_SUCCESS``
  -like files, see :func:`has_data_files`) holds no data;
* deleting a location deletes every key below ``<prefix>/`` and its marker, never a sibling that
  merely shares the prefix (``x`` vs ``xy``);
* listings are never cached (``use_listings_cache=False``): Spark or another process may have
  written or deleted keys since the last call.

``s3a://`` and ``s3n://`` locations are opened with s3fs as ``s3://`` (locations are reported
with their own scheme). Credentials and endpoint, in order of precedence:

1. :func:`configure` (``configure("s3", endpoint_url=..., key=..., secret=...)``);
2. fsspec's configuration: ``FSSPEC_S3_<OPTION>`` environment variables (``FSSPEC_S3_ENDPOINT_URL``,
   ``FSSPEC_S3_KEY``, ``FSSPEC_S3_SECRET``), ``FSSPEC_S3='{"endpoint_url": ...}'`` or
   ``fsspec.config.conf["s3"]``;
3. boto's own chain: ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``,
   ``AWS_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL_S3``), ``AWS_DEFAULT_REGION``, ``AWS_PROFILE``,
   instance roles.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import fsspec
from fsspec.implementations.local import LocalFileSystem

from tableswap import errors
from tableswap.core import locations as loc
from tableswap.core import partitions as pn
from tableswap.core.catalog import PartitionInfo

_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "wasbs": "abfs", "abfss": "abfs", "wasb": "abfs", "gcs": "gs"}
_EXTRAS = {"s3": "s3fs", "gs": "gcsfs", "abfs": "adlfs"}
#: fsspec protocols served by hdfs-native (the ``hdfs`` extra).
HDFS_PROTOCOLS = frozenset({"hdfs", "viewfs"})
#: fsspec protocols of object stores: no real directories, listings must not be cached.
OBJECT_STORES = frozenset({"s3", "gs", "abfs"})

_configured: dict[str, dict[str, Any]] = {}

#: fsspec protocols whose files are never erasure-coded (Hadoop's ``FileStatus.isErasureCoded()`` is true
#: only on HDFS-like stores): a partition there has ``numFilesErasureCoded`` 0 without asking.
_NEVER_ERASURE_CODED = OBJECT_STORES | {"file"}


def protocol_of(scheme: str) -> str:
    scheme = scheme.lower()
    return _SCHEME_ALIASES.get(scheme, scheme)


def never_erasure_coded(location: str) -> bool:
    """True if no file at ``location`` can be erasure-coded: a local disk or an object store. False on
    HDFS, Ozone and a location without a scheme (Hadoop resolves it against ``fs.defaultFS``)."""
    scheme = loc.split(location)[0]
    return bool(scheme) and protocol_of(scheme) in _NEVER_ERASURE_CODED


def configure(scheme: str, **options: Any) -> None:
    """Set the fsspec options tableswap uses for ``scheme`` (``"s3"`` also covers s3a/s3n),
    e.g. ``configure("s3a", endpoint_url="http://minio:9000", key="...", secret="...")``.
    They win over fsspec's configuration and the environment. ``configure("s3")`` with no
    options forgets them."""
    protocol = protocol_of(scheme)
    if options:
        _configured[protocol] = dict(options)
    else:
        _configured.pop(protocol, None)


def filesystem(location: str) -> tuple[Any, str]:
    """The fsspec filesystem and the path inside it for a metastore location."""
    norm = loc.normalize(location)
    scheme, _, rest = norm.partition("://")
    if scheme == "file":
        return fsspec.filesystem("file"), rest
    protocol = protocol_of(scheme)
    options = dict(_configured.get(protocol, {}))
    if protocol in OBJECT_STORES:
        options.setdefault("use_listings_cache", False)
    if protocol in HDFS_PROTOCOLS:
        return _hdfs_filesystem(protocol, rest, options)
    try:
        # url_to_fs puts the host (a namenode, an account) into the filesystem where needed.
        fs, path = fsspec.core.url_to_fs(f"{protocol}://{rest}", **options)
    except (ImportError, ValueError) as exc:
        from tableswap.errors import ConfigurationError

        raise ConfigurationError(
            f"cannot open {scheme}:// storage through fsspec ({exc}); install "
            f"{_EXTRAS.get(protocol, 'the fsspec implementation for ' + protocol)}"
        ) from exc
    if protocol == "s3" and "?versionId=" in path:
        from tableswap.errors import UnsafeOperationError

        raise UnsafeOperationError(
            f"{location}: s3fs reads '?versionId=' in a key as an object version, so this path cannot be "
            "listed or deleted exactly; tableswap does not touch it")
    fs.invalidate_cache()  # never answer from an earlier listing
    return fs, path


def _hdfs_filesystem(protocol: str, rest: str, options: dict[str, Any]) -> tuple[Any, str]:
    """hdfs-native's file system for ``<protocol>://<rest>`` (the NameNode or nameservice in the URL's
    authority, the rest from ``$HADOOP_CONF_DIR``), and the path inside it."""
    try:
        from hdfs_native.fsspec import HdfsFileSystem, ViewfsFileSystem
    except ImportError as exc:
        raise errors.ConfigurationError(
            f"cannot open {protocol}:// storage: its client, hdfs-native, is not installed ({exc}); install it "
            "with pip install 'tableswap[hdfs]' (a wheel: no libhdfs or Hadoop CLASSPATH is needed)") from exc
    cls = HdfsFileSystem if protocol == "hdfs" else ViewfsFileSystem
    url = f"{protocol}://{rest}"
    kwargs = {**cls._get_kwargs_from_urls(url), **options}
    # A client is made from the Hadoop configuration as it is now (hdfs-native reads the nameservices and
    # their NameNodes when it makes one): another configuration, or its files rewritten, gets a client of its own.
    key = (protocol, repr(sorted(kwargs.items())), _hadoop_conf_identity())
    with _HDFS_LOCK:
        if _HDFS_CLIENTS.get("pid") != os.getpid():  # a forked child: the parent's clients are not its own
            _HDFS_LEFT_BY_PARENT.append(dict(_HDFS_CLIENTS))
            _HDFS_CLIENTS.clear()
            _HDFS_CLIENTS["pid"] = os.getpid()
        fs = _HDFS_CLIENTS.get(key)
        if fs is None:
            _raise_if_unreachable(key)
            kerberos = _kerberos_in_use()
            fs = cls(skip_instance_cache=True, **kwargs)
            # Before it is kept: a later call with a ticket, or once the NameNode answers, gets a new one.
            _first_answer(fs, key, url, kerberos=kerberos)
            _HDFS_CLIENTS[key] = fs
    return fs, cls._strip_protocol(url)


def _hadoop_conf_identity() -> tuple[Any, ...]:
    """Which Hadoop configuration a client made now would read: its directory and its files' sizes and times."""
    where = hadoop_conf_dir()
    if where is None:
        return ()
    out: list[Any] = [where]
    for name in ("core-site.xml", "hdfs-site.xml"):
        try:
            st = os.stat(os.path.join(where, name))
            out.append((name, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((name, None))
    return tuple(out)


# ---------------------------------------------------------------------- HDFS and Kerberos
#: The keytab login :func:`use_kerberos_keytab` asked for, ``(principal, keytab)``, and the one done: the same
#: pair and the ticket cache it filled (a login is done again when ``KRB5CCNAME`` no longer names that cache).
_KEYTAB_LOGIN: dict[str, Any] = {"wanted": None, "done": None}
#: How hdfs-native raises a failure of Kerberos (GSSAPI, through the system's libgssapi_krb5): a RuntimeError
#: whose text is ``GSSAPIError(GssMajorCodes {...}, <minor code>, "<MIT Kerberos' message>")``.
_GSSAPI_ERROR = re.compile(r'^GSSAPIError\(.*"(?P<msg>[^"]*)"\)\s*$', re.S)


def use_kerberos_keytab(principal: str | None, keytab: str | None) -> None:
    """Log in to a Kerberized HDFS as ``principal`` from ``keytab`` when this process first reaches one (both
    None: use the ticket cache ``kinit`` filled, ``KRB5CCNAME``). The login is :func:`kerberos_login`'s."""
    _KEYTAB_LOGIN["wanted"] = (principal, keytab) if principal and keytab else None


def _kerberos_in_use() -> bool:
    """Whether a client made now authenticates with Kerberos: a keytab login is asked for (done here, first), or
    the Hadoop client configuration says ``hadoop.security.authentication=kerberos``."""
    wanted = _KEYTAB_LOGIN["wanted"]
    if wanted is not None:
        if _KEYTAB_LOGIN["done"] != (wanted, os.environ.get("KRB5CCNAME")):
            _KEYTAB_LOGIN["done"] = (wanted, kerberos_login(*wanted))
        return True
    directory = hadoop_conf_dir()
    if not directory:
        return False
    return read_hadoop_conf(directory)[0].get(
        "hadoop.security.authentication", "").strip().lower() == "kerberos"


def kerberos_login(principal: str, keytab: str) -> str:
    """Log this process in as ``principal`` from ``keytab``: ``kinit`` into a ticket cache of its own (a file in a
    private temporary directory, removed at exit) that ``KRB5CCNAME`` then names, and ``KRB5_CLIENT_KTNAME`` the
    keytab, so that MIT Kerberos gets a new ticket from it when this one expires. The keytab's keys stay in
    the keytab: nothing is printed or logged but the principal and the keytab's path. Raises
    :class:`~tableswap.errors.StorageAuthenticationError` when the login fails, nothing changed. Returns the
    ticket cache's name."""
    import atexit
    import shutil
    import subprocess
    import tempfile

    kinit = shutil.which("kinit")
    if kinit is None:
        raise errors.StorageAuthenticationError(
            f"cannot log in to HDFS as {principal} from the keytab {keytab}: MIT Kerberos' kinit is not on PATH; "
            "nothing was deleted or changed. Install it (Debian: apt-get install krb5-user), or run `kinit` "
            "yourself and leave [hdfs] kerberos_keytab unset", reason="no_kinit", principal=principal)
    directory = tempfile.mkdtemp(prefix="tableswap-krb5-")  # 0700: this user's only
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    ccache = f"FILE:{os.path.join(directory, 'ccache')}"
    done = subprocess.run([kinit, "-k", "-t", keytab, "-c", ccache, principal], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=60)
    if done.returncode != 0:
        said = " ".join((done.stderr or done.stdout).split()) or f"exit status {done.returncode}"
        low = said.lower()
        reason = ("principal_not_in_keytab" if "no suitable keys" in low
                  else "unknown_principal" if "not found in kerberos database" in low else "keytab_login_failed")
        raise errors.StorageAuthenticationError(
            f"cannot log in to HDFS as {principal} from the keytab {keytab} ({said}); nothing was deleted or "
            "changed. Check [hdfs] kerberos_principal and kerberos_keytab (TABLESWAP_HDFS_KERBEROS_PRINCIPAL, "
            f"TABLESWAP_HDFS_KERBEROS_KEYTAB): `klist -kt {keytab}` lists the principals the keytab holds",
            reason=reason, principal=principal)
    os.environ["KRB5CCNAME"] = ccache
    os.environ["KRB5_CLIENT_KTNAME"] = f"FILE:{os.path.abspath(keytab)}"
    return ccache


def kerberos_failure(exc: BaseException) -> tuple[str, str] | None:
    """``(reason, MIT Kerberos' message)`` when ``exc`` is hdfs-native's failure to authenticate with Kerberos
    (reason ``no_ticket``, ``expired_ticket`` or ``rejected``), else None."""
    found = _GSSAPI_ERROR.match(str(exc)) if isinstance(exc, RuntimeError) else None
    if found is None:
        return None
    message = found.group("msg")
    low = f"{exc} {message}".lower()
    if "expired" in low:
        return "expired_ticket", message
    if "gss_s_no_cred" in low or "no kerberos credentials" in low or "credentials cache" in low:
        return "no_ticket", message
    return "rejected", message


# ---------------------------------------------------------------------- an HDFS that does not answer
#: How long a new HDFS client waits for its NameNode's first answer (``[hdfs] connect_timeout_s``): hdfs-native
#: itself retries a NameNode that refuses connections or does not answer for minutes (178 s for a closed port).
_CONNECT_TIMEOUT_S = {"value": 30.0}
#: The HDFS clients that got no answer in this process, by client key: ``(when, the error)``. Made again only
#: after :data:`_UNREACHABLE_MEMORY` timeouts, so that a command reaching many locations waits once, not for each.
_UNREACHABLE: dict[Any, tuple[float, errors.StorageError]] = {}
_UNREACHABLE_MEMORY = 10
#: Hadoop's NameNode RPC port where a location names a host without one.
HDFS_DEFAULT_PORT = 8020


def use_connect_timeout(seconds: float) -> None:
    """Give up on an HDFS whose NameNode(s) do not answer a new client's first request in ``seconds``
    (:class:`~tableswap.errors.StorageError`, before anything is read or changed there)."""
    _CONNECT_TIMEOUT_S["value"] = float(seconds)
    _UNREACHABLE.clear()


def _raise_if_unreachable(key: Any) -> None:
    found = _UNREACHABLE.get(key)
    if found is None:
        return
    when, error = found
    if time.monotonic() - when < _UNREACHABLE_MEMORY * _CONNECT_TIMEOUT_S["value"]:
        raise error
    del _UNREACHABLE[key]


def namenodes(location: str, conf: Mapping[str, str]) -> tuple[str, list[tuple[str, int]]]:
    """What the authority of an ``hdfs://`` location is, and the NameNode RPC addresses it stands for, as
    Hadoop's client resolves it: a nameservice of ``dfs.nameservices`` (its ``dfs.ha.namenodes.<ns>``'
    ``dfs.namenode.rpc-address.<ns>.<nn>``), else ``host[:port]`` (port 8020 when none); without an authority,
    ``fs.defaultFS``'s. Raises ValueError saying why when it names none."""
    authority = loc.split(location)[1]
    if not authority:
        default = conf.get("fs.defaultFS", "")
        if not default.startswith("hdfs://") or not loc.split(default)[1]:
            raise ValueError(f"{location} names no NameNode and fs.defaultFS is {default or 'not set'}")
        authority = loc.split(default)[1]
    services = {s.strip() for s in conf.get("dfs.nameservices", "").split(",") if s.strip()}
    if authority in services or f"dfs.ha.namenodes.{authority}" in conf:
        nns = [n.strip() for n in conf.get(f"dfs.ha.namenodes.{authority}", "").split(",") if n.strip()]
        addresses = [conf.get(f"dfs.namenode.rpc-address.{authority}.{nn}", "") for nn in nns] or \
            [conf.get(f"dfs.namenode.rpc-address.{authority}", "")]
        if not all(addresses):
            raise ValueError(f"the nameservice {authority} has no dfs.namenode.rpc-address for each of its "
                             f"NameNodes ({', '.join(nns) or 'dfs.ha.namenodes.' + authority + ' not set'})")
        return f"nameservice {authority}", [_host_port(a) for a in addresses]
    return f"NameNode {authority}", [_host_port(authority)]


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":") if ":" in address else (address, "", "")
    return host, int(port) if port else HDFS_DEFAULT_PORT


def _unreachable(url: str, what_went_wrong: str) -> errors.StorageError:
    """The error for an HDFS whose NameNode(s) did not answer: which, at which addresses, and what to do."""
    timeout = _CONNECT_TIMEOUT_S["value"]
    where = url
    if url.startswith("hdfs://"):
        directory = hadoop_conf_dir()
        try:
            what, addresses = namenodes(url, read_hadoop_conf(directory)[0] if directory else {})
            where = f"{url} ({what}: {', '.join(f'{h}:{p}' for h, p in addresses)})"
        except ValueError:
            pass
    return errors.StorageError(
        f"cannot reach HDFS at {where}: {what_went_wrong}; nothing was read, deleted or changed there. Check that "
        f"the NameNode runs and that this machine reaches it (HADOOP_CONF_DIR names its addresses), or give it longer "
        f"with [hdfs] connect_timeout_s (TABLESWAP_HDFS_CONNECT_TIMEOUT_S, now {timeout:g} s)")


def answer_within(call: Callable[[], object], seconds: float, name: str) -> tuple[bool, BaseException | None]:
    """Run ``call`` in a daemon thread named ``name`` and wait at most ``seconds`` for it (hdfs-native cannot be
    interrupted; a thread still waiting does not keep the process from exiting): ``(True, None)`` when it
    returned, ``(True, exc)`` when it raised ``exc``, ``(False, None)`` when it said nothing in time."""
    outcome: list[BaseException | None] = []

    def ask() -> None:
        try:
            call()
            outcome.append(None)
        except Exception as exc:  # noqa: BLE001 - handed to the caller, whatever it is
            outcome.append(exc)

    asker = threading.Thread(target=ask, name=name, daemon=True)
    asker.start()
    asker.join(seconds)
    return (True, outcome[0]) if outcome else (False, None)


def _first_answer(fs: Any, key: Any, url: str, *, kerberos: bool) -> None:
    """Ask the NameNode for ``/`` once, for at most ``[hdfs] connect_timeout_s`` (in a daemon thread: hdfs-native
    cannot be interrupted, and one still waiting does not keep the process from exiting), so that an HDFS that
    does not answer is one :class:`~tableswap.errors.StorageError` before any work, remembered for the calls that
    follow, and a Kerberos failure one :class:`~tableswap.errors.StorageAuthenticationError` (it fails at once:
    no ticket is no retry). Any other failure is left to the calls that follow, which report it with their
    location."""
    timeout = _CONNECT_TIMEOUT_S["value"]
    answered, failure = answer_within(lambda: fs.client.get_file_info("/"), timeout, "tableswap-hdfs-first-answer")
    if not answered:
        error = _unreachable(url, f"no answer in {timeout:g} s")
    elif failure is None:
        return
    elif kerberos and kerberos_failure(failure) is not None:
        raise_kerberos_failure(failure, url)
    elif isinstance(failure, OSError) and not isinstance(failure, (FileNotFoundError, PermissionError)):
        error = _unreachable(url, f"{type(failure).__name__}: {failure}")
    else:
        return
    _UNREACHABLE[key] = (time.monotonic(), error)
    raise error


def raise_kerberos_failure(exc: BaseException, url: str) -> None:
    """Raise the :class:`~tableswap.errors.StorageAuthenticationError` for hdfs-native's Kerberos failure ``exc``
    (one error before any work rather than one for each location); ``exc`` must be one (:func:`kerberos_failure`)."""
    failure = kerberos_failure(exc)
    assert failure is not None
    reason, said = failure
    principal = (_KEYTAB_LOGIN["wanted"] or (None,))[0]
    where = f"HDFS at {url}"
    nothing = "nothing was deleted or changed there"
    logins = ("or set [hdfs] kerberos_keytab and kerberos_principal (TABLESWAP_HDFS_KERBEROS_KEYTAB, "
              "..._PRINCIPAL) so that tableswap logs in from a keytab itself")
    if reason == "no_ticket":
        message = (f"no Kerberos ticket to authenticate to {where} ({said}); {nothing}. Run `kinit` "
                   f"(KRB5CCNAME names the ticket cache) {logins}")
    elif reason == "expired_ticket":
        message = (f"the Kerberos ticket to authenticate to {where} has expired ({said}); {nothing}. Renew it "
                   f"with `kinit` (or `kinit -R`) {logins}")
    else:
        message = (f"{where} refused this process's Kerberos credentials ({said}); {nothing}. Check the "
                   "ticket's principal and realm with `klist` and the client configuration in "
                   "$HADOOP_CONF_DIR (docs/hdfs.md#kerberos)")
    raise errors.StorageAuthenticationError(message, reason=reason, principal=principal, location=url) from None


#: hdfs-native's file systems of this process, by URL, options and Hadoop configuration; never in fsspec's instance
#: cache. fsspec clears that cache in a forked child (``os.register_at_fork``), and an hdfs-native client freed in
#: a child waits forever for its I/O threads, which a fork does not copy: a ``multiprocessing`` child (fork) of a
#: process that had reached HDFS hung before running a line. Here a child starts a map of its own and keeps
#: the parent's clients referenced, never used and never freed (:data:`_HDFS_LEFT_BY_PARENT`).
_HDFS_CLIENTS: dict[Any, Any] = {"pid": os.getpid()}
_HDFS_LEFT_BY_PARENT: list[dict[Any, Any]] = []
_HDFS_LOCK = threading.RLock()


def _after_fork_in_child() -> None:
    """In a forked child: a lock of its own (another thread of the parent may have held it at the fork) and a
    map of its own; the parent's clients stay referenced."""
    global _HDFS_LOCK
    _HDFS_LOCK = threading.RLock()
    _HDFS_LEFT_BY_PARENT.append(dict(_HDFS_CLIENTS))
    _HDFS_CLIENTS.clear()
    _HDFS_CLIENTS["pid"] = os.getpid()


os.register_at_fork(after_in_child=_after_fork_in_child)


def _has_glob(path: str) -> bool:
    """True when fsspec's ``rm``/``expand_path`` would read ``path`` as a glob pattern (``*``, ``?``,
    ``[``): on an object store such a path is deleted by what an exact listing finds, never by ``rm``."""
    return any(ch in path for ch in "*?[")


def _delete_listed(fs: Any, location: str, files: Sequence[str]) -> None:
    """Delete exactly the listed keys of ``location`` (an object store's), without pattern expansion."""
    if not files:
        return
    if hasattr(fs, "call_s3"):
        refused = _delete_keys(fs, [Survey(location, fs, "", tuple(files), 0)])
        if refused:
            raise refused[location] if location in refused else next(iter(refused.values()))
        return
    for name in files:
        fs.rm_file(name)


def _protocols(fs: Any) -> set[str]:
    return set(fs.protocol) if isinstance(fs.protocol, (tuple, list)) else {fs.protocol}


def is_object_store(fs: Any) -> bool:
    return any(p in OBJECT_STORES or p == "s3a" for p in _protocols(fs))


def is_marker(name: str) -> bool:
    """A zero-byte "directory marker" object of an object store (its key ends with ``/``)."""
    return name.endswith("/")


def entries(fs: Any, path: str) -> list[dict[str, Any]]:
    """``fs.ls(path, detail=True)`` without directory markers and without ``path`` itself."""
    own = path.rstrip("/")
    return [e for e in fs.ls(path, detail=True)
            if not is_marker(e["name"]) and e["name"].rstrip("/") != own]


def exists(location: str) -> bool:
    fs, path = filesystem(location)
    return bool(fs.exists(path))


def make_dirs(location: str) -> None:
    """Create the directory ``location`` (and its parents) where directories exist; on an object
    store, where a prefix needs no creating, nothing is done."""
    fs, path = filesystem(location)
    if not is_object_store(fs):
        fs.makedirs(path, exist_ok=True)


def delete_tree(location: str) -> None:
    fs, path = filesystem(location)
    if fs.exists(path):
        fs.rm(path, recursive=True)


def remove_empty_dir(location: str) -> bool:
    """Remove ``location`` if it is an empty directory; True if it was (or, on an object store,
    if nothing but directory markers was left under the prefix: those are deleted)."""
    fs, path = filesystem(location)
    if is_object_store(fs):
        try:
            found = fs.find(path, detail=False)
        except FileNotFoundError:
            return False
        if not found or any(not is_marker(name) for name in found):
            return False
        _delete_listed(fs, location, found)  # never fs.rm(path): it globs, a sibling could match
        return True
    if isinstance(fs, LocalFileSystem):
        try:  # one system call: rmdir refuses a directory that is not empty
            os.rmdir(path)
            return True
        except OSError:
            return False
    if fs.isdir(path) and not fs.ls(path, detail=False):
        fs.rmdir(path)
        return True
    return False


def replace_file(fs: Any, source: str, target: str) -> None:
    """Rename the file ``source`` to ``target`` (paths inside ``fs``), replacing ``target`` if it exists: in one
    step on HDFS (its rename with ``OVERWRITE``: a plain HDFS rename refuses an existing target), else
    fsspec's ``mv``."""
    if _protocols(fs) & HDFS_PROTOCOLS:
        fs.client.rename(source, target, overwrite=True)
    else:
        fs.mv(source, target)


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
        for entry in entries(fs, path)
        if entry.get("type") == "directory"
    )


# --- what a storage error says ------------------------------------------------------------------
#: How hdfs-native raises an error the NameNode returned: a RuntimeError whose text is
#: ``RPCError("<the Java exception's class>", "<its message, then the server's stack trace>")``.
_HDFS_RPC_ERROR = re.compile(r'^RPCError\("(?P<cls>[\w.$]+)", "(?P<msg>.*?)(?:\\n|"\)$)', re.S)


def _hdfs_rpc_error(exc: BaseException) -> tuple[str, str] | None:
    """``(Java class, first line of its message)`` of an error hdfs-native raised for the NameNode, else None."""
    found = _HDFS_RPC_ERROR.match(str(exc)) if isinstance(exc, RuntimeError) else None
    if found is None:
        return None
    return found["cls"], found["msg"].replace('\\"', '"')


def error_text(exc: BaseException) -> str:
    """One line saying what ``exc`` is: for an error the NameNode returned, its Java exception's short name
    and the first line of its message (without the server's stack trace hdfs-native passes on)."""
    rpc = _hdfs_rpc_error(exc)
    if rpc is not None:
        return f"{rpc[0].rpartition('.')[2]}: {rpc[1]}"
    return f"{type(exc).__name__}: {exc}"


#: The NameNode's refusals that the same request meets again until someone changes something, by the short
#: name of the Java exception it returns: for want of permission, a snapshottable directory with snapshots at or
#: below the path (a delete or a rename of it), a name or space quota (a move into the trash).
_HDFS_REFUSALS = {"AccessControlException": "permission", "SnapshotException": "snapshot",
                  "QuotaExceededException": "quota", "NSQuotaExceededException": "quota",
                  "DSQuotaExceededException": "quota"}


def refusal(exc: BaseException) -> tuple[str, str] | None:
    """``(kind, what the storage said in one line)`` when ``exc``, or an error it was raised from, is a refusal
    that another try would meet again: ``"permission"`` (HDFS's ``AccessControlException``, for the user
    hdfs-native connects as; a ``PermissionError``: a local disk, s3fs's ``AccessDenied``), ``"snapshot"``
    (HDFS's ``SnapshotException``: a snapshottable directory that has snapshots is neither deleted nor
    renamed) or ``"quota"`` (HDFS's ``QuotaExceededException`` and its name and space kinds); else None."""
    seen: BaseException | None = exc
    for _ in range(10):  # a cause chain, never a cycle
        if seen is None:
            return None
        if isinstance(seen, PermissionError):
            return "permission", error_text(seen)
        rpc = _hdfs_rpc_error(seen)
        kind = _HDFS_REFUSALS.get(rpc[0].rpartition(".")[2]) if rpc is not None else None
        if kind is not None:
            return kind, error_text(seen)
        seen = seen.__cause__ or seen.__context__
    return None


def permission_denied(exc: BaseException) -> str | None:
    """What the storage said when ``exc`` is a :func:`refusal` for want of permission, else None."""
    found = refusal(exc)
    return found[1] if found is not None and found[0] == "permission" else None


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
        found = entries(fs, path)  # some filesystems list a file as itself: skipped
    except FileNotFoundError:
        return []
    out = []
    for entry in found:
        name = entry["name"].rstrip("/")
        out.append((_location_of(location, fs, path, name), entry.get("type") == "directory"))
    return sorted(out)


def size(location: str) -> int:
    """Bytes of all files at or below ``location`` (0 if it is missing): its :func:`survey`'s."""
    found = survey(location)
    return found.bytes if found is not None else 0


def newest_mtime(location: str) -> float | None:
    """Epoch seconds of the most recent modification at or below ``location`` (None if missing)."""
    fs, path = filesystem(location)
    try:
        infos = [fs.info(path)]
        if infos[0].get("type") == "directory":
            infos.extend(fs.find(path, withdirs=True, detail=True).values())
    except FileNotFoundError:
        return None
    times = [t for t in map(_mtime, infos) if t is not None]
    return max(times) if times else None


def _mtime(info: Mapping[str, Any]) -> float | None:
    """Epoch seconds of an fsspec entry's last modification, whatever the implementation calls it (None when
    it tells none): ``mtime`` (local), ``LastModified`` (s3fs), ``last_modified`` (adlfs), or HDFS's
    ``modification_time`` (hdfs-native) and ``modificationTime`` (WebHDFS), both in milliseconds."""
    for name, scale in (("mtime", 1.0), ("LastModified", 1.0), ("last_modified", 1.0),
                        ("modification_time", 1000.0), ("modificationTime", 1000.0)):
        raw = info.get(name)
        if raw is not None:
            return raw.timestamp() if hasattr(raw, "timestamp") else float(raw) / scale
    return None


@dataclass(frozen=True)
class Survey:
    """What one recursive listing found at or below a location: its files (paths inside ``fs``,
    directory markers included) and their bytes; ``sizes``: the bytes of each file proper (no
    directory marker)."""

    location: str
    fs: Any
    path: str
    files: tuple[str, ...]
    bytes: int
    sizes: Mapping[str, int] = field(default_factory=dict, compare=False)


def survey(location: str) -> Survey | None:
    """List ``location`` once, recursively (on an object store one paged LIST of the prefix);
    ``None`` when nothing is there (an object store's empty prefix does not exist)."""
    fs, path = filesystem(location)
    try:
        found = fs.find(path, withdirs=False, detail=True)
    except FileNotFoundError:
        found = {}
    if not found and (is_object_store(fs) or not fs.exists(path)):
        return None
    total = sum(int(info.get("size") or 0) for info in found.values())
    sizes = {name: int(info.get("size") or 0) for name, info in sorted(found.items())
             if info.get("type") != "directory" and not is_marker(name)}
    return Survey(loc.normalize(location), fs, path, tuple(sorted(found)), total, sizes)


def _delete_keys(fs: Any, surveys: Sequence[Survey]) -> dict[str, BaseException]:
    """Delete the surveyed S3 objects by key, up to 1,000 keys a DeleteObjects request across
    locations, without listing; returns the locations with keys the store refused."""
    owner: dict[tuple[str, str], str] = {}
    for found in surveys:
        for name in found.files:
            bucket, key, _ = fs.split_path(name)  # keeps a directory marker's trailing "/"
            owner[(bucket, key)] = found.location
    refused: dict[str, list[str]] = {}
    by_bucket: dict[str, list[str]] = {}
    for bucket, key in owner:
        by_bucket.setdefault(bucket, []).append(key)
    for bucket, keys in by_bucket.items():
        for first in range(0, len(keys), 1000):
            chunk = keys[first:first + 1000]
            try:
                out = fs.call_s3("delete_objects", Bucket=bucket,
                                 Delete={"Objects": [{"Key": k} for k in chunk], "Quiet": True})
            except Exception as exc:  # noqa: BLE001 - every location of the chunk failed
                for k in chunk:
                    refused.setdefault(owner[(bucket, k)], []).append(f"{k}: {exc}")
                continue
            for error in out.get("Errors", []):
                key = error.get("Key")
                refused.setdefault(owner.get((bucket, key), f"{bucket}/{key}"), []).append(
                    f"{key}: {error.get('Code')}: {error.get('Message')}")
    return {location: OSError(f"{len(lines)} object(s) not deleted: {'; '.join(lines[:3])}")
            for location, lines in refused.items()}


def delete_many(locations: list[str], surveyed: Mapping[str, Survey] | None = None) -> dict[str, BaseException]:
    """Delete files and directory trees, one ``fs.rm`` call per filesystem (object stores batch it).

    Locations in ``surveyed`` (their :func:`survey`) on S3 are deleted by their listed keys, up to
    1,000 keys a DeleteObjects request, without listing them again. Missing paths are not an error.
    Returns the locations that could not be deleted with the error, after retrying the failed batch
    path by path.
    """
    failures: dict[str, BaseException] = {}
    groups: dict[int, tuple[Any, list[tuple[str, str]]]] = {}
    by_keys: dict[int, tuple[Any, list[Survey]]] = {}
    literal: list[Survey] = []
    for location in locations:
        known = (surveyed or {}).get(location)
        if known is None:
            fs, path = filesystem(location)
            if not (is_object_store(fs) and _has_glob(path)):
                groups.setdefault(id(fs), (fs, []))[1].append((location, path))
                continue
            # fs.rm would expand '*', '?', '[' as a pattern and could match a sibling: list exactly instead.
            known = survey(location)
            if known is None:
                continue  # nothing there
        if hasattr(known.fs, "call_s3"):
            by_keys.setdefault(id(known.fs), (known.fs, []))[1].append(known)
        elif is_object_store(known.fs) and _has_glob(known.path):
            literal.append(known)
        else:
            fs, path = filesystem(location)
            groups.setdefault(id(fs), (fs, []))[1].append((location, path))
    for found in literal:
        try:
            _delete_listed(found.fs, found.location, found.files)
        except Exception as exc:  # noqa: BLE001 - reported per path
            failures[found.location] = exc
    for fs, surveys in by_keys.values():
        failures.update(_delete_keys(fs, surveys))
    for fs, items in groups.values():
        present = []
        for location, path in items:
            try:
                if fs.exists(path):
                    present.append((location, path))
            except Exception as exc:  # noqa: BLE001 - reported per path (HDFS: a parent this user may not enter)
                failures[location] = exc
        if not present:
            continue
        if not _protocols(fs) & HDFS_PROTOCOLS:  # hdfs-native deletes one path a call
            try:
                fs.rm([path for _, path in present], recursive=True)
                continue
            except Exception:  # noqa: BLE001 - find out which ones failed, path by path
                pass
        for location, path in present:
            try:
                if fs.exists(path):
                    fs.rm(path, recursive=True)
            except FileNotFoundError:
                pass  # deleted meanwhile
            except Exception as exc:  # noqa: BLE001 - reported per path
                failures[location] = exc
    return failures


# ---------------------------------------------------------------------- HDFS's spellings
def hadoop_conf_source() -> tuple[str | None, str]:
    """The Hadoop client configuration directory, as Hadoop's client and hdfs-native find it
    (``$HADOOP_CONF_DIR``, else ``$HADOOP_HOME/etc/hadoop``), and which variable named it; ``(None, "")`` when
    neither is set."""
    if os.environ.get("HADOOP_CONF_DIR"):
        return os.environ["HADOOP_CONF_DIR"], "HADOOP_CONF_DIR"
    if os.environ.get("HADOOP_HOME"):
        return os.path.join(os.environ["HADOOP_HOME"], "etc", "hadoop"), "HADOOP_HOME/etc/hadoop"
    return None, ""


def hadoop_conf_dir() -> str | None:
    """:func:`hadoop_conf_source`'s directory."""
    return hadoop_conf_source()[0]


def read_hadoop_conf(directory: str, *, strict: bool = False) -> tuple[dict[str, str], list[str]]:
    """The properties of ``core-site.xml`` and ``hdfs-site.xml`` in ``directory`` (the later file wins, as in
    Hadoop's client) and the files read. A missing file declares nothing; one that cannot be read or parsed
    raises with ``strict`` (``doctor`` reports it), else declares nothing either."""
    import xml.etree.ElementTree as ET

    properties: dict[str, str] = {}
    read = []
    for name in ("core-site.xml", "hdfs-site.xml"):
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            continue
        try:
            root = ET.parse(path).getroot()
        except (OSError, ET.ParseError):
            if strict:
                raise
            continue
        for prop in root.iter("property"):
            properties[(prop.findtext("name") or "").strip()] = (prop.findtext("value") or "").strip()
        read.append(name)
    return properties, read


def hdfs_names(conf_dir: str | None = None) -> loc.HdfsNames:
    """The HDFS spellings the client configuration in ``conf_dir`` (default :func:`hadoop_conf_dir`) declares:
    its nameservices with their NameNodes, and ``fs.defaultFS`` (``core-site.xml`` and ``hdfs-site.xml``; a
    missing or unreadable file declares nothing)."""
    directory = conf_dir or hadoop_conf_dir()
    if directory is None:
        return loc.HdfsNames()
    return loc.HdfsNames.from_properties(read_hadoop_conf(directory)[0])


# ---------------------------------------------------------------------- HDFS's trash
#: ``[janitor] trash``: ``auto`` (HDFS's trash where the NameNode has it on), ``always`` (on HDFS, the trash
#: or nothing), ``never`` (delete, as ``hdfs dfs -rm -skipTrash``).
TRASH_MODES = ("auto", "always", "never")
SKIP_TRASH_HINT = "run `tableswap janitor run --skip-trash` (or set [janitor] trash = \"never\") to delete it instead"


@dataclass
class Trashing:
    """What :func:`move_to_trash` did with each location (a missing one is in none of these)."""

    moved: dict[str, str] = field(default_factory=dict)  # a location moved -> its place in the trash
    to_delete: list[str] = field(default_factory=list)  # the locations to delete instead
    refused: dict[str, BaseException] = field(default_factory=dict)  # neither moved nor to delete, and why
    zone_trash: set[str] = field(default_factory=set)  # the locations moved into their encryption zone's trash
    notes: dict[str, str] = field(default_factory=dict)  # why a location inside an encryption zone is to delete


def move_to_trash(locations: Sequence[str], mode: str) -> Trashing:
    """Move the HDFS directories and files among ``locations`` into the trash of the user deleting them,
    as Hive's ``DROP`` and ``hdfs dfs -rm`` do (Hadoop's ``TrashPolicyDefault`` layout:
    ``/user/<user>/.Trash/Current/<path>``, through hdfs-native's ``Client.trash``; inside an encryption
    zone the zone's own trash, ``<zone>/.Trash/<user>/Current/<path>``: :func:`_into_zone_trash`).

    ``to_delete`` are the locations to delete instead: every one with ``mode`` ``"never"``, those on
    storage without a trash (not HDFS), and, with ``"auto"``, those on a NameNode whose trash is off
    (``fs.trash.interval`` 0 in its configuration: hdfs-native asks the NameNode, as Hadoop's client does
    first) and those inside an encryption zone without a trash of its own (Hive's rule: the trash, else a
    delete). ``refused`` are neither moved nor deleted: with ``"always"`` where the trash is off or an
    encryption zone has none, and whenever the NameNode refuses the move (a quota, permissions)."""
    if mode not in TRASH_MODES:
        raise errors.InvalidInputError(f"trash {mode!r} is not one of {', '.join(TRASH_MODES)}")
    if mode == "never":
        return Trashing(to_delete=list(locations))
    done = Trashing()
    trash_off: set[tuple[str, str]] = set()  # (scheme, authority) of NameNodes that said their trash is off
    zone_trashes: dict[str, bool] = {}  # <dir>/.Trash -> whether it is an encryption zone's trash
    for location in locations:
        namenode = loc.split(loc.normalize(location))[:2]
        if protocol_of(namenode[0]) not in HDFS_PROTOCOLS or (namenode in trash_off and mode == "auto"):
            done.to_delete.append(location)  # no trash there (other storage is not even opened here)
            continue
        fs, path = filesystem(location)
        from hdfs_native import TrashNotEnabledError  # filesystem() has imported it

        try:
            if not fs.exists(path):
                continue
            try:
                where = fs.client.trash(path)
            except RuntimeError as exc:  # hdfs-native's error for the NameNode's refusal
                if _OUT_OF_ZONE not in str(exc):
                    raise
                where = _into_zone_trash(fs.client, path, zone_trashes)  # None: the zone has no trash
                if where is None:
                    zone = (f"it is inside an HDFS encryption zone, whose files cannot move into {_user()}'s "
                            "trash, and no trash of the zone's own (a .Trash of mode 1777 above it, as `hdfs "
                            "crypto -createZone` or `-provisionTrash` makes) takes it")
                    if mode == "auto":
                        done.to_delete.append(location)
                        done.notes[location] = f"deleted without the trash: {zone} (as Hive does)"
                    else:
                        done.refused[location] = errors.StorageError(
                            f"{location} was not moved into the trash: {zone}, and [janitor] trash is \"always\": "
                            f"nothing was moved or deleted; provision the zone's trash (hdfs crypto "
                            f"-provisionTrash -path <zone>), or {SKIP_TRASH_HINT}")
                    continue
                done.zone_trash.add(location)
        except TrashNotEnabledError:
            trash_off.add(namenode)
            if mode == "auto":
                done.to_delete.append(location)
            else:
                done.refused[location] = errors.StorageError(
                    f"the NameNode of {location} has its trash off (fs.trash.interval 0) and [janitor] trash is "
                    f"\"always\": nothing was moved or deleted; turn the trash on, or {SKIP_TRASH_HINT}")
            continue
        except FileNotFoundError:
            continue  # deleted meanwhile
        except Exception as exc:  # noqa: BLE001 - hdfs-native raises the NameNode's refusal as its own errors
            refusal = errors.StorageError(
                f"HDFS refused to move {location} into the trash ({error_text(exc)}); nothing was "
                f"deleted; {SKIP_TRASH_HINT}")
            refusal.__cause__ = exc  # what it was: permission_denied() reads it
            done.refused[location] = refusal
            continue
        done.moved[location] = _location_of(location, fs, path, where or path)
    return done


#: What the NameNode says when a rename would take a path out of its encryption zone (its
#: ``EncryptionZoneManager.checkMoveValidity``): the user's trash is outside the zone.
_OUT_OF_ZONE = "can't be moved from an encryption zone"
#: The mode of an encryption zone's trash (``<zone>/.Trash``) as HDFS provisions it: everyone's, sticky.
_ZONE_TRASH_MODE = 0o1777


def _user() -> str:
    """The user hdfs-native connects as with simple authentication (``HADOOP_USER_NAME``, else the process's),
    whose name Hadoop gives a user's trash."""
    import getpass

    return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()


def _into_zone_trash(client: Any, path: str, zone_trashes: dict[str, bool]) -> str | None:
    """Move ``path``, inside an encryption zone, into the zone's trash as Hadoop's ``TrashPolicyDefault`` does
    (``<zone>/.Trash/<user>/Current/<path>``, a time suffix on a name taken; the directories made with mode
    700); returns where it went, or None if no trash of the zone takes it.

    Hadoop finds the zone with the NameNode's ``getEZForPath`` (``DistributedFileSystem.getTrashRoot``),
    which hdfs-native does not call; the zone's trash is the nearest ``.Trash`` above ``path`` that HDFS
    made for a zone (mode 1777: ``hdfs crypto -createZone`` provisions it). The NameNode checks the rest:
    a ``.Trash`` outside the zone makes it refuse the rename, and that is None too. ``zone_trashes``
    remembers the ``.Trash`` directories looked at."""
    parent, _, name = path.rstrip("/").rpartition("/")
    above = parent
    while True:
        candidate = f"{above}/.Trash"
        if candidate not in zone_trashes:
            try:
                status = client.get_file_info(candidate)
                zone_trashes[candidate] = status.isdir and status.permission == _ZONE_TRASH_MODE
            except FileNotFoundError:
                zone_trashes[candidate] = False
        if zone_trashes[candidate]:
            break
        if not above:
            return None
        above = above.rpartition("/")[0]
    base = f"{candidate}/{_user()}/Current{parent}"
    client.mkdirs(base, 0o700, True)
    target = f"{base}/{name}"
    try:
        client.get_file_info(target)
        target = f"{target}{time.time_ns() // 1_000_000}"  # TrashPolicyDefault: the name and the time in ms
    except FileNotFoundError:
        pass
    try:
        client.rename(path, target)
    except RuntimeError as exc:  # hdfs-native's error for the NameNode's refusal
        if _OUT_OF_ZONE in str(exc):
            return None
        raise
    return target


def has_data_files(location: str) -> bool:
    """True if any file at or below ``location`` is a data file: not ``_SUCCESS``-like nor hidden,
    nor an object store's directory marker."""
    fs, path = filesystem(location)
    try:
        found = fs.find(path, detail=False)
    except FileNotFoundError:
        return False
    return any(not is_marker(name) and not name.rsplit("/", 1)[-1].startswith(("_", ".")) for name in found)


# ---------------------------------------------------------------------- a swap's staged batch
def written_partitions(location: str, keys: tuple[str, ...]) -> list[PartitionInfo]:
    """The partitions a staging write produced, from one recursive listing of its directory tree (on an
    object store one paged LIST of the prefix, not one per directory), each with ``numFiles``/``totalSize``
    of its data files, and ``numFilesErasureCoded`` 0 where no file can be (:func:`never_erasure_coded`).
    Names starting with ``_`` or ``.`` are not data, nor is anything under such a directory unless it
    is a partition directory, ``<key>=<value>`` of the table's next partition column, which a column
    named ``_p`` has; a partition directory without a data file is not a written partition; directory
    markers and empty directories are ignored. Any other directory holding a file is refused. The
    listing is :func:`survey`'s."""
    return written_partitions_in(survey_staging(location), location, keys)


def survey_staging(location: str) -> Survey | None:
    """:func:`survey` of a staging location, a failure raised as :class:`StorageError`."""
    try:
        return survey(location)
    except Exception as exc:  # noqa: BLE001 - fsspec implementations raise their clients' own errors
        raise errors.StorageError(f"cannot list the staging location {location}: {type(exc).__name__}: {exc}") from exc


def written_partitions_in(found: Survey | None, location: str, keys: tuple[str, ...]) -> list[PartitionInfo]:
    """:func:`written_partitions` from ``found``, a listing of ``location`` made already
    (:func:`survey_staging`)."""
    if found is None:
        return []
    prefix = found.path.rstrip("/") + "/"
    written: dict[tuple[str, ...], list[int]] = {}
    for name, size in found.sizes.items():
        relative = name[len(prefix):] if name.startswith(prefix) else ""
        if not relative:
            continue
        parts = relative.split("/")
        dirs = parts[:-1]
        partition_dirs = dirs[:len(keys)]
        # A partition directory is <key>=<value> of the next partition column, whatever its first
        # character (a column may be named _p); only another hidden name is a committer's or
        # tableswap's own directory (_temporary, _tableswap), not the table's.
        hidden = False
        for depth, name_ in enumerate(partition_dirs):
            if pn.is_partition_dir(name_, keys[depth]):
                continue
            if pn.is_hidden(name_):
                hidden = True
                break
            raise errors.StagingWriteError(
                f"unexpected directory {name_!r} in the staging location {location} (expected {keys[depth]}=...)"
            )
        if hidden:
            continue
        if len(dirs) == len(keys) and not pn.is_hidden(parts[-1]):
            written.setdefault(tuple(dirs), []).append(size)
    # Hive 3+ counts erasure-coded files among a partition's fast statistics: without the count, a
    # metastore adding the partition lists its directory again to compute it (one more LIST per
    # added partition on an object store).
    ec = {"numFilesErasureCoded": "0"} if never_erasure_coded(location) else {}
    return [PartitionInfo(tuple(pn.unescape(d.partition("=")[2]) for d in dirs), loc.join(location, *dirs),
                          {"numFiles": str(len(sizes)), "totalSize": str(sum(sizes)), **ec})
            for dirs, sizes in sorted(written.items())]


def empty_partition(location: str, keys: tuple[str, ...], values: tuple[str, ...]) -> PartitionInfo:
    """A partition of the batch at ``location`` with no data file (Spark's static overwrite of a whole
    partition spec by no rows keeps that partition, emptied): its directory made where directories exist
    (on an object store a prefix with nothing under it reads as empty, as Spark leaves such a partition)."""
    where = loc.join(location, pn.partition_name(keys, values))
    make_dirs(where)
    ec = {"numFilesErasureCoded": "0"} if never_erasure_coded(location) else {}
    return PartitionInfo(tuple(values), where, {"numFiles": "0", "totalSize": "0", **ec})


def staged_bytes(location: str) -> int | None:
    """The bytes of the data files a staging write left at ``location`` (an unpartitioned table's), from
    one recursive listing, with :func:`written_partitions`' rule for what is data (no name starting with
    ``_`` or ``.`` on the way, no directory marker); None when the listing fails (the size is then
    unknown: nothing depends on it but ``tableswap janitor status``)."""
    fs, root = filesystem(location)
    try:
        found = fs.find(root, withdirs=False, detail=True)
    except FileNotFoundError:
        return 0
    except Exception:  # noqa: BLE001 - fsspec implementations raise their clients' own errors
        return None
    sizes = {name: int(info.get("size") or 0) for name, info in found.items() if not is_marker(name)}
    return sum(pn.data_files_below(root, sizes).values())
