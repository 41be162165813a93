"""What a DataFrame reads, for the lineage of its swap (:func:`read_sources`).

Spark's own OpenLineage integration reports a job's reads, but the job it sees writes the temporary table; the
swap's own run (:mod:`tableswap.lineage.events`) names the target table and, with this, the datasets its batch
was read from. They are the leaves of the DataFrame's analyzed plan in a classic session's JVM: catalog tables
(``HiveTableRelation``, a ``LogicalRelation`` with its ``CatalogTable``) and paths read as files
(``HadoopFsRelation``'s root paths). A Spark Connect session keeps its plan on the server: none are known there.
Called only when lineage is configured; best effort (what it cannot read, it leaves out).
"""

from __future__ import annotations

from typing import Any

from tableswap.core.datasets import ReadSource
from tableswap.spark.api import is_connect


def read_sources(df: Any) -> tuple[ReadSource, ...]:
    """The catalog tables and file paths at the leaves of ``df``'s analyzed plan, in the plan's order (none for a
    Spark Connect DataFrame)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None or is_connect(df.sparkSession):
        return ()
    leaves = jdf.queryExecution().analyzed().collectLeaves()
    out: list[ReadSource] = []
    for i in range(leaves.size()):
        leaf = leaves.apply(i)
        kind = leaf.getClass().getSimpleName()
        if kind == "HiveTableRelation":
            out.extend(_table(leaf.tableMeta()))
        elif kind == "LogicalRelation":
            catalog_table = leaf.catalogTable()
            if catalog_table.isDefined():
                out.extend(_table(catalog_table.get()))
            elif leaf.relation().getClass().getSimpleName() == "HadoopFsRelation":
                paths = leaf.relation().location().rootPaths()
                out.extend(ReadSource(paths.apply(j).toString()) for j in range(paths.size()))
    return tuple(out)


def _table(meta: Any) -> list[ReadSource]:
    """A ``CatalogTable`` as a source (none without a location, e.g. a view's)."""
    location = meta.storage().locationUri()
    if not location.isDefined():
        return []
    ident = meta.identifier()
    db = ident.database()
    return [ReadSource(location.get().toString(), db.get() if db.isDefined() else None, ident.table())]
