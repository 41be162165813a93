"""``tableswap.sql(spark, text)``: a SQL script whose ``INSERT OVERWRITE`` statements run as swaps (docs/sql.md).

Every statement is split and parsed by Spark itself (spark/sqlscript.py) and checked (core/sqlscript.py,
the target's eligibility in the catalog) before the first one runs: a statement tableswap cannot run with
Spark's semantics refuses the whole script. Then the statements run in order: an overwrite is analyzed by
Spark (nothing executed), and the rows Spark would write are swapped in, replacing what Spark's own
statement replaces:

* an unpartitioned table: the whole table (an empty result empties it) → ``swap_table``;
* Spark's dynamic overwrite (``partitionOverwriteMode=dynamic`` and a dynamic column in the spec): the
  partitions the rows fall in; an empty result replaces nothing → ``swap_partitions``;
* Spark's static overwrite: every partition matching the static part of the spec (every partition when there
  is none), those without rows dropped → ``swap_partitions`` with ``replace_where`` that spec; a fully static
  spec keeps (or adds) its one partition even without rows, emptied (a fresh, empty directory).

Every other statement runs as Spark runs it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from tableswap import errors
from tableswap.core import eligibility
from tableswap.core.records import Action, PartitionChange, SwapKind
from tableswap.core.result import SwapResult
from tableswap.core.sqlscript import (Overwrite, Parsed, next_database, overwrite_changes, overwrite_target, refusal,
                                      serde_refusal)
from tableswap.logs import get_logger
from tableswap.ops.write.request import SwapRequest
from tableswap.ops.write.swap import run_swap, swap_partitions, swap_table
from tableswap.runtime import Runtime, use
from tableswap.spark import api as sparkapi, sqlscript

log = get_logger("tableswap")

SWAP_TABLE, SWAP_PARTITIONS, NOTHING, RAN = "swap_table", "swap_partitions", "nothing replaced", "ran"
#: A dry run's statement that is neither an overwrite nor a USE or SET: not run.
WOULD_RUN = "would run"


@dataclass(frozen=True)
class StatementResult:
    """What one statement of a script did."""
    index: int
    statement: str
    action: str                          # swap_table | swap_partitions | nothing replaced | ran
    table: str | None = None
    mode: str | None = None              # static | dynamic (a partitioned overwrite)
    scope: str | None = None             # the partitions a static overwrite owns
    rows: int | None = None              # the rows a statement Spark ran returned
    result: SwapResult | None = None

    @property
    def swap_id(self) -> str | None:
        return self.result.swap_id if self.result else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"statement": self.index, "text": self.statement, "action": self.action}
        for key in ("table", "mode", "scope", "rows", "swap_id"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.result is not None:
            r = self.result
            out.update(added=len(r.added), replaced=len(r.replaced), dropped=len(r.dropped),
                       result=r.to_dict())
        return out

    def summary(self) -> str:
        head = f"{self.index}: "
        if self.result is not None and self.result.dry_run:
            return head + self._planned()
        if self.action == WOULD_RUN:
            return f"{head}would run {self.statement}"
        if self.result is not None:
            r = self.result
            what = ("table swapped" if r.table_change else
                    f"{len(r.added)} added, {len(r.replaced)} replaced, {len(r.dropped)} dropped")
            mode = f" ({self.mode}{', ' + self.scope if self.scope else ''})" if self.mode else ""
            return f"{head}{self.action} {self.table}{mode} {r.swap_id}: {what}"
        if self.action == NOTHING:
            return f"{head}{self.table} ({self.mode}): no rows, nothing replaced (as Spark's dynamic overwrite)"
        return f"{head}ran {self.statement}" + (f" ({self.rows} row(s))" if self.rows else "")

    def _planned(self) -> str:
        """A dry run's overwrite: what it would replace, partition by partition."""
        r = self.result
        assert r is not None
        if r.table_change is not None:
            return f"would replace the whole table {self.table} (now at {r.table_change.old_location})"
        mode = f" ({self.mode}{', ' + self.scope if self.scope else ''})" if self.mode else ""
        lines = [f"would swap {self.table}{mode}: {len(r.added)} added, {len(r.replaced)} replaced, "
                 f"{len(r.dropped)} dropped"]
        lines += [f"     would {verb} {c.partition}" for verb, changes in
                  (("add", r.added), ("replace", r.replaced), ("drop", r.dropped)) for c in changes]
        return "\n".join(lines)


