"""The Spark front end on the AWS Glue Data Catalog: ``swap_partitions`` / ``swap_table`` / ``read_as_of`` on Glue
tables whose data is on S3, with a real SparkSession writing through S3A and moto's server on loopback serving S3,
Glue and DynamoDB (the table leases) as AWS would.

The session's own catalog is the test Hive Metastore, which knows nothing of these tables: on Glue, Spark only
writes and reads files (the schema comes from Glue's columns or the Spark schema a table stores), so a session
need not have Glue as its catalog. Glue tables name ``s3://`` locations, which S3A serves off EMR
(``spark.hadoop.fs.s3.impl``, set by the session fixture; docs/glue.md).
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest

from tableswap import errors, read_as_of, storage, swap_partitions, swap_table
from tableswap.core.catalog import SWAP_ID_PARAM, TEMP_FOR_PARAM
from tableswap.core.names import temp_table_name
from tableswap.journal import Journal

from ..support.helpers import batch_df, today
from .test_bad_input import CASES as BAD_INPUT
from ..unit.test_error_data import TABLE_ERRORS
from ..support.glue_tables import PARQUET_FORMAT as PARQUET
from ..support.s3 import ACCESS_KEY, REGION, SECRET_KEY

pytestmark = [pytest.mark.integration, pytest.mark.glue]

COLUMNS = [{"Name": "id", "Type": "bigint"}, {"Name": "value", "Type": "string"}, {"Name": "batch", "Type": "string"}]


@pytest.fixture
def glue_env(s3_endpoint, s3_bucket, spark, tmp_path, monkeypatch) -> dict[str, str]:
    """boto3's standard configuration pointed at the emulator, tableswap's settings naming ``glue://REGION`` and a
    fresh journal and lease table, tableswap's storage (s3fs) on the same endpoint."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_GLUE", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    env = {"AWS_ENDPOINT_URL": s3_endpoint.url, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
           "AWS_DEFAULT_REGION": REGION, "TABLESWAP_METASTORE_URI": f"glue://{REGION}",
           "TABLESWAP_JOURNAL_URL": f"sqlite:///{tmp_path / 'journal.db'}",
           "TABLESWAP_GLUE_LOCK_TABLE": f"tsl_{uuid.uuid4().hex[:8]}"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    storage.configure("s3", endpoint_url=s3_endpoint.url, key=ACCESS_KEY, secret=SECRET_KEY)
    yield env
    storage.configure("s3")


@pytest.fixture
def glue(s3_endpoint):
    """The test's own boto3 Glue client on the emulator (never tableswap's)."""
    import boto3

    return boto3.client("glue", endpoint_url=s3_endpoint.url, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY)


@pytest.fixture
def gdb(glue, glue_env) -> str:
    name = f"tsgs_{uuid.uuid4().hex[:10]}"
    glue.create_database(DatabaseInput={"Name": name})
    return name


@pytest.fixture
def root(s3_bucket) -> str:
    return f"s3://{s3_bucket}/glue-{uuid.uuid4().hex[:8]}"


def create_glue_table(glue, db: str, location: str, name: str = "events", *, partitioned: bool = True,
                      table_type: str = "EXTERNAL_TABLE", columns: list[dict[str, str]] | None = None,
                      buckets: int = 0) -> str:
    """A Hive-style parquet table as Athena, a Glue crawler or Spark on EMR would create it (no Spark schema in its
    parameters: the schema comes from Glue's columns)."""
    sd: dict[str, Any] = {**PARQUET, "Columns": columns or COLUMNS, "Location": location}
    if buckets:
        sd.update(NumberOfBuckets=buckets, BucketColumns=["id"])
    glue.create_table(DatabaseName=db, TableInput={
        "Name": name, "TableType": table_type, "StorageDescriptor": sd,
        "PartitionKeys": [{"Name": "dt", "Type": "string"}] if partitioned else [],
        "Parameters": {"classification": "parquet", **({"EXTERNAL": "TRUE"} if table_type == "EXTERNAL_TABLE" else {})}})
    return f"{db}.{name}"


def partitions(glue, db: str, name: str = "events") -> dict[tuple[str, ...], dict[str, Any]]:
    return {tuple(p["Values"]): p for p in glue.get_partitions(DatabaseName=db, TableName=name)["Partitions"]}


