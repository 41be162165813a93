"""One rule for the parts of the suite that need something outside Python (a PostgreSQL server, its JDBC
driver, a Maven-resolved jar): **in CI everything runs**, so a missing part fails the test; on a developer's
machine the test is skipped with one line saying what to install. CI is recognised by ``$CI`` (set by
``.ci/run``'s caller and by every CI service); ``TABLESWAP_TEST_STRICT=1`` asks for the same locally.

``conftest.py`` also fails a CI run that skipped anything at all (see ``strict()``), so a skip can never hide
a part that CI did not install.
"""

from __future__ import annotations

import os

import pytest


def strict() -> bool:
    """True in CI (``$CI``) or with ``TABLESWAP_TEST_STRICT=1``: nothing may be skipped."""
    return any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes")
               for name in ("CI", "TABLESWAP_TEST_STRICT"))


def missing(what: str, reason: str, install: str, *, module: bool = False) -> None:
    """Stop the current test (or fixture) because ``what`` is not available here: a failure in CI, a
    one-line skip elsewhere. ``install`` says how to get it. ``module``: called while a test module is
    imported, for all of its tests at once (one line for the module, not one per test)."""
    __tracebackhide__ = True  # a skip is reported where it was called from, not here
    message = f"needs {what}: {reason}. To run it: {install}"
    if strict():
        pytest.fail(f"{message} (CI runs every test; nothing may be skipped)", pytrace=False)
    pytest.skip(message, allow_module_level=module)


POSTGRES_INSTALL = ("apt-get install postgresql, start it with trust auth for 127.0.0.1, and create a "
                    "database 'test' (what .ci/run does)")
