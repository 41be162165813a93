"""Where tableswap keeps its files for this user: the one resolver of user directories.

=========  ==========================================  ===============================================
kind       default                                     what lives there
=========  ==========================================  ===============================================
state      ``$XDG_STATE_HOME/tableswap/<name>``,       the SQLite journal (``journal.db``), the
           else ``~/.local/state/tableswap/<name>``    development metastore (``metastore``)
cache      ``$XDG_CACHE_HOME/tableswap/<name>``,       the S3A jars (``jars``), the Hive Metastore
           else ``~/.cache/tableswap/<name>``          releases (``hive-metastore``)
config     ``$XDG_CONFIG_HOME/tableswap/<name>``,      the config file (``config.toml``)
           else ``~/.config/tableswap/<name>``
=========  ==========================================  ===============================================

``$TABLESWAP_STATE_DIR`` puts state and caches together under one directory (``$TABLESWAP_STATE_DIR/<name>``);
a variable of the directory's own (``$TABLESWAP_JARS_DIR``, ``$TABLESWAP_HMS_CACHE``, ``$TABLESWAP_CONFIG``)
wins over both. Pure but for reading the environment.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

#: One directory for tableswap's state and caches (tests, containers, several users on one machine).
ENV_STATE_DIR = "TABLESWAP_STATE_DIR"

Kind = Literal["state", "cache", "config"]
_XDG = {"state": ("XDG_STATE_HOME", (".local", "state")), "cache": ("XDG_CACHE_HOME", (".cache",)),
        "config": ("XDG_CONFIG_HOME", (".config",))}


def user_path(name: str, kind: Kind, *, env: str | None = None) -> Path:
    """Where ``name`` of ``kind`` lives: ``$<env>`` when given and set, else (state and cache)
    ``$TABLESWAP_STATE_DIR/<name>``, else the XDG default of the table above."""
    return lookup_paths(name, kind, env=env)[0]


def lookup_paths(name: str, kind: Kind, *, env: str | None = None) -> tuple[Path, ...]:
    """:func:`user_path` first, then, for a cache found through ``$TABLESWAP_STATE_DIR``, the XDG default
    too: a cache filled before that variable was set is still found (read only; new entries go to the first)."""
    explicit = os.environ.get(env) if env else None
    if explicit:
        return (Path(explicit).expanduser(),)
    variable, home_parts = _XDG[kind]
    xdg = os.environ.get(variable)
    default = (Path(xdg).expanduser() if xdg else Path.home().joinpath(*home_parts)) / "tableswap" / name
    state = os.environ.get(ENV_STATE_DIR) if kind != "config" else None
    if not state:
        return (default,)
    chosen = Path(state).expanduser() / name
    return (chosen, default) if kind == "cache" and default != chosen else (chosen,)
