"""A SQL script through Spark's own parser and analyzer (``tableswap sql``; the decisions: core/sqlscript.py).

Everything here asks the session's JVM, so it needs a classic SparkSession: a Spark Connect client has no
parser of its own (the server parses), and tableswap must read a script's statements before any of them runs.

* :func:`split`: the script's statements, as Spark's SQL CLI splits them (``SqlStatementSplitter``: a ``;``
  outside quotes, back-quotes and comments ends a statement);
* :func:`parse`: one statement's unresolved plan (``sessionState.sqlParser.parsePlan``, which substitutes
  ``${var}`` / ``${hivevar:var}`` from the session's settings as ``spark-sql`` does), reduced to
  :class:`~tableswap.core.sqlscript.Parsed`;
* :func:`analyze_overwrite`: when an overwrite runs, Spark's own analysis of the statement (no execution):
  the rows Spark would write (its query with Spark's casts, column order and static partition values), the
  partition columns, the static part of the spec and whether Spark would overwrite dynamically.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

from tableswap import errors
from tableswap.core.sqlscript import Insert, Parsed
from tableswap.spark.api import is_connect

_CATALYST = "org.apache.spark.sql.catalyst"
_FS_INSERT = "org.apache.spark.sql.execution.datasources.InsertIntoHadoopFsRelationCommand"


def require_classic(spark: Any) -> None:
    """Refuse a Spark Connect session before anything runs: its client cannot parse a statement."""
    if is_connect(spark):
        raise errors.UnsupportedTableError(
            "tableswap sql needs a classic SparkSession: a Spark Connect client has no SQL parser (the server "
            "parses), and tableswap reads every statement of a script before any runs. Nothing ran: run the "
            "script with `tableswap sql` or spark-submit, or call swap_partitions(spark.sql(query), table)")


def _seq(scala_seq: Any) -> Iterator[Any]:
    it = scala_seq.iterator()
    while it.hasNext():
        yield it.next()


def _class(obj: Any) -> str:
    return str(obj.getClass().getName())


def split(spark: Any, text: str) -> list[str]:
    """The statements of ``text``, in order, without their terminators; empty ones left out."""
    try:
        result = _splitter(spark).split(text)
    except Exception as exc:  # noqa: BLE001 - an older Spark without the splitter (py4j raises its own types)
        raise errors.DependencyError(
            "this Spark has no SQL statement splitter (org.apache.spark.sql.catalyst.parser.SqlStatementSplitter, "
            f"as its SQL CLI uses); nothing ran: {str(exc).splitlines()[0][:200]}") from None
    if result.hasUnclosedComment():
        raise errors.InvalidInputError("the script ends inside a /* comment that is never closed; nothing ran")
    statements = [str(s.statement()) for s in _seq(result.completeStatements())]
    last = str(result.partialStatement())
    # The text after the last ';': a statement, or only comments (which the splitter keeps as a partial one).
    if last.strip() and _splitter(spark).split(last + "\n;").completeStatements().size() > 0:
        statements.append(last)
    return [s for s in statements if s.strip()]


def _splitter(spark: Any) -> Any:
    return getattr(getattr(spark._jvm.org.apache.spark.sql.catalyst.parser, "SqlStatementSplitter$"), "MODULE$")


def parse(spark: Any, index: int, text: str) -> Parsed:
    """Spark's unresolved plan of one statement, reduced to what tableswap decides on. Raises
    InvalidInputError with Spark's message when the statement does not parse."""
    parser = spark._jsparkSession.sessionState().sqlParser()
    try:
        plan = parser.parsePlan(text)
    except Exception as exc:  # noqa: BLE001 - Spark's ParseException through py4j
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        raise errors.InvalidInputError(f"statement {index} does not parse: {first[:500]}. Nothing ran") from None
    kind = _class(plan).rsplit(".", 1)[-1]
    if kind == "UnresolvedWith":  # WITH q AS (...) INSERT ...
        plan, kind = plan.child(), _class(plan.child()).rsplit(".", 1)[-1]
    if kind == "InsertIntoStatement":
        return Parsed(index, text, inserts=(_insert(plan),))
    if kind == "Union":  # FROM s INSERT ... INSERT ...: one InsertIntoStatement per target
        children = list(_seq(plan.children()))
        if children and all(_class(c).endswith(".InsertIntoStatement") for c in children):
            return Parsed(index, text, inserts=tuple(_insert(c) for c in children))
    if kind == "SetCatalogAndNamespace":
        child = plan.child()
        if _class(child).endswith(".UnresolvedNamespace"):
            return Parsed(index, text, use_namespace=tuple(str(p) for p in _seq(child.multipartIdentifier())))
    if kind == "SetCommand" and plan.kv().isDefined():
        key, value = plan.kv().get()._1(), plan.kv().get()._2()
        if value.isDefined():
            return Parsed(index, text, setting=(str(key), str(value.get())))
    return Parsed(index, text)


