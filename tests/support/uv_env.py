"""Virtual environments of their own for tests whose tools do not fit beside the suite's: built by uv
(``uv venv``, ``uv pip install``) in seconds from its download cache (``~/.cache/uv``, reused between runs as
pip's is). tests/support/airflow_env.py (Airflow) and tests/support/dbt_env.py (dbt) build theirs with :func:`build`."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
UV_MISSING = "uv is not installed: pip install uv (the test extra has it)"


@dataclass(frozen=True)
class VenvEnv:
    root: Path
    seconds: float
    steps: dict[str, float]

    @property
    def python(self) -> str:
        return str(self.root / "bin" / "python")

    def bin(self, name: str) -> str:
        return str(self.root / "bin" / name)


def project() -> dict:
    """pyproject.toml's ``[project]`` table (its dependencies and extras)."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def uv_command() -> list[str] | None:
    """uv as the test extra installs it (``python -m uv``), else one on the PATH; ``None`` without either."""
    try:
        subprocess.run([sys.executable, "-m", "uv", "--version"], check=True, capture_output=True)
        return [sys.executable, "-m", "uv"]
    except (subprocess.CalledProcessError, OSError):
        pass
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if folder and os.access(os.path.join(folder, "uv"), os.X_OK):
            return [os.path.join(folder, "uv")]
    return None


def build(root: Path, uv: list[str], requirements: list[str], step_name: str) -> VenvEnv:
    """Create the environment at ``root`` (which must not exist) with ``requirements`` (the step
    ``step_name``), then tableswap from this checkout ``--no-deps`` (a wheel, as a user installs it); raises
    ``CalledProcessError`` with uv's output on failure."""
    steps: dict[str, float] = {}
    began = time.monotonic()

    def step(name: str, args: list[str]) -> None:
        t = time.monotonic()
        done = subprocess.run([*uv, *args], capture_output=True, text=True)
        if done.returncode:
            raise subprocess.CalledProcessError(done.returncode, done.args, done.stdout, done.stderr)
        steps[name] = round(time.monotonic() - t, 1)

    # The interpreter running the tests (its base, not its environment: the suite's packages stay out).
    step("venv", ["venv", "--quiet", "--python", sys.executable, str(root)])
    python = str(root / "bin" / "python")
    step(step_name, ["pip", "install", "--quiet", "--python", python, *requirements])
    step("tableswap", ["pip", "install", "--quiet", "--python", python, "--no-deps", str(ROOT)])
    return VenvEnv(root, round(time.monotonic() - began, 1), steps)


class InBackground:
    """``prepare(root, uv)`` in a background thread, once per process: :meth:`start` a second time returns the
    first call's future, whatever its ``root``; the future's ``result()`` raises what preparing raised (without
    uv: a ``RuntimeError`` saying how to get it)."""

    def __init__(self, name: str, prepare: Callable[[Path, list[str]], Any]) -> None:
        self.name = name
        self.prepare = prepare
        self._started: list[Future] = []
        self._lock = threading.Lock()

    def start(self, root: Path) -> Future:
        with self._lock:
            if not self._started:
                pool = ThreadPoolExecutor(1, thread_name_prefix=self.name)
                self._started.append(pool.submit(self._prepare_or_raise, root, uv_command()))
                pool.shutdown(wait=False)
            return self._started[0]

    def _prepare_or_raise(self, root: Path, uv: list[str] | None) -> Any:
        if uv is None:
            raise RuntimeError(UV_MISSING)
        return self.prepare(root, uv)
