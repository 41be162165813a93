"""Shared CLI plumbing: common options, exit codes, settings, error reporting (the output: :mod:`.output`).

Exit codes (every command):
  0 success · 1 failure · 2 usage error · 3 not found · 4 conflict (retryable) · 5 refused as unsafe
"""

from __future__ import annotations

import datetime as dt
import functools
import sys
from typing import Any, Callable

import click
from sqlalchemy.exc import SQLAlchemyError

from tableswap import errors
from tableswap.config import ENV_JOURNAL_URL, ENV_METASTORE_URI, journal_setting, metastore_setting, resolve_detailed
from tableswap.core.durations import parse_duration
from tableswap.journal.store import Journal, default_url, safe_url
from tableswap.redact import known_secrets, mask_url
from tableswap.ops.hdfs_client import configure_hdfs_client
from tableswap.runtime import Runtime
from tableswap.cli.output import current_output, output_option

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_CONFLICT, EXIT_UNSAFE = 0, 1, 2, 3, 4, 5


def exit_code(exc: BaseException) -> int:
    if isinstance(exc, errors.SqlStatementFailedError) and isinstance(exc.__cause__, errors.TableSwapError):
        return exit_code(exc.__cause__)  # a script's statement: the code of what failed in it
    if isinstance(exc, (errors.TableNotFoundError, errors.NotFoundError)):
        return EXIT_NOT_FOUND
    if isinstance(exc, (errors.SwapConflictError, errors.LockTimeoutError)):
        return EXIT_CONFLICT
    if isinstance(exc, errors.UnsafeOperationError):
        return EXIT_UNSAFE
    return EXIT_FAILURE


def key_values(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[tuple[str, str]]:
    """A repeatable KEY=VALUE option (``--conf``, ``-d``) as pairs, in order."""
    out = []
    for value in values:
        key, eq, rest = value.partition("=")
        if not eq or not key.strip():
            raise click.BadParameter(f"{value!r}: expected KEY=VALUE")
        out.append((key.strip(), rest))
    return out


json_option = output_option()  # --json: the command's `out` parameter, a TextOutput or a JsonOutput
# No click envvar: config.resolve reads the environment and the config file itself, in that order,
# so that every command (and `tableswap doctor`) resolves and reports settings the same way.
metastore_option = click.option(
    "--metastore-uri", metavar="URI",
    help=f"Hive Metastore Thrift URI, e.g. thrift://127.0.0.1:9083, or glue://REGION for the AWS Glue Data "
         f"Catalog (else env {ENV_METASTORE_URI}, "
         "else metastore_uri in the config file).",
)
journal_option = click.option(
    "--journal-url", metavar="URL",
    help=f"SQLAlchemy URL of the swap journal (else env {ENV_JOURNAL_URL}, else journal_url in the "
         "config file, else a SQLite file under ~/.local/state/tableswap).",
)


def connection_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--metastore-uri, --journal-url and --json."""
    return metastore_option(journal_option(json_option(fn)))


SRC_OPTION = "command line"
REPORTED_CONFIG_ERROR = "tableswap.config_error_reported"


def runtime(metastore_uri: str | None, journal_url: str | None, *, read_only: bool = False) -> Runtime:
    """The command's runtime: settings resolved once (option > environment > config file > default).

    ``read_only``: the command only reads the journal, so a journal that does not exist is an error
    (``JournalNotFoundError``, exit 1) rather than a new, empty one. The journal and metastore in use
    are named in the output (:func:`announce`)."""
    settings, sources = resolve_detailed(metastore_uri=metastore_uri, journal_url=journal_url,
                                         explicit_source=SRC_OPTION)
    configure_hdfs_client()  # every command reaching HDFS logs in, and gives up, the same way ([hdfs])
    announce((settings.journal_url, sources["journal_url"]), (settings.metastore_uri, sources["metastore_uri"]))
    rt = Runtime(settings, create_journal=not read_only)
    if read_only:
        try:
            rt.journal  # noqa: B018 - opened first: a missing journal is the error, before any metastore call
        except BaseException:
            rt.close()
            raise
    return rt


def journal_only(journal_url: str | None, metastore_uri: str | None = None, *,
                 read_only: bool = True) -> Journal:
    """The journal alone, for commands that need no metastore (``backfill``, ``janitor status``); the
    metastore, if one is configured, is named but not contacted."""
    url, source = journal_setting(journal_url, SRC_OPTION)
    configure_hdfs_client()  # `janitor status --measure` reaches HDFS
    announce((url, source), metastore_setting(metastore_uri, SRC_OPTION), metastore_used=False)
    return Journal(url, create=not read_only)


def where_payload(journal: tuple[str | None, str], metastore: tuple[str | None, str] | None,
                  metastore_used: bool = True) -> dict[str, Any]:
    """``{"journal": {"url", "source", "default"}, "metastore": {"uri", "source", "used"} | None}``, masked."""
    url, source = journal
    out: dict[str, Any] = {"journal": {"url": safe_url(url or default_url()), "source": source,
                                       "default": url is None}}
    uri = metastore[0] if metastore else None
    out["metastore"] = ({"uri": mask_url(uri), "source": metastore[1], "used": metastore_used}  # type: ignore[index]  # uri set: metastore is not None
                        if uri else None)
    return out


def announce(journal: tuple[str | None, str], metastore: tuple[str | None, str] | None, *,
             metastore_used: bool = True) -> None:
    """Name the journal and metastore this command uses: first lines of the text output; ``journal`` and
    ``metastore`` keys of ``--json`` output (success or error)."""
    if click.get_current_context(silent=True) is None:
        return
    current_output().announce(where_payload(journal, metastore, metastore_used))


def current_where() -> dict[str, Any]:
    return dict(current_output().where)


def human_bytes(n: int | None) -> str:
    """``n`` bytes for a person: ``512 B``, ``1.5 KiB``, ``3.2 GiB``; ``?`` when unknown."""
    if n is None:
        return "?"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"


def duration(ctx: click.Context, param: click.Parameter, value: str | None) -> dt.timedelta | None:
    """Click callback: ``30m``, ``24h``, ``7d``, ``1h30m`` → timedelta (the janitor's and recover's
    parser, :func:`tableswap.core.durations.parse_duration`); ``None`` stays ``None``."""
    if value is None:
        return None
    try:
        return parse_duration(value)
    except errors.InvalidInputError as exc:
        raise click.BadParameter(str(exc)) from exc


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Report a TableSwapError through the command's output (one line of text, or JSON) and exit with its code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (errors.TableSwapError, SQLAlchemyError) as exc:
            if isinstance(exc, SQLAlchemyError):  # a journal failure the library did not classify
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                exc = errors.JournalError(f"journal operation failed: {first}")
            code = exit_code(exc)
            if isinstance(exc, errors.ConfigurationError):  # reported here: not logged again at the end
                ctx = click.get_current_context(silent=True)
                if ctx is not None:
                    ctx.find_root().meta[REPORTED_CONFIG_ERROR] = True
            # No secret in any output: the configured URLs' passwords and secret-named environment
            # variables are scrubbed besides the masking every TableSwapError message already has.
            secrets = known_secrets(kwargs.get("journal_url"), kwargs.get("metastore_uri"))
            current_output().error(exc, code, secrets)
            sys.exit(code)

    return wrapper
