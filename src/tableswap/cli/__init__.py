"""The ``tableswap`` command line. Only the CLI configures logging; the library never does."""

from __future__ import annotations

import logging
import sys

import click
import structlog

from . import admin, janitor
from .metastore import metastore

LEVELS = ("debug", "info", "warning", "error")


def configure_logging(level: str) -> None:
    """structlog to stderr: readable on a terminal, JSON lines otherwise."""
    renderer = (structlog.dev.ConsoleRenderer() if sys.stderr.isatty()
                else structlog.processors.JSONRenderer())
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.processors.TimeStamper(fmt="iso"), renderer],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="tableswap")
@click.option("--log-level", type=click.Choice(LEVELS), default="warning", show_default=True,
              help="Log level of the structured log written to stderr.")
def main(log_level: str) -> None:
    """tableswap: safe Spark table overwrites by repointing Hive Metastore locations.

    \b
    Every command takes --json and exits non-zero on failure:
      1 failure, 2 usage, 3 not found, 4 conflict (retry), 5 refused as unsafe.
    """
    configure_logging(log_level)


main.add_command(metastore)
admin.register(main)
janitor.register(main)