def glue_view(spark, glue, db: str, name: str = "events") -> dict[tuple[str, ...], tuple[int, tuple[str, ...]]]:
    """What a reader of the Glue table sees: each registered partition's files, read at its location."""
    out = {}
    for values, p in partitions(glue, db, name).items():
        rows = spark.read.parquet(p["StorageDescriptor"]["Location"]).collect()
        out[values] = (len(rows), tuple(sorted({r["batch"] for r in rows})))
    return out


def table_view(spark, glue, db: str, name: str) -> tuple[int, tuple[str, ...]]:
    location = glue.get_table(DatabaseName=db, Name=name)["Table"]["StorageDescriptor"]["Location"]
    rows = spark.read.parquet(location).collect()
    return len(rows), tuple(sorted({r["batch"] for r in rows}))


def glue_tables(glue, db: str) -> list[str]:
    return sorted(t["Name"] for t in glue.get_tables(DatabaseName=db)["TableList"])


def snapshot(glue, db: str) -> dict[str, Any]:
    """Every table of ``db`` with its location, parameters and partitions (for nothing-changed checks)."""
    out = {}
    for t in glue.get_tables(DatabaseName=db)["TableList"]:
        parts = {}
        if t.get("PartitionKeys"):
            parts = {v: (p["StorageDescriptor"]["Location"], p.get("Parameters"))
                     for v, p in partitions(glue, db, t["Name"]).items()}
        out[t["Name"]] = (t["StorageDescriptor"].get("Location"), t.get("Parameters"), parts)
    return out


# --------------------------------------------------------------------------- swaps
def test_swap_partitions_on_glue_adds_replaces_and_a_rerun_changes_nothing(spark, glue, gdb, root, glue_env):
    """A Glue table (created as Athena would, no Spark schema stored) swapped from a session whose own catalog
    does not know it: the batch is written once under the table's root, registered and repointed through Glue
    under a lease, the temporary table dropped; a rerun of the same batch gives the same table."""
    table = create_glue_table(glue, gdb, f"{root}/events")
    first = swap_partitions(batch_df(spark, {(today(0),): 2, (today(1),): 2}, "old"), table)
    assert sorted(c.partition for c in first.added) == [f"dt={today(0)}", f"dt={today(1)}"]
    assert glue_view(spark, glue, gdb) == {(today(0),): (2, ("old",)), (today(1),): (2, ("old",))}
    old = {v: p["StorageDescriptor"]["Location"] for v, p in partitions(glue, gdb).items()}

    batch = batch_df(spark, {(today(0),): 3, (today(2),): 1}, "new")
    second = swap_partitions(batch, table)
    assert [c.partition for c in second.replaced] == [f"dt={today(0)}"]
    assert [c.partition for c in second.added] == [f"dt={today(2)}"]
    expected = {(today(0),): (3, ("new",)), (today(1),): (2, ("old",)), (today(2),): (1, ("new",))}
    assert glue_view(spark, glue, gdb) == expected
    parts = partitions(glue, gdb)
    # Each swapped partition points into its swap's staging directory under the table's root, stamped.
    assert parts[(today(0),)]["StorageDescriptor"]["Location"].startswith(f"{root}/events/_tableswap/")
    assert parts[(today(0),)]["Parameters"][SWAP_ID_PARAM] == second.swap_id
    assert parts[(today(1),)]["StorageDescriptor"]["Location"] == old[(today(1),)]
    # No temporary table is left; the displaced directory is kept (queued) and still holds its files.
    assert glue_tables(glue, gdb) == ["events"]
    journal = Journal(glue_env["TABLESWAP_JOURNAL_URL"])
    assert journal.get_swap(second.swap_id).state == "committed"
    queued = [d.location for d in journal.deletions(db=gdb, table="events")]
    assert queued == [old[(today(0),)]]
    assert spark.read.parquet(old[(today(0),)]).count() == 2

    rerun = swap_partitions(batch, table)
    assert sorted(c.partition for c in rerun.replaced) == [f"dt={today(0)}", f"dt={today(2)}"]
    assert glue_view(spark, glue, gdb) == expected


