"""The development metastore's database schema: created by the release's own schematool (3.1/4.x), and
a Derby database only ever opened by the release that created it."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Protocol

from tableswap.devmetastore import process
from tableswap.devmetastore.backend import Backend, DerbyBackend, DevMetastoreError, ServerBackend
from tableswap.devmetastore.releases import Distribution, HiveRelease


class DevMetastore(Protocol):
    """What the checks before a start and the schema step read of the metastore being started
    (:class:`tableswap.devmetastore.launcher.DevMetastore` is one; named here so that these steps do
    not import the launcher that runs them)."""

    state_dir: Path

    @property
    def derby_dir(self) -> Path: ...
    @property
    def schema_file(self) -> Path: ...
    @property
    def log_file(self) -> Path: ...
    @property
    def release(self) -> HiveRelease | None: ...
    @property
    def java(self) -> str | None: ...
    @property
    def hive_version(self) -> str: ...
    @property
    def backend(self) -> Backend: ...
    def recorded_version(self) -> str | None: ...
    def distribution(self) -> Distribution: ...
    def server_java_options(self) -> list[str]: ...
    def classpath(self) -> str: ...
    def failure(self, message: str, log_offset: int | None) -> DevMetastoreError: ...


def check_same_release(dm: DevMetastore) -> None:
    """A Derby database is only ever opened by the release that created it."""
    recorded = dm.recorded_version()
    if recorded is None or recorded == dm.hive_version:
        return
    if isinstance(dm.backend, DerbyBackend) and dm.derby_dir.exists():
        raise DevMetastoreError(
            f"the state directory {dm.state_dir} holds the Derby database of Hive Metastore "
            f"{recorded}, not {dm.hive_version}: start {recorded} there (--hive-version {recorded}) "
            "or choose another --state-dir"
        )


def ensure_schema(dm: DevMetastore, java: str) -> None:
    """Create the metastore schema with the release's own schematool unless it exists."""
    release = dm.release
    assert release is not None
    backend = dm.backend
    marker = f"{release.version} {backend.describe()}"
    try:
        if dm.schema_file.read_text(encoding="utf-8").strip() == marker:
            return
    except OSError:
        pass
    db_type = backend.schematool_db_type
    exists = isinstance(backend, DerbyBackend) and dm.derby_dir.exists()
    if isinstance(backend, ServerBackend):  # an existing schema is reused
        exists = schema_tool(dm, java, db_type, "-info", check=False) == 0
    if not exists:
        schema_tool(dm, java, db_type, "-initSchema", check=True)
    process.write_atomic(dm.schema_file, marker + "\n", private=True)


def schema_tool(dm: DevMetastore, java: str, db_type: str, action: str, *, check: bool) -> int:
    release = dm.release
    assert release is not None
    dist = dm.distribution()
    command = [java, *dm.server_java_options(), "-cp", dm.classpath(), release.schema_tool_class,
               "-dbType", db_type, action]
    env = process.child_env()
    env["METASTORE_HOME"] = str(dist.home)
    try:
        code, offset = process.run_logged(command, dm.state_dir, env, dm.log_file,
                                          f"tableswap dev metastore: schematool {action}")
    except (OSError, subprocess.SubprocessError) as exc:
        raise DevMetastoreError(f"could not run Hive Metastore {release.version}'s schematool: {exc}") from exc
    if check and code != 0:
        raise dm.failure(f"Hive Metastore {release.version}'s schematool {action} failed (exit code {code}) "
                            f"on {dm.backend.describe()}", offset)
    return code
