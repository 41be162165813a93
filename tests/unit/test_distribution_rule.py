"""The rule of ``write_distribution = "auto"`` (pure: :func:`tableswap.core.distribution.choose`), every branch,
and the journal's count it takes when nothing else gives one (:meth:`Journal.last_batch_partitions`, SQLite).
A default swap's layout on S3: tests/integration/test_write_distribution_auto.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tableswap.core import distribution
from tableswap.core.distribution import AUTO, NONE, PARTITION, advice, choose, storage_kind
from tableswap.journal import Journal, PartitionChange, SwapRecord, utcnow

S3 = "s3a://bucket/warehouse/events"
LOCAL = "file:/warehouse/events"
MANY = distribution.AUTO_MIN_PARTITIONS
MIB = 1024 * 1024


def _never() -> bool:
    raise AssertionError("asked whether the batch is clustered where the answer decides nothing")


@pytest.mark.parametrize("location, kind", [
    ("s3a://b/t", "object store"), ("s3://b/t", "object store"), ("S3N://b/t", "object store"),
    ("gs://b/t", "object store"), ("abfss://c@a.dfs.core.windows.net/t", "object store"),
    ("wasbs://c@a.blob.core.windows.net/t", "object store"), ("oss://b/t", "object store"),
    ("hdfs://nn:8020/t", "file system"), ("viewfs://cluster/t", "file system"), ("file:/w/t", "file system"),
    ("/w/t", "file system"), ("", "file system"),
])
def test_the_storage_is_told_by_the_locations_scheme(location, kind):
    assert storage_kind(location) == kind


@pytest.mark.parametrize("asked", [AUTO, NONE, PARTITION])
def test_an_unpartitioned_table_is_written_as_it_comes_whatever_was_asked(asked):
    layout = choose(asked, location=S3, partitioned=False, partitions=MANY * 10, clustered=_never)
    assert (layout.applied, layout.asked, layout.reason) == (NONE, asked, "unpartitioned table")


@pytest.mark.parametrize("asked", [AUTO, NONE, PARTITION])
def test_sparks_insert_lays_out_a_bucketed_or_char_table_whatever_was_asked(asked):
    layout = choose(asked, location=S3, partitioned=True, insert_layout="4 buckets on id", partitions=MANY,
                    clustered=_never)
    assert layout.applied == NONE and layout.reason == "Spark's insert lays out the files (4 buckets on id)"


@pytest.mark.parametrize("asked", [NONE, PARTITION])
@pytest.mark.parametrize("partitions", [None, 1, MANY * 20])
@pytest.mark.parametrize("location", [S3, LOCAL])
def test_an_explicit_setting_wins(asked, partitions, location):
    layout = choose(asked, location=location, partitioned=True, partitions=partitions, clustered=_never)
    assert (layout.applied, layout.asked, layout.reason) == (asked, asked, "asked for")


@pytest.mark.parametrize("location, where", [(S3, "object store"), (LOCAL, "file system")])
def test_auto_writes_a_batch_of_unknown_count_as_it_comes(location, where):
    """Measured: clustering a batch of 1 partition costs its shuffle on every storage (S3 emulator, 1,000,000
    rows, 2026-11-29: 2.64 s against 2.40 s), so without a count the rule keeps today's layout."""
    layout = choose(AUTO, location=location, partitioned=True, partitions=None, clustered=_never)
    assert layout.applied == NONE
    assert layout.reason == f"{where}, partition count unknown before the write: written as it comes"


@pytest.mark.parametrize("location", [S3, LOCAL])
@pytest.mark.parametrize("partitions", [1, 20, MANY - 1])
def test_auto_writes_fewer_partitions_than_the_threshold_as_they_come(location, partitions):
    layout = choose(AUTO, location=location, partitioned=True, partitions=partitions,
                    partitions_source="its replace_where lists them", clustered=_never)
    assert layout.applied == NONE
    assert layout.reason.endswith(f"{partitions:,} partitions (its replace_where lists them): fewer than {MANY}")


