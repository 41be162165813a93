"""Reading a table as it was (``read_as_of``, ``tableswap show --as-of``) against the real metastore
and SparkSession: the rows each swap left, across swaps, a rollback and a janitor run."""

from __future__ import annotations

import datetime as dt
import json
import warnings

import pytest
from click.testing import CliRunner

from tableswap import read_as_of, swap_partitions, swap_table
from tableswap.cli import main
from tableswap.errors import InvalidInputError, NotFoundError, PastDataMissingError
from tableswap.journal import Journal
from tableswap.ops.inspect.asof import MissingDataWarning
from tableswap.ops.janitor.run import run_janitor
from tableswap.ops.restore.rollback import execute_rollback, plan_rollback

from ..support.helpers import batch_df, create_events, reader_view, today

pytestmark = pytest.mark.integration


def view(df) -> dict[tuple, tuple[int, tuple[str, ...]]]:
    """Per partition: row count and the distinct batches (as :func:`reader_view` of a table)."""
    out: dict[tuple, list] = {}
    for row in df.collect():
        n, batches = out.setdefault((row["dt"],), [0, set()])
        out[(row["dt"],)] = [n + 1, batches | {row["batch"]}]
    return {k: (n, tuple(sorted(b))) for k, (n, b) in out.items()}


def cli(*args: str, expect: int = 0):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == expect, f"exit {result.exit_code}: {result.output}"
    return result


def test_each_swap_rollback_and_janitor_run(spark, db, tmp_path, ts_env):
    table = create_events(spark, db, tmp_path)
    d = [today(i) for i in range(4)]
    batch_df(spark, {(d[0],): 5, (d[1],): 5, (d[2],): 5}, "initial").write.insertInto(table)
    initial = reader_view(spark, table)
    s1 = swap_partitions(batch_df(spark, {(d[1],): 7, (d[3],): 4}, "s1"), table)
    after_s1 = reader_view(spark, table)
    s2 = swap_partitions(batch_df(spark, {(d[1],): 2, (d[2],): 3}, "s2"), table)
    after_s2 = reader_view(spark, table)
    rolled = execute_rollback(plan_rollback(table))  # undoes s2
    assert reader_view(spark, table) == after_s1

    assert view(read_as_of(spark, table, swap_id=s1.swap_id)) == after_s1
    assert view(read_as_of(spark, table, swap_id=s2.swap_id)) == after_s2
    assert view(read_as_of(spark, table, swap_id=rolled.swap_id)) == after_s1
    # The columns and types are the table's, partition column last.
    past = read_as_of(spark, table, swap_id=s2.swap_id)
    assert past.schema == spark.table(table).schema
    # By time: before the first swap, between them, now.
    records = {r.swap_id: r for r in Journal(ts_env["TABLESWAP_JOURNAL_URL"]).list_swaps(db, "events")}
    first_commit = dt.datetime.fromisoformat(records[s1.swap_id].committed_at)
    assert view(read_as_of(spark, table, timestamp=first_commit - dt.timedelta(microseconds=1))) == initial
    assert view(read_as_of(spark, table, timestamp=records[s2.swap_id].committed_at)) == after_s2
    assert view(read_as_of(spark, table, timestamp=dt.datetime.now(dt.timezone.utc))) == after_s1

    # `show --as-of` lists that state's partitions and who set each.
    shown = json.loads(cli("show", table, "--as-of", s2.swap_id, "--json").stdout)
    assert shown["as_of"] == s2.swap_id and shown["undone"] == [rolled.swap_id]
    by_name = {p["partition"]: p for p in shown["partitions"]}
    assert sorted(by_name) == [f"dt={x}" for x in d]
    assert by_name[f"dt={d[1]}"]["set_by"] == s2.swap_id and by_name[f"dt={d[3]}"]["set_by"] == s1.swap_id
    assert by_name[f"dt={d[0]}"]["set_by"] is None and all(p["exists"] for p in shown["partitions"])
    text = cli("show", table, "--as-of", s1.swap_id).stdout
    assert f"right after swap {s1.swap_id}" in text and f"dt={d[3]}" in text

    # The janitor deletes what no partition references: s2's batch (rolled back) and day 1's
    # initial data (displaced by s1). The state after s1 is intact; after s2 and before s1 are not.
    report = run_janitor(table=table, grace="0", force_short_grace=True, dry_run=False)
    assert len([o for o in report.deleted if o.kind == "displaced"]) == 3
    assert view(read_as_of(spark, table, swap_id=s1.swap_id)) == after_s1
    with pytest.raises(PastDataMissingError) as caught:
        read_as_of(spark, table, swap_id=s2.swap_id)
    assert f"dt={d[1]}" in str(caught.value) and f"dt={d[2]}" in str(caught.value)
    assert "deleted by the janitor" in str(caught.value) and len(caught.value.missing) == 2
    with pytest.warns(MissingDataWarning, match=f"dt={d[2]}"):
        partial = read_as_of(spark, table, swap_id=s2.swap_id, missing="skip")
    assert view(partial) == {k: v for k, v in after_s2.items() if k in ((d[0],), (d[3],))}
    with pytest.raises(PastDataMissingError, match=f"dt={d[1]}"):
        read_as_of(spark, table, timestamp=first_commit - dt.timedelta(microseconds=1))
    shown = json.loads(cli("show", table, "--as-of", s2.swap_id, "--json").stdout)
    assert sorted(shown["missing"]) == [f"dt={d[1]}", f"dt={d[2]}"]
    assert "DELETED by janitor" in cli("show", table, "--as-of", s2.swap_id).stdout


