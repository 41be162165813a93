"""Post-commit hooks: tell other readers that a table changed, once a swap, rollback or recovery committed.

Engines that cache metastore answers (Trino's ``hive.metastore-cache-ttl``, another Spark session's
relation cache) keep reading the old partitions until their cache expires. A hook shortens that to the
next query. Built in:

* :class:`TrinoFlushHook` runs ``CALL <catalog>.system.flush_metadata_cache(...)`` through the ``trino``
  client (``pip install 'tableswap[trino]'``): for the replaced partitions one by one when a swap only
  replaced a few, else for the whole table (an added or dropped partition changes the partition list).
* :class:`CommandHook` runs a program with the event's fields filled into its arguments and the event
  as JSON on its standard input.
* :class:`SparkRefreshHook` refreshes the table in other Spark sessions of this process.
* :class:`PrometheusHook` publishes the operation's duration and partition counts for Prometheus (a
  Pushgateway and/or a node_exporter textfile; ``pip install 'tableswap[metrics]'``).

Any callable taking a :class:`CommitEvent` (and a ``timeout_s`` keyword) is a hook too. Hooks run after
the commit, outside the table lock; a failing hook never fails the committed operation: the caller
logs it and records it in the journal (:func:`run_hooks` returns the outcomes).
"""

from __future__ import annotations

import datetime as dt
import inspect
import json
import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

from tableswap.metrics import prometheus
from tableswap.config import HookSpec
from tableswap.core.plan import SwapPlan
from tableswap.core.records import HookOutcome
from tableswap.errors import ConfigurationError, DependencyError

#: A swap that replaced at most this many partitions (and added or dropped none) is flushed partition by
#: partition; otherwise the whole table.
MAX_PARTITION_FLUSHES = 20


@dataclass(frozen=True)
class CommitEvent:
    """What a committed operation changed, for readers."""

    swap_id: str
    kind: str  # as logs name it: swap (also a merge, a compaction), publish (a staged swap), rollback, repair
    db: str
    table: str
    partition_keys: tuple[str, ...]
    added: tuple[tuple[str, ...], ...]  # partition values
    replaced: tuple[tuple[str, ...], ...]
    dropped: tuple[tuple[str, ...], ...]
    table_location_changed: bool
    #: How long the operation took, from its begin to its commit (None when not known: a recovery).
    seconds: float | None = None

    @classmethod
    def from_plan(cls, plan: SwapPlan, kind: str, *, seconds: float | None = None) -> "CommitEvent":
        return cls(swap_id=plan.swap_id, kind=kind, db=plan.db, table=plan.table,
                   partition_keys=tuple(plan.partition_keys),
                   added=tuple(a.values for a in plan.adds), replaced=tuple(a.values for a in plan.replaces),
                   dropped=tuple(a.values for a in plan.drops), table_location_changed=plan.table_change is not None,
                   seconds=None if seconds is None else round(seconds, 3))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def hook_name(hook: Any) -> str:
    return getattr(hook, "name", None) or getattr(hook, "__name__", None) or type(hook).__name__


def run_hooks(hooks: Sequence[Any], event: CommitEvent, timeout_s: float) -> list[HookOutcome]:
    """Call each hook once, in order; an exception becomes a failed outcome, never propagates."""
    outcomes = []
    for hook in hooks:
        began, at = time.monotonic(), dt.datetime.now(dt.timezone.utc).isoformat(timespec="microseconds")
        try:
            if _takes_timeout(hook):
                hook(event, timeout_s=timeout_s)
            else:
                hook(event)
        except Exception as exc:  # noqa: BLE001 - a hook never fails a committed swap
            outcomes.append(HookOutcome(hook_name(hook), False, round(time.monotonic() - began, 3),
                                        f"{type(exc).__name__}: {exc}"[:2000], at))
        else:
            outcomes.append(HookOutcome(hook_name(hook), True, round(time.monotonic() - began, 3), ran_at=at))
    return outcomes


def _takes_timeout(hook: Any) -> bool:
    try:
        return "timeout_s" in inspect.signature(hook).parameters
    except (TypeError, ValueError):
        return False


