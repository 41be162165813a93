"""Metastore compatibility (tableswap.metastore.compat): pure rules for HMS 2.3 / 3.1 / 4.x, and
what of them can be checked on the HMS 2.3.10 server the suite runs."""

from __future__ import annotations

import pytest

from tableswap import errors, swap_partitions
from tableswap.core import eligibility, locations as loc
from tableswap.metastore import compat
from tableswap.core.catalog import is_stats_param

from ..support.helpers import batch_df, create_events, file_tree, partition_locations, reader_view, today


# ----------------------------------------------------------------------------- pure rules
@pytest.mark.parametrize("raw, family, version, major", [
    ("3.0", "2.x", None, None),          # HMS 1.x/2.x: a constant, not their version
    ("3.1.3", "3.x", "3.1.3", 3),
    ("3.1.0.3.1.5.0-152", "3.x", "3.1.0.3.1.5.0-152", 3),  # HDP-style suffix
    ("4.0.1", "4.x", "4.0.1", 4),
    ("4.1.0-SNAPSHOT", "4.x", "4.1.0-SNAPSHOT", 4),
    ("5.0.0", "newer", "5.0.0", 5),
    ("2.3.10", "2.x", "2.3.10", 2),
    ("banana", "unknown", "banana", None),
    (None, "unknown", None, None),
    ("", "unknown", None, None),
])
def test_parse_server_version(raw, family, version, major):
    info = compat.parse_server_version(raw)
    assert (info.family, info.version, info.major) == (family, version, major)
    assert info.at_least_3 == (major is not None and major >= 3)
    assert info.describe()


def test_staging_parameters_never_purge_and_drop_markers_and_stats():
    target = {"EXTERNAL": "TRUE", "external.table.purge": "TRUE", "TRANSLATED_TO_EXTERNAL": "TRUE",
              "COLUMN_STATS_ACCURATE": '{"BASIC_STATS":"true","COLUMN_STATS":{"id":"true"}}',
              "numFiles": "3", "numFilesErasureCoded": "0", "spark.sql.statistics.numRows": "9",
              "tableswap.swap_id": "old", "transient_lastDdlTime": "1", "parquet.compression": "ZSTD",
              "spark.sql.sources.provider": "parquet"}
    params = compat.staging_table_parameters(target, {"tableswap.temp_for": "db.t"}, is_stats_param)
    assert params == {"EXTERNAL": "TRUE", "external.table.purge": "false", "parquet.compression": "ZSTD",
                      "spark.sql.sources.provider": "parquet", "tableswap.temp_for": "db.t"}
    # The caller's extras cannot turn purging back on.
    assert compat.staging_table_parameters({}, {"external.table.purge": "true"}, is_stats_param)[
        "external.table.purge"] == "false"


@pytest.mark.parametrize("params, refused, translated", [
    ({}, False, False),
    ({"external.table.purge": "false"}, False, False),
    ({"external.table.purge": "TRUE"}, True, False),
    ({"external.table.purge": " true "}, True, False),
    ({"external.table.purge": "TRUE", "TRANSLATED_TO_EXTERNAL": "TRUE"}, True, True),
    ({"TRANSLATED_TO_EXTERNAL": "TRUE", "external.table.purge": "false"}, False, False),
])
def test_purge_refusal(params, refused, translated):
    reason = eligibility.purge_refusal("db.t", params)
    assert (reason is not None) == refused
    if reason:
        assert "external.table.purge=true" in reason
        assert "SET TBLPROPERTIES ('external.table.purge'='false')" in reason
        assert ("TRANSLATED_TO_EXTERNAL" in reason) == translated


@pytest.mark.parametrize("conf, refused", [
    ({}, False),
    ({"spark.hadoop.metastore.catalog.default": "spark"}, False),   # 2.3 client: sends no catalog
    ({"spark.sql.hive.metastore.version": "3.1.3"}, False),
    ({"spark.sql.hive.metastore.version": "3.1.3", "spark.hadoop.metastore.catalog.default": "hive"}, False),
    ({"spark.sql.hive.metastore.version": "3.1.3", "spark.hadoop.metastore.catalog.default": "spark"}, True),
    ({"spark.sql.hive.metastore.version": "4.0.1", "spark.hadoop.hive.metastore.catalog.default": "x"}, True),
])
def test_catalog_refusal(conf, refused):
    reason = eligibility.catalog_refusal(conf.get)
    assert (reason is not None) == refused
    if reason:
        assert "default catalog" in reason


def test_lock_expiry_hint_names_the_right_settings():
    assert "hive.compactor.initiator.on" in compat.lock_expiry_hint(compat.parse_server_version("3.0"))
    assert "hive.txn.timeout" in compat.lock_expiry_hint(None)
    hint = compat.lock_expiry_hint(compat.parse_server_version("4.0.1"))
    assert "metastore.txn.timeout" in hint and "metastore.housekeeping.threads.on" in hint


