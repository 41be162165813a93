"""Issue 21: a swapped table whose metastore entry is lost (dropped and re-created, then MSCK REPAIR) is put
back by `tableswap repair`, from the journal or from the recovery manifests alone; against the real
metastore and SparkSession."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import click.testing
import pytest
from click.testing import CliRunner

from tableswap import SwapResult, storage, swap_partitions, swap_table
from tableswap.cli import main
from tableswap.core import locations as loc
from tableswap.core import manifest as mf
from tableswap.journal import Journal
from tableswap.core.catalog import SWAP_ID_PARAM
from tableswap.errors import UnsafeOperationError
from tableswap.ops import commit as commit_module
from tableswap.ops import manifests
from tableswap.ops.janitor.run import run_janitor
from tableswap.ops.restore.recover import recover
from tableswap.ops.restore.repair import repair

from ..support.helpers import batch_df, create_events, metastore_snapshot, partition_locations, queue_deletions_by_hand

pytestmark = pytest.mark.integration

BEFORE_DROP = {("d1",): (10, ("init",)), ("d2",): (5, ("new",)), ("d3",): (5, ("new",))}
AFTER_MSCK = {("d1",): (10, ("init",)), ("d2",): (10, ("init",))}


def cli(*args: str, expect: int = 0):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == expect, f"exit {result.exit_code}: {result.output}"
    return result


def view(spark, table: str) -> dict[tuple, tuple[int, tuple[str, ...]]]:
    spark.sql(f"REFRESH TABLE {table}")
    return {(r["dt"],): (r["n"], tuple(r["b"])) for r in spark.sql(
        f"SELECT dt, count(*) AS n, sort_array(collect_set(batch)) AS b FROM {table} GROUP BY dt").collect()}


def lose_the_entry(spark, db: str, root: Path | str, *, msck: bool = True) -> str:
    """What a re-deploy does: drop the table's entry (EXTERNAL: data kept), create it again with the same
    DDL and location, and run the usual MSCK REPAIR TABLE."""
    table = f"{db}.events"
    spark.sql(f"DROP TABLE {table}")
    create_events(spark, db, root)
    if msck:
        spark.sql(f"MSCK REPAIR TABLE {table}")
    return table


def issue_sequence(spark, db: str, root: Path | str):
    """The issue's table: days d1, d2 written by Spark; a swap replaces d2 and adds d3; then the entry is lost."""
    table = create_events(spark, db, root)
    batch_df(spark, {("d1",): 10, ("d2",): 10}, "init").write.insertInto(table)
    swap = swap_partitions(batch_df(spark, {("d2",): 5, ("d3",): 5}, "new"), table)
    assert view(spark, table) == BEFORE_DROP
    lose_the_entry(spark, db, root)
    assert view(spark, table) == AFTER_MSCK  # the issue: d2 silently reverted, d3 gone
    return table, swap


def test_repair_from_the_journal_restores_the_rows_and_is_reversible(spark, db, tmp_path, hms, ts_env):
    table, swap = issue_sequence(spark, db, tmp_path)
    d1_before = partition_locations(hms, db, "events")[("d1",)]

    dry = cli("repair", table, "--dry-run")
    assert "repoint  dt=d2 -> " + swap.replaced[0].new_location in dry.output
    assert "add      dt=d3 -> " in dry.output and "[exists]" in dry.output
    assert "1 partition(s) tableswap never touched: left alone" in dry.output
    assert "dry run: nothing was changed" in dry.output
    snapshot = metastore_snapshot(hms, db)
    assert view(spark, table) == AFTER_MSCK and metastore_snapshot(hms, db) == snapshot

    done = json.loads(cli("repair", table, "--yes", "--json").output)
    assert done["result"]["kind"] == "repair" and done["plan"]["source"] == "journal"
    assert [c["partition"] for c in done["result"]["added"]] == ["dt=d3"]
    assert [c["partition"] for c in done["result"]["replaced"]] == ["dt=d2"]
    assert view(spark, table) == BEFORE_DROP
    parts = {p.values: p for p in hms.list_partitions(db, "events")}
    assert loc.normalize(parts[("d1",)].location) == d1_before and SWAP_ID_PARAM not in parts[("d1",)].parameters
    assert parts[("d2",)].parameters[SWAP_ID_PARAM] == done["result"]["swap_id"]
    # Nothing left to do; MSCK's d2 directory is queued for the janitor again.
    assert "nothing to do" in cli("repair", table, "--dry-run").output
    pending = {loc.normalize(d.location) for d in Journal(ts_env["TABLESWAP_JOURNAL_URL"]).deletions_of(db, "events")
               if d.swap_id == done["result"]["swap_id"]}
    assert pending == {d1_before.replace("dt=d1", "dt=d2")}

    # A repair is a swap like any other: rollback undoes it.
    undo = json.loads(cli("rollback", table, "--yes", "--json").output)
    assert undo["rollback_of"] == done["result"]["swap_id"]
    assert view(spark, table) == AFTER_MSCK


