"""``tableswap.sql`` / ``tableswap sql``: a script's INSERT OVERWRITE statements as swaps (docs/sql.md).

The differential proof: each form runs as Spark's own statement on one table and through tableswap on an
identical copy; both tables then hold the same rows and the same partitions. Then the refusals (nothing of
the script ran, not even the statements before the refused one) and the command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import tableswap
from tableswap import errors
from tableswap.cli import main
from tableswap.core import locations as loc
from tableswap.journal import Journal
from tests.support.helpers import (data_files, file_codecs, file_format, file_layout, file_tree,
                                   metastore_snapshot, spark_conf)

# What a statement maps to is Spark's and tableswap's, not the metastore release's (the swaps themselves run
# against every release in their own suites): the default run only.
pytestmark = [pytest.mark.integration, pytest.mark.release_independent]

#: Rows of the two tables before the statement: (id, value, country, dt).
BEFORE = [(1, "old", "fr", "d1"), (2, "old", "fr", "d2"), (3, "old", "de", "d1"), (4, "old", "de", "d2")]
#: The statement's source: new rows for fr/d1, fr/d3 and de/d1 (id, value, country, dt).
SOURCE = [(10, "new", "fr", "d1"), (11, "new", "fr", "d3"), (12, "new", "de", "d1")]

# (name, PARTITION clause, select list, WHERE of the source): every spec form, with and without rows.
FORMS = [
    ("mixed", "PARTITION (country='fr', dt)", "id, value, dt", "country = 'fr'"),
    ("dynamic", "PARTITION (country, dt)", "id, value, country, dt", "true"),
    ("no-spec", "", "id, value, country, dt", "true"),
    ("static", "PARTITION (country='fr', dt='d1')", "id, value", "country = 'fr' AND dt = 'd1'"),
    ("mixed-empty", "PARTITION (country='fr', dt)", "id, value, dt", "false"),
    ("dynamic-empty", "PARTITION (country, dt)", "id, value, country, dt", "false"),
    ("static-empty", "PARTITION (country='fr', dt='d2')", "id, value", "false"),
    ("static-empty-new", "PARTITION (country='fr', dt='d9')", "id, value", "false"),
]


def _create(spark, table: str, root: Path, layout: str, partitioned: bool) -> None:
    location = (root / table.split(".")[1]).as_uri()
    if layout == "hive":
        parts = " PARTITIONED BY (country string, dt string)" if partitioned else ""
        cols = "" if partitioned else ", country string, dt string"
        spark.sql(f"CREATE EXTERNAL TABLE {table} (id bigint, value string{cols}){parts} STORED AS PARQUET "
                  f"LOCATION '{location}'")
    else:
        parts = " PARTITIONED BY (country, dt)" if partitioned else ""
        spark.sql(f"CREATE TABLE {table} (id bigint, value string, country string, dt string) USING parquet"
                  f"{parts} LOCATION '{location}'")
    rows = ", ".join(f"({i}, '{v}', '{c}', '{d}')" for i, v, c, d in BEFORE)
    spec = " PARTITION (country, dt)" if partitioned else ""
    with spark_conf(spark, {"spark.sql.sources.partitionOverwriteMode": "dynamic",
                            "hive.exec.dynamic.partition.mode": "nonstrict"}):
        spark.sql(f"INSERT INTO {table}{spec} SELECT * FROM VALUES {rows} AS v(id, value, country, dt)")


def _state(spark, table: str, partitioned: bool) -> tuple[list, list]:
    spark.catalog.refreshTable(table)
    rows = sorted(tuple(r) for r in spark.sql(f"SELECT id, value, country, dt FROM {table}").collect())
    parts = sorted(r[0] for r in spark.sql(f"SHOW PARTITIONS {table}").collect()) if partitioned else []
    return rows, parts


def _table_layout(hms, table: str) -> tuple[frozenset[str], frozenset[str]]:
    """An unpartitioned table's data files: their formats and codecs."""
    db, name = table.split(".")
    files = data_files(Path(loc.to_local_path(hms.get_table(db, name).location)))
    return frozenset(file_format(f) for f in files), frozenset(file_codecs(files))


@pytest.fixture
def source(spark, db):
    view = f"{db}.src"
    values = ", ".join(f"({i}, '{v}', '{c}', '{d}')" for i, v, c, d in SOURCE)
    spark.sql(f"CREATE TABLE {view} USING parquet AS SELECT * FROM VALUES {values} AS v(id, value, country, dt)")
    return view


