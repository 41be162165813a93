"""Structured logging for the library without configuring anything globally.

Each event is a structlog event with the swap id and table bound. If the application configured
structlog (the tableswap CLI does), events go through that configuration; otherwise they go to the
standard ``logging`` logger of the same name (``tableswap...``) rendered as ``key=value`` text, so an
application that configured nothing sees only warnings, as with any well-behaved library.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog

_FALLBACK_PROCESSORS = [
    structlog.processors.TimeStamper(fmt="iso"),
    structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
]


class Logger:
    """A lazily resolved structlog logger; ``bind`` returns a new one with more context."""

    def __init__(self, name: str, context: dict[str, Any] | None = None) -> None:
        self._name = name
        self._context = dict(context or {})

    def bind(self, **values: Any) -> "Logger":
        return Logger(self._name, {**self._context, **values})

    def _target(self) -> Any:
        if structlog.is_configured():
            return structlog.get_logger(self._name).bind(**self._context)
        return structlog.wrap_logger(
            logging.getLogger(self._name), processors=_FALLBACK_PROCESSORS,
            wrapper_class=structlog.stdlib.BoundLogger,
        ).bind(**self._context)

    def debug(self, event: str, **kw: Any) -> None:
        self._target().debug(event, **kw)

    def info(self, event: str, **kw: Any) -> None:
        self._target().info(event, **kw)

    def warning(self, event: str, **kw: Any) -> None:
        self._target().warning(event, **kw)

    def error(self, event: str, **kw: Any) -> None:
        self._target().error(event, **kw)


def get_logger(name: str) -> Logger:
    return Logger(name)
