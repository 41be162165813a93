"""The README runs as written: its blocks marked ``<!-- readme-test: run -->`` are run in order, as one
shell script in an empty directory (Python blocks as ``python3 FILE``), against a metastore the README
itself starts. The README's test command is the one ``.ci/run`` runs, and every relative link in the
README and docs points at a file and heading that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MARKER = "<!-- readme-test: run -->"
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)


def runnable_blocks(text: str) -> list[tuple[str, str]]:
    """(language, code) of every block that follows the marker, in document order."""
    blocks = []
    for part in text.split(MARKER)[1:]:
        match = FENCE.match(part.lstrip("\n"))
        assert match, f"{MARKER} must be followed directly by a fenced code block: {part[:80]!r}"
        language, code = match.groups()
        assert language in ("bash", "python"), f"runnable blocks are bash or python, not {language!r}"
        blocks.append((language, code))
    return blocks


def fenced_command(text: str, after: str) -> str:
    """The first command of the first bash block after the text ``after``."""
    rest = text[text.index(after):]
    return FENCE.search(rest).group(2).strip()


def test_readme_test_command_is_what_ci_runs():
    command = fenced_command(README.read_text(), "**Second command**")
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert command == 'python3 -m pip install -q uv && python3 -m uv pip install -q -e ".[test]" && python3 -m pytest'
    assert command in ci_lines, ".ci/run must run the README's test command"
    # After it, CI only runs the suite again against other metastore releases (docs/metastores.md).
    after = [line for line in ci_lines[ci_lines.index(command) + 1:] if line and not line.startswith("#")]
    version_run = r'TABLESWAP_TEST_HIVE_VERSION=[\d.]+ (TABLESWAP_TEST_METASTORE_DB=postgresql )?python3 -m pytest -m "[\w ()]+"'
    assert after and all(re.fullmatch(version_run, line) for line in after), after


def test_readme_first_command_runs_the_demo():
    assert fenced_command(README.read_text(), "**First command**") == \
        "python -m pip install -e . && python -m tableswap.demo"  # the demo itself: tests/integration/test_demo.py


@pytest.mark.integration
@pytest.mark.default_metastore
def test_readme_example_runs_as_written(tmp_path: Path):
    blocks = runnable_blocks(README.read_text())
    assert [language for language, _ in blocks] == ["bash", "python", "bash"]
    work = tmp_path / "work"
    work.mkdir()
    lines = ["set -euo pipefail"]
    for n, (language, code) in enumerate(blocks):
        if language == "python":
            script = work / f"readme_block_{n}.py"
            script.write_text(code)
            lines.append(f"python3 {script.name}")
        else:
            lines.append(code)
    # A user's shell: none of the suite's switches, nor the Spark client settings the suite's own session
    # exported for its child processes (the README starts the default metastore, whatever the suite runs on).
    env = {k: v for k, v in os.environ.items() if not k.startswith("TABLESWAP_") and k != "PYSPARK_SUBMIT_ARGS"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["TABLESWAP_STATE_DIR"] = str(tmp_path / "state")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    env["TABLESWAP_LOG_LEVEL"] = "warning"
    try:
        proc = subprocess.run(["bash", "-c", "\n".join(lines)], cwd=work, env=env, capture_output=True,
                              text=True, timeout=600)
    finally:
        subprocess.run([str(Path(sys.executable).parent / "tableswap"), "metastore", "stop", "--state-dir",
                        str(work / "hms")], cwd=work, env=env, capture_output=True, timeout=120)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    # The example's own claims: two partitions added, then both replaced by the rerun.
    assert "2 added, 0 replaced" in out and "0 added, 2 replaced" in out
    # The scoped backfill: 2026-06-05 added, 2026-06-03 replaced, 2026-06-04 (no rows any more) dropped.
    assert "1 added, 1 replaced, 0 unchanged, 1 dropped" in out
    # history lists both swaps; the rollback plan puts both partitions back; the janitor keeps everything.
    assert len(re.findall(r"\b\d{8}_\d{6}_[0-9a-f]{8}\b", out)) >= 2
    assert "dt=2026-06-03" in out and "dt=2026-06-04" in out
    assert "dry run" in out.lower()
    assert (work / "warehouse" / "sales" / "events" / "_tableswap").is_dir()


SLUG_DROP = re.compile(r"[^\w\- ]")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return SLUG_DROP.sub("", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


DOCS = [README, ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_relative_links_resolve(doc: Path):
    assert doc.exists(), doc
    text = FENCE.sub("", doc.read_text())
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        path = (doc.parent / file_part).resolve() if file_part else doc
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading with that anchor in {path.name}")
    assert not broken, broken


def test_docs_do_not_speak_of_work_sessions():
    for doc in DOCS:
        text = doc.read_text().replace("SparkSession", "")
        hits = [line for line in text.splitlines()
                if re.search(r"\b(this|previous|earlier|last|next) sessions?\b|\bsession \d", line, re.I)]
        assert not hits, (doc.name, hits)
