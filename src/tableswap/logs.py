"""Structured logging for the library without configuring anything globally.

Each event is a structlog event with the swap id and table bound. If the application configured
structlog (the tableswap CLI does), events go through that configuration; otherwise they go to the
standard ``logging`` logger of the same name (``tableswap...``) rendered as ``key=value`` text, so an
application that configured nothing sees only warnings, as with any well-behaved library.

No secret reaches a log line: the values of every event are masked (:mod:`tableswap.redact`) whatever
the application's configuration, and :func:`mask_secrets` masks other libraries' records in the CLI's.
"""

from __future__ import annotations

import logging
from typing import Any

import structlog
from structlog.typing import EventDict, Processor

from tableswap.redact import known_secrets, mask_data


def mask_secrets(logger: Any, method: str, event_dict: EventDict) -> EventDict:
    """A structlog processor: no secret in any log line (:func:`tableswap.redact.mask_data` with the
    secrets this process was configured with). The CLI's configuration runs it too; place it after
    ``format_exc_info`` and before the renderer."""
    return mask_data(event_dict, known_secrets())


_FALLBACK_PROCESSORS: list[Processor] = [
    structlog.processors.TimeStamper(fmt="iso"),
    mask_secrets,
    structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
]


class Logger:
    """A lazily resolved structlog logger; ``bind`` returns a new one with more context."""

    def __init__(self, name: str, context: dict[str, Any] | None = None) -> None:
        self._name = name
        self._context = dict(context or {})

    def bind(self, **values: Any) -> "Logger":
        return Logger(self._name, {**self._context, **mask_data(values, known_secrets())})

    def _target(self) -> Any:
        if structlog.is_configured():
            return structlog.get_logger(self._name).bind(**self._context)
        return structlog.wrap_logger(
            logging.getLogger(self._name), processors=_FALLBACK_PROCESSORS,
            wrapper_class=structlog.stdlib.BoundLogger,
        ).bind(**self._context)

    def debug(self, event: str, **kw: Any) -> None:
        self._target().debug(event, **mask_data(kw, known_secrets()))

    def info(self, event: str, **kw: Any) -> None:
        self._target().info(event, **mask_data(kw, known_secrets()))

    def warning(self, event: str, **kw: Any) -> None:
        self._target().warning(event, **mask_data(kw, known_secrets()))

    def error(self, event: str, **kw: Any) -> None:
        self._target().error(event, **mask_data(kw, known_secrets()))


def get_logger(name: str) -> Logger:
    return Logger(name)
