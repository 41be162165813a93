"""The one resolver of user directories (tableswap.dirs) and the modules that use it. Pure."""

from __future__ import annotations

from pathlib import Path

import pytest

from tableswap import dirs
from tableswap.jvm import jars as jvmjars
from tableswap.config_file import config_path
from tableswap.devmetastore import releases
from tableswap.devmetastore.state import default_state_dir
from tableswap.journal.db import default_url


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in ("TABLESWAP_STATE_DIR", "TABLESWAP_JARS_DIR", "TABLESWAP_HMS_CACHE", "TABLESWAP_CONFIG",
                 "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_defaults_follow_xdg(home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    assert default_url() == f"sqlite:///{home / '.local/state/tableswap/journal.db'}"
    assert default_state_dir() == home / ".local/state/tableswap/metastore"
    assert jvmjars.default_cache_dir() == home / ".cache/tableswap/jars"
    assert releases.default_cache_dir() == home / ".cache/tableswap/hive-metastore"
    assert config_path() == (home / ".config/tableswap/config.toml", False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xc"))
    assert releases.default_cache_dir() == tmp_path / "xc/tableswap/hive-metastore"


def test_the_state_dir_holds_state_and_caches_but_not_the_config(home: Path, monkeypatch, tmp_path: Path):
    monkeypatch.setenv("TABLESWAP_STATE_DIR", str(tmp_path / "ts"))
    assert default_url() == f"sqlite:///{tmp_path / 'ts/journal.db'}"
    assert default_state_dir() == tmp_path / "ts/metastore"
    assert jvmjars.default_cache_dir() == tmp_path / "ts/jars"
    # The releases' cache ignored TABLESWAP_STATE_DIR before the resolver was one.
    assert releases.default_cache_dir() == tmp_path / "ts/hive-metastore"
    assert config_path() == (home / ".config/tableswap/config.toml", False)


def test_a_directory_of_its_own_wins(home: Path, monkeypatch, tmp_path: Path):
    monkeypatch.setenv("TABLESWAP_STATE_DIR", str(tmp_path / "ts"))
    monkeypatch.setenv("TABLESWAP_HMS_CACHE", str(tmp_path / "hms"))
    monkeypatch.setenv("TABLESWAP_JARS_DIR", str(tmp_path / "jars"))
    assert releases.default_cache_dir() == tmp_path / "hms"
    assert jvmjars.default_cache_dir() == tmp_path / "jars"
    assert dirs.lookup_paths("jars", "cache", env="TABLESWAP_JARS_DIR") == (tmp_path / "jars",)


def test_caches_filled_before_the_state_dir_was_set_are_still_looked_up(home: Path, monkeypatch, tmp_path: Path):
    assert dirs.lookup_paths("jars", "cache") == (home / ".cache/tableswap/jars",)
    monkeypatch.setenv("TABLESWAP_STATE_DIR", str(tmp_path / "ts"))
    assert dirs.lookup_paths("jars", "cache") == (tmp_path / "ts/jars", home / ".cache/tableswap/jars")
    assert dirs.lookup_paths("metastore", "state") == (tmp_path / "ts/metastore",)  # state: one place