def test_lineage_names_a_glue_table_by_its_location_and_its_arn(spark, glue, gdb, root, glue_env, ol_env):
    """The swap's OpenLineage output on Glue is the table as Spark's integration names a Glue table: its S3
    location, with the Glue ARN (region and the catalog's account) and ``table/db/name`` as its symlink."""
    from tableswap.lineage import events as lineage_events

    from ..support.lineage_receiver import Receiver, validate

    table = create_glue_table(glue, gdb, f"{root}/events")
    account = glue.get_table(DatabaseName=gdb, Name="events")["Table"]["CatalogId"]
    with Receiver() as receiver:
        ol_env.setenv("OPENLINEAGE_URL", receiver.url)
        result = swap_partitions(batch_df(spark, {(today(0),): 1}, "b"), table)
        assert lineage_events.flush(60)
        got = list(receiver.events)
    for event in got:
        validate(event)
    assert [e["eventType"] for e in got] == ["START", "COMPLETE"]
    assert got[1]["run"]["runId"] == lineage_events.run_id_of(result.swap_id)
    for event in got:
        (out,) = event["outputs"]
        bucket, prefix = root.split("/", 3)[2:]  # root: s3://BUCKET/PREFIX
        assert (out["namespace"], out["name"]) == (f"s3://{bucket}", f"{prefix}/events")
        assert out["facets"]["symlinks"]["identifiers"] == [
            {"namespace": f"arn:aws:glue:{REGION}:{account}", "name": f"table/{gdb}/events", "type": "TABLE"}]


def test_swap_table_on_glue_repoints_the_table_and_refuses_an_empty_batch(spark, glue, gdb, root, glue_env):
    table = create_glue_table(glue, gdb, f"{root}/dim", name="dim", partitioned=False)
    first = swap_table(batch_df(spark, {("x",): 3}, "one").drop("dt"), table)
    assert table_view(spark, glue, gdb, "dim") == (3, ("one",))
    second = swap_table(batch_df(spark, {("x",): 5}, "two").drop("dt"), table)
    assert table_view(spark, glue, gdb, "dim") == (5, ("two",))
    raw = glue.get_table(DatabaseName=gdb, Name="dim")["Table"]
    assert raw["Parameters"][SWAP_ID_PARAM] == second.swap_id
    assert raw["StorageDescriptor"]["Location"].startswith(f"{root}/dim/_tableswap/")
    assert first.swap_id != second.swap_id and glue_tables(glue, gdb) == ["dim"]
    before = snapshot(glue, gdb)
    empty = batch_df(spark, {}, "none").drop("dt")
    with pytest.raises(errors.EmptyBatchError, match="would empty the table"):
        swap_table(empty, table)
    assert snapshot(glue, gdb) == before
    # On purpose, it is allowed.
    swap_table(empty, table, allow_empty=True)
    assert table_view(spark, glue, gdb, "dim") == (0, ())


def test_rollback_and_read_as_of_on_glue(spark, glue, gdb, root, glue_env):
    from tableswap.ops.restore.rollback import rollback

    table = create_glue_table(glue, gdb, f"{root}/events")
    first = swap_partitions(batch_df(spark, {(today(0),): 2, (today(1),): 2}, "one"), table)
    swap_partitions(batch_df(spark, {(today(0),): 4, (today(5),): 1}, "two"), table)
    assert glue_view(spark, glue, gdb)[(today(0),)] == (4, ("two",))

    past = read_as_of(spark, table, swap_id=first.swap_id)
    assert sorted((r["dt"], r["batch"]) for r in past.groupBy("dt", "batch").count().collect()) == [
        (today(0), "one"), (today(1), "one")]
    assert [f.name for f in past.schema.fields] == ["id", "value", "batch", "dt"]

    rollback(table)
    assert glue_view(spark, glue, gdb) == {(today(0),): (2, ("one",)), (today(1),): (2, ("one",))}
    assert glue_tables(glue, gdb) == ["events"]