def sql(spark: Any, text: str, *, variables: Mapping[str, str] | None = None, dry_run: bool = False,
        metastore_uri: str | None = None, journal_url: str | None = None, runtime: Runtime | None = None,
        on_statement: Callable[[StatementResult], None] | None = None,
        **options: Any) -> list[StatementResult]:
    """Run the SQL script ``text`` statement by statement; each ``INSERT OVERWRITE`` of a table becomes a
    tableswap swap replacing exactly the partitions Spark's own statement replaces (docs/sql.md).

    Args:
        spark: a classic SparkSession with Hive support on the metastore tableswap swaps in.
        text: one or more statements separated by ``;`` (split as Spark's SQL CLI splits them).
        variables: ``${NAME}`` / ``${hivevar:NAME}`` substitution, as ``spark-sql -d NAME=VALUE`` (set in the
            session's settings, where Spark's parser reads them).
        dry_run: parse, check and analyze every statement as the run does and say per statement what it would
            do, changing nothing: an overwrite's result (a :class:`SwapResult` marked ``dry_run``) lists the
            partitions it would add, replace and drop, planned from the table as it is now (its query runs,
            reading only; nothing is written, no temporary table made, nothing journaled); ``USE`` and ``SET`` run
            for the statements after them and the session's database and settings are put back at the end; any
            other statement does not run (``would run``). A statement that reads what an earlier one would make
            cannot be planned: the dry run stops there (:class:`SqlStatementFailedError`).
        on_statement: called with each statement's result as soon as it has run.
        options: the swap options, as for :func:`tableswap.swap_partitions`.

    Raises:
        SqlStatementRefusedError: a statement cannot run as a swap with Spark's semantics; nothing ran.
        TableNotFoundError, UnsupportedTableError: an overwrite's target is missing or not swappable; nothing ran.
        SqlStatementFailedError: a statement failed when it ran; those before it ran (their swaps committed).
    """
    sqlscript.require_classic(spark)
    for name, value in (variables or {}).items():
        spark.conf.set(name, value)  # as spark-sql does with -d / --hivevar: Spark's parser substitutes them
    statements = [sqlscript.parse(spark, i, t) for i, t in enumerate(sqlscript.split(spark, text), start=1)]
    if not statements:
        raise errors.InvalidInputError("the script has no statement; nothing ran")
    with use(runtime, spark=spark, metastore_uri=metastore_uri, journal_url=journal_url, **options) as rt:
        plan = _check(spark, rt, statements)
        if dry_run:
            return _dry_run(spark, rt, statements, plan, on_statement)
        results: list[StatementResult] = []
        for parsed in statements:
            try:
                result = _run(spark, rt, parsed, plan.get(parsed.index))
            except errors.TableSwapError as exc:
                failed = errors.SqlStatementFailedError(
                    f"{parsed.label} failed: {exc}. The {len(results)} statement(s) before it ran (their swaps "
                    "are committed); those after it did not run", statement=parsed.index, completed=len(results))
                failed.retryable = exc.retryable
                raise failed from exc
            except Exception as exc:  # noqa: BLE001 - Spark's AnalysisException and others through py4j
                first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
                raise errors.SqlStatementFailedError(
                    f"{parsed.label} failed in Spark: {first[:500]}. The {len(results)} statement(s) before it "
                    "ran (their swaps are committed); those after it did not run", statement=parsed.index,
                    completed=len(results)) from exc
            results.append(result)
            if on_statement is not None:
                on_statement(result)
        return results


