"""swap_table: an unpartitioned table swapped whole with one alter_table."""

from __future__ import annotations


import pytest

from tableswap import swap_table
from tableswap.core import locations as loc
from tableswap.errors import EmptyBatchError
from tableswap.journal import Journal
from tableswap.core.catalog import ROOT_PARAM, SWAP_ID_PARAM

pytestmark = pytest.mark.integration


def _dim(spark, n: int, batch: str):
    return spark.createDataFrame([(i, f"user{i}", batch) for i in range(n)], "id bigint, name string, batch string")


@pytest.mark.parametrize("ddl", [
    "CREATE TABLE {t} (id bigint, name string, batch string) USING parquet LOCATION '{loc}'",
    "CREATE EXTERNAL TABLE {t} (id bigint, name string, batch string) STORED AS ORC LOCATION '{loc}'",
], ids=["datasource-parquet", "hive-orc"])
def test_swap_table_repoints_location_and_keeps_old_files(spark, db, tmp_path, hms, ts_env, ddl):
    table = f"{db}.dim_user"
    root = (tmp_path / "dim_user").as_uri()
    spark.sql(ddl.format(t=table, loc=root))
    _dim(spark, 10, "v1").write.insertInto(table)
    old_files = {p.name for p in (tmp_path / "dim_user").iterdir() if not p.name.startswith(("_", "."))}
    # A reader in another session that has already planned against the old location.
    other = spark.newSession()
    old_reader = other.table(table)
    assert old_reader.count() == 10

    result = swap_table(_dim(spark, 3, "v2"), table)

    assert result.table_change is not None
    assert loc.same(result.table_change.old_location, root)
    info = hms.get_table(db, "dim_user")
    assert loc.same(info.location, result.table_change.new_location)
    assert loc.is_within(info.location, root) and f"/_tableswap/{result.swap_id}" in info.location
    assert info.parameters[SWAP_ID_PARAM] == result.swap_id
    assert loc.same(info.parameters[ROOT_PARAM], root)
    if info.provider:  # datasource tables keep the location in the serde 'path' too
        assert loc.same(info.serde_parameters["path"], info.location)
    assert sorted(r.batch for r in spark.table(table).collect()) == ["v2"] * 3
    # A session that has not cached the table sees the new data; old files are still there.
    assert spark.newSession().table(table).count() == 3
    assert old_files <= {p.name for p in (tmp_path / "dim_user").iterdir()}
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]

    # Rerun: same content, the root stays the root (no nesting), one more displaced location.
    again = swap_table(_dim(spark, 3, "v2"), table)
    assert spark.table(table).count() == 3
    assert loc.same(hms.get_table(db, "dim_user").parameters[ROOT_PARAM], root)
    assert loc.same(again.table_change.old_location, result.table_change.new_location)
    assert loc.is_within(again.table_change.new_location, loc.join(root, "_tableswap"))
    queued = Journal(ts_env["TABLESWAP_JOURNAL_URL"]).deletions(db=db, table="dim_user")
    assert sorted(d.location for d in queued) == sorted([result.table_change.old_location,
                                                          again.table_change.old_location])


def test_swap_table_refuses_an_empty_batch_unless_asked(spark, db, tmp_path, hms, ts_env):
    table = f"{db}.dim"
    spark.sql(f"CREATE TABLE {table} (id bigint, name string, batch string) USING parquet "
              f"LOCATION '{(tmp_path / 'dim').as_uri()}'")
    _dim(spark, 4, "v1").write.insertInto(table)
    before = hms.get_table(db, "dim").location
    with pytest.raises(EmptyBatchError, match="no rows"):
        swap_table(_dim(spark, 0, "v2"), table)
    assert hms.get_table(db, "dim").location == before
    assert spark.table(table).count() == 4
    assert not (tmp_path / "dim" / "_tableswap").exists()
    result = swap_table(_dim(spark, 0, "v2"), table, allow_empty=True)
    assert result.table_change is not None
    assert spark.table(table).count() == 0