def on_a_terminal(monkeypatch):
    """The CLI runner's stdin as a terminal, so that the command asks (its answer is the runner's ``input``)."""
    monkeypatch.setattr(click.testing._NamedTextIOWrapper, "isatty", lambda self: self.name == "<stdin>")


def test_repair_asks_like_rollback_and_its_dry_run_returns_what_the_real_run_returns(spark, db, tmp_path, hms,
                                                                                    ts_env, monkeypatch):
    """Issue 54: `tableswap repair` repairs when asked (it used to be a dry run unless --yes): it shows its plan and
    asks on a terminal, --yes skips the question, and with --json or without a terminal it needs --yes or --dry-run
    (exit 2, nothing changed). Its dry run returns what its real run returns (a SwapResult of kind repair, marked as
    a dry run), holding the plan and the repair's items."""
    table, swap = issue_sequence(spark, db, tmp_path)
    snapshot = metastore_snapshot(hms, db)
    hint = "--dry-run to see the plan, --yes to apply"

    no_terminal = cli("repair", table, expect=2)
    assert hint in no_terminal.output and "nothing was changed" in no_terminal.output
    as_json = json.loads(cli("repair", table, "--json", expect=2).stdout)
    assert as_json["error_type"] == "UsageError" and hint in as_json["error"]
    assert metastore_snapshot(hms, db) == snapshot

    dry = json.loads(cli("repair", table, "--dry-run", "--json").stdout)
    assert dry["ok"] and dry["dry_run"] and dry["result"]["dry_run"] and dry["result"]["kind"] == "repair"
    assert [c["partition"] for c in dry["result"]["added"]] == ["dt=d3"]
    assert [c["partition"] for c in dry["result"]["replaced"]] == ["dt=d2"]
    assert {i["partition"]: i["action"] for i in dry["result"]["repair"]["items"]} == {"dt=d2": "repoint",
                                                                                      "dt=d3": "add"}
    assert dry["plan"] == dry["result"]["repair"]
    library = repair(table, dry_run=True)
    assert isinstance(library, SwapResult) and library.dry_run and library.kind == "repair"
    assert library.repair is not None and [i.partition for i in library.repair.items] == ["dt=d2", "dt=d3"]
    assert [c.partition for c in library.replaced] == ["dt=d2"] and library.state_token is None
    assert metastore_snapshot(hms, db) == snapshot

    on_a_terminal(monkeypatch)
    declined = CliRunner().invoke(main, ["repair", table], input="n\n", catch_exceptions=False)
    assert declined.exit_code == 1 and "repoint  dt=d2" in declined.output and "Repair " in declined.output
    assert metastore_snapshot(hms, db) == snapshot and view(spark, table) == AFTER_MSCK

    agreed = CliRunner().invoke(main, ["repair", table], input="y\n", catch_exceptions=False)
    assert agreed.exit_code == 0, agreed.output
    assert "repaired " in agreed.output and view(spark, table) == BEFORE_DROP


def test_repair_from_storage_after_the_journal_is_lost(spark, db, tmp_path, hms, ts_env, monkeypatch):
    table, swap = issue_sequence(spark, db, tmp_path)
    manifest = manifests.read(mf.manifest_location(str(tmp_path / "events"), swap.swap_id))
    assert manifest is not None and manifest.state == "committed" and manifest.qualified_name == table
    assert {c.partition: c.action for c in manifest.changes} == {"dt=d2": "replace", "dt=d3": "add"}

    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", f"sqlite:///{tmp_path / 'new-journal.db'}")  # the journal is gone
    # A missing journal is an error (never created by a dry run), with the way out.
    assert "try --from-storage" in cli("repair", table, "--dry-run", expect=1).output
    dry = cli("repair", table, "--from-storage", "--dry-run")
    assert "from the storage (1 committed swap(s) replayed)" in dry.output and view(spark, table) == AFTER_MSCK
    cli("repair", table, "--from-storage", "--yes")
    assert view(spark, table) == BEFORE_DROP
    # The repair is journaled in the new journal (and reversible there) and wrote its own manifest.
    [record] = Journal(f"sqlite:///{tmp_path / 'new-journal.db'}").list_swaps(db, "events")
    assert record.kind == "repair" and record.state == "committed"
    own = manifests.read(mf.manifest_location(str(tmp_path / "events"), record.swap_id))
    assert own is not None and own.state == "committed" and own.kind == "repair"
    cli("rollback", table, "--yes")
    assert view(spark, table) == AFTER_MSCK


