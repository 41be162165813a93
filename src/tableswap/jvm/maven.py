"""JVM parts by Maven coordinates: the one place tableswap runs Maven, and finds the pyspark wheel's jars.

The S3A jars (:mod:`tableswap.jvm.jars`) and the standalone Hive Metastore releases
(:mod:`tableswap.devmetastore.releases`) are resolved here, with Maven's own default repositories (or the
mirrors of the user's ``~/.m2/settings.xml``) into caches that later runs reuse offline. No repository
address is written here: Maven's defaults name it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

from tableswap.errors import DependencyError, TableSwapError

#: Another Maven executable than ``mvn`` on PATH.
MAVEN_ENV = "TABLESWAP_MVN"
#: Seconds one Maven run may take (a first resolution downloads hundreds of MB).
DEFAULT_TIMEOUT = 1800.0

_OFFLINE_MARKERS = (
    "UnknownHostException", "Unknown host", "Connection refused", "Network is unreachable", "Connect timed out",
    "connect timed out", "Connection timed out", "offline mode", "Could not transfer", "No route to host",
    "Temporary failure in name resolution",
    # the dependency plugin itself could not be fetched (an empty local repository, offline)
    "No plugin found for prefix",
)
_NOT_PUBLISHED_MARKERS = ("Could not find artifact", "was not found in")


def find_maven(explicit: str | None = None, *, needed_for: str,
               error: type[TableSwapError] = DependencyError) -> str:
    """The Maven executable: ``explicit``, else ``$TABLESWAP_MVN``, else ``mvn`` on PATH.

    Args:
        needed_for: what is missing from the cache, for the message (e.g. "the S3A jars for Hadoop 3.5.0").
        error: the exception type raised (a subclass of :class:`TableSwapError`).

    Raises:
        error: no such executable, with how to install one.
    """
    name = explicit or os.environ.get(MAVEN_ENV) or "mvn"
    found = shutil.which(name)
    if found is None:
        raise error(
            f"{needed_for} is not in the cache yet and Maven (`{name}`) was not found: install Maven "
            f"(Debian/Ubuntu: `apt-get install maven`) or point ${MAVEN_ENV} at one. Maven resolves it once; "
            "later runs reuse the cache, offline.")
    return found


def run_maven(mvn: str, args: list[str], *, cwd: Path, what: str, offline: bool = False,
              timeout: float = DEFAULT_TIMEOUT, error: type[TableSwapError] = DependencyError) -> None:
    """Run ``mvn -B -q [--offline] ARGS`` in ``cwd``.

    Args:
        what: what this run resolves (coordinates), for the message.
        offline: never reach the network (Maven's local repository only).

    Raises:
        error: Maven could not run, timed out or failed; the message carries Maven's own error lines and a
            hint (offline, not published, or Maven's message).
    """
    command = [mvn, "-B", "-q", *(["--offline"] if offline else []), *args]
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired as exc:
        raise error(f"Maven did not finish resolving {what} in {timeout:.0f}s") from exc
    except (OSError, subprocess.SubprocessError) as exc:
        raise error(f"could not run Maven ({mvn}) to resolve {what}: {exc}") from exc
    if done.returncode != 0:
        raise error(failure_message(what, done.stdout + done.stderr, offline=offline))


def failure_message(what: str, output: str, *, offline: bool = False) -> str:
    """Maven's error lines for a failed resolution of ``what``, and what to do about it."""
    output = re.sub(r"\x1b\[[0-9;]*m", "", output)
    errors = [line.replace("[ERROR]", "").strip() for line in output.splitlines()
              if "[ERROR]" in line and line.replace("[ERROR]", "").strip()]
    detail = "\n".join(errors[:6]) or output.strip()[-1500:] or "(no output)"
    if offline or looks_offline(output):
        hint = ("no repository was reachable (offline?): Maven resolves this once from the repositories of your "
                "Maven settings, and later runs reuse it offline from the cache; run it once on a machine that "
                "reaches them, or configure a reachable mirror in ~/.m2/settings.xml")
    elif any(marker in output for marker in _NOT_PUBLISHED_MARKERS):
        hint = "the repository does not have it: check that this version is published"
    else:
        hint = "see Maven's message above, and your ~/.m2/settings.xml"
    return f"Maven could not resolve {what}:\n{detail}\nhint: {hint}"


def looks_offline(output: str) -> bool:
    """Whether Maven's output says that no repository was reachable."""
    return any(marker in output for marker in _OFFLINE_MARKERS)


def pyspark_jars_dir(*, error: type[TableSwapError] = DependencyError) -> Path:
    """The ``jars`` directory of the installed pyspark wheel (its Hadoop, Spark and Hive 2.3 jars).

    Raises:
        error: pyspark is not installed, or has no jars directory (not a wheel from PyPI).
    """
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise error("pyspark is not installed; tableswap's JVM parts must match the jars in its wheel "
                    "(pip install 'pyspark>=4,<5')")
    for location in spec.submodule_search_locations:
        jars = Path(location) / "jars"
        if any(jars.glob("hadoop-client-api-*.jar")):
            return jars
    raise error(f"pyspark at {', '.join(spec.submodule_search_locations)} has no jars directory with Hadoop's "
                "client jars; a pyspark wheel from PyPI is needed")