def test_a_group_of_glue_tables_is_audited_and_commits_as_one_unit(spark, glue, gdb, root, glue_env):
    """A swap group on Glue (docs/groups.md): its audit reads the staged batches from their files (Spark's own
    catalog does not know Glue tables), its commit takes every table's lease in one order and flips both; a
    refused audit changes neither table."""
    from tableswap import AuditFailedError, swap_group
    from tableswap.journal.groups import GroupLog

    events = create_glue_table(glue, gdb, f"{root}/events")
    dim = create_glue_table(glue, gdb, f"{root}/dim", name="dim", partitioned=False)
    swap_partitions(batch_df(spark, {(today(0),): 2}, "old"), events)
    swap_table(batch_df(spark, {("x",): 2}, "old").drop("dt"), dim)
    before = snapshot(glue, gdb)
    with pytest.raises(AuditFailedError, match="refused it"):
        with swap_group(audit=lambda frames: frames[dim].count() > 5) as refused:
            refused.swap_partitions(batch_df(spark, {(today(0),): 3}, "new"), events)
            refused.swap_table(batch_df(spark, {("x",): 3}, "new").drop("dt"), dim)
    assert {t: v for t, v in snapshot(glue, gdb).items() if "__tswap_" not in t} == before
    seen = {}

    def no_old_rows(frames):  # the staged batches, read from their files
        seen.update({t: sorted({r["batch"] for r in df.collect()}) for t, df in frames.items()})
        return all(b == ["new"] for b in seen.values())

    with swap_group(f"glue-{gdb}", audit=no_old_rows) as g:
        g.swap_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 1}, "new"), events)
        g.swap_table(batch_df(spark, {("x",): 4}, "new").drop("dt"), dim)

    assert seen == {events: ["new"], dim: ["new"]}
    assert set(g.result) == {events, dim}
    assert glue_view(spark, glue, gdb) == {(today(0),): (3, ("new",)), (today(1),): (1, ("new",))}
    assert table_view(spark, glue, gdb, "dim") == (4, ("new",))
    record = GroupLog(Journal(glue_env["TABLESWAP_JOURNAL_URL"])).get(g.group_id)
    assert record.state == "committed" and {m.catalog for m in record.members} == {"glue"}
    left = set(glue_tables(glue, gdb))
    assert not {temp_table_name(t.split(".")[1], s.swap_id) for t, s in g.staged.items()} & left  # dropped


def test_a_group_mixing_a_hive_metastore_table_and_a_glue_table_is_refused(spark, glue, gdb, root, glue_env, db,
                                                                          tmp_path, metastore_uri):
    """A group's tables are locked and flipped through one catalog: a group whose members were staged in the Hive
    Metastore and in Glue, or a Glue group published through the Hive Metastore, is refused before anything is
    written; nothing changed, the group still staged."""
    from tableswap import publish_group, stage_group, stage_partitions
    from tableswap.journal.groups import GroupLog

    from ..support.helpers import create_events, reader_view

    hive_events = create_events(spark, db, tmp_path)
    glue_events = create_glue_table(glue, gdb, f"{root}/events")
    on_hive = stage_partitions(batch_df(spark, {(today(0),): 2}, "new"), hive_events, metastore_uri=metastore_uri)
    on_glue = stage_partitions(batch_df(spark, {(today(0),): 2}, "new"), glue_events)
    journal = Journal(glue_env["TABLESWAP_JOURNAL_URL"])
    groups, group_id = GroupLog(journal), f"g-mixed-{gdb}"
    groups.create(group_id, None, "swap")
    groups.add_member(group_id, on_hive.swap_id, db, "events", catalog="hive-metastore")
    groups.add_member(group_id, on_glue.swap_id, gdb, "events", catalog="glue")
    before = snapshot(glue, gdb), reader_view(spark, hive_events)
    for uri in (None, metastore_uri):  # through either catalog
        with pytest.raises(errors.InvalidInputError, match="mixes catalogs") as refused:
            publish_group(group_id, metastore_uri=uri)
        assert f"{hive_events} in hive-metastore" in str(refused.value) and "Nothing was changed" in str(refused.value)
    spark.catalog.refreshTable(hive_events)
    assert (snapshot(glue, gdb), reader_view(spark, hive_events)) == before
    assert groups.get(group_id).state == "open"
    assert {journal.get_swap(s.swap_id).state for s in (on_hive, on_glue)} == {"staged"}

    with stage_group() as g:  # a Glue group
        g.swap_partitions(batch_df(spark, {(today(1),): 1}, "g"), glue_events)
    with pytest.raises(errors.InvalidInputError, match="staged in the glue catalog"):
        publish_group(g.group_id, metastore_uri=metastore_uri)  # through the Hive Metastore
    assert groups.get(g.group_id).state == "open"
    assert {t: v for t, v in snapshot(glue, gdb).items() if "__tswap_" not in t} == {
        t: v for t, v in before[0].items() if "__tswap_" not in t}