def test_unpartitioned_table_and_bad_requests(spark, db, tmp_path, ts_env):
    spark.sql(f"CREATE TABLE {db}.dim (id bigint, name string) USING orc LOCATION '{(tmp_path / 'dim').as_uri()}'")
    spark.createDataFrame([(1, "a"), (2, "b")], "id bigint, name string").write.insertInto(f"{db}.dim")
    s1 = swap_table(spark.createDataFrame([(3, "c")], "id bigint, name string"), f"{db}.dim")
    s2 = swap_table(spark.createDataFrame([(4, "d"), (5, "e")], "id bigint, name string"), f"{db}.dim")
    rows = lambda df: sorted(tuple(r) for r in df.collect())  # noqa: E731
    assert rows(read_as_of(spark, f"{db}.dim", swap_id=s1.swap_id)) == [(3, "c")]
    assert rows(read_as_of(spark, f"{db}.dim", swap_id=s2.swap_id)) == [(4, "d"), (5, "e")]
    assert rows(read_as_of(spark, f"{db}.dim", timestamp="2000-01-01T00:00:00")) == [(1, "a"), (2, "b")]

    with pytest.raises(NotFoundError, match="not in the history"):
        read_as_of(spark, f"{db}.dim", swap_id="20260101_000000_deadbeef")
    with pytest.raises(InvalidInputError, match="exactly one"):
        read_as_of(spark, f"{db}.dim", swap_id=s1.swap_id, timestamp="2026-01-01")
    with pytest.raises(InvalidInputError, match="ISO date-time"):
        read_as_of(spark, f"{db}.dim", timestamp="yesterday")
    with pytest.raises(InvalidInputError, match="missing="):
        read_as_of(spark, f"{db}.dim", swap_id=s1.swap_id, missing="ignore")
    assert "not in the history" in cli("show", f"{db}.dim", "--as-of", "nope", expect=3).output
    assert "not both" in cli("show", f"{db}.dim", "--as-of", s1.swap_id, "--at", "2026-01-01", expect=2).output
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is missing: no warning
        assert rows(read_as_of(spark, f"{db}.dim", swap_id=s1.swap_id, missing="skip")) == [(3, "c")]


@pytest.mark.hostile
def test_partition_values_are_read_back_verbatim_never_substituted(spark, db, tmp_path, ts_env):
    # Spark substitutes ${...} (also ${env:...}, ${system:...}) in SQL text: a stored partition value
    # must reach the DataFrame as data, never as text Spark parses.
    cols = ("dt", "country")
    table = create_events(spark, db, tmp_path, partition_cols=cols)
    values = ["${env:HOME}", "${system:java.version}", "${spark.sql.shuffle.partitions}", "a'b\\c`d", None]
    batch_df(spark, {("2026-01-01", "old"): 1}, "old", cols).write.insertInto(table)
    s1 = swap_partitions(batch_df(spark, {("2026-01-01", v): 2 for v in values}, "s1", cols), table)
    past = read_as_of(spark, table, swap_id=s1.swap_id)
    assert past.schema == spark.table(table).schema
    got = sorted(((r["country"] is None, r["country"] or "") for r in past.collect()))
    assert got == sorted([(False, "old")] + [(v is None, v or "") for v in values for _ in range(2)])
