"""The old names kept for one release after a rename (issue 54, one name per concept). Pure.

A module that renamed a public name keeps the old one through its ``__getattr__`` (the same object, so
``isinstance`` and ``except`` keep working) and declares it under ``TYPE_CHECKING`` as an alias, so that the
type checker accepts the old name and at run time each use warns::

    if TYPE_CHECKING:
        OldName = NewName
    else:
        def __getattr__(name: str) -> Any:
            return renamed(__name__, globals(), name, {"OldName": "NewName"})
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping


def warn_renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """A ``DeprecationWarning`` that ``old`` is now ``new``, pointing at the caller's caller."""
    warnings.warn(f"{old} is deprecated: it is {new}; the old name is kept for one release only",
                  DeprecationWarning, stacklevel=stacklevel)


def renamed(module: str, names: Mapping[str, Any], name: str, renames: Mapping[str, str]) -> Any:
    """A module ``__getattr__``'s answer for ``name``: the object now called ``renames[name]``, with a warning;
    ``AttributeError`` for a name the module never had."""
    if name not in renames:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warn_renamed(f"{module}.{name}", f"{module}.{renames[name]}", stacklevel=4)
    return names[renames[name]]