@pytest.mark.parametrize("mode", ["static", "dynamic"])
@pytest.mark.parametrize("form", FORMS, ids=[f[0] for f in FORMS])
@pytest.mark.parametrize("layout", ["hive", "datasource"])
def test_an_overwrite_gives_the_table_spark_gives(spark, db, tmp_path, source, hms, ts_env, layout, form, mode):
    name, spec, select, where = form
    spark_t, swap_t = f"{db}.by_spark", f"{db}.by_tableswap"
    for t in (spark_t, swap_t):
        _create(spark, t, tmp_path, layout, partitioned=True)
    statement = "INSERT OVERWRITE TABLE {t} " + spec + f" SELECT {select} FROM {source} WHERE {where}"
    with spark_conf(spark, {"spark.sql.sources.partitionOverwriteMode": mode,
                            "hive.exec.dynamic.partition.mode": "nonstrict"}):
        spark.sql(statement.format(t=spark_t))
        results = tableswap.sql(spark, statement.format(t=swap_t))
    assert _state(spark, swap_t, True) == _state(spark, spark_t, True)
    assert file_layout(hms, swap_t) == file_layout(hms, spark_t)  # each partition's file formats and codecs
    assert [r.table for r in results] == [swap_t]
    if name.startswith("static-empty"):
        # Spark keeps (or adds) that one partition, emptied: so does the swap, pointing it at a fresh, empty
        # directory; the old files stay for rollback.
        partition = "country=fr/dt=" + spec.split("dt='")[1][:2]
        assert partition in _state(spark, spark_t, True)[1]
        assert [c.partition for c in results[0].result.added + results[0].result.replaced] == [partition]


@pytest.mark.parametrize("empty", [False, True], ids=["rows", "empty"])
@pytest.mark.parametrize("layout", ["hive", "datasource"])
def test_an_unpartitioned_overwrite_gives_the_table_spark_gives(spark, db, tmp_path, source, hms, ts_env, layout,
                                                                empty):
    spark_t, swap_t = f"{db}.by_spark", f"{db}.by_tableswap"
    for t in (spark_t, swap_t):
        _create(spark, t, tmp_path, layout, partitioned=False)
    statement = "INSERT OVERWRITE TABLE {t} SELECT id, value, country, dt FROM " + source + (
        " WHERE false" if empty else "")
    spark.sql(statement.format(t=spark_t))
    [result] = tableswap.sql(spark, statement.format(t=swap_t))
    assert _state(spark, swap_t, False) == _state(spark, spark_t, False)
    assert _table_layout(hms, swap_t) == _table_layout(hms, spark_t)
    assert result.action == "swap_table" and result.result.table_change is not None


@pytest.mark.parametrize("statement, reason", [
    ("INSERT OVERWRITE TABLE {t} PARTITION (country='fr', dt='d1') IF NOT EXISTS SELECT id, value FROM {src}",
     "IF NOT EXISTS"),
    ("INSERT OVERWRITE TABLE {t} (id, value, country, dt) SELECT id, value, country, dt FROM {src}", "column list"),
    ("INSERT OVERWRITE TABLE other_catalog.{t} SELECT * FROM {src}", "session catalog"),
    (("FROM {src} INSERT OVERWRITE TABLE {t} SELECT id, value, country, dt "
      "INSERT OVERWRITE TABLE {t} SELECT id, value, country, dt"), "multi-insert"),
    ("INSERT INTO {t} REPLACE WHERE dt = 'd1' SELECT id, value, country, dt FROM {src}", "Spark itself refuses"),
    ("INSERT INTO {t} REPLACE USING (dt) SELECT id, value, country, dt FROM {src}", "Spark itself refuses"),
], ids=["if-not-exists", "column-list", "other-catalog", "multi-insert", "replace-where", "replace-using"])
def test_a_refused_statement_stops_the_script_before_anything_runs(spark, db, tmp_path, source, ts_env,
                                                                    statement, reason):
    table = f"{db}.target"
    _create(spark, table, tmp_path, "datasource", partitioned=True)
    before = _state(spark, table, True)
    script = (f"CREATE TABLE {db}.marker (a int) USING parquet;\n"
              f"INSERT OVERWRITE TABLE {table} SELECT id, value, country, dt FROM {source};\n"
              + statement.format(t=table, src=source) + ";")
    with pytest.raises(errors.SqlStatementRefusedError, match=reason) as refused:
        tableswap.sql(spark, script)
    assert refused.value.statement == 3 and "Nothing of the script ran" in str(refused.value)
    assert not spark.catalog.tableExists(f"{db}.marker")
    assert _state(spark, table, True) == before