def check_hook(hook: Any, timeout_s: float) -> str:
    """``tableswap doctor``: whether ``hook`` can reach what it notifies; returns what was checked.

    Raises:
        Exception: it cannot (the message says why).
    """
    check = getattr(hook, "check", None)
    if check is None:
        return "a callable (not checked)"
    return check(timeout_s)


# --------------------------------------------------------------------------- Trino
class TrinoFlushHook:
    """Flush Trino's Hive metastore cache for the changed table (``system.flush_metadata_cache``).

    Args:
        host, port, http_scheme: the Trino coordinator.
        user: the Trino user (needs to run procedures of ``catalog``).
        catalog: the Hive catalog whose metastore is the one swapped in.
        password: with ``http_scheme="https"``, basic authentication; ``password_env`` names an environment
            variable holding it (the config file's way: no secret in the file).
        verify: TLS verification: True, False, or a CA bundle path.
    """

    def __init__(self, host: str, port: int = 8080, *, user: str = "tableswap", catalog: str = "hive",
                 http_scheme: str = "http", password: str | None = None, password_env: str | None = None,
                 verify: bool | str = True, name: str | None = None) -> None:
        self.host, self.port, self.user, self.catalog = host, port, user, catalog
        self.http_scheme, self.verify = http_scheme, verify
        self.password, self.password_env = password, password_env
        self.name = name or f"trino {http_scheme}://{host}:{port} catalog {catalog}"

    def _connect(self, timeout_s: float):
        try:
            import trino
        except ImportError as exc:
            raise DependencyError("the Trino hook needs the trino client: pip install 'tableswap[trino]'") from exc
        password = self.password
        if password is None and self.password_env:
            password = os.environ.get(self.password_env)
            if password is None:
                raise ConfigurationError(f"{self.name}: the environment variable {self.password_env} (password_env) "
                                         "is not set")
        auth = trino.auth.BasicAuthentication(self.user, password) if password is not None else None
        return trino.dbapi.connect(host=self.host, port=self.port, user=self.user, catalog=self.catalog,
                                   http_scheme=self.http_scheme, auth=auth, verify=self.verify,
                                   request_timeout=timeout_s)

    def statements(self, event: CommitEvent) -> list[str]:
        """The ``CALL`` statements for ``event``."""
        call = f"CALL {_ident(self.catalog)}.system.flush_metadata_cache(schema_name => {_lit(event.db)}, " \
               f"table_name => {_lit(event.table)}"
        per_partition = (event.partition_keys and event.replaced and not event.added and not event.dropped
                         and len(event.replaced) <= MAX_PARTITION_FLUSHES)
        if not per_partition:
            return [call + ")"]
        columns = ", ".join(_lit(k) for k in event.partition_keys)
        return [f"{call}, partition_columns => ARRAY[{columns}], "
                f"partition_values => ARRAY[{', '.join(_lit(v) for v in values)}])" for values in event.replaced]

    def __call__(self, event: CommitEvent, *, timeout_s: float = 30.0) -> None:
        conn = self._connect(timeout_s)
        try:
            cur = conn.cursor()
            for statement in self.statements(event):
                cur.execute(statement)
                cur.fetchall()
        finally:
            conn.close()

    def check(self, timeout_s: float) -> str:
        conn = self._connect(timeout_s)
        try:
            cur = conn.cursor()
            cur.execute("SHOW CATALOGS")
            catalogs = {row[0] for row in cur.fetchall()}
        finally:
            conn.close()
        if self.catalog not in catalogs:
            raise ConfigurationError(f"{self.name}: Trino has no catalog {self.catalog!r} "
                                     f"(it has {', '.join(sorted(catalogs)) or 'none'})")
        return f"{self.name}: connected, catalog {self.catalog} present"


