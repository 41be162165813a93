"""How a swap lays out its batch before the staging write (``[swap] write_distribution``; pure: the
values and the rule that picks one, read by the settings, by the swap (:func:`choose`) and by the Spark write,
:func:`tableswap.spark.staging.distributed`).

* ``"auto"`` (the default): :func:`choose` picks one of the two layouts below per swap, from what is known
  before the write (the rule: docs/configuration.md#write-distribution).
* ``"none"``: the batch is written as it comes. Each Spark task writes one file into every table partition it
  holds rows of: a batch spread over many tasks leaves up to (tasks x partitions) files.
* ``"partition"``: the batch is first clustered by the target's partition columns (Spark's rebalance hint,
  one shuffle), so each table partition is written by one task, or by several when adaptive query execution
  splits a skewed one to the advisory partition size. Only for a partitioned target written as plain files:
  a bucketed or char/varchar target is laid out by Spark's own insert, an unpartitioned one has nothing to
  cluster by.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tableswap.core import locations as loc

AUTO = "auto"
NONE = "none"
PARTITION = "partition"
#: What ``write_distribution`` may be set to (keyword, config file, Airflow connection, ``Settings``).
WRITE_DISTRIBUTIONS = (AUTO, NONE, PARTITION)
#: What a staging write applies: ``"auto"`` is resolved by :func:`choose` first.
LAYOUTS = (NONE, PARTITION)

#: ``"auto"`` clusters a batch known to touch at least this many partitions. Measured (2026-11-28/29, 2 cores,
#: 24 GiB, Debian 12; docs/benchmarks.md): clustered, a swap took 0.80-0.90 of the unclustered one's time at
#: 200 partitions and 0.55-0.57 at 2,000 on local disk, 0.73-0.78 and 0.55-0.60 on the S3 emulator, but
#: 1.11-1.19 at 20 and 1.32-1.56 at 1 on both (the shuffle costs more than the files it saves).
AUTO_MIN_PARTITIONS = 100
#: The storage schemes of object stores (after :data:`tableswap.core.locations.SAME_STORAGE`): every file
#: costs requests there (on S3A's magic committer three multipart calls), so a file saved is worth more.
OBJECT_STORES = frozenset({"s3", "gs", "abfs", "oss", "cos", "cosn", "obs"})


@dataclass(frozen=True)
class Layout:
    """The layout a swap's staging write applies (``"none"`` or ``"partition"``), what was asked for
    (``"auto"``, ``"none"``, ``"partition"``) and why, in words (the journal's and the log's ``reason``)."""

    applied: str
    asked: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"applied": self.applied, "asked": self.asked, "reason": self.reason}


def rule() -> str:
    """The rule of ``"auto"`` in one sentence (``tableswap doctor`` shows it beside the setting)."""
    return (f"per swap: \"{PARTITION}\" (clustered by partition) when the batch is known before its write to touch "
            f"{AUTO_MIN_PARTITIONS} partitions or more (its replace_where lists them, else the table's last swap "
            f"wrote as many) and is not clustered by partition already; else \"{NONE}\" (as it comes); an "
            "unpartitioned, bucketed or char/varchar table is always written as it comes "
            "(docs/configuration.md#write-distribution)")


def storage_kind(location: str) -> str:
    """``"object store"`` for a location on S3, GCS, Azure and the like, else ``"file system"`` (HDFS, local
    disk, a scheme tableswap does not know)."""
    scheme = loc.split(location)[0].lower()
    return "object store" if loc.SAME_STORAGE.get(scheme, scheme) in OBJECT_STORES else "file system"


def choose(asked: str, *, location: str, partitioned: bool, insert_layout: str | None = None,
           partitions: int | None = None, partitions_source: str = "",
           clustered: bool | Callable[[], bool] = False) -> Layout:
    """The layout of one swap's staging write (the rule of ``write_distribution = "auto"``).

    ``asked``: the setting. ``location``: the target's (its scheme says the storage). ``partitioned``: a swap of
    partitions (else of an unpartitioned table). ``insert_layout``: why Spark's own insert lays out the files
    (bucketed, char/varchar), else None. ``partitions``: how many partitions the batch touches at most, when
    known before the write (``partitions_source`` says from what: its scope, the table's last swap), else None.
    ``clustered``: the batch is already clustered by the partition columns (``df.repartition("dt")``), or a
    callable that tells (asked only where the answer decides: it plans the batch).

    The target's shape first, whatever was asked: an unpartitioned table has nothing to cluster by and Spark's
    insert lays out a bucketed or char/varchar table's files. Then an explicit ``"none"`` or ``"partition"``
    wins. ``"auto"``: a batch known to touch :data:`AUTO_MIN_PARTITIONS` or more is clustered unless it is
    clustered already (nothing to add), fewer are not (its shuffle would cost more than the files it saves);
    a batch of unknown count is written as it comes (at 1 or 20 partitions clustering is slower on
    every storage measured, and a swap then logs the advice to cluster when its write shows it would have
    helped: :func:`advice`)."""
    if asked not in WRITE_DISTRIBUTIONS:  # resolved settings are checked already: a caller's mistake
        raise ValueError(f"write_distribution={asked!r}: not one of {', '.join(WRITE_DISTRIBUTIONS)}")
    if not partitioned:
        return Layout(NONE, asked, "unpartitioned table")
    if insert_layout:
        return Layout(NONE, asked, f"Spark's insert lays out the files ({insert_layout})")
    if asked != AUTO:
        return Layout(asked, asked, "asked for")
    where = storage_kind(location)
    if partitions is None:
        return Layout(NONE, asked, f"{where}, partition count unknown before the write: written as it comes")
    source = f" ({partitions_source})" if partitions_source else ""
    if partitions < AUTO_MIN_PARTITIONS:
        return Layout(NONE, asked, f"{where}, {partitions:,} partitions{source}: fewer than {AUTO_MIN_PARTITIONS}")
    if clustered() if callable(clustered) else clustered:
        return Layout(NONE, asked, f"{where}, {partitions:,} partitions{source}, the batch clustered by the "
                                   "partition columns already")
    return Layout(PARTITION, asked, f"{where}, {partitions:,} partitions{source}: {AUTO_MIN_PARTITIONS} or more")


#: A swap written as it comes logs advice to cluster its batch (``swap.write_distribution_advice``, INFO) when
#: its staging write left at least this many partitions, with at least this many files per partition on
#: average, of at most this mean size. On local disk (2,000,000 rows, 2 tasks, 2026-11-28) the clustered
#: write took 0.80-0.90 of the unclustered one's time at 200 partitions and 0.55-0.57 at 2,000, but more
#: below 100 (its shuffle); large files per partition are what a large partition should have anyway.
ADVICE_MIN_PARTITIONS = 100
ADVICE_MIN_FILES_PER_PARTITION = 2
ADVICE_MAX_MEAN_FILE_BYTES = 32 * 1024 * 1024


def advice(applied: str, partitions: int, files: int, total_bytes: int, asked: str = NONE) -> str | None:
    """What to tell the user of a staging write laid out as ``applied`` (``asked`` for) that left ``files`` data
    files of ``total_bytes`` in ``partitions`` table partitions: the advice to cluster the batch by partition when
    it was written as it comes, into many partitions, in several small files each; else ``None``. With ``"auto"``
    (which wrote it as it comes for not knowing the count) the table's next swap clusters by itself: the rule
    takes the count of the table's last swap."""
    if applied != NONE or partitions < ADVICE_MIN_PARTITIONS or files <= 0:
        return None
    if files < ADVICE_MIN_FILES_PER_PARTITION * partitions or total_bytes / files > ADVICE_MAX_MEAN_FILE_BYTES:
        return None
    left = (f"the staging write left {files:,} files in {partitions:,} partitions ({files / partitions:.1f} per "
            f"partition, {total_bytes / files / 1024 / 1024:.1f} MiB each on average)")
    if asked == AUTO:
        return (f"{left}: the next swap of this table clusters its batch by partition (write_distribution "
                f"\"{AUTO}\" takes the count of the table's last swap when nothing else gives it); "
                f"write_distribution=\"{PARTITION}\" (the keyword or [swap] write_distribution), or a "
                "replace_where listing the partitions, does it from the first swap, about one file per partition "
                "(docs/configuration.md#write-distribution)")
    return (f"{left}: write_distribution=\"{PARTITION}\" (the keyword or [swap] write_distribution) clusters the "
            "batch by partition first, about one file per partition, usually faster from about a hundred "
            "partitions (docs/configuration.md#write-distribution)")