@pytest.mark.parametrize("layout", ["hive", "datasource"])
def test_replace_where_is_refused_as_spark_itself_refuses_it(spark, db, tmp_path, source, ts_env, layout):
    """Spark 4.3 has no result for INSERT INTO ... REPLACE WHERE on a table of its session catalog (it refuses the
    statement when it analyzes it): tableswap refuses it too, before anything of the script runs. Should a Spark
    start to run it, the first assertion fails and the mapping is to be written against its result."""
    table = f"{db}.target"
    _create(spark, table, tmp_path, layout, partitioned=True)
    before = _state(spark, table, True)
    statement = f"INSERT INTO {table} REPLACE WHERE dt = 'd1' SELECT id, value, country, dt FROM {source}"
    with pytest.raises(Exception, match="does not support INSERT INTO ... REPLACE WHERE"):
        spark.sql(statement)
    with pytest.raises(errors.SqlStatementRefusedError, match="Spark itself refuses"):
        tableswap.sql(spark, f"CREATE TABLE {db}.marker (a int) USING parquet; {statement}")
    assert not spark.catalog.tableExists(f"{db}.marker")
    assert _state(spark, table, True) == before


def test_a_managed_or_missing_target_stops_the_script_before_anything_runs(spark, db, source, ts_env):
    spark.sql(f"CREATE TABLE {db}.managed (id bigint, value string, country string, dt string) USING parquet")
    for target, error in ((f"{db}.managed", errors.UnsupportedTableError), (f"{db}.missing", errors.TableNotFoundError)):
        script = (f"CREATE TABLE {db}.marker (a int) USING parquet; "
                  f"INSERT OVERWRITE TABLE {target} SELECT id, value, country, dt FROM {source}")
        with pytest.raises(error, match="Nothing of the script ran"):
            tableswap.sql(spark, script)
        assert not spark.catalog.tableExists(f"{db}.marker")


def test_the_command_runs_a_file_with_variables_and_reports_each_statement(spark, db, tmp_path, source, ts_env):
    table = f"{db}.target"
    _create(spark, table, tmp_path, "datasource", partitioned=True)
    script = tmp_path / "daily.sql"
    script.write_text(
        "-- a daily load; a ';' in a comment and in 'a string;' does not end a statement\n"
        "SET spark.sql.sources.partitionOverwriteMode=dynamic;\n"
        f"CREATE TEMPORARY VIEW today AS SELECT * FROM {source} WHERE dt = '${{day}}' AND value <> 'a string;';\n"
        f"INSERT OVERWRITE TABLE {table} PARTITION (country, dt) SELECT id, value, country, dt FROM today;\n"
        f"SELECT count(*) FROM {table} WHERE dt = '${{hivevar:day}}'\n")
    with spark_conf(spark, {"spark.sql.sources.partitionOverwriteMode": "static"}):
        run = CliRunner().invoke(main, ["sql", "-f", str(script), "-d", "day=d1", "--json"])
    assert run.exit_code == 0, run.output
    statements = json.loads(run.output)["statements"]
    assert [s["action"] for s in statements] == ["ran", "ran", "swap_partitions", "ran"]
    swap = statements[2]
    assert (swap["mode"], swap["added"], swap["replaced"], swap["dropped"]) == ("dynamic", 0, 2, 0)
    assert swap["swap_id"] and swap["table"] == table
    rows, parts = _state(spark, table, True)
    assert sorted(r for r in rows if r[3] == "d1") == [(10, "new", "fr", "d1"), (12, "new", "de", "d1")]
    assert parts == ["country=de/dt=d1", "country=de/dt=d2", "country=fr/dt=d1", "country=fr/dt=d2"]

    refused = CliRunner().invoke(main, ["sql", "-e", f"INSERT OVERWRITE TABLE {db}.nope SELECT 1", "--json"])
    assert refused.exit_code == 3 and json.loads(refused.output)["error_type"] == "TableNotFoundError"
    both = CliRunner().invoke(main, ["sql", "-e", "SELECT 1", "-f", str(script)])
    assert both.exit_code == 2