def _check(spark: Any, rt: Runtime, statements: list[Parsed]) -> dict[int, Overwrite]:
    """Every statement checked before any runs: the overwrites by statement number."""
    current = str(spark.catalog.currentDatabase())
    settings: dict[str, str] = {}
    overwrites: dict[int, Overwrite] = {}
    with rt.catalog() as catalog:
        for parsed in statements:
            reason = refusal(parsed)
            try:
                target = overwrite_target(parsed, current) if reason is None else None
            except ValueError as exc:
                reason = str(exc)
            if reason is not None:
                raise errors.SqlStatementRefusedError(
                    f"{parsed.label} is refused: {reason}. Nothing of the script ran", statement=parsed.index)
            if target is not None:
                overwrites[parsed.index] = target
                try:
                    table = catalog.get_table(target.db, target.table)
                    eligibility.check_target(table, partitioned=table.is_partitioned)
                except errors.InvalidInputError as exc:
                    raise type(exc)(f"{parsed.label}: {exc}. Nothing of the script ran", table=exc.table) from None

                def conf(key: str, default: str) -> str:
                    return settings.get(key) or sparkapi.conf_get(spark, key, default) or default

                serde = serde_refusal(table.provider, table.storage_format, table.is_partitioned, conf)
                if serde is not None:
                    raise errors.SqlStatementRefusedError(
                        f"{parsed.label} is refused: {serde}. Nothing of the script ran",
                        table=target.qualified_name, statement=parsed.index)
            current = next_database(parsed, current)
            if parsed.setting is not None:
                settings[parsed.setting[0]] = parsed.setting[1]
    return overwrites


def _analyzed(spark: Any, parsed: Parsed, target: Overwrite, then: str) -> sqlscript.AnalyzedOverwrite:
    """The overwrite as Spark analyzes it, refused (``then``: what that means for the script) when Spark resolves
    another target table than the one checked before."""
    write = sqlscript.analyze_overwrite(spark, parsed)
    if (write.db, write.table) != (target.db, target.table):
        raise errors.SqlStatementRefusedError(
            f"{parsed.label}: Spark resolves its target to {write.db}.{write.table}, not {target.qualified_name} "
            f"{then}", table=target.qualified_name, statement=parsed.index)
    return write


def _run(spark: Any, rt: Runtime, parsed: Parsed, target: Overwrite | None) -> StatementResult:
    if target is None:
        log.info("sql.run", statement=parsed.index)
        return StatementResult(parsed.index, _short(parsed.text), RAN, rows=sqlscript.run(spark, parsed.text))
    write = _analyzed(spark, parsed, target, "as checked before the script ran; it did not run")
    name = target.qualified_name
    log.info("sql.overwrite", statement=parsed.index, table=name, dynamic=write.dynamic, static=dict(write.static))
    if not write.partition_columns:
        result = swap_table(write.rows, name, allow_empty=True, runtime=rt)
        return StatementResult(parsed.index, _short(parsed.text), SWAP_TABLE, table=name, result=result)
    if write.dynamic:
        try:
            result = swap_partitions(write.rows, name, runtime=rt)
        except errors.EmptyBatchError:  # Spark's dynamic overwrite of no rows replaces no partition
            return StatementResult(parsed.index, _short(parsed.text), NOTHING, table=name, mode="dynamic")
        return StatementResult(parsed.index, _short(parsed.text), SWAP_PARTITIONS, table=name, mode="dynamic",
                               result=result)
    scope: Any = [dict(write.static)] if write.static else "true"
    described = ("/".join(f"{k}={v}" for k, v in write.static) if write.static else "every partition")
    # A fully static spec: Spark keeps (or adds) that partition even when the query returns no rows, emptied;
    # so does the swap, pointing it at a fresh, empty directory.
    static = dict(write.static)
    whole = (tuple(static[c] for c in write.partition_columns),) if set(static) >= set(write.partition_columns) else ()
    result = run_swap(write.rows, SwapRequest(name, replace_where=scope, allow_empty=True, empty_partitions=whole), rt)
    return StatementResult(parsed.index, _short(parsed.text), SWAP_PARTITIONS, table=name, mode="static",
                           scope=described, result=result)