def test_a_location_the_janitor_deleted_is_refused_and_the_rest_can_be_repaired(spark, db, tmp_path, hms, ts_env):
    table, swap = issue_sequence(spark, db, tmp_path)
    d3 = next(c.new_location for c in swap.added)
    # Queued for deletion (as a displaced location), then deleted by a real janitor run: after the loss
    # nothing references it, so the janitor may.
    queue_deletions_by_hand(ts_env["TABLESWAP_JOURNAL_URL"], db, "events", str(tmp_path / "events"), [d3])
    assert loc.normalize(d3) in {o.location for o in run_janitor(table=table, dry_run=False).deleted}
    snapshot = metastore_snapshot(hms, db)

    refused = cli("repair", table, "--yes", expect=5)
    assert "dt=d3: deleted by the janitor" in refused.output and "Nothing was changed" in refused.output
    assert "1 other partition(s) can be restored: rerun with --skip-missing" in refused.output
    # A dry run refuses as the real run would (exit 5, the plan in the document; the library raises).
    dry = json.loads(cli("repair", table, "--dry-run", "--json", expect=5).stdout)
    assert not dry["ok"] and dry["error_type"] == "UnsafeOperationError" and dry["plan"]["problems"]
    with pytest.raises(UnsafeOperationError, match="deleted by the janitor"):
        repair(table, dry_run=True)
    assert metastore_snapshot(hms, db) == snapshot
    cli("repair", table, "--skip-missing", "--yes")
    assert view(spark, table) == {("d1",): (10, ("init",)), ("d2",): (5, ("new",))}


def test_repair_an_unpartitioned_table_and_partitions_never_swapped(spark, db, tmp_path, hms, ts_env, monkeypatch):
    location = (tmp_path / "dim").as_uri()
    spark.sql(f"CREATE TABLE {db}.dim (id bigint, batch string) USING parquet LOCATION '{location}'")
    spark.createDataFrame([(1, "init")], "id bigint, batch string").write.insertInto(f"{db}.dim")
    swap = swap_table(spark.createDataFrame([(1, "new"), (2, "new")], "id bigint, batch string"), f"{db}.dim")
    spark.sql(f"DROP TABLE {db}.dim")
    spark.sql(f"CREATE TABLE {db}.dim (id bigint, batch string) USING parquet LOCATION '{location}'")
    assert sorted(r["batch"] for r in spark.table(f"{db}.dim").collect()) == ["init"]

    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", f"sqlite:///{tmp_path / 'empty.db'}")
    out = cli("repair", f"{db}.dim", "--from-storage", "--yes")
    assert "REFRESH TABLE" in out.output
    assert loc.same(hms.get_table(db, "dim").location, swap.staging_location)
    spark.sql(f"REFRESH TABLE {db}.dim")
    assert sorted(r["batch"] for r in spark.table(f"{db}.dim").collect()) == ["new", "new"]


