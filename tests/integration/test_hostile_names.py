"""Hostile names against the real metastore and Spark: a partition column starting with ``_``,
partition values that differ only by trailing whitespace, locations with ``#`` and ``?``."""

from __future__ import annotations

import datetime as dt
import shutil
import uuid
from pathlib import Path

import pytest

from tableswap import swap_partitions
from tableswap.core import locations as loc
from tableswap.core.catalog import SWAP_ID_PARAM, LocationChange
from tableswap.ops.janitor.run import run_janitor
from tableswap.ops.restore.repair import repair
from tableswap.ops.restore.rollback import rollback

from ..conftest import selected_metastore_db
from ..support.helpers import batch_df, create_events, partition_locations, queue_deletions_by_hand, reader_view

pytestmark = [pytest.mark.integration, pytest.mark.hostile]


# ------------------------------------------------------------------ a partition column named _p


def _underscore_table(spark, db: str, root: Path) -> str:
    table = f"{db}.u"
    spark.sql(f"CREATE TABLE {table} (id bigint, value string, batch string, `_p` string) USING parquet "
              f"PARTITIONED BY (`_p`) LOCATION '{(root / 'u').as_uri()}'")
    return table


def _underscore_df(spark, rows: dict[str, int], batch: str):
    data = [(i, f"v{i}", batch, p) for p, n in rows.items() for i in range(n)]
    return spark.createDataFrame(data, "id bigint, value string, batch string, `_p` string")


def _underscore_view(spark, table: str) -> dict[str, tuple[int, tuple[str, ...]]]:
    return {r["_p"]: (r["n"], tuple(r["b"])) for r in spark.sql(
        f"SELECT `_p`, count(*) AS n, sort_array(collect_set(batch)) AS b FROM {table} GROUP BY `_p`").collect()}


def test_a_partition_column_starting_with_underscore_swaps(spark, db, tmp_path, hms, ts_env):
    table = _underscore_table(spark, db, tmp_path)
    _underscore_df(spark, {"a": 2, "b": 2}, "old").write.insertInto(table)
    result = swap_partitions(_underscore_df(spark, {"b": 3, "c": 1}, "new"), table)
    assert sorted(c.partition for c in result.replaced) == ["_p=b"]
    assert sorted(c.partition for c in result.added) == ["_p=c"]
    # Spark reads such a table (its listing keeps `_key=value` directories), before and after the swap.
    assert _underscore_view(spark, table) == {"a": (2, ("old",)), "b": (3, ("new",)), "c": (1, ("new",))}


def test_replace_where_with_allow_empty_keeps_the_rows_of_an_underscore_column(spark, db, tmp_path, hms, ts_env):
    table = _underscore_table(spark, db, tmp_path)
    _underscore_df(spark, {"a": 2, "b": 2}, "old").write.insertInto(table)
    result = swap_partitions(_underscore_df(spark, {"a": 4}, "new"), table, replace_where=["_p=a", "_p=b"],
                             allow_empty=True)
    assert [c.partition for c in result.replaced] == ["_p=a"]
    assert [c.partition for c in result.dropped] == ["_p=b"]
    assert _underscore_view(spark, table) == {"a": (4, ("new",))}


# ------------------------------------------- values that differ only by trailing whitespace


def _lookalikes() -> list[str]:
    # Derby and MySQL compare VARCHARs with trailing blanks padded ('a ' = 'a'), so on them the metastore
    # itself cannot hold both; PostgreSQL can. U+00A0 is no blank to any of them.
    return ["a\u00a0"] + (["a "] if selected_metastore_db() == "postgresql" else [])


def test_values_with_trailing_whitespace_are_their_own_partitions(spark, db, tmp_path, hms, ts_env):
    values = ["a", *_lookalikes()]
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(v,): 2 for v in values}, "old").write.insertInto(table)
    before = partition_locations(hms, db, "events")
    assert sorted(before) == sorted((v,) for v in values)

    # replace_where names the look-alike partitions exactly: 'a' is outside the scope and untouched.
    swapped = swap_partitions(batch_df(spark, {(v,): 3 for v in values[1:]}, "new"), table,
                              replace_where=[f"dt={v}" for v in values[1:]])
    assert sorted(c.partition for c in swapped.replaced) == sorted(f"dt={v}" for v in values[1:])
    assert reader_view(spark, table) == {("a",): (2, ("old",)), **{(v,): (3, ("new",)) for v in values[1:]}}

    # Rollback restores each look-alike partition, and only those.
    undo = rollback(table, dry_run=False)
    assert sorted(c.partition for c in undo.replaced) == sorted(f"dt={v}" for v in values[1:])
    assert partition_locations(hms, db, "events") == before
    assert reader_view(spark, table) == {(v,): (2, ("old",)) for v in values}

    # Repair from the journal after the table's entry is lost (re-created, no MSCK): the partitions
    # come back under their own values.
    swap_partitions(batch_df(spark, {(v,): 4 for v in values[1:]}, "again"), table)
    spark.sql(f"DROP TABLE {table}")
    create_events(spark, db, tmp_path)
    spark.sql(f"ALTER TABLE {table} ADD PARTITION (dt='a') LOCATION '{before[('a',)]}'")
    repaired = repair(table, dry_run=False, skip_missing=True)
    assert sorted(c.partition for c in repaired.added) == sorted(f"dt={v}" for v in values[1:])
    spark.sql(f"REFRESH TABLE {table}")
    assert reader_view(spark, table) == {("a",): (2, ("old",)), **{(v,): (4, ("again",)) for v in values[1:]}}