def test_a_dry_run_prints_each_statements_plan_changes_nothing_and_the_run_then_does_it(
        spark, db, tmp_path, source, hms, ts_env):
    """docs/cli.md#dry-runs: `tableswap sql --dry-run` (sql(..., dry_run=True)) parses and analyzes every statement
    as the run does and says per statement which table and which partitions it would add, replace and drop; it
    runs no statement that changes anything, writes nothing, leaves no temporary table and no journal record,
    and gives the session back as it was (its USE and SET apply to the statements after them only). The run
    then does what it said."""
    table = f"{db}.target"
    _create(spark, table, tmp_path, "datasource", partitioned=True)
    script = (
        "SET spark.sql.sources.partitionOverwriteMode=dynamic;\n"
        f"INSERT OVERWRITE TABLE {table} PARTITION (country, dt) SELECT id, value, country, dt FROM {source} "
        "WHERE country = 'fr';\n"
        "SET spark.sql.sources.partitionOverwriteMode=static;\n"
        f"USE {db};\n"
        "INSERT OVERWRITE TABLE target PARTITION (country='de', dt) SELECT id, value, dt FROM src WHERE country = 'de';\n"
        f"CREATE TABLE {db}.made_by_the_script USING parquet AS SELECT 1 AS one\n")
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    before = (metastore_snapshot(hms, db), file_tree(tmp_path / "target"), journal.list_swaps(db=db),
              _state(spark, table, True))
    current = spark.catalog.currentDatabase()

    with spark_conf(spark, {"spark.sql.sources.partitionOverwriteMode": "static"}):
        printed = CliRunner().invoke(main, ["sql", "-e", script, "--dry-run", "--json"])
        text = CliRunner().invoke(main, ["sql", "-e", script, "--dry-run"])
        planned = tableswap.sql(spark, script, dry_run=True)
        mode_after = spark.conf.get("spark.sql.sources.partitionOverwriteMode")

    assert printed.exit_code == 0, printed.output
    document = json.loads(printed.output)
    assert document["dry_run"] is True
    statements = document["statements"]
    assert [s["action"] for s in statements] == ["ran", "swap_partitions", "ran", "ran", "swap_partitions",
                                                 "would run"]

    def changes(s: dict) -> dict:
        return {k: sorted(c["partition"] for c in s["result"][k]) for k in ("added", "replaced", "dropped")}

    assert (statements[1]["table"], statements[1]["mode"]) == (table, "dynamic")
    assert changes(statements[1]) == {"added": ["country=fr/dt=d3"], "replaced": ["country=fr/dt=d1"], "dropped": []}
    assert (statements[4]["table"], statements[4]["mode"]) == (table, "static")
    assert changes(statements[4]) == {"added": [], "replaced": ["country=de/dt=d1"], "dropped": ["country=de/dt=d2"]}
    assert [changes(s) for s in statements if s["action"] == "swap_partitions"] == [
        changes(r.to_dict()) for r in planned if r.result is not None]
    assert all(r.result.dry_run for r in planned if r.result is not None)
    assert text.exit_code == 0, text.output
    assert "dry run" in text.output and "would replace country=de/dt=d1" in text.output
    assert "would drop country=de/dt=d2" in text.output and "nothing was changed" in text.output

    # Nothing changed: the metastore (no temporary table, no table made by the script), the storage, the
    # journal, the rows; the session's database and settings as they were.
    assert (metastore_snapshot(hms, db), file_tree(tmp_path / "target"), journal.list_swaps(db=db),
            _state(spark, table, True)) == before
    assert "made_by_the_script" not in hms.list_tables(db) and not [t for t in hms.list_tables(db) if "__tswap_" in t]
    assert spark.catalog.currentDatabase() == current and mode_after == "static"

    ran = CliRunner().invoke(main, ["sql", "-e", script, "--json"])
    assert ran.exit_code == 0, ran.output
    done = json.loads(ran.output)["statements"]
    assert [changes(s) for s in done if s["action"] == "swap_partitions"] == [
        changes(s) for s in statements if s["action"] == "swap_partitions"]
    assert "made_by_the_script" in hms.list_tables(db)
