"""The ``tableswap`` command line. Only the CLI configures logging; the library never does."""

from __future__ import annotations

import logging
import sys

import click
import structlog

from tableswap import errors
from tableswap.logs import mask_secrets
from tableswap.config import ENV_LOG_FORMAT, ENV_LOG_LEVEL, LOG_FORMATS, LOG_LEVELS, log_settings
from tableswap.cli import admin, backfill, doctor, janitor, jars, repair
from tableswap.cli.metastore import metastore


def renderer_for(fmt: str, stream) -> object:
    """``json``: one JSON object per line; ``text``: the readable console format; ``auto``: text on
    a terminal, JSON otherwise (cron, CI, log shippers)."""
    if fmt == "auto":
        fmt = "text" if stream.isatty() else "json"
    if fmt == "json":
        return structlog.processors.JSONRenderer(sort_keys=False, default=str)
    return structlog.dev.ConsoleRenderer(colors=stream.isatty())


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of the record (test runners swap it)."""

    @property  # type: ignore[override]
    def stream(self):  # noqa: D401
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def configure_logging(level: str, fmt: str = "auto") -> None:
    """structlog to stderr: timestamp, level, event and every bound key (swap_id, table, ...).

    Records of other libraries' standard ``logging`` loggers (Thrift, SQLAlchemy, ...) are rendered
    the same way, so that in JSON mode every stderr line is one JSON object.
    """
    stream = sys.stderr
    numeric = getattr(logging, level.upper())
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp")
    renderer = renderer_for(fmt, stream)
    extra = [structlog.processors.format_exc_info] if isinstance(renderer, structlog.processors.JSONRenderer) else []
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, structlog.processors.add_log_level, stamp,
                    *extra, mask_secrets, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    handler = _StderrHandler()
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *extra, mask_secrets, renderer],
        foreign_pre_chain=[structlog.stdlib.add_log_level, structlog.stdlib.add_logger_name, stamp],
    ))
    handler._tableswap = True  # type: ignore[attr-defined]
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_tableswap", False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="tableswap")
@click.option("--log-level", type=click.Choice(LOG_LEVELS), default=None,
              help=f"Level of the structured log written to stderr (else env {ENV_LOG_LEVEL}, else [log] level "
                   "in the config file, else warning).")
@click.option("--log-format", type=click.Choice(LOG_FORMATS), default=None,
              help="auto: readable text on a terminal, one JSON object per line otherwise; json; text "
                   f"(else env {ENV_LOG_FORMAT}, else [log] format in the config file, else auto).")
def main(log_level: str | None, log_format: str | None) -> None:
    """tableswap: safe Spark table overwrites by repointing Hive Metastore locations.

    \b
    Every command takes --json and exits non-zero on failure:
      1 failure, 2 usage, 3 not found, 4 conflict (retry), 5 refused as unsafe.
    Settings: option > environment > config file ($TABLESWAP_CONFIG or
    ~/.config/tableswap/config.toml); `tableswap doctor` shows where each came from.
    """
    try:
        fmt, level = log_settings(log_format, log_level)
    except errors.ConfigurationError as exc:
        # The command itself reports a broken config file (with its exit code); log meanwhile
        # with the built-in defaults rather than failing before the command can say so.
        fmt, level = log_format or "auto", log_level or "warning"
        configure_logging(level, fmt)
        structlog.get_logger("tableswap.cli").warning("config.invalid", error=str(exc))
        return
    configure_logging(level, fmt)


main.add_command(metastore)
admin.register(main)
backfill.register(main)
janitor.register(main)
doctor.register(main)
jars.register(main)
repair.register(main)