def test_recover_completes_the_drop_of_a_look_alike_partition_only(spark, db, tmp_path, hms, ts_env, monkeypatch):
    """A swap replaces ``b`` and empties the look-alike partitions; the drop fails after the repoint landed:
    recover completes it on the look-alikes, never on ``a``."""
    from tableswap import errors
    from tableswap.metastore.client import MetastoreClient as Client
    from tableswap.ops.restore.recover import recover

    values = ["a", *_lookalikes()]
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(v,): 2 for v in [*values, "b"]}, "old").write.insertInto(table)
    real_drop = Client.drop_partitions_keep_data

    def broken_drop(self, *args, **kwargs):
        raise errors.CatalogError("drop_partitions: metastore error: injected failure")

    monkeypatch.setattr(Client, "drop_partitions_keep_data", broken_drop)
    with pytest.raises(errors.CommitStateUnknownError):
        swap_partitions(batch_df(spark, {("b",): 3}, "new"), table,
                        replace_where=["dt=b", *(f"dt={v}" for v in values[1:])])
    assert sorted(partition_locations(hms, db, "events")) == sorted((v,) for v in [*values, "b"])  # not dropped
    monkeypatch.setattr(Client, "drop_partitions_keep_data", real_drop)
    report = recover(table)
    assert [r.outcome for r in report.resolutions] == ["completed"]
    assert sorted(partition_locations(hms, db, "events")) == [("a",), ("b",)]
    assert reader_view(spark, table) == {("a",): (2, ("old",)), ("b",): (3, ("new",))}


# -------------------------------------------------------------- locations with '#' and '?'


def _janitor(table: str):
    return run_janitor(table=table, grace="0", force_short_grace=True, dry_run=False,
                       now=dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=3))


def _dir_with_data(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "part-0.parquet").write_text("x")
    return path


def test_locations_with_hash_and_question_mark_are_exact_paths(spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {("d0",): 2, ("d1",): 2}, "old").write.insertInto(table)
    root = tmp_path / "events"
    info = hms.get_table(db, "events")
    # A live partition moved by hand to a directory with '#' and '?' in its name.
    live = root / "moved#1?x"
    current = hms.get_partitions(info, [("d0",)])[("d0",)].location
    shutil.copytree(loc.to_local_path(current), live)
    hms.alter_partition_locations(info, [LocationChange(("d0",), current, f"file://{live}")],
                                  {SWAP_ID_PARAM: f"manual-{uuid.uuid4().hex[:6]}"})
    assert reader_view(spark, table)[("d0",)] == (2, ("old",))
    # Displaced directories with '#' and '?' next to siblings named by the prefix before them.
    gone = [_dir_with_data(root / "old#1"), _dir_with_data(root / "old?q=1"), _dir_with_data(root / "moved")]
    kept = [_dir_with_data(root / "old"), _dir_with_data(root / "oldX"), _dir_with_data(root / "old?r")]
    queued = [f"file://{p}" for p in gone] + [f"file://{live}"]
    queue_deletions_by_hand(ts_env["TABLESWAP_JOURNAL_URL"], db, "events", f"file://{root}", queued)

    report = _janitor(table)

    assert sorted(o.location for o in report.deleted) == sorted(f"file://{p}" for p in gone)
    refused = {o.location: o.reason for o in report.refused}
    assert "still referenced" in refused[f"file://{live}"]
    assert not any(p.exists() for p in gone)
    assert all(p.is_dir() and (p / "part-0.parquet").exists() for p in kept)
    assert any(f.suffix == ".parquet" for f in live.iterdir())
    assert reader_view(spark, table) == {("d0",): (2, ("old",)), ("d1",): (2, ("old",))}