def test_a_spark_schema_stored_by_the_table_is_used_and_columns_are_aligned_by_name(spark, glue, gdb, root,
                                                                                    glue_env):
    """The DataFrame's columns in another order, an int widened to the table's bigint: aligned as on HMS."""
    table = create_glue_table(glue, gdb, f"{root}/events")
    df = batch_df(spark, {(today(0),): 2}, "x")
    shuffled = df.select("batch", "dt", df["id"].cast("int").alias("id"), "value")
    swap_partitions(shuffled, table)
    assert glue_view(spark, glue, gdb) == {(today(0),): (2, ("x",))}
    data = spark.read.parquet(partitions(glue, gdb)[(today(0),)]["StorageDescriptor"]["Location"])
    assert [(f.name, f.dataType.simpleString()) for f in data.schema.fields] == [
        ("id", "bigint"), ("value", "string"), ("batch", "string")]


# --------------------------------------------------------------------------- bad input
def test_bad_input_on_glue_is_a_clear_error_and_changes_nothing(spark, glue, gdb, root, glue_env):
    table = create_glue_table(glue, gdb, f"{root}/events")
    swap_partitions(batch_df(spark, {(today(0),): 1}, "old"), table)
    create_glue_table(glue, gdb, f"{root}/managed", name="managed", table_type="MANAGED_TABLE")
    create_glue_table(glue, gdb, f"{root}/bucketed", name="bucketed", buckets=4)
    create_glue_table(glue, gdb, f"{root}/odd", name="odd",
                      columns=[*COLUMNS[:2], {"Name": "batch", "Type": "no_such_type<int>"}])
    before = snapshot(glue, gdb)
    journal = Journal(glue_env["TABLESWAP_JOURNAL_URL"])
    swaps_before = len(journal.list_swaps(gdb, "events"))
    good = batch_df(spark, {(today(0),): 1}, "new")
    cases = [
        (good.withColumn("extra", good["id"]), table, errors.SchemaMismatchError, "not in the table: 'extra'"),
        (good.drop("value"), table, errors.SchemaMismatchError, "missing column 'value'"),
        (good.withColumn("id", good["value"]), table, errors.SchemaMismatchError, "is string in the DataFrame"),
        (good, f"{gdb}.nope", errors.TableNotFoundError, f"table {gdb}.nope does not exist"),
        (good, f"nodb_{uuid.uuid4().hex[:6]}.events", errors.TableNotFoundError, "database"),
        (good, f"{gdb}.managed", errors.UnsupportedTableError, "EXTERNAL"),
        (good, f"{gdb}.bucketed", errors.UnsupportedTableError, "as plain files"),
        (good, f"{gdb}.odd", errors.UnsupportedTableError, "Spark cannot read the catalog's column types"),
        (batch_df(spark, {}, "none"), table, errors.EmptyBatchError, "has no rows"),
    ]
    for df, target, kind, text in cases:
        with pytest.raises(kind) as info:
            swap_partitions(df, target)
        assert text in str(info.value), (target, str(info.value))
        assert "\n" not in str(info.value).strip()
    assert snapshot(glue, gdb) == before
    # Nothing staged is left on S3 either: every staging directory of the refused swaps was removed.
    fs, path = storage.filesystem(f"{root}/events/_tableswap")
    left = [p for p in fs.find(path) if not p.endswith("/")]
    committed = journal.list_swaps(gdb, "events")
    assert all(any(s.swap_id in p for s in committed if s.state == "committed") for p in left), left
    assert len(committed) >= swaps_before


def test_a_table_without_a_location_is_refused(spark, glue, gdb, root, glue_env):
    """A Glue table with no location at all cannot be swapped: there is no root to stage under."""
    glue.create_table(DatabaseName=gdb, TableInput={
        "Name": "noloc", "TableType": "EXTERNAL_TABLE",
        "StorageDescriptor": {**PARQUET, "Columns": COLUMNS},
        "PartitionKeys": [{"Name": "dt", "Type": "string"}], "Parameters": {"EXTERNAL": "TRUE"}})
    before = snapshot(glue, gdb)
    with pytest.raises(errors.TableSwapError) as info:
        swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), f"{gdb}.noloc")
    assert "location" in str(info.value).lower()
    assert snapshot(glue, gdb) == before


