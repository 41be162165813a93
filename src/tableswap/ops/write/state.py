"""``table_state``: the state token a read-modify-write job takes when it reads its input and passes
back as ``if_unchanged_since`` when it swaps its result (the check itself runs under the table lock,
see :class:`tableswap.core.planning.LockedPlanning`)."""

from __future__ import annotations

from typing import Any, Sequence

from tableswap import errors
from tableswap.core import partitions as pn
from tableswap.core.names import parse_table_name
from tableswap.core.state import partition_state, table_only_state
from tableswap.ops.locations import partition_key
from tableswap.runtime import Runtime, use
from tableswap.spark import api as sparkapi


def table_state(table: str, partitions: Sequence[str] | None = None, *, spark: Any = None,
                metastore_uri: str | None = None, runtime: Runtime | None = None, **options: Any) -> str:
    """A state token of ``table``: take it when the job reads its input, pass it to
    ``swap_partitions(..., if_unchanged_since=token)`` (or ``swap_table``) when it writes its result.

    The swap is then refused with a retryable :class:`~tableswap.errors.SwapConflictError`, nothing
    changed, if a partition it touches (for ``swap_table``: the table) changed since: repointed,
    added, dropped, or rewritten in place by a tool that updates its metastore entry. Partitions the
    batch does not touch may change freely.

    Args:
        table: ``db.table``.
        partitions: only these partitions (specs like ``dt=2026-06-03`` or ``a=1/b=x``), read with one
            ``get_partitions_by_names`` call: the token then covers just them (a partition it does
            not name is not checked). Default: every partition of the table, listed once (for a table
            of very many partitions, name the ones the job reads).
        spark: a SparkSession whose ``spark.hadoop.hive.metastore.uris`` names the metastore, when
            neither ``metastore_uri`` nor ``TABLESWAP_METASTORE_URI`` does (default: the active one).

    Returns:
        An opaque string (``tswap1.`` + data); it holds fingerprints of locations and swap ids only.

    Raises:
        TableNotFoundError, InvalidInputError: no such table, a bad partition spec.
        CatalogUnavailableError: the metastore cannot be reached.
    """
    db, name = parse_table_name(table)
    if spark is None and runtime is None:
        spark = sparkapi.active_session()
    with use(runtime, spark=spark, metastore_uri=metastore_uri, **options) as rt, rt.catalog() as catalog:
        info = catalog.get_table(db, name)
        if not info.is_partitioned:
            if partitions:
                raise errors.InvalidInputError(f"{info.qualified_name} is not partitioned: partitions= does not apply")
            return table_only_state(info.qualified_name, info).encode()
        keys = info.partition_key_names
        if partitions is None:
            found = catalog.list_partitions(db, name)
            return partition_state(info.qualified_name, ((p.name(keys), p) for p in found), complete=True).encode()
        if isinstance(partitions, str):
            partitions = [partitions]
        names = sorted({partition_key(info, spec) for spec in partitions})
        values = [pn.values_for(keys, pn.parse_name(n)) for n in names]
        current = catalog.get_partitions(info, values)
        return partition_state(info.qualified_name, ((n, current.get(tuple(v))) for n, v in zip(names, values)),
                               complete=False).encode()
