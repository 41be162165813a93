"""The CLI's one output interface: a command says *what* to show, the :class:`Output` decides *how*.

Every command takes ``--json`` (:func:`output_option`); the option's callback chooses the output once per
invocation (:func:`choose_output`): :class:`TextOutput` for people, :class:`JsonOutput` for scripts, and
hands it to the command as its ``out`` parameter (helpers below the command find the same object with
:func:`current_output`). A command then calls, whatever the mode:

- ``out.result(document, text)``: its result; JSON prints the document (with the ``journal`` and
  ``metastore`` keys :meth:`Output.announce` recorded), text prints the text. Either may be a callable,
  called only by the output that prints it.
- ``out.message(text)``: a line for people (a plan shown before a prompt, a note); not part of JSON.
- ``out.confirm(question, assume_yes)``: a prompt on a terminal; JSON has none and needs ``--yes``.
- ``with out.progress(label) as update``: a progress bar on a terminal's stderr, else ``None``.
- ``out.error(exc, exit_code)``, ``out.usage_error(exc)``, ``out.aborted()``: the one failure format
  (text: one line on stderr; JSON: one object on stdout), used by :func:`tableswap.cli.common.handle_errors`
  and the program's usage-error handler.

Nothing else in ``cli/`` looks at ``--json``.
"""

from __future__ import annotations

import json
import sys
from abc import ABC, abstractmethod
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence, Union

import click

from tableswap import errors
from tableswap.redact import mask_data, mask_text

#: ``update(done, total)``: how far a long step is.
Progress = Callable[[int, int], None]
#: A value, or a callable returning it (called only when the value is printed).
Lazy = Union[Any, Callable[[], Any]]

_OUTPUT = "tableswap.output"


def _value(value: Lazy) -> Any:
    return value() if callable(value) else value


def render_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A plain aligned text table (the text of many results)."""
    data = [[("" if v is None else str(v)) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in data:
        widths = [max(w, len(v)) for w, v in zip(widths, row)]
    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(row) for row in data)
    return "\n".join(out)


def where_lines(where: dict[str, Any]) -> list[str]:
    """``journal: URL (source)`` and ``metastore: URI (source)``: which journal and metastore a command used."""
    j = where["journal"]
    source = ("default: a SQLite file local to this machine; set --journal-url / TABLESWAP_JOURNAL_URL to the "
              "writers' journal" if j["default"] else j["source"])
    lines = [f"journal: {j['url']} ({source})"]
    m = where.get("metastore")
    if m:
        lines.append(f"metastore: {m['uri']} ({m['source']})" + ("" if m["used"] else ", not contacted"))
    else:
        lines.append("metastore: none configured")
    return lines


class Output(ABC):
    """How a command's result, messages, prompts, progress and failures reach the user."""

    def __init__(self) -> None:
        #: ``{"journal": {...}, "metastore": {...} | None}``: what the command uses (:meth:`announce`).
        self.where: dict[str, Any] = {}

    def announce(self, where: dict[str, Any]) -> None:
        """Record the journal and metastore the command uses (``where``, already masked)."""
        self.where = dict(where)

    @abstractmethod
    def result(self, document: Lazy, text: Lazy = None) -> None:
        """The command's result: ``document`` (JSON-able) or ``text`` (``None``: no text)."""

    @abstractmethod
    def message(self, text: str, *, err: bool = False) -> None:
        """A line for people (on stderr with ``err``), not part of a machine-readable result."""

    @abstractmethod
    def confirm(self, question: str, assume_yes: bool, *, or_else: str | None = None) -> None:
        """Go on only if the user agrees (``assume_yes``: already agreed). ``or_else`` names the other way
        to run without a prompt, the one that shows the plan (``--dry-run``). Raises :class:`click.Abort`, or
        :class:`click.UsageError` naming both ways, where there is no prompt."""

    @abstractmethod
    @contextmanager
    def progress(self, label: str) -> Iterator[Progress | None]:
        """A progress callback for a long step, or ``None`` where progress is not shown."""

    @abstractmethod
    def error(self, exc: errors.TableSwapError, exit_code: int, secrets: Iterable[str] = ()) -> None:
        """The one-line report of a failed command; ``secrets`` are scrubbed besides the usual masking."""

    @abstractmethod
    def usage_error(self, exc: click.ClickException) -> None:
        """A usage error (bad option, missing argument...)."""

    @abstractmethod
    def aborted(self) -> None:
        """The user declined a prompt (or pressed Ctrl-C at one)."""