def test_the_temporary_table_is_marked_while_the_swap_runs(spark, glue, gdb, root, glue_env, monkeypatch):
    """While Spark writes, the swap's temporary table exists in Glue, marked as the target's (what recover and
    the janitor's sweep look for after a crash)."""
    from tableswap.ops.write import swap as swap_module

    table = create_glue_table(glue, gdb, f"{root}/events")
    seen: dict[str, Any] = {}
    real = swap_module.crash_point

    def look(name: str) -> None:
        if name == "after_staging_write":
            temps = [t for t in glue.get_tables(DatabaseName=gdb)["TableList"] if t["Name"] != "events"]
            seen["temps"] = [(t["Name"], t.get("Parameters", {}).get(TEMP_FOR_PARAM)) for t in temps]
        real(name)

    monkeypatch.setattr(swap_module, "crash_point", look)
    result = swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), table)
    (name, marked_for), = seen["temps"]
    assert name == temp_table_name("events", result.swap_id)
    assert marked_for == table
    assert glue_tables(glue, gdb) == ["events"]


# --------------------------------------------------------------------------- the on-call engineer's CLI
def cli(*args: str, expect: int = 0) -> Any:
    import json

    from click.testing import CliRunner

    from tableswap.cli import main

    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == expect, f"exit {result.exit_code}: {result.output}"
    return json.loads(result.stdout)


def test_the_cli_on_a_glue_table(spark, glue, gdb, root, glue_env):
    """history, show, repair, rollback, recover and the janitor, as the on-call engineer runs them, with the
    metastore URI ``glue://REGION`` from the environment."""
    table = create_glue_table(glue, gdb, f"{root}/events")
    first = swap_partitions(batch_df(spark, {(today(0),): 2, (today(1),): 2}, "one"), table)
    second = swap_partitions(batch_df(spark, {(today(0),): 4}, "two"), table)
    history = cli("history", table)
    assert [h["swap_id"] for h in history["swaps"]] == [second.swap_id, first.swap_id]
    assert history["metastore"] == {"uri": f"glue://{REGION}", "source": "env TABLESWAP_METASTORE_URI", "used": True}
    shown = {p["partition"]: p for p in cli("show", table)["partitions"]}
    assert shown[f"dt={today(0)}"]["set_by"] == second.swap_id and shown[f"dt={today(0)}"]["can_roll_back"]
    # Roll back the second swap: its directory is displaced, the first swap's is live again.
    second_dir = partitions(glue, gdb)[(today(0),)]["StorageDescriptor"]["Location"]
    rolled = cli("rollback", table, "--yes")
    assert rolled["kind"] == "rollback" and rolled["rollback_of"] == second.swap_id
    assert glue_view(spark, glue, gdb) == {(today(0),): (2, ("one",)), (today(1),): (2, ("one",))}
    run = cli("janitor", "run", "--grace", "0s", "--force-short-grace", "--table", table)
    displaced = [o["location"] for o in run["outcomes"] if o["kind"] == "displaced"]
    assert displaced == [second_dir] and {o["outcome"] for o in run["outcomes"]} == {"deleted"}, run
    fs, path = storage.filesystem(second_dir)
    assert not fs.exists(path)
    assert glue_view(spark, glue, gdb) == {(today(0),): (2, ("one",)), (today(1),): (2, ("one",))}
    # A hand-made change: someone points a partition elsewhere; repair puts it back where tableswap left it.
    live = partitions(glue, gdb)[(today(1),)]
    elsewhere = f"{root}/elsewhere/dt={today(1)}"
    glue.update_partition(DatabaseName=gdb, TableName="events", PartitionValueList=[today(1)], PartitionInput={
        "Values": [today(1)], "StorageDescriptor": {**live["StorageDescriptor"], "Location": elsewhere},
        "Parameters": live.get("Parameters", {})})
    plan = cli("repair", table, "--dry-run")
    assert plan["dry_run"] and [(i["partition"], i["action"]) for i in plan["plan"]["items"]] == [
        (f"dt={today(0)}", "leave"), (f"dt={today(1)}", "repoint")]
    assert partitions(glue, gdb)[(today(1),)]["StorageDescriptor"]["Location"] == elsewhere  # a dry run
    repaired = cli("repair", table, "--yes")
    assert [c["partition"] for c in repaired["result"]["replaced"]] == [f"dt={today(1)}"]
    assert partitions(glue, gdb)[(today(1),)]["StorageDescriptor"]["Location"] == live["StorageDescriptor"]["Location"]
    # Rolling back the repair would point the partition at a directory that does not exist: refused.
    refused = cli("rollback", table, "--yes", expect=5)
    assert refused["error_type"] == "UnsafeOperationError" and "no longer exists" in refused["error"]
    assert cli("recover", "--table", table)["resolutions"] == []
    status = cli("janitor", "status", "--table", table)
    assert status["last_successful_run"]["deleted"] == 2
    assert status["pending"]["count"] == 1 and status["pending"]["oldest"]["location"] == elsewhere


