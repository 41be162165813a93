"""The ``tableswap`` command line. Only the CLI configures logging; the library never does."""

from __future__ import annotations

import logging
import sys

import click
import structlog
from structlog.typing import EventDict, Processor

from tableswap import errors
from tableswap.logs import mask_secrets
from tableswap.config import ENV_LOG_FORMAT, ENV_LOG_LEVEL, LOG_FORMATS, LOG_LEVELS, log_settings
from tableswap.cli import admin, backfill, compact, doctor, janitor, jars, repair, sql, staged
from tableswap.cli.common import REPORTED_CONFIG_ERROR
from tableswap.cli.output import choose_output
from tableswap.cli.metastore import metastore


def renderer_for(fmt: str, stream) -> Processor:
    """``json``: one JSON object per line; ``text``: the readable console format; ``auto``: text on
    a terminal, JSON otherwise (cron, CI, log shippers)."""
    if fmt == "auto":
        fmt = "text" if stream.isatty() else "json"
    if fmt == "json":
        return structlog.processors.JSONRenderer(sort_keys=False, default=str)
    return structlog.dev.ConsoleRenderer(colors=stream.isatty())


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of the record (test runners swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


#: Libraries whose records only detail failures tableswap reports itself (one ``error:`` line, a
#: ``metastore.retry`` event per attempt): shown from ``--log-level info`` on, hidden at warning and error.
DETAIL_LOGGERS = ("thrift",)


def _not_reported_twice(logger: object, method: str, event_dict: EventDict) -> EventDict:
    """Below ``--log-level info``: drop the library's record of a failure it raises (``raised=True``): the
    command reports that failure itself, as its one ``error:`` line."""
    if event_dict.get("raised") is True:
        raise structlog.DropEvent
    return event_dict


def _no_tracebacks(logger: object, method: str, event_dict: EventDict) -> EventDict:
    """Below ``--log-level debug``: one line per record, without the traceback a library attached."""
    for key in ("exc_info", "exception", "stack", "stack_info"):
        event_dict.pop(key, None)
    return event_dict


def configure_logging(level: str, fmt: str = "auto") -> None:
    """structlog to stderr: timestamp, level, event and every bound key (swap_id, table, ...).

    Records of other libraries' standard ``logging`` loggers (Thrift, SQLAlchemy, ...) are rendered
    the same way, so that in JSON mode every stderr line is one JSON object. Tracebacks only at
    ``debug``; the Thrift library's loggers (``thrift.*``) follow ``level`` (see :data:`DETAIL_LOGGERS`).
    """
    stream = sys.stderr
    numeric = getattr(logging, level.upper())
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True, key="timestamp")
    renderer = renderer_for(fmt, stream)
    if numeric > logging.DEBUG:
        extra: list[Processor] = [_no_tracebacks]
    elif isinstance(renderer, structlog.processors.JSONRenderer):
        extra = [structlog.processors.format_exc_info]
    else:
        extra = []
    drop = [_not_reported_twice] if numeric > logging.INFO else []
    for name in DETAIL_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if numeric <= logging.INFO else logging.CRITICAL + 1)
    structlog.configure(
        processors=[structlog.contextvars.merge_contextvars, structlog.processors.add_log_level, stamp,
                    *drop, *extra, mask_secrets, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    handler = _StderrHandler()
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *extra, mask_secrets, renderer],
        foreign_pre_chain=[structlog.stdlib.add_log_level, structlog.stdlib.add_logger_name, stamp],
    ))
    handler._tableswap = True  # type: ignore[attr-defined]  # marks our handler, to replace it on reconfiguring
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "_tableswap", False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)


#: Options of the whole program, accepted anywhere on the line (moved before the command).
ROOT_OPTIONS = ("--log-level", "--log-format")
#: Options of the commands, accepted before the command name too (moved after it).
COMMAND_FLAGS = ("--json",)
COMMAND_OPTIONS = ("--metastore-uri", "--journal-url")


