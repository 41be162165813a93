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
from tableswap.core.result import SwapResult
from tableswap.core.sqlscript import Overwrite, Parsed, next_database, overwrite_target, refusal, serde_refusal
from tableswap.logs import get_logger
from tableswap.ops.write.request import SwapRequest
from tableswap.ops.write.swap import run_swap, swap_partitions, swap_table
from tableswap.runtime import Runtime, use
from tableswap.spark import api as sparkapi, sqlscript

log = get_logger("tableswap")

SWAP_TABLE, SWAP_PARTITIONS, NOTHING, RAN = "swap_table", "swap_partitions", "nothing replaced", "ran"


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
        if self.result is not None:
            r = self.result
            what = ("table swapped" if r.table_change else
                    f"{len(r.added)} added, {len(r.replaced)} replaced, {len(r.dropped)} dropped")
            mode = f" ({self.mode}{', ' + self.scope if self.scope else ''})" if self.mode else ""
            return f"{head}{self.action} {self.table}{mode} {r.swap_id}: {what}"
        if self.action == NOTHING:
            return f"{head}{self.table} ({self.mode}): no rows, nothing replaced (as Spark's dynamic overwrite)"
        return f"{head}ran {self.statement}" + (f" ({self.rows} row(s))" if self.rows else "")


def sql(spark: Any, text: str, *, variables: Mapping[str, str] | None = None, metastore_uri: str | None = None,
        journal_url: str | None = None, runtime: Runtime | None = None,
        on_statement: Callable[[StatementResult], None] | None = None,
        **options: Any) -> list[StatementResult]:
    """Run the SQL script ``text`` statement by statement; each ``INSERT OVERWRITE`` of a table becomes a
    tableswap swap replacing exactly the partitions Spark's own statement replaces (docs/sql.md).

    Args:
        spark: a classic SparkSession with Hive support on the metastore tableswap swaps in.
        text: one or more statements separated by ``;`` (split as Spark's SQL CLI splits them).
        variables: ``${NAME}`` / ``${hivevar:NAME}`` substitution, as ``spark-sql -d NAME=VALUE`` (set in the
            session's settings, where Spark's parser reads them).
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
    with rt.client() as catalog:
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


def _run(spark: Any, rt: Runtime, parsed: Parsed, target: Overwrite | None) -> StatementResult:
    if target is None:
        log.info("sql.run", statement=parsed.index)
        return StatementResult(parsed.index, _short(parsed.text), RAN, rows=sqlscript.run(spark, parsed.text))
    write = sqlscript.analyze_overwrite(spark, parsed)
    if (write.db, write.table) != (target.db, target.table):
        raise errors.SqlStatementRefusedError(
            f"{parsed.label}: Spark resolves its target to {write.db}.{write.table}, not {target.qualified_name} "
            "as checked before the script ran; it did not run", table=target.qualified_name, statement=parsed.index)
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


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 80 else flat[:77] + "..."