@pytest.mark.parametrize("location, where", [(S3, "object store"), (LOCAL, "file system")])
@pytest.mark.parametrize("partitions", [MANY, 2_000])
def test_auto_clusters_a_batch_known_to_touch_many_partitions(location, where, partitions):
    asked_clustered = []

    def clustered() -> bool:
        asked_clustered.append(True)
        return False

    layout = choose(AUTO, location=location, partitioned=True, partitions=partitions,
                    partitions_source="the table's last swap wrote as many", clustered=clustered)
    assert (layout.applied, layout.asked) == (PARTITION, AUTO)
    assert layout.reason == (f"{where}, {partitions:,} partitions (the table's last swap wrote as many): "
                             f"{MANY} or more")
    assert asked_clustered == [True]  # the plan is read once, and only here


def test_auto_adds_nothing_to_a_batch_clustered_already():
    layout = choose(AUTO, location=S3, partitioned=True, partitions=MANY, clustered=True)
    assert layout.applied == NONE and "the batch clustered by the partition columns already" in layout.reason
    assert choose(AUTO, location=S3, partitioned=True, partitions=MANY, clustered=lambda: True).applied == NONE


def test_an_invalid_setting_is_a_callers_mistake():
    with pytest.raises(ValueError, match="'hash'"):
        choose("hash", location=S3, partitioned=True)


def test_the_layout_reads_as_the_result_carries_it():
    layout = choose(AUTO, location=S3, partitioned=True, partitions=MANY)
    assert layout.to_dict() == {"applied": PARTITION, "asked": AUTO, "reason": layout.reason}


def test_the_advice_after_auto_says_the_next_swap_clusters_by_itself():
    text = advice(NONE, 200, 400, 400 * MIB, AUTO)
    assert text is not None and "400 files in 200 partitions" in text
    assert "the next swap of this table clusters its batch by partition" in text
    assert advice(PARTITION, 200, 400, 400 * MIB, AUTO) is None  # auto clustered it: nothing to advise


def test_the_threshold_is_the_documented_one():
    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    section = page[page.index("### Write distribution"):]
    section = " ".join(section[:section.index("\n## ")].split())
    assert f"{MANY} partitions or more" in section and '`"auto"` (the default)' in section


# ------------------------------------------------------------------ the journal's count
def _swap(journal: Journal, swap_id: str, kind: str, state: str, partitions: int, drops: int = 0) -> None:
    journal.begin_swap(SwapRecord(swap_id=swap_id, db_name="db", table_name="events", kind=kind, state="staging",
                                  table_root="file:/w/events", started_at=utcnow()))
    items = [PartitionChange(f"dt={i}", "add" if i % 2 else "replace", None, f"file:/w/n/{i}")
             for i in range(partitions)]
    items += [PartitionChange(f"dt=d{i}", "drop", f"file:/w/o/{i}", None) for i in range(drops)]
    journal.record_intent(swap_id, items)
    if state == "committed":
        journal.commit(swap_id, [])
    else:
        journal.finish(swap_id, state=state, error="x")


def test_the_journal_gives_the_partitions_the_tables_last_committed_swap_wrote(tmp_path):
    journal = Journal(f"sqlite:///{tmp_path / 'j.db'}")
    assert journal.last_batch_partitions("db", "events") is None  # no swap yet
    _swap(journal, "s1", "partitions", "committed", 150, drops=7)
    assert journal.last_batch_partitions("db", "events") == 150  # its drops are not the batch's
    _swap(journal, "s2", "partitions", "failed", 3)  # not committed: not counted
    _swap(journal, "s3", "compact", "committed", 2)  # a compaction's batch is its plan: not counted
    assert journal.last_batch_partitions("db", "events") == 150
    _swap(journal, "s4", "merge", "committed", 12)
    assert journal.last_batch_partitions("db", "events") == 12
    assert journal.last_batch_partitions("db", "other") is None