def _dry_run(spark: Any, rt: Runtime, statements: list[Parsed], overwrites: dict[int, Overwrite],
             on_statement: Callable[[StatementResult], None] | None) -> list[StatementResult]:
    """Each statement's plan, nothing changed: the session's database and the settings the script sets are put
    back afterwards."""
    database = str(spark.catalog.currentDatabase())
    settings = {p.setting[0]: sparkapi.conf_get(spark, p.setting[0], None) for p in statements if p.setting}
    results: list[StatementResult] = []
    try:
        for parsed in statements:
            try:
                result = _plan(spark, rt, parsed, overwrites.get(parsed.index))
            except errors.TableSwapError:
                raise
            except Exception as exc:  # noqa: BLE001 - Spark's AnalysisException and others through py4j
                first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
                raise errors.SqlStatementFailedError(
                    f"{parsed.label} cannot be planned in a dry run: {first[:500]}. A dry run runs none of the "
                    "statements that would change something: if this one reads what an earlier one makes, run the "
                    "script. Nothing was changed", statement=parsed.index, completed=0) from exc
            results.append(result)
            if on_statement is not None:
                on_statement(result)
    finally:
        spark.catalog.setCurrentDatabase(database)
        for key, value in settings.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
    return results


def _plan(spark: Any, rt: Runtime, parsed: Parsed, target: Overwrite | None) -> StatementResult:
    """One statement of a dry run: an overwrite planned, ``USE`` and ``SET`` run (the statements after them read
    them), any other statement not run."""
    if target is None:
        if parsed.use_namespace is None and parsed.setting is None:
            return StatementResult(parsed.index, _short(parsed.text), WOULD_RUN)
        return StatementResult(parsed.index, _short(parsed.text), RAN, rows=sqlscript.run(spark, parsed.text))
    write = _analyzed(spark, parsed, target, "as checked before; nothing was changed")
    name = target.qualified_name
    with rt.catalog() as catalog:
        table = catalog.get_table(target.db, target.table)
        existing = ({p.values: p.location for p in catalog.list_partitions(target.db, target.table)}
                    if write.partition_columns else {})
    if not write.partition_columns:
        change = PartitionChange("", Action.REPLACE, table.location, None)
        result = SwapResult(swap_id="", table=name, kind=SwapKind.TABLE, table_change=change, dry_run=True)
        return StatementResult(parsed.index, _short(parsed.text), SWAP_TABLE, table=name, result=result)
    written = sqlscript.partition_values(write)
    mode = "dynamic" if write.dynamic else "static"
    if write.dynamic and not written:
        return StatementResult(parsed.index, _short(parsed.text), NOTHING, table=name, mode=mode)
    changes = overwrite_changes(table.partition_key_names, [c.type for c in table.partition_keys], existing,
                                written, dict(write.static), write.dynamic)

    def of(action: Action) -> tuple[PartitionChange, ...]:
        return tuple(c for c in changes if c.action == action)

    result = SwapResult(swap_id="", table=name, kind=SwapKind.PARTITIONS, added=of(Action.ADD),
                        replaced=of(Action.REPLACE), dropped=of(Action.DROP), dry_run=True)
    scope = None if write.dynamic else ("/".join(f"{k}={v}" for k, v in write.static) if write.static
                                        else "every partition")
    return StatementResult(parsed.index, _short(parsed.text), SWAP_PARTITIONS, table=name, mode=mode, scope=scope,
                           result=result)


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 80 else flat[:77] + "..."
