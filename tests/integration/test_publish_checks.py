"""What a publish compares with what was staged (docs/audit.md, "What a publish verifies"): the pure comparisons
of a staged swap's data files and of its target's format and columns, and the journal's record of them on both
dialects (version 9)."""

from __future__ import annotations


from tableswap.core.catalog import Column, TableInfo
from tableswap.journal import FAILED, PENDING, STAGING, Journal, SwapRecord, utcnow
from tableswap.journal.store import STAGED
from tableswap.ops.write.staged_state import file_differences, shape_differences, written_for

PARQUET = dict(input_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
               output_format="org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
               serde_lib="org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe")
ORC = dict(input_format="org.apache.hadoop.hive.ql.io.orc.OrcInputFormat",
           output_format="org.apache.hadoop.hive.ql.io.orc.OrcOutputFormat",
           serde_lib="org.apache.hadoop.hive.ql.io.orc.OrcSerde")


def _table(columns=(("id", "bigint"), ("value", "string")), fmt=PARQUET, keys=(("dt", "string"),)) -> TableInfo:
    return TableInfo("db", "events", "EXTERNAL_TABLE", "file:/w/events", tuple(Column(*c) for c in columns),
                     tuple(Column(*c) for c in keys), **fmt)


def test_the_same_table_and_columns_added_after_the_staged_ones_are_no_difference():
    staged_for = written_for(_table())
    assert shape_differences(staged_for, _table()) == []
    assert shape_differences(staged_for, _table(columns=(("ID", "BIGINT"), ("value", "string"), ("extra", "int")))) == []


def test_another_format_or_a_changed_staged_column_or_partition_column_is_a_difference():
    staged_for = written_for(_table())
    assert [d.split(":")[0] for d in shape_differences(staged_for, _table(fmt=ORC))] == [
        "input format", "output format", "serde"]
    assert shape_differences(staged_for, _table(columns=(("id", "bigint"), ("value", "int")))) == [
        "column 2: value string when staged, value int now"]
    assert shape_differences(staged_for, _table(columns=(("value", "string"), ("id", "bigint"))))[0].startswith(
        "column 1: id bigint when staged")
    assert shape_differences(staged_for, _table(columns=(("id", "bigint"),))) == ["column value string: gone"]
    assert shape_differences(staged_for, _table(keys=(("dt", "date"),))) == [
        "partition columns: (dt string) when staged, (dt date) now"]


def test_files_deleted_added_or_resized_are_differences():
    staged = {"dt=1/a.parquet": 10, "dt=1/b.parquet": 20}
    assert file_differences(staged, dict(staged)) == []
    assert file_differences(staged, {"dt=1/a.parquet": 10, "dt=1/b.parquet": 21, "dt=2/c.parquet": 5}) == [
        "dt=2/c.parquet: added (5 bytes)", "dt=1/b.parquet: 20 bytes staged, 21 now"]
    assert file_differences(staged, {"dt=1/a.parquet": 10}) == ["dt=1/b.parquet: missing (20 bytes staged)"]


def test_the_journal_keeps_what_was_staged_with_the_staged_state(any_journal_url):
    journal = Journal(any_journal_url)
    for swap_id in ("s1", "s2"):
        journal.begin_swap(SwapRecord(swap_id=swap_id, db_name="db", table_name="events", kind="partitions",
                                      state=STAGING, table_root="file:/w/events", started_at=utcnow()))
    files = {"dt=1/part-0.parquet": 123, "dt=2/part-0.parquet": 45}
    assert journal.mark_staged("s1", ["dt=3"], files=files, written_for=written_for(_table()))
    assert journal.staged_batch("s1") == (files, written_for(_table()))
    assert journal.get_swap("s1").state == STAGED
    assert journal.staged_batch("s2") is None  # never staged: nothing recorded
    assert not journal.mark_staged("s1", [], files={"x": 1}, written_for={})  # not staging any more: nothing changed
    assert journal.staged_batch("s1") == (files, written_for(_table()))

    # A publish's failure mapping marked it failed (its flip never started): staged again, and only then.
    journal.record_intent("s1", [])
    assert not journal.restage("s1", "interrupted", states=(FAILED,))  # pending: its flip may have started
    assert journal.get_swap("s1").state == PENDING
    journal.finish("s1", state=FAILED)
    assert journal.restage("s1", "interrupted", states=(FAILED,))
    assert journal.get_swap("s1").state == STAGED
    journal.close()