def _lit(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --------------------------------------------------------------------------- command
class CommandHook:
    """Run ``argv`` with ``{swap_id}``, ``{db}``, ``{table}``, ``{kind}`` filled in and the event as JSON on
    standard input; a non-zero exit status or a timeout is a failure."""

    def __init__(self, argv: Sequence[str], *, name: str | None = None) -> None:
        if not argv or isinstance(argv, str):
            raise ConfigurationError("CommandHook takes a non-empty list of arguments, e.g. ['notify', '{table}']")
        self.argv = list(argv)
        self.name = name or f"command {self.argv[0]}"

    def __call__(self, event: CommitEvent, *, timeout_s: float = 30.0) -> None:
        fields = {"swap_id": event.swap_id, "db": event.db, "table": event.table, "kind": event.kind}
        argv = [arg.format(**fields) for arg in self.argv]
        try:
            done = subprocess.run(argv, input=json.dumps(event.to_dict()), capture_output=True, text=True,
                                  timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            raise TimeoutError(f"{argv[0]} did not finish in {timeout_s:g}s") from exc
        if done.returncode != 0:
            detail = (done.stderr or done.stdout).strip()[-500:]
            raise RuntimeError(f"{argv[0]} exited with {done.returncode}" + (f": {detail}" if detail else ""))

    def check(self, timeout_s: float) -> str:
        found = shutil.which(self.argv[0])
        if found is None:
            raise FileNotFoundError(f"{self.name}: {self.argv[0]!r} is not an executable on PATH")
        return f"{self.name}: {found} is executable"


# --------------------------------------------------------------------------- Spark
class SparkRefreshHook:
    """``REFRESH TABLE`` in other Spark sessions of this process (classic or Connect): their cached
    relation and file listing of the table are dropped, so their next query reads the new locations."""

    def __init__(self, *sessions: Any, name: str | None = None) -> None:
        self.sessions = sessions
        self.name = name or f"spark refresh ({len(sessions)} session(s))"

    def __call__(self, event: CommitEvent, *, timeout_s: float = 30.0) -> None:
        failed = []
        for session in self.sessions:
            try:
                session.catalog.refreshTable(f"`{event.db}`.`{event.table}`")
            except Exception as exc:  # noqa: BLE001 - the others are still refreshed
                failed.append(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        if failed:
            raise RuntimeError(f"{len(failed)} of {len(self.sessions)} session(s) not refreshed: {failed[0]}")

    def check(self, timeout_s: float) -> str:
        for session in self.sessions:
            session.sql("SELECT 1").collect()
        return f"{self.name}: every session answers"


# --------------------------------------------------------------------------- Prometheus
#: The swaps' metrics: name -> help. Gauges labelled ``table`` (db.table) and ``kind`` (swap, rollback, repair).
SWAP_METRICS: dict[str, str] = {
    "tableswap_swap_last_timestamp_seconds": "When the last committed operation of this kind on the table committed "
                                             "(unix seconds).",
    "tableswap_swap_last_duration_seconds": "How long it took, from its begin to its commit (left out when unknown: "
                                            "a recovery).",
    "tableswap_swap_last_added_partitions": "Partitions it added.",
    "tableswap_swap_last_replaced_partitions": "Partitions it repointed to new data.",
    "tableswap_swap_last_dropped_partitions": "Partitions it dropped (their data kept for the janitor).",
    "tableswap_swap_last_table_location_changed": "1 if it repointed an unpartitioned table's location, else 0.",
}
SWAP_JOB = "tableswap_swap"
_LABELS = ("table", "kind")


class PrometheusHook:
    """Publish each committed operation's duration and partition counts as gauges labelled ``table`` and
    ``kind``: pushed to a Pushgateway (job ``tableswap_swap``, grouping key ``table`` and ``kind``: one
    group per table and kind) and/or written to a node_exporter textfile (``*.prom``), whose other tables'
    and kinds' samples are kept (the file is rewritten whole; two processes writing it at the same moment
    can lose one's update until its next commit).

    Args:
        pushgateway: the Pushgateway's URL (``http://pushgateway:9091``).
        textfile: a path ending in ``.prom``.
    """

    _needed_by = "the prometheus hook ([[hooks.prometheus]], tableswap.hooks.PrometheusHook)"

    def __init__(self, pushgateway: str | None = None, textfile: str | None = None, *, name: str | None = None) -> None:
        if not pushgateway and not textfile:
            raise ConfigurationError("the prometheus hook needs a pushgateway URL or a textfile path (or both)")
        if textfile and not textfile.endswith(".prom"):
            raise ConfigurationError(f"prometheus hook textfile {textfile!r} must end in .prom: node_exporter's "
                                     "textfile collector reads only *.prom files")
        if pushgateway and pushgateway.split("://")[0] not in ("http", "https"):
            raise ConfigurationError(f"prometheus hook pushgateway {pushgateway.split('@')[-1]!r} is not an http:// "
                                     "or https:// URL")
        prometheus.client(self._needed_by)  # refused now, not after the first commit
        self.pushgateway, self.textfile = pushgateway, textfile
        self.name = name or "prometheus " + " + ".join(
            x for x in (pushgateway and "pushgateway", textfile and f"textfile {textfile}") if x)

    @staticmethod
    def values(event: CommitEvent, now: float | None = None) -> dict[str, float]:
        """The metrics' values for ``event``."""
        values = {
            "tableswap_swap_last_timestamp_seconds": time.time() if now is None else now,
            "tableswap_swap_last_added_partitions": float(len(event.added)),
            "tableswap_swap_last_replaced_partitions": float(len(event.replaced)),
            "tableswap_swap_last_dropped_partitions": float(len(event.dropped)),
            "tableswap_swap_last_table_location_changed": 1.0 if event.table_location_changed else 0.0,
        }
        if event.seconds is not None:
            values["tableswap_swap_last_duration_seconds"] = float(event.seconds)
        return values

    def __call__(self, event: CommitEvent, *, timeout_s: float = 30.0) -> None:
        labels = {"table": f"{event.db}.{event.table}", "kind": event.kind}
        values = self.values(event)
        failures = []
        if self.pushgateway:
            registry = prometheus.gauges({k: SWAP_METRICS[k] for k in SWAP_METRICS if k in values},
                                         [(k, labels, v) for k, v in values.items()], _LABELS, self._needed_by)
            try:
                prometheus.push(self.pushgateway, SWAP_JOB, registry, labels, timeout_s, self._needed_by)
            except Exception as exc:  # noqa: BLE001 - the textfile is still written
                failures.append(f"pushgateway: {type(exc).__name__}: {exc}")
        if self.textfile:
            kept = [(n, dict(lb), v) for n, lb, v in prometheus.read_samples(self.textfile, self._needed_by)
                    if n in SWAP_METRICS and set(lb) == set(_LABELS) and lb != labels]
            registry = prometheus.gauges(SWAP_METRICS, kept + [(k, labels, v) for k, v in values.items()], _LABELS,
                                         self._needed_by)
            try:
                prometheus.write_textfile(self.textfile, registry, self._needed_by)
            except Exception as exc:  # noqa: BLE001 - a hook's failure is an outcome, never the swap's error
                failures.append(f"textfile: {type(exc).__name__}: {exc}")
        if failures:
            raise RuntimeError("; ".join(failures))


# --------------------------------------------------------------------------- from the config file
_BUILDERS: dict[str, Callable[..., Any]] = {"trino": TrinoFlushHook, "command": CommandHook,
                                            "prometheus": PrometheusHook}


def build(hooks: Sequence[Any]) -> list[Any]:
    """Hook objects from the settings: config-file specs are built, objects and callables kept."""
    out = []
    for hook in hooks:
        if isinstance(hook, HookSpec):
            options = dict(hook.options)
            out.append(CommandHook(options.pop("argv"), **options) if hook.kind == "command"
                       else _BUILDERS[hook.kind](**options))
        elif callable(hook):
            out.append(hook)
        else:
            raise ConfigurationError(f"hooks=: {hook!r} is not a hook (a callable taking the commit event)")
    return out


__all__ = ["CommitEvent", "HookOutcome", "TrinoFlushHook", "CommandHook", "SparkRefreshHook", "PrometheusHook",
           "SWAP_METRICS", "run_hooks",
           "check_hook", "build"]
