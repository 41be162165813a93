"""``compact_partitions``, pure parts: which partitions a compaction rewrites and into how many files.

A partition is a candidate when at least ``min_files`` of its data files are *small*, smaller than half
the target file size; it is rewritten into ``ceil(bytes / target)`` files (at least one). What a
partition holds comes from one storage listing of its location (no Spark): data files are the files
whose names (and directories below the partition) do not start with ``_`` or ``.``, as Spark and Hive
read them. The rewrite itself is :mod:`tableswap.spark.compacting`; the swap :mod:`tableswap.ops.write.compact`.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from tableswap.core import partitions as pn
from tableswap.errors import InvalidInputError

MiB = 1024 * 1024
DEFAULT_TARGET_FILE_BYTES = 128 * MiB
DEFAULT_MIN_FILES = 10

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000 ** 2, "mb": 1000 ** 2, "g": 1000 ** 3, "gb": 1000 ** 3,
          "kib": 1024, "mib": MiB, "gib": 1024 ** 3}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: Any) -> int:
    """A byte size: an integer, or text like ``128MiB``, ``64 MB``, ``1GiB``, ``500000`` (B, KB/MB/GB powers
    of 1000, KiB/MiB/GiB powers of 1024); :class:`InvalidInputError` otherwise. At least 1 KiB."""
    if isinstance(text, bool):
        raise InvalidInputError(f"a file size must be a number of bytes or text like '128MiB', got {text!r}")
    if isinstance(text, int):
        value = text
    else:
        match = _SIZE.match(str(text))
        unit = match.group(2).lower() if match else None
        if not match or unit not in _UNITS:
            raise InvalidInputError(f"a file size must be a number of bytes or text like '128MiB', got {text!r}")
        value = int(float(match.group(1)) * _UNITS[unit])
    if value < 1024:
        raise InvalidInputError(f"target file size {text!r} is below 1 KiB: compaction would make more files, "
                                "not fewer")
    return value


def check_min_files(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise InvalidInputError(f"min_files must be an integer >= 2 (one file needs no compaction), got {value!r}")
    return value


@dataclass(frozen=True)
class PartitionFiles:
    """One partition's data files as listed: ``sizes`` in bytes."""

    values: tuple[str, ...]
    location: str
    sizes: tuple[int, ...]


@dataclass(frozen=True)
class Candidate:
    """One partition as the compaction sees it."""

    partition: str  # its name, ``dt=2026-06-03``
    values: tuple[str, ...]
    location: str
    files: int
    small_files: int
    bytes: int
    target_files: int  # files after the rewrite
    compact: bool  # rewritten (at least min_files small files)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["values"] = list(self.values)
        return out


@dataclass(frozen=True)
class CompactionPlan:
    """What a compaction of ``table`` would rewrite: every listed partition, the candidates marked."""

    table: str
    target_file_bytes: int
    min_files: int
    partitions: tuple[Candidate, ...] = field(default=())

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        return tuple(c for c in self.partitions if c.compact)

    def to_dict(self) -> dict[str, Any]:
        chosen = self.candidates
        return {"table": self.table, "target_file_bytes": self.target_file_bytes, "min_files": self.min_files,
                "candidates": [c.to_dict() for c in chosen],
                "partitions_listed": len(self.partitions),
                "files_before": sum(c.files for c in chosen), "files_after": sum(c.target_files for c in chosen),
                "bytes": sum(c.bytes for c in chosen)}


def plan_compaction(table: str, keys: Sequence[str], listed: Iterable[PartitionFiles], *,
                    target_file_bytes: int, min_files: int) -> CompactionPlan:
    """The plan from each partition's listed data files."""
    half = target_file_bytes / 2
    out = []
    for p in sorted(listed, key=lambda p: p.values):
        total = sum(p.sizes)
        small = sum(1 for s in p.sizes if s < half)
        target = max(1, math.ceil(total / target_file_bytes))
        out.append(Candidate(pn.partition_name(keys, p.values), p.values, p.location, len(p.sizes), small, total,
                             target, compact=small >= min_files and target < len(p.sizes)))
    return CompactionPlan(table, target_file_bytes, min_files, tuple(out))


def sizes_below(location_path: str, sizes: Mapping[str, int]) -> tuple[int, ...]:
    """The data files' sizes of one storage listing (paths → bytes) below ``location_path``."""
    return tuple(size for _, size in sorted(pn.data_files_below(location_path, sizes).items()))