def test_crash_before_the_manifest_is_finished_never_claims_more(spark, db, tmp_path, hms, ts_env, monkeypatch):
    """A swap killed after its flip, before its manifest says committed: replay from storage takes only what the
    metastore's stamps show; `tableswap recover` finishes the manifest."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {("d1",): 10, ("d2",): 10}, "init").write.insertInto(table)
    first = swap_partitions(batch_df(spark, {("d2",): 5}, "new"), table)
    real = commit_module.crash_point

    def crash_after_flip(name: str) -> None:
        if name == "after_alter":
            raise SystemExit("killed after the flip")
        real(name)

    monkeypatch.setattr(commit_module, "crash_point", crash_after_flip)
    with pytest.raises(SystemExit):
        swap_partitions(batch_df(spark, {("d2",): 3, ("d3",): 3}, "crashed"), table)
    monkeypatch.setattr(commit_module, "crash_point", real)
    [crashed] = [r for r in Journal(ts_env["TABLESWAP_JOURNAL_URL"]).list_swaps(db, "events")
                 if r.swap_id != first.swap_id]
    root = str(tmp_path / "events")
    assert crashed.state == "pending" and manifests.read(mf.manifest_location(root, crashed.swap_id)).state == "intent"

    manifest_file = Path(mf.manifest_location(root, crashed.swap_id))
    intent_text = manifest_file.read_text()

    # With the metastore intact the stamps show the crashed swap landed: the replay takes it.
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", f"sqlite:///{tmp_path / 'other.db'}")
    out = cli("repair", table, "--from-storage", "--dry-run")
    assert f"swap {crashed.swap_id} never finished (manifest state intent): 2 of its 2" in out.output
    assert "nothing to do" in out.output
    # `tableswap recover` (with the swap's journal) commits it and finishes its manifest.
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", ts_env["TABLESWAP_JOURNAL_URL"])
    [resolution] = recover(table).resolutions
    assert resolution.outcome == "committed"
    assert manifests.read(mf.manifest_location(root, crashed.swap_id)).state == "committed"

    # Killed after the journal's commit but before the manifest's (the intent file as it was left), then the
    # entry lost (stamps gone): the replay does not claim the swap; the last finished state comes back.
    manifest_file.write_text(intent_text)
    lose_the_entry(spark, db, tmp_path)
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", f"sqlite:///{tmp_path / 'other.db'}")
    out = cli("repair", table, "--from-storage", "--yes")
    assert f"swap {crashed.swap_id} never finished (manifest state intent): 0 of its 2" in out.output
    assert view(spark, table) == {("d1",): (10, ("init",)), ("d2",): (5, ("new",))}
    # The journal knows better: with it, the crashed (since committed) swap comes back whole.
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", ts_env["TABLESWAP_JOURNAL_URL"])
    assert "repoint  dt=d2" in cli("repair", table, "--dry-run").output


def test_janitor_keeps_manifests_in_use_and_never_deletes_one_as_data(spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {("d1",): 2, ("d2",): 2}, "init").write.insertInto(table)
    swap = swap_partitions(batch_df(spark, {("d2",): 1}, "new"), table)
    rolled = json.loads(cli("rollback", table, "--yes", "--json").output)
    root = str(tmp_path / "events")
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=30)
    for _ in range(2):  # the displaced data, then the empty remains of its directory
        run_janitor(table=table, grace="1s", force_short_grace=True, now=later, dry_run=False)
    # The swap's data was displaced by the rollback and deleted; the rollback's manifest names d2's live
    # location, so it stays; the swap's manifest went with its empty directory.
    assert not storage.exists(swap.replaced[0].new_location)
    assert manifests.read(mf.manifest_location(root, rolled["swap_id"])) is not None
    assert not Path(root, "_tableswap", swap.swap_id).exists()
    # A swap directory the journal does not know, holding live data and its manifest: the janitor's orphan
    # sweep deletes none of it, the manifest included.
    kept = swap_partitions(batch_df(spark, {("d1",): 1}, "kept"), table)
    Journal(ts_env["TABLESWAP_JOURNAL_URL"]).finish(kept.swap_id, state="failed")  # as if unknown / not committed
    run_janitor(table=table, grace="1s", force_short_grace=True, now=later, dry_run=False)
    assert manifests.read(mf.manifest_location(root, kept.swap_id)) is not None
    assert storage.exists(kept.added[0].new_location if kept.added else kept.replaced[0].new_location)


def test_doctor_warns_what_msck_repair_would_do(spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {("d1",): 2, ("d2",): 2}, "init").write.insertInto(table)
    before = json.loads(cli("doctor", "--table", table, "--json").output)
    assert [c["status"] for c in before["checks"] if c["name"] == "recovery"] == ["ok"]
    swap_partitions(batch_df(spark, {("d2",): 1, ("d3",): 1}, "new"), table)
    report = json.loads(cli("doctor", "--table", table, "--json").output)
    [check] = [c for c in report["checks"] if c["name"] == "recovery"]
    assert check["status"] == "warn" and f"tableswap repair {table}" in check["fix"]
    assert [x.split(" ")[0] for x in check["facts"]["reverts"]] == ["dt=d2"]
    assert check["facts"]["vanishes"] == ["dt=d3"] and check["facts"]["without_manifest"] == []
    text = cli("doctor", "--table", table).output
    assert "MSCK REPAIR TABLE would revert 1 partition(s)" in text and "do NOT run MSCK REPAIR TABLE" in text


def test_repair_from_storage_on_s3a(spark, db, s3root, hms, ts_env, tmp_path, monkeypatch):
    """The same sequence on an object store (moto's S3 on loopback): manifests written and replayed through s3a."""
    table, swap = issue_sequence(spark, db, s3root)
    root = loc.join(s3root, "events")
    assert manifests.read(mf.manifest_location(root, swap.swap_id)).state == "committed"
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", f"sqlite:///{tmp_path / 'new-journal.db'}")
    plan = json.loads(cli("repair", table, "--from-storage", "--dry-run", "--json").output)["plan"]
    assert {i["partition"]: (i["action"], i["exists"]) for i in plan["items"]} == {
        "dt=d2": ("repoint", True), "dt=d3": ("add", True)}
    cli("repair", table, "--from-storage", "--yes")
    assert view(spark, table) == BEFORE_DROP
