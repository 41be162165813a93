"""A SQL script's statements as tableswap maps them, pure parts (``tableswap sql``, docs/sql.md).

Spark's own parser reads the script (:mod:`tableswap.spark.sqlscript` turns its unresolved plans into the
values below); this module decides, before anything of the script runs, what each statement becomes:

* an ``INSERT OVERWRITE`` of a table → a swap of that table (:class:`Overwrite`; which partitions it replaces
  is decided when it runs, from Spark's own analysis of the statement: ``partitionOverwriteMode``, the static
  part of the partition spec);
* a form tableswap cannot map safely → a refusal with its reason (:func:`refusal`): nothing of the script runs;
* anything else → run by Spark as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection, Mapping, Sequence

from tableswap.core import partitions as pn
from tableswap.core.records import Action, PartitionChange

#: Spark's name of its built-in (session) catalog: a three-part name in it is a metastore table.
SESSION_CATALOG = "spark_catalog"

#: Spark settings that decide whether an insert into a Hive-format table goes through Spark's datasource
#: writer (whose overwrite semantics tableswap maps) rather than Hive's SerDe writer, with their defaults
#: (Spark's ``HiveUtils``; ``RelationConversions`` applies them).
HIVE_CONVERSION = {
    "parquet": ("spark.sql.hive.convertMetastoreParquet", "true"),
    "orc": ("spark.sql.hive.convertMetastoreOrc", "true"),
}
CONVERT_PARTITIONED = ("spark.sql.hive.convertInsertingPartitionedTable", "true")
CONVERT_UNPARTITIONED = ("spark.sql.hive.convertInsertingUnpartitionedTable", "true")


@dataclass(frozen=True)
class Insert:
    """One ``INSERT`` of Spark's unresolved plan (``InsertIntoStatement``), as plain values."""
    target: tuple[str, ...]                          # the name as written: (table,), (db, table), (catalog, db, table)
    overwrite: bool
    partition_spec: tuple[tuple[str, str | None], ...] = ()   # column → static value, None for a dynamic column
    if_partition_not_exists: bool = False
    user_columns: tuple[str, ...] = ()
    replace_criteria: str | None = None              # REPLACE WHERE / REPLACE USING, as Spark prints it
    schema_evolution: bool = False


@dataclass(frozen=True)
class Parsed:
    """What Spark's parser made of one statement."""
    index: int                                       # 1-based, in the script
    text: str                                        # the statement as written (no terminator)
    inserts: tuple[Insert, ...] = ()                 # several: a multi-insert (FROM s INSERT ... INSERT ...)
    use_namespace: tuple[str, ...] | None = None     # USE db / USE catalog.db
    setting: tuple[str, str] | None = None           # SET key=value

    @property
    def label(self) -> str:
        first = " ".join(self.text.split())
        return f"statement {self.index} ({first[:60]}{'...' if len(first) > 60 else ''})"


@dataclass(frozen=True)
class Overwrite:
    """An ``INSERT OVERWRITE`` tableswap runs as a swap of ``db.table``."""
    statement: Parsed
    db: str
    table: str

    @property
    def qualified_name(self) -> str:
        return f"{self.db}.{self.table}"


def refusal(parsed: Parsed) -> str | None:
    """Why tableswap cannot run this statement as a swap with Spark's semantics, or None (a plain overwrite,
    or a statement that is no overwrite at all)."""
    overwrites = [i for i in parsed.inserts if i.overwrite or i.replace_criteria]
    if not overwrites:
        return None
    if len(parsed.inserts) > 1:
        return ("a multi-insert (FROM ... INSERT ... INSERT ...) with an overwrite: write one INSERT OVERWRITE "
                "statement per table")
    insert = overwrites[0]
    if insert.replace_criteria is not None:
        return ("Spark itself refuses INSERT INTO ... REPLACE WHERE / REPLACE USING on the tables of its session "
                "catalog (UNSUPPORTED_FEATURE.TABLE_OPERATION; only a catalog of its own, Delta's say, takes it), so "
                "there is no Spark result for a swap to give: write INSERT OVERWRITE with a PARTITION clause, or "
                "call swap_partitions(df, table, replace_where=...)")
    if insert.if_partition_not_exists:
        return "IF NOT EXISTS: Spark then skips a partition that exists, which no swap does"
    if insert.user_columns:
        return (f"a column list ({', '.join(insert.user_columns)}): Spark fills the other columns with their "
                "defaults; select every column instead")
    if insert.schema_evolution:
        return "WITH SCHEMA EVOLUTION: a swap never changes the table's columns"
    return None