def _insert(plan: Any) -> Insert:
    table = plan.table()
    if not _class(table).endswith(".UnresolvedRelation"):
        target: tuple[str, ...] = (str(table.toString()),)
    else:
        target = tuple(str(p) for p in _seq(table.multipartIdentifier()))
    spec = []
    for pair in _seq(plan.partitionSpec().toList()):
        value = pair._2()
        spec.append((str(pair._1()).lower(), str(value.get()) if value.isDefined() else None))
    criteria = plan.replaceCriteriaOpt()
    return Insert(target=target, overwrite=bool(plan.overwrite()), partition_spec=tuple(spec),
                  if_partition_not_exists=bool(plan.ifPartitionNotExists()),
                  user_columns=tuple(str(c) for c in _seq(plan.userSpecifiedCols())),
                  replace_criteria=str(criteria.get().toString()) if criteria.isDefined() else None,
                  schema_evolution=bool(plan.withSchemaEvolution()))


@dataclass(frozen=True)
class AnalyzedOverwrite:
    """An ``INSERT OVERWRITE`` as Spark's analyzer resolved it (nothing executed)."""
    rows: Any                                  # the DataFrame of the rows Spark would write, the table's columns
    db: str
    table: str
    partition_columns: tuple[str, ...]
    static: tuple[tuple[str, str], ...]        # the static part of the partition spec, as written
    dynamic: bool                              # Spark would replace only the partitions the rows fall in


def analyze_overwrite(spark: Any, parsed: Parsed) -> AnalyzedOverwrite:
    """Spark's analysis of the overwrite ``parsed``: what its datasource writer would be asked to do.
    Raises UnsupportedTableError when Spark would not write through its datasource writer."""
    jss = spark._jsparkSession
    jvm = spark._jvm
    plan = jss.sessionState().sqlParser().parsePlan(parsed.text)
    skip = jvm.org.apache.spark.sql.execution.CommandExecutionMode.SKIP()
    command = jss.sessionState().executePlan(plan, skip).analyzed()
    if _class(command) != _FS_INSERT:
        raise errors.UnsupportedTableError(
            f"{parsed.label}: Spark plans it as {_class(command).rsplit('.', 1)[-1]}, not its datasource writer, "
            "so tableswap cannot give it Spark's semantics; it did not run",
            table=".".join(parsed.inserts[0].target) if parsed.inserts else None)
    identifier = command.catalogTable().get().identifier()
    db = str(identifier.database().get()) if identifier.database().isDefined() else ""
    names = [str(n) for n in _seq(command.outputColumnNames())]
    rows = _frame(spark, command.query()).toDF(*names)
    static = tuple((str(p._1()).lower(), str(p._2())) for p in _seq(command.staticPartitions().toList()))
    return AnalyzedOverwrite(rows=rows, db=db.lower(), table=str(identifier.table()).lower(),
                             partition_columns=tuple(str(a.name()).lower() for a in _seq(command.partitionColumns())),
                             static=static, dynamic=bool(command.dynamicPartitionOverwrite()))


def partition_values(write: AnalyzedOverwrite) -> list[tuple[str | None, ...]]:
    """The partitions the overwrite's rows fall in (its partition columns as Spark spells them in a partition
    name, ``None`` for a null): its query runs, reading only; nothing is written."""
    from pyspark.sql import functions

    columns = [functions.col(c).cast("string") for c in write.partition_columns]
    return [tuple(r) for r in write.rows.select(*columns).distinct().collect()]


def _frame(spark: Any, logical_plan: Any) -> Any:
    """A DataFrame of an analyzed logical plan."""
    from pyspark.sql import DataFrame

    sql = spark._jvm.org.apache.spark.sql
    try:
        dataset = sql.classic.Dataset.ofRows(spark._jsparkSession, logical_plan)
    except Exception:  # noqa: BLE001 - before Spark 4 the class was org.apache.spark.sql.Dataset
        dataset = sql.Dataset.ofRows(spark._jsparkSession, logical_plan)
    return DataFrame(dataset, spark)


def run(spark: Any, text: str) -> int:
    """Run one statement as Spark runs it (a command at once, a query collected, as ``spark-sql`` prints
    it); the number of rows it returned."""
    return len(spark.sql(text).collect())
