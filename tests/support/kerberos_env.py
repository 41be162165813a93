"""The ``kerberos`` binding of MIT Kerberos for the secured-metastore tests, installed where and when they run.

The ``[kerberos]`` extra's binding (pure-sasl's GSSAPI mechanism calls it) has no Linux wheel: pip builds it
from source, with MIT Kerberos' headers (``krb5-config``; Debian's ``libkrb5-dev``), a C compiler and
Python's headers (``python3-dev``). The test extra leaves it out, so that the README's test command installs
with nothing but Python (``.ci/run`` checks it). When tests/integration/test_secured_metastore.py runs, :func:`ensure`
makes it importable:

- the test environment imports it already (``pip install 'tableswap[kerberos]'``): that one is used;
- else it is built once (``pip install --no-deps --target``) into a cache of its own that later runs reuse::

      <cache>/<python>-<platform>-<requirement>/kerberos*.so
          ($TABLESWAP_KERBEROS_BINDING_CACHE, else ~/.cache/tableswap/kerberos-binding)

  and that directory is put on this process's ``sys.path``; :func:`search_path` is what a child process
  that connects to a Kerberized metastore needs on its ``PYTHONPATH``.

Without the build's parts, :class:`Unavailable` says which are missing (the tests skip outside CI, saying
what to install; tests/support/needs.py). A build with the parts there that fails is a :class:`BuildError`.
Measured on 2026-11-29 (2 cores, 24 GiB, Debian 12, shared with other test runs): the build took 19.2 s (pip's
cache empty: its build environment's setuptools downloaded too), 1.2 s with the wheel in pip's cache; from
this cache, none.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
CACHE_ENV = "TABLESWAP_KERBEROS_BINDING_CACHE"
#: The Debian packages of the build (what .ci/run installs).
PACKAGES = ("libkrb5-dev", "gcc", "python3-dev")
NOT_BUILDABLE = "the kerberos binding is not installed and cannot be built here"

_added: list[str] = []  # the directories this process put on sys.path


class Unavailable(RuntimeError):
    """The binding is not installed and cannot be built here: a part of the build is missing."""


class BuildError(RuntimeError):
    """The build's parts are there but the binding could not be built or imported."""


def requirements() -> list[str]:
    """What the ``[kerberos]`` extra has that the ``[test]`` extra leaves out (the binding), from pyproject.toml."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return [requirement for requirement in extras["kerberos"] if requirement not in extras["test"]]


def default_cache_dir() -> Path:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "tableswap" / "kerberos-binding"


def cached_dir(cache_dir: Path | None = None) -> Path:
    """Where the binding for this interpreter (its ABI and platform) and these requirements is kept."""
    key = hashlib.sha256("\n".join(requirements()).encode()).hexdigest()[:12]
    name = f"{sys.implementation.cache_tag}-{sysconfig.get_platform()}-{key}"
    return (cache_dir or default_cache_dir()) / name


def missing_build_parts() -> list[str]:
    """What the build needs and this machine lacks (empty: it can build)."""
    missing = []
    if shutil.which("krb5-config") is None:
        missing.append("krb5-config (MIT Kerberos' headers) not on PATH")
    compiler = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        missing.append(f"no C compiler ({compiler}) on PATH")
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.is_file():
        missing.append(f"no {headers} (Python's headers)")
    return missing


def importable() -> bool:
    try:
        importlib.import_module("kerberos")
    except ImportError:
        return False
    return True


def unavailable_reason(cache_dir: Path | None = None) -> str | None:
    """Why :func:`ensure` cannot make the binding importable here (None: it can, from the environment, the
    cache or a build)."""
    if importable() or cached_dir(cache_dir).is_dir():
        return None
    missing = missing_build_parts()
    if missing:
        return f"{NOT_BUILDABLE}: {'; '.join(missing)}"
    return None


def ensure(cache_dir: Path | None = None) -> Path | None:
    """Make ``import kerberos`` work in this process: ``None`` when it did already, else the cache directory
    now on ``sys.path`` (built first when it is not there yet)."""
    if importable():
        return None
    directory = cached_dir(cache_dir)
    if not directory.is_dir():
        _build(directory)
    _activate(directory)
    try:
        importlib.import_module("kerberos")
    except ImportError as exc:
        raise BuildError(f"the kerberos binding in {directory} does not import: {exc} (delete the "
                         "directory to build it again)") from exc
    return directory


def search_path() -> list[str]:
    """The directories :func:`ensure` put on ``sys.path``: for a child process's ``PYTHONPATH``."""
    return list(_added)


def _activate(directory: Path) -> None:
    if str(directory) not in sys.path:
        sys.path.append(str(directory))
        _added.append(str(directory))
        importlib.invalidate_caches()


def _build(directory: Path) -> None:
    """Build into a temporary directory beside ``directory``, then rename it (under a lock: two test processes
    may want it at once)."""
    missing = missing_build_parts()
    if missing:
        raise Unavailable(f"{NOT_BUILDABLE}: {'; '.join(missing)}")
    directory.parent.mkdir(parents=True, exist_ok=True)
    with open(directory.parent / ".lock", "w") as lock, contextlib.ExitStack() as stack:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if directory.is_dir():  # built by another process meanwhile
            return
        tmp = tempfile.mkdtemp(dir=directory.parent, prefix=".build-")
        stack.callback(shutil.rmtree, tmp, ignore_errors=True)
        began = time.monotonic()
        command = [*_installer(), "install", "--quiet", "--no-deps", "--target", tmp, *requirements()]
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise BuildError(f"`{' '.join(command)}` failed ({done.returncode}): "
                             f"{(done.stderr or done.stdout).strip()[-3000:]}")
        os.rename(tmp, directory)
    print(f"kerberos binding ({', '.join(requirements())}) built into {directory} in "
          f"{time.monotonic() - began:.1f} s")


def _installer() -> list[str]:
    """pip of the interpreter running the tests (what ``python3 -m venv`` ships), else uv (the test extra's)."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    from .airflow_env import uv_command

    uv = uv_command()
    if uv is None:
        raise Unavailable("neither pip nor uv is installed to build the kerberos binding")
    return [*uv, "pip", "--python", sys.executable]


if __name__ == "__main__":  # python -m tests.support.kerberos_env: build it (or say where it is)
    where = ensure()
    print(f"import kerberos: {'the environment has it' if where is None else where}")