# --------------------------------------------------------------------------- the bad-input suite, on Glue
#: Cases of tests/integration/test_bad_input.py that name a Thrift metastore URI of their own (they never reach Glue).
THRIFT_ONLY = {"port-that-is-not-a-metastore", "metastore-unreachable", "non-thrift-metastore-uri"}


@pytest.fixture(scope="module")
def hostile_target(spark, s3_endpoint, tmp_path_factory) -> tuple[str, Any]:
    """``DB.events`` in Glue with two partitions (Spark's files, registered by hand), a local root: shared by the
    bad-input cases, each of which must leave it exactly as it was."""
    import boto3

    glue = boto3.client("glue", endpoint_url=s3_endpoint.url, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY)
    db, root = f"tsgh_{uuid.uuid4().hex[:10]}", tmp_path_factory.mktemp("glue-hostile")
    glue.create_database(DatabaseInput={"Name": db})
    create_glue_table(glue, db, (root / "events").as_uri())
    for day in (today(0), today(1)):
        location = (root / "events" / f"dt={day}").as_uri()
        batch_df(spark, {(day,): 3}, "initial").drop("dt").write.parquet(location)
        glue.create_partition(DatabaseName=db, TableName="events", PartitionInput={
            "Values": [day], "StorageDescriptor": {**PARQUET, "Columns": COLUMNS, "Location": location}})
    return db, root


@pytest.mark.hostile
@pytest.mark.parametrize("case", sorted(set(BAD_INPUT) - THRIFT_ONLY))
def test_the_bad_input_suite_on_glue_is_a_clear_error_and_changes_nothing(case, spark, glue, hostile_target,
                                                                          glue_env):
    """tests/integration/test_bad_input.py's cases with ``glue://`` as the metastore: the same error type and text, Glue's
    tables and partitions and the files under the root unchanged, no temporary table left."""
    from ..support.helpers import file_tree

    db, root = hostile_target
    exc_type, message, call = BAD_INPUT[case]
    before = snapshot(glue, db), file_tree(root)
    with pytest.raises(exc_type, match=re.escape(message)) as info:
        call(spark, db)
    assert isinstance(info.value, errors.TableSwapError)
    if type(info.value).__name__ in TABLE_ERRORS:  # errors about one table carry it (--json shows it)
        assert info.value.to_dict()["table"].endswith(".events") or "nope" in info.value.table, info.value
    assert (snapshot(glue, db), file_tree(root)) == before
    assert glue_tables(glue, db) == ["events"]


@pytest.mark.hostile
def test_an_unreachable_glue_endpoint_is_a_retryable_error_and_a_bad_glue_uri_a_configuration_error(
        spark, glue, hostile_target, glue_env, monkeypatch):
    from .test_bad_input import _free_port

    db, root = hostile_target
    df = batch_df(spark, {(today(0),): 1}, "x")
    with pytest.raises(errors.ConfigurationError, match="glue://"):
        swap_partitions(df, f"{db}.events", metastore_uri="glue://us-east-1/extra")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")
    with pytest.raises(errors.CatalogUnavailableError) as info:
        swap_partitions(df, f"{db}.events", connect_attempts=2)
    assert info.value.retryable