def arrange(args: list[str]) -> list[str]:
    """``--log-level``/``--log-format`` anywhere → before the command; ``--json``, ``--metastore-uri`` and
    ``--journal-url`` before the command → after it (the command's own options). ``--`` ends options."""
    end = args.index("--") if "--" in args else len(args)
    head, tail = args[:end], args[end:]
    root, rest, i = [], [], 0
    while i < len(head):
        name = head[i].split("=", 1)[0]
        if name in ROOT_OPTIONS:
            width = 1 if "=" in head[i] else 2
            root.extend(head[i:i + width])
            i += width
            continue
        rest.append(head[i])
        i += 1
    lead, moved, j = [], [], 0
    while j < len(rest) and rest[j].startswith("-"):
        name = rest[j].split("=", 1)[0]
        width = 1 if name in COMMAND_FLAGS or "=" in rest[j] else 2
        if name in COMMAND_FLAGS or name in COMMAND_OPTIONS:
            moved.extend(rest[j:j + width])
        else:
            lead.append(rest[j])
        j += width if (name in COMMAND_FLAGS or name in COMMAND_OPTIONS) else 1
    return root + lead + rest[j:] + moved + tail


class TableswapGroup(click.Group):
    """The program: options anywhere (:func:`arrange`), and with ``--json`` a usage error (exit 2) is a JSON
    object on stdout like every other error."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        args = arrange(list(sys.argv[1:] if args is None else args))
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        end = args.index("--") if "--" in args else len(args)
        # The output for errors raised before (or outside) the command's own --json option chose its output.
        out = choose_output("--json" in args[:end])
        try:
            super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            out.usage_error(exc)
            sys.exit(exc.exit_code)
        except click.Abort:
            out.aborted()
            sys.exit(1)
        sys.exit(0)


@click.group(cls=TableswapGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="tableswap")
@click.option("--log-level", type=click.Choice(LOG_LEVELS), default=None,
              help=f"Level of the structured log written to stderr (else env {ENV_LOG_LEVEL}, else [log] level "
                   "in the config file, else warning).")
@click.option("--log-format", type=click.Choice(LOG_FORMATS), default=None,
              help="auto: readable text on a terminal, one JSON object per line otherwise; json; text "
                   f"(else env {ENV_LOG_FORMAT}, else [log] format in the config file, else auto).")
@click.option("--json", "json_output", is_flag=True, expose_value=False,
              help="Machine-readable output, also for errors (a command option, accepted here too).")
@click.option("--metastore-uri", metavar="URI", expose_value=False,
              help="Metastore for the command: thrift://HOST:PORT (Hive) or glue://REGION (a command option, "
                   "accepted here too).")
@click.option("--journal-url", metavar="URL", expose_value=False,
              help="Swap journal for the command (a command option, accepted here too).")
def main(log_level: str | None, log_format: str | None) -> None:
    """tableswap: safe Spark table overwrites by repointing locations in the Hive Metastore or the
    AWS Glue Data Catalog.

    \b
    Every command takes --json and exits non-zero on failure:
      1 failure, 2 usage, 3 not found, 4 conflict (retry), 5 refused as unsafe.
    Settings: option > environment > config file ($TABLESWAP_CONFIG or
    ~/.config/tableswap/config.toml); `tableswap doctor` shows where each came from.
    """
    try:
        fmt, level = log_settings(log_format, log_level)
    except errors.ConfigurationError as exc:
        # Log with the built-in defaults rather than failing before the command can say what is wrong.
        # A command that reads the settings reports the error itself (its `error:` line and exit code);
        # for one that does not (jars, metastore), it is logged once when the command ends.
        fmt, level = log_format or "auto", log_level or "warning"
        configure_logging(level, fmt)
        ctx, error = click.get_current_context(), str(exc)

        def warn_unless_reported() -> None:
            if not ctx.meta.get(REPORTED_CONFIG_ERROR):
                structlog.get_logger("tableswap.cli").warning("config.invalid", error=error)

        ctx.call_on_close(warn_unless_reported)
        return
    configure_logging(level, fmt)


main.add_command(metastore)
admin.register(main)
backfill.register(main)
janitor.register(main)
doctor.register(main)
jars.register(main)
repair.register(main)
staged.register(main)
compact.register(main)
sql.register(main)