def overwrite_target(parsed: Parsed, current_db: str) -> Overwrite | None:
    """The table an overwrite statement replaces (``current_db`` for a one-part name), or None for any other
    statement. Raises ValueError with the reason for a name outside Spark's session catalog."""
    inserts = [i for i in parsed.inserts if i.overwrite]
    if not inserts:
        return None
    name = inserts[0].target
    if len(name) == 3 and name[0].lower() == SESSION_CATALOG:
        name = name[1:]
    if len(name) == 1:
        return Overwrite(parsed, current_db.lower(), name[0].lower())
    if len(name) == 2:
        return Overwrite(parsed, name[0].lower(), name[1].lower())
    raise ValueError(f"{'.'.join(name)} is not a table of Spark's session catalog (a catalog of its own, "
                     f"{name[0]!r}): tableswap swaps tables of the Hive Metastore the session uses")


def next_database(parsed: Parsed, current_db: str) -> str:
    """The current database after the statement (``USE db`` changes it)."""
    ns = parsed.use_namespace
    if not ns:
        return current_db
    if len(ns) == 2 and ns[0].lower() == SESSION_CATALOG:
        return ns[1]
    return ns[-1] if len(ns) == 1 else current_db


def serde_refusal(provider: str | None, storage_format: str | None, partitioned: bool,
                  conf: Callable[[str, str], str]) -> str | None:
    """Why Spark would write this table through Hive's SerDe writer rather than its datasource writer (the
    settings that decide it, as Spark's ``RelationConversions`` reads them; ``conf(key, default)``), or None."""
    if provider and provider.lower() != "hive":
        return None
    keys: Sequence[tuple[str, str]] = [HIVE_CONVERSION.get(storage_format or "", ("", "false")),
                                       CONVERT_PARTITIONED if partitioned else CONVERT_UNPARTITIONED]
    off = [key for key, default in keys if not key or conf(key, default).strip().lower() != "true"]
    if not off:
        return None
    return (f"Spark would write this Hive-format table through Hive's SerDe writer ({', '.join(k for k in off if k)} "
            "is false), whose overwrite semantics (always dynamic) tableswap does not map: leave the setting at "
            "its default (true)")


def overwrite_changes(keys: Sequence[str], types: Sequence[str], existing: Mapping[tuple[str, ...], str | None],
                      written: Collection[tuple[str | None, ...]], static: Mapping[str, str],
                      dynamic: bool) -> list[PartitionChange]:
    """What a partitioned overwrite would change (a dry run's plan, nothing written): the partitions its rows
    fall in (``written``, from the table's partition columns ``keys`` of Hive ``types``) added where ``existing``
    (the table's partitions → location) has none, else replaced; with Spark's static overwrite also every
    existing partition matching ``static`` (the static part of the spec) without rows dropped, and a fully static
    spec's one partition kept (or added) even without rows. Values are compared as their column's type reads
    them (``'01'`` and ``'1'`` of an INT are one partition, :func:`~tableswap.core.partitions.value_key`); a new
    location is not known before the batch is written (``None``)."""
    def key(values: Sequence[str | None]) -> tuple[object, ...]:
        return tuple(pn.value_key(t, v) for t, v in zip(types, values))

    stored = {key(values): values for values in existing}
    rows = {key(values): tuple(pn.stored_value(v) for v in values) for values in written}
    if not dynamic and set(static) >= set(keys):
        whole = tuple(static[k] for k in keys)
        rows.setdefault(key(whole), whole)
    out = []
    for k, values in sorted(rows.items(), key=lambda kv: kv[1]):
        if k in stored:
            out.append(PartitionChange(pn.partition_name(keys, stored[k]), Action.REPLACE,
                                       existing[stored[k]], None))
        else:
            out.append(PartitionChange(pn.partition_name(keys, values), Action.ADD, None, None))
    if not dynamic:
        matching = key(tuple(static.get(k) or "" for k in keys))
        for k, values in sorted(stored.items(), key=lambda kv: kv[1]):
            in_scope = all(k[i] == matching[i] for i, name in enumerate(keys) if name in static)
            if in_scope and k not in rows:
                out.append(PartitionChange(pn.partition_name(keys, values), Action.DROP, existing[values], None))
    return out
