"""The library's one dry-run rule (docs/cli.md, "Dry runs"): every call that changes a table or deletes data takes
``dry_run`` (plan as the real run does, change nothing, return what the real run returns, marked as a dry run) and
its default is ``dry_run=False``.

``repair`` and ``run_janitor`` defaulted to the dry run before: a caller that relied on that must never be
surprised into a real run, so for this release their ``dry_run`` is required. :data:`REQUIRED` is their default,
and :func:`required` turns what the caller passed into a ``bool``, or raises our error when it passed nothing.
"""

from __future__ import annotations

from tableswap import errors


class RequiredDryRun:
    """The type of :data:`REQUIRED`: no value a caller would pass."""

    def __repr__(self) -> str:
        return "<dry_run required>"


REQUIRED = RequiredDryRun()


def required(dry_run: bool | RequiredDryRun, call: str) -> bool:
    """``dry_run`` as a ``bool``; :class:`~tableswap.errors.ConfigurationError` when the caller of ``call`` left it
    at :data:`REQUIRED`."""
    if isinstance(dry_run, RequiredDryRun):
        raise errors.ConfigurationError(
            f"{call}() needs dry_run: its default was the dry run and becomes dry_run=False, like every other call "
            "that changes a table. Nothing was changed: pass dry_run=True to see the plan, dry_run=False to apply")
    return bool(dry_run)


__all__ = ["REQUIRED", "RequiredDryRun", "required"]
