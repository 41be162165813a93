"""The README's test command on a fresh machine: its install step needs nothing the README does not name.

The test extra leaves out the only part of the extras that builds with a compiler (the ``kerberos`` binding);
the secured-metastore tests build it where they run (tests/support/kerberos_env.py) and skip outside CI, saying what
to install, when they cannot. ``.ci/run`` proves the install step by running it first, with the compilers
hidden and a uv cache that never saw them; the checks here keep that step the README's.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from ..support import kdc, kerberos_env
from .test_readme import README, fenced_command

ROOT = Path(__file__).resolve().parents[2]
CI_RUN = ROOT / ".ci" / "run"


def _extras() -> dict[str, list[str]]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def _name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9._-]+", requirement).group().lower()


def test_the_test_extra_has_the_kerberos_extra_but_its_binding():
    extras = _extras()
    [own] = [r for r in extras["test"] if r.startswith("tableswap[")]
    assert "kerberos" not in re.search(r"\[(.*)\]", own).group(1).split(","), own
    assert [_name(r) for r in kerberos_env.requirements()] == ["kerberos"]  # what the tests build
    assert set(extras["kerberos"]) - set(kerberos_env.requirements()) <= set(extras["test"])


def test_ci_runs_the_readmes_install_step_with_no_compiler_before_it_installs_any_system_part():
    readme_command = fenced_command(README.read_text(), "**Second command**")
    install_step = readme_command.removesuffix(" && python3 -m pytest")
    assert install_step != readme_command
    lines = [line.strip() for line in CI_RUN.read_text().splitlines()]
    [check] = [n for n, line in enumerate(lines) if line == install_step]
    first_apt = min(n for n, line in enumerate(lines) if re.match(r"(.*\|\| )?apt_install \w", line))
    assert check < first_apt
    block = "\n".join(lines[:check])
    shims = re.search(r"for tool in (.*?); do", block, re.S).group(1).replace("\\", " ").split()
    assert {"krb5-config", "gcc", "cc", "x86_64-linux-gnu-gcc"} <= set(shims)
    assert 'export PATH="$hidden:$PATH" UV_CACHE_DIR=' in block  # a uv cache that never saw a compiler


def test_the_binding_is_kept_per_interpreter_in_a_cache_of_its_own(monkeypatch, tmp_path):
    monkeypatch.setenv(kerberos_env.CACHE_ENV, str(tmp_path))
    where = kerberos_env.cached_dir()
    assert where.parent == tmp_path and where.name.startswith(f"{sys.implementation.cache_tag}-")


def test_without_the_binding_or_its_build_parts_the_reason_names_each_missing_part(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "kerberos", None)  # what `import kerberos` sees without the binding
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CC", "no-such-cc")
    reason = kerberos_env.unavailable_reason(tmp_path)
    assert reason is not None and "krb5-config" in reason and "no-such-cc" in reason, reason
    kerberos_env.cached_dir(tmp_path).mkdir()  # built on an earlier run: nothing more is needed
    assert kerberos_env.unavailable_reason(tmp_path) is None


def test_the_kdc_names_the_packages_of_the_programs_it_misses(monkeypatch):
    monkeypatch.setattr(kdc, "find_program", lambda name: None if name == "kinit" else f"/usr/sbin/{name}")
    assert kdc.missing_packages() == ["krb5-user"]
    assert "kinit" in kdc.unavailable_reason() and "apt-get install krb5-user" in kdc.unavailable_reason()
