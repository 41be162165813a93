"""Partition locations without the rest of the partition: Hive Metastore 4.x's ``get_partitions_with_specs``
with a projection (HIVE-20306), a call the Hive 2.3 IDL of hmsclient lacks, so its request and
response structs are declared here (field ids and types as in Hive 4's ``hive_metastore.thrift``).

Asked for the fields ``values`` and ``sd.location`` of partitions named in a page, the server runs one
query for them instead of the several that build full partitions (columns, serde, parameters), and the
answer is a fraction of the size. It comes grouped (``MetaStoreServerUtils.
getPartitionspecsGroupedByStorageDescriptor``): partitions under the table's location as paths relative
to it (``sd.location`` of the group + ``relativePath``, exactly as Hive's own client rebuilds them), the
others as partitions. Servers without the call (2.3, 3.1) answer UNKNOWN_METHOD: the caller then reads
full partitions by name, as before.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from hmsclient.genthrift.hive_metastore import ttypes as tt
from thrift.protocol.TBase import TBase
from thrift.Thrift import TApplicationException, TMessageType, TType

METHOD = "get_partitions_with_specs"
#: What is asked for: the partition's values (its name) and its location, nothing else.
FIELDS = ["values", "sd.location"]
#: ``PartitionFilterMode.BY_NAMES``.
BY_NAMES = 0

_STR_LIST = (TType.STRING, "UTF8", False)


def _spec(*fields: tuple[Any, ...]) -> tuple[Any, ...]:
    """A ``thrift_spec``: the entry of field id ``i`` at index ``i``."""
    out: list[Any] = [None] * (max(f[0] for f in fields) + 1)
    for f in fields:
        out[f[0]] = f
    return tuple(out)


class _Struct(TBase):
    """A struct read and written from its ``thrift_spec`` (thrift's generic TBase code paths)."""

    thrift_spec: tuple[Any, ...] = ()

    def __init__(self, **values: Any) -> None:
        for entry in self.thrift_spec:
            if entry is not None:
                setattr(self, entry[2], values.get(entry[2]))


class ProjectionSpec(_Struct):  # GetProjectionsSpec
    thrift_spec = _spec((1, TType.LIST, "fieldList", _STR_LIST, None),
                        (2, TType.STRING, "includeParamKeyPattern", "UTF8", None),
                        (3, TType.STRING, "excludeParamKeyPattern", "UTF8", None))


class FilterSpec(_Struct):  # GetPartitionsFilterSpec
    thrift_spec = _spec((7, TType.I32, "filterMode", None, None),
                        (8, TType.LIST, "filters", _STR_LIST, None))


class Request(_Struct):  # GetPartitionsRequest
    thrift_spec = _spec((1, TType.STRING, "catName", "UTF8", None),
                        (2, TType.STRING, "dbName", "UTF8", None),
                        (3, TType.STRING, "tblName", "UTF8", None),
                        (7, TType.STRUCT, "projectionSpec", [ProjectionSpec, ProjectionSpec.thrift_spec], None),
                        (8, TType.STRUCT, "filterSpec", [FilterSpec, FilterSpec.thrift_spec], None))


class Response(_Struct):  # GetPartitionsResponse
    thrift_spec = _spec((1, TType.LIST, "partitionSpec",
                         (TType.STRUCT, [tt.PartitionSpec, tt.PartitionSpec.thrift_spec], False), None))


class _Args(_Struct):
    thrift_spec = _spec((1, TType.STRUCT, "request", [Request, Request.thrift_spec], None))


class _Result(_Struct):
    thrift_spec = _spec((0, TType.STRUCT, "success", [Response, Response.thrift_spec], None),
                        (1, TType.STRUCT, "o1", [tt.MetaException, tt.MetaException.thrift_spec], None))


def exchange(c: Any, method: str, write_args: Callable[[Any], object], read_result: Callable[[Any], object]) -> None:
    """One call of ``method`` over the open hmsclient connection ``c`` outside its generated (2.3) IDL:
    ``write_args`` writes the arguments struct, ``read_result`` reads the answer's; a server exception
    (e.g. :class:`TApplicationException` UNKNOWN_METHOD) is raised."""
    c._seqid += 1
    c._oprot.writeMessageBegin(method, TMessageType.CALL, c._seqid)
    write_args(c._oprot)
    c._oprot.writeMessageEnd()
    c._oprot.trans.flush()
    _, mtype, _ = c._iprot.readMessageBegin()
    if mtype == TMessageType.EXCEPTION:
        exc = TApplicationException()
        exc.read(c._iprot)
        c._iprot.readMessageEnd()
        raise exc
    read_result(c._iprot)
    c._iprot.readMessageEnd()


def call(c: Any, db: str, table: str, names: Sequence[str]) -> list[tuple[tuple[str, ...], str | None]]:
    """``(values, location)`` of the existing partitions among ``names``, over the open hmsclient
    connection ``c``; raises what the server raises (TApplicationException UNKNOWN_METHOD without the
    call, MetaException)."""
    request = Request(dbName=db, tblName=table,
                      projectionSpec=ProjectionSpec(fieldList=list(FIELDS), includeParamKeyPattern="",
                                                    excludeParamKeyPattern=""),
                      filterSpec=FilterSpec(filterMode=BY_NAMES, filters=list(names)))
    result = _Result()
    exchange(c, METHOD, _Args(request=request).write, result.read)
    if result.o1 is not None:
        raise result.o1
    if result.success is None:
        raise TApplicationException(TApplicationException.MISSING_RESULT, f"{METHOD} failed: unknown result")
    return locations(result.success)


def locations(response: Response) -> list[tuple[tuple[str, ...], str | None]]:
    """The ``(values, location)`` of each partition of a grouped answer."""
    out: list[tuple[tuple[str, ...], str | None]] = []
    for spec in response.partitionSpec or ():
        shared = spec.sharedSDPartitionSpec
        if shared is not None:
            base = shared.sd.location if shared.sd is not None else None
            for p in shared.partitions or ():
                where = None if base is None or p.relativePath is None else base + p.relativePath
                out.append((tuple(p.values or ()), where))
        listed = spec.partitionList
        if listed is not None:
            for p in listed.partitions or ():
                out.append((tuple(p.values or ()), p.sd.location if p.sd is not None else None))
    return out