class TextOutput(Output):
    """For people: aligned text on stdout, failures and progress on stderr, prompts on a terminal."""

    def announce(self, where: dict[str, Any]) -> None:
        super().announce(where)
        for line in where_lines(self.where):
            click.echo(line)

    def result(self, document: Lazy, text: Lazy = None) -> None:
        text = _value(text)
        if text is not None:
            click.echo(text)

    def message(self, text: str, *, err: bool = False) -> None:
        click.echo(text, err=err)

    def confirm(self, question: str, assume_yes: bool, *, or_else: str | None = None) -> None:
        """Ask on a terminal; without a terminal, require ``--yes``."""
        if assume_yes:
            return
        if not sys.stdin.isatty():
            raise click.UsageError(f"not on a terminal: pass --yes to confirm{_no_prompt_hint(or_else)}")
        if not click.confirm(question, default=False):
            raise click.Abort()

    @contextmanager
    def progress(self, label: str) -> Iterator[Progress | None]:
        """A bar on stderr when stderr is a terminal (drawn from the first update on), else ``None``."""
        if not sys.stderr.isatty():
            yield None
            return
        bar: Any = None
        last = 0

        def update(done: int, total: int) -> None:
            nonlocal bar, last
            if bar is None:
                bar = click.progressbar(length=total, label=label, file=sys.stderr)
                bar.__enter__()
            bar.update(done - last)
            last = done

        try:
            yield update
        finally:
            if bar is not None:
                bar.__exit__(None, None, None)

    def error(self, exc: errors.TableSwapError, exit_code: int, secrets: Iterable[str] = ()) -> None:
        click.echo(f"error: {mask_text(exc, secrets)}", err=True)

    def usage_error(self, exc: click.ClickException) -> None:
        exc.show()

    def aborted(self) -> None:
        click.echo("Aborted!", err=True)


class JsonOutput(Output):
    """For scripts: one JSON document on stdout per command, also for failures; no prompt, no progress.

    ``indent`` and ``sort_keys`` are the result document's layout (``tableswap metastore``: one line,
    sorted keys; every other command: indented, in the document's order). Failures are one line."""

    def __init__(self, *, indent: int | None = 2, sort_keys: bool = False) -> None:
        super().__init__()
        self.indent = indent
        self.sort_keys = sort_keys

    def result(self, document: Lazy, text: Lazy = None) -> None:
        """``document``; a dict gets the ``journal`` and ``metastore`` keys (:meth:`announce`) unless it has them."""
        payload = _value(document)
        if isinstance(payload, dict):
            payload = {**payload, **{k: v for k, v in self.where.items() if k not in payload}}
        click.echo(json.dumps(payload, indent=self.indent, sort_keys=self.sort_keys, default=str))

    def message(self, text: str, *, err: bool = False) -> None:
        """Dropped: the result document carries the facts."""

    def confirm(self, question: str, assume_yes: bool, *, or_else: str | None = None) -> None:
        if not assume_yes:
            other = f" (or {or_else})" if or_else else ""
            raise click.UsageError(f"--json needs --yes{other}: there is no prompt in JSON mode"
                                   + _no_prompt_hint(or_else))

    @contextmanager
    def progress(self, label: str) -> Iterator[Progress | None]:
        yield None

    def error(self, exc: errors.TableSwapError, exit_code: int, secrets: Iterable[str] = ()) -> None:
        click.echo(json.dumps(mask_data({"ok": False, **exc.to_dict(), "exit_code": exit_code, **self.where},
                                        secrets)))

    def usage_error(self, exc: click.ClickException) -> None:
        self._failure(exc.format_message(),
                      "UsageError" if isinstance(exc, click.UsageError) else type(exc).__name__, exc.exit_code)

    def aborted(self) -> None:
        self._failure("aborted", "Aborted", 1)

    @staticmethod
    def _failure(message: str, error_type: str, exit_code: int) -> None:
        click.echo(json.dumps({"ok": False, "error": message, "error_type": error_type, "retryable": False,
                               "exit_code": exit_code}))


def _no_prompt_hint(or_else: str | None) -> str:
    """What a refused prompt adds: nothing changed, and the two ways to go on (``or_else`` shows the plan)."""
    return f"; nothing was changed ({or_else} to see the plan, --yes to apply)" if or_else else "; nothing was changed"


def choose_output(as_json: bool, **json_layout: Any) -> Output:
    """The one place the ``--json`` flag is read: :class:`JsonOutput` (with ``json_layout``) or :class:`TextOutput`."""
    return JsonOutput(**json_layout) if as_json else TextOutput()


def output_option(help: str = "Print machine-readable JSON instead of text.",  # noqa: A002 - click's name
                  **json_layout: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--json``: the command gets its :class:`Output` as the ``out`` parameter (and
    :func:`current_output` returns it)."""

    def choose(ctx: click.Context, param: click.Parameter, value: bool) -> Output:
        out = choose_output(value, **json_layout)
        ctx.meta[_OUTPUT] = out
        return out

    return click.option("--json", "out", is_flag=True, callback=choose, help=help)


def current_output() -> Output:
    """The running command's output (text when the command has no ``--json`` option or none runs)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return TextOutput()
    return ctx.meta.setdefault(_OUTPUT, TextOutput())
