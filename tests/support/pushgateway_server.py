"""A real Prometheus Pushgateway for the janitor's metrics tests, built from its Go module.

The Pushgateway publishes no Python package and no Maven artifact; its source is a Go module. The Go
toolchain (``go`` on the PATH, ``/usr/local/go/bin/go``, or ``$TABLESWAP_TEST_GO``) fetches the module of
:data:`VERSION` through the Go module proxy into Go's module cache and builds it once into a cache that later
runs reuse (offline)::

    <cache>/<version>/pushgateway     ($TABLESWAP_PUSHGATEWAY_CACHE, else ~/.cache/tableswap/pushgateway)

The build is ``go mod download`` of the tagged module, then ``go build`` in its directory of the module cache,
pinned by the module's own go.sum (``-mod=readonly``): what ``go install MODULE@VERSION`` does, without the
deprecation check of ``go install``, which asks the proxy for the module's version list (a proxy may serve
the tagged version and refuse the list). ``python3 -m tests.support.pushgateway_server`` builds it (``.ci/run`` does,
and prints how long it took); this part imports nothing outside the standard library.

Measured on 2026-11-25 (2 cores, 24 GiB, shared with another test run): the build with Go's module cache
filled and an empty build cache took 92 s (Go 1.26.8); with the binary cached, 0.0 s. The server is ready
about 0.1 s after it starts.

The server listens on a free loopback port, keeps its groups in memory, and is stopped at the end of the
session (:class:`Pushgateway`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

MODULE = "github.com/prometheus/pushgateway"
VERSION = "v1.11.1"
CACHE_ENV = "TABLESWAP_PUSHGATEWAY_CACHE"
GO_ENV = "TABLESWAP_TEST_GO"
GO_FALLBACK = "/usr/local/go/bin/go"


class BuildError(RuntimeError):
    """The Pushgateway could not be built (no Go toolchain, the module not reachable, a failed build)."""


def default_cache_dir() -> Path:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "tableswap" / "pushgateway"


def cached_binary(version: str = VERSION, cache_dir: Path | None = None) -> Path:
    return (cache_dir or default_cache_dir()) / version / "pushgateway"


def find_go() -> str:
    for candidate in (os.environ.get(GO_ENV), shutil.which("go"), GO_FALLBACK):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise BuildError(f"no Go toolchain: none on the PATH, none at {GO_FALLBACK}, {GO_ENV} not set")


def build(version: str = VERSION, cache_dir: Path | None = None) -> Path:
    """The Pushgateway binary of ``version``: from the cache, else built into it (atomically: a temporary
    name in the same directory, then a rename)."""
    binary = cached_binary(version, cache_dir)
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    go = find_go()
    binary.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0"}
    download = _go([go, "mod", "download", "-json", f"{MODULE}@{version}"], cwd=binary.parent, env=env)
    source = json.loads(download)["Dir"]
    fd, tmp = tempfile.mkstemp(dir=binary.parent, prefix=".pushgateway-")
    os.close(fd)
    try:
        # The version the server reports (`pushgateway --version`, its build_info metric).
        ldflags = f"-s -w -X github.com/prometheus/common/version.Version={version.lstrip('v')}"
        _go([go, "build", "-mod=readonly", "-trimpath", "-ldflags", ldflags, "-o", tmp, "."], cwd=Path(source), env=env)
        os.chmod(tmp, 0o755)
        os.replace(tmp, binary)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return binary


def _go(cmd: list[str], *, cwd: Path, env: dict[str, str]) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise BuildError(f"`{' '.join(cmd)}` failed ({done.returncode}): {(done.stderr or done.stdout).strip()[-2000:]}")
    return done.stdout


class Pushgateway:
    """A Pushgateway process on a free loopback port (in a session of its own, stopped with its group)."""

    def __init__(self, binary: Path, state_dir: Path, *, start_timeout_s: float = 30.0) -> None:
        from .connect_server import free_port

        self.binary = binary
        self.port = free_port()
        self.log_path = Path(state_dir) / "pushgateway.log"
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Pushgateway":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([str(self.binary), f"--web.listen-address=127.0.0.1:{self.port}"],
                                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Pushgateway exited ({self.proc.returncode}): {self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"the Pushgateway did not get ready in {self.start_timeout_s:.0f}s: {self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def metrics_text(self) -> str:
        """What Prometheus would scrape: ``/metrics``, in the text format."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as answer:
            return answer.read().decode()

    def groups(self) -> list[dict]:
        """The groups pushed, from the API (``/api/v1/metrics``)."""
        with urllib.request.urlopen(f"{self.url}/api/v1/metrics", timeout=10) as answer:
            return json.loads(answer.read())["data"]

    def stop(self, grace_s: float = 30.0) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            from .connect_server import stop_process_group

            stop_process_group(proc, grace_s)


def main() -> int:
    start = time.monotonic()
    cached = cached_binary().is_file()
    try:
        binary = build()
    except BuildError as exc:
        print(f"pushgateway: {exc}", file=sys.stderr)
        return 1
    how = "cached" if cached else "built"
    print(f"pushgateway {VERSION}: {how} {binary} in {time.monotonic() - start:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