# ----------------------------------------------------------------------------- on HMS 2.3.10
@pytest.mark.integration
def test_a_latin1_schema_refusing_a_partition_name_is_a_clear_input_error():
    """What HMS 4.0.1 over MariaDB 10.11 answered for get_partitions_by_names with 'country=日本' (shortened)."""
    from hmsclient.genthrift.hive_metastore import ttypes as tt

    from tableswap.metastore.client import translate

    server = ("JDOException: Exception thrown when executing query : SELECT DISTINCT A0.CREATE_TIME FROM PARTITIONS "
              "A0 WHERE ((A0.PART_NAME = ?) OR (A0.PART_NAME = ?)) ORDER BY NUCORDER0\nRoot cause: "
              "java.sql.SQLException: Illegal mix of collations (latin1_bin,IMPLICIT) and (utf8mb4_general_ci,"
              "COERCIBLE) for operation '='")
    err = translate(tt.MetaException(message=server), "get_partitions_by_names(db.events)")
    assert isinstance(err, errors.InvalidPartitionValueError) and isinstance(err, errors.InvalidInputError)
    text = str(err)
    assert text.startswith("get_partitions_by_names(db.events): the metastore's database cannot hold")
    assert "latin1" in text and "PostgreSQL" in text and "SELECT" not in text
    assert text.endswith("(the database said: java.sql.SQLException: Illegal mix of collations (latin1_bin,IMPLICIT) "
                         "and (utf8mb4_general_ci,COERCIBLE) for operation '=')")
    other = translate(tt.MetaException(message="Some other failure"), "alter_table(db.t)")
    assert type(other) is errors.CatalogError and "Some other failure" in str(other)


def test_server_version_is_cached_per_connection(hms):
    info = compat.server_info(hms)
    assert info.family in ("2.x", "3.x", "4.x")  # per release: tests/integration/test_hms_versions.py
    assert compat.server_info(hms) is info  # cached: one call per connection


@pytest.mark.integration
def test_an_unknown_thrift_method_is_a_clear_error(hms):
    """A method no Hive Metastore implements is answered with UNKNOWN_METHOD (on HMS 2.3 also
    get_catalogs, which exists from Hive 3.0 on)."""
    with pytest.raises(errors.UnsupportedMetastoreError) as info:
        compat.call_raw(hms, "tableswap_no_such_call")
    message = str(info.value)
    assert "tableswap_no_such_call" in message and "does not implement" in message
    assert "Hive Metastore 2.3, 3.1 or 4.x" in message and "TABLESWAP_METASTORE_URI" in message
    assert isinstance(info.value, errors.CatalogError) and not info.value.retryable
    hms.ping()  # the connection is still usable


@pytest.mark.integration
def test_purge_target_is_refused_and_nothing_changes(spark, db, tmp_path, hms, ts_env):
    """A target marked like a Hive 4 translated table (set by hand on 2.3) is refused before any
    write; the adapter's drop paths refuse it too, and its data stays."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2}, "old").write.insertInto(table)
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('external.table.purge'='TRUE', "
              "'TRANSLATED_TO_EXTERNAL'='TRUE')")
    before_locations = partition_locations(hms, db, "events")
    before_files = file_tree(tmp_path / "events")
    with pytest.raises(errors.UnsupportedTableError, match=r"external.table.purge=true \(Hive 4 translated"):
        swap_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 1}, "new"), table)
    assert partition_locations(hms, db, "events") == before_locations
    assert file_tree(tmp_path / "events") == before_files  # nothing staged
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]
    info = hms.get_table(db, "events")
    with pytest.raises(errors.UnsafeOperationError):
        hms.drop_partitions_keep_data(info, [(today(0),)])
    with pytest.raises(errors.UnsafeOperationError):
        hms.drop_table_keep_data(db, "events")
    assert reader_view(spark, table) == {(today(0),): (2, ("old",))}
    # Made a plain EXTERNAL table again (what the error says to do), it swaps.
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('external.table.purge'='false')")
    swap_partitions(batch_df(spark, {(today(0),): 3}, "new"), table)
    assert reader_view(spark, table) == {(today(0),): (3, ("new",))}


@pytest.mark.integration
def test_staging_table_is_created_with_purge_false_and_its_drop_keeps_data(spark, db, tmp_path, hms):
    table = create_events(spark, db, tmp_path)
    # A translated-looking target that is not purging is fine; its markers are not copied.
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('TRANSLATED_TO_EXTERNAL'='TRUE', "
              "'external.table.purge'='false', 'numRows'='7')")
    target = hms.get_table(db, "events")
    staged_dir = tmp_path / "events" / "_tableswap" / "s1"
    (staged_dir / "dt=x").mkdir(parents=True)
    (staged_dir / "dt=x" / "part-0.parquet").write_bytes(b"data")
    created = hms.create_staging_table(target, "events__tswap_s1", staged_dir.as_uri(), {"tableswap.temp_for": table})
    staging = hms.get_table(db, "events__tswap_s1")  # as the metastore stored it
    # What a swap's own drop relies on instead of a re-read (drop_table_keep_data(created=...)):
    assert created.is_external and not created.purges_on_drop and created.table_type == staging.table_type
    assert staging.is_external and staging.parameters["external.table.purge"] == "false"
    assert "TRANSLATED_TO_EXTERNAL" not in staging.parameters and "numRows" not in staging.parameters
    assert loc.same(staging.location, staged_dir.as_uri())
    hms.drop_table_keep_data(db, "events__tswap_s1")
    assert not hms.table_exists(db, "events__tswap_s1")
    assert (staged_dir / "dt=x" / "part-0.parquet").read_bytes() == b"data"
