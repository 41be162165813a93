"""``tableswap janitor status`` on a real journal (SQLite and PostgreSQL): recent runs, pending count and bytes
(recorded when a swap wrote the location, unknown otherwise, ``--measure`` listing storage for the rest), the
oldest pending entry, the backlog past grace (``--grace``, ``[janitor] grace``, 24h), refusals with their
reasons, ``--table``; it reads the journal only (no metastore) and never creates one. A journal of the
schema before sizes were recorded is migrated without losing a row. Real swaps (Spark, the metastore)
carry the sizes of what they wrote to the queue."""

from __future__ import annotations

import datetime as dt
import json
import os

from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from tableswap.cli import main
from tableswap.cli.common import human_bytes
from tableswap.core import locations as loc
from tableswap.journal import Journal
from tableswap.journal import db as journal_db
from tableswap.journal.queue import JanitorQueue
from tableswap.journal.store import STAGING, PartitionChange, SwapRecord, utcnow


def ago(hours: float) -> str:
    return (dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=hours)).isoformat(timespec="microseconds")


def committed(journal: Journal, swap_id: str, table: str, displaced: list[tuple[str, str]], queued_hours_ago: float):
    journal.begin_swap(SwapRecord(swap_id=swap_id, db_name="db", table_name=table, kind="partitions", state=STAGING,
                                  table_root=f"file:/w/{table}", started_at=utcnow(), user_name="me", host_name="h"))
    journal.record_intent(swap_id, [PartitionChange(p, "replace", old, f"{old}_new") for p, old in displaced])
    journal.commit(swap_id, displaced)
    with journal.engine.begin() as conn:
        conn.execute(sa.text("UPDATE tableswap_deletions SET queued_at = :t WHERE swap_id = :s"),
                     {"t": ago(queued_hours_ago), "s": swap_id})


@pytest.fixture
def status_journal_env(any_journal_url, monkeypatch, tmp_path):
    for key in list(os.environ):
        if key.startswith("TABLESWAP_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("TABLESWAP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # no config file
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", any_journal_url)
    journal = Journal(any_journal_url)
    committed(journal, "s_old", "events", [("dt=1", "file:/w/events/a"), ("dt=2", "file:/w/events/b")], 50)
    committed(journal, "s_new", "events", [("dt=3", "file:/w/events/c")], 2)
    committed(journal, "s_dim", "dim", [("", "file:/w/dim/v1")], 30)
    queue = JanitorQueue(journal)
    queue.record([("s_old", "file:/w/events/b", "refused", "referenced by db.other partition dt=2")], None)
    queue.record_run({"run_id": "j1", "started_at": ago(3), "finished_at": ago(3), "host_name": "cron1",
                      "table_filter": None, "grace_seconds": 86400, "keep_count": 0, "deleted": 4,
                      "bytes_freed": 2048, "refused": 1, "errors": 0})
    queue.record_run({"run_id": "j2", "started_at": ago(1), "finished_at": ago(1), "host_name": "cron1",
                      "table_filter": "db.dim", "grace_seconds": 86400, "keep_count": 0, "deleted": 0,
                      "bytes_freed": 0, "refused": 0, "errors": 0})
    queue.record_run({"run_id": "j3", "started_at": ago(0.5), "finished_at": ago(0.5), "host_name": "cron2",
                      "table_filter": "db.events", "grace_seconds": 86400, "keep_count": 0, "deleted": 0,
                      "bytes_freed": 0, "refused": 0, "errors": 2})
    journal.close()
    return any_journal_url


def status(*args: str) -> dict:
    result = CliRunner().invoke(main, ["janitor", "status", *args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_status_of_every_table(status_journal_env):
    got = status()
    assert got["grace_seconds"] == 86400 and got["grace_source"] == "default"
    assert [r["run_id"] for r in got["runs"]] == ["j3", "j2", "j1"] and got["last_run"]["run_id"] == "j3"
    assert 1500 < got["last_run_age_seconds"] < 2500 and got["last_run"]["errors"] == 2
    # The last run failed to delete something: the last run without errors is the one before.
    assert got["last_successful_run"]["run_id"] == "j2" and 3000 < got["last_successful_run_age_seconds"] < 4000
    assert got["pending"]["count"] == 4 and got["pending"]["bytes"] is None and got["pending"]["bytes_known"] is False
    assert got["pending"]["known_bytes"] == 0 and got["pending"]["unknown_size_count"] == 4
    assert got["past_grace"]["bytes"] is None and got["past_grace"]["unknown_size_count"] == 3
    assert got["measured"] is None
    oldest = got["pending"]["oldest"]
    assert oldest["swap_id"] == "s_old" and oldest["table"] == "db.events" and oldest["age_seconds"] > 49 * 3600
    # Past 24h: the two entries of s_old (50h) and dim's (30h); s_new's (2h) is within its grace.
    assert got["past_grace"]["count"] == 3 and got["past_grace"]["oldest_age_seconds"] > 49 * 3600
    [refused] = got["refused"]["entries"]
    assert got["refused"]["count"] == 1 and refused["location"] == "file:/w/events/b"
    assert refused["reason"] == "referenced by db.other partition dt=2" and refused["attempts"] == 1
    assert got["journal"]["url"].split("@")[-1] == status_journal_env.split("@")[-1] and got["metastore"] is None


def test_grace_from_option_and_config_file(status_journal_env, tmp_path, monkeypatch):
    assert status("--grace", "40h")["past_grace"]["count"] == 2
    assert status("--grace", "1h")["past_grace"]["count"] == 4
    config = tmp_path / "config.toml"
    config.write_text('[janitor]\ngrace = "72h"\n')
    monkeypatch.setenv("TABLESWAP_CONFIG", str(config))
    got = status()
    assert got["past_grace"]["count"] == 0 and got["grace_seconds"] == 72 * 3600
    assert str(config) in got["grace_source"]


def test_one_table(status_journal_env):
    got = status("--table", "db.dim")
    assert got["table"] == "db.dim" and got["pending"]["count"] == 1 and got["past_grace"]["count"] == 1
    assert got["refused"]["count"] == 0
    assert [r["run_id"] for r in got["runs"]] == ["j2", "j1"]  # its own run and the run of every table
    events = status("--table", "db.events")
    assert [r["run_id"] for r in events["runs"]] == ["j3", "j1"] and events["pending"]["count"] == 3
    assert events["last_successful_run"]["run_id"] == "j1"


def test_text_output(status_journal_env):
    result = CliRunner().invoke(main, ["janitor", "status"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("journal: ") and "metastore: none configured" in out
    assert "last run: j3" in out and "errors 2" in out and "last run without errors: j2 started" in out
    assert "pending: 4 location(s), size unknown" in out
    assert "oldest pending: queued" in out and "s_old" in out
    assert "past grace: 3 pending for longer than 1d" in out
    assert "refused: 1" in out and "referenced by db.other partition dt=2" in out
    assert "freed 2.0 KiB" in out or "2.0 KiB" in out


def test_no_journal_is_an_error_and_nothing_is_created(clean_env, tmp_path):
    result = CliRunner().invoke(main, ["janitor", "status", "--json"], catch_exceptions=False)
    assert result.exit_code == 1 and json.loads(result.stdout)["error_type"] == "JournalNotFoundError"
    assert not (tmp_path / "state").exists()


# ------------------------------------------------------------------------------------------- bytes


def sized(journal: Journal, swap_id: str, table: str, changes: list[tuple[str, str | None, str]],
          sizes: dict[str, int], *, displaced: list[tuple[str, str]] | None = None) -> None:
    """A committed swap of ``changes`` (partition, old, new) recording ``sizes`` of its new locations."""
    journal.begin_swap(SwapRecord(swap_id=swap_id, db_name="db", table_name=table, kind="partitions", state=STAGING,
                                  table_root=f"file:/w/{table}", started_at=utcnow(), user_name="me", host_name="h"))
    journal.record_intent(swap_id, [PartitionChange(p, "replace" if old else "add", old, new) for p, old, new in changes],
                          sizes)
    journal.commit(swap_id, [(p, old) for p, old, _ in changes if old] if displaced is None else displaced)


def test_queue_rows_carry_the_sizes_swaps_recorded(any_journal_url, clean_env, monkeypatch):
    """A location's size recorded with the intent of the swap that wrote it goes with it into the queue when
    a later swap displaces it (any spelling of the location); a location nobody recorded stays unknown, and
    the totals never pass a partial sum off as the total."""
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", any_journal_url)
    journal = Journal(any_journal_url)
    sized(journal, "s1", "t", [("dt=1", "file:/w/t/dt=1", "file:/w/t/_tableswap/s1/dt=1"),
                               ("dt=2", None, "file:/w/t/_tableswap/s1/dt=2")],
          {"file:/w/t/_tableswap/s1/dt=1": 1000, "file:/w/t/_tableswap/s1/dt=2": 24})
    # s2 displaces s1's two directories, spelled as the metastore may return them (file:///..., a trailing /).
    sized(journal, "s2", "t", [("dt=1", "file:///w/t/_tableswap/s1/dt=1/", "file:/w/t/_tableswap/s2/dt=1"),
                               ("dt=2", "file:/w/t/_tableswap/s1/dt=2", "file:/w/t/_tableswap/s2/dt=2")],
          {"file:/w/t/_tableswap/s2/dt=1": 7})
    by_location = {d.location: d.bytes for d in journal.deletions()}
    assert by_location == {"file:/w/t/dt=1": None,  # written before tableswap: unknown, not 0
                           "file:///w/t/_tableswap/s1/dt=1/": 1000, "file:/w/t/_tableswap/s1/dt=2": 24}
    journal.close()

    got = status()
    assert got["pending"]["count"] == 3 and got["pending"]["bytes"] is None and not got["pending"]["bytes_known"]
    assert got["pending"]["known_bytes"] == 1024 and got["pending"]["unknown_size_count"] == 1
    assert got["pending"]["oldest"]["bytes"] is None  # s1's displacement of dt=1
    text = CliRunner().invoke(main, ["janitor", "status"], catch_exceptions=False).stdout
    assert "pending: 3 location(s), at least 1.0 KiB: 1 of them of unknown size (queued before" in text


def test_a_journal_of_the_old_schema_is_migrated_without_losing_a_row(any_journal_url, clean_env, monkeypatch):
    """A journal created by the tableswap before sizes were recorded (schema versions 1-6) is upgraded on
    open: every swap, queue row and run stays as it was, its sizes unknown; new swaps record sizes."""
    engine = journal_db.create_engine(any_journal_url)
    old = [(v, script) for v, script in journal_db.migrations(engine.dialect.name) if v <= 6]
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE tableswap_schema (version INTEGER PRIMARY KEY, "
                             "applied_at VARCHAR(40) NOT NULL)"))
        for version, script in old:
            for statement in journal_db.statements(script):
                conn.execute(sa.text(statement))
            conn.execute(sa.text("INSERT INTO tableswap_schema VALUES (:v, 'old')"), {"v": version})
        # What the old tableswap wrote: a committed swap, its items, a pending and a deleted queue row, a run.
        conn.execute(sa.text(
            "INSERT INTO tableswap_swaps (swap_id, db_name, table_name, kind, state, table_root, started_at) "
            "VALUES ('s_old', 'db', 't', 'partitions', 'committed', 'file:/w/t', :t)"), {"t": ago(30)})
        conn.execute(sa.text(
            "INSERT INTO tableswap_swap_items VALUES ('s_old', 'dt=1', 'replace', 'file:/w/t/dt=1', 'file:/w/t/n1')"))
        for location, state in (("file:/w/t/dt=1", "pending"), ("file:/w/t/dt=0", "deleted")):
            conn.execute(sa.text(
                "INSERT INTO tableswap_deletions (swap_id, location, db_name, table_name, partition_name, "
                "table_root, reason, state, queued_at, attempts) VALUES ('s_old', :l, 'db', 't', 'dt=1', 'file:/w/t', "
                "'displaced', :st, :q, 0)"), {"l": location, "st": state, "q": ago(30)})
        conn.execute(sa.text(
            "INSERT INTO tableswap_janitor_runs (run_id, started_at, grace_seconds, deleted, bytes_freed) "
            "VALUES ('j_old', :t, 86400, 1, 4096)"), {"t": ago(5)})
    assert journal_db.applied_versions(engine) == set(range(1, 7))
    engine.dispose()

    journal = Journal(any_journal_url)  # the upgrade
    assert journal.schema_version() == max(v for v, _ in journal_db.migrations(journal.dialect))
    [swap] = journal.list_swaps()
    assert swap.swap_id == "s_old" and [i.new_location for i in swap.items] == ["file:/w/t/n1"]
    rows = {d.location: (d.state, d.bytes) for d in journal.deletions(states=("pending", "deleted"))}
    assert rows == {"file:/w/t/dt=1": ("pending", None), "file:/w/t/dt=0": ("deleted", None)}
    with journal.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT applied_at FROM tableswap_schema WHERE version = 6")).scalar() == "old"
    # The first swap after the upgrade records sizes; displacing the old swap's directory stays unknown.
    sized(journal, "s_new", "t", [("dt=1", "file:/w/t/n1", "file:/w/t/n2")], {"file:/w/t/n2": 5})
    sized(journal, "s_next", "t", [("dt=1", "file:/w/t/n2", "file:/w/t/n3")], {})
    journal.close()

    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", any_journal_url)
    got = status()
    assert [r["run_id"] for r in got["runs"]] == ["j_old"] and got["runs"][0]["bytes_freed"] == 4096
    assert got["pending"]["count"] == 3 and got["pending"]["known_bytes"] == 5
    assert got["pending"]["unknown_size_count"] == 2 and got["pending"]["bytes"] is None


def test_measure_lists_the_locations_of_unknown_size(sqlite_journal_url, clean_env, monkeypatch, tmp_path):
    """--measure lists the pending locations whose size is unknown on storage (not those of known size): the
    bytes become a total; a location already gone counts 0 bytes; progress goes to stderr, stdout stays
    JSON; the journal is not changed."""
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", sqlite_journal_url)
    root = tmp_path / "w"
    dirs = []
    for i in range(25):  # enough for a progress report
        d = root / f"dt={i}"
        d.mkdir(parents=True)
        (d / "part-0.parquet").write_bytes(b"x" * (100 + i))
        (d / "_SUCCESS").write_bytes(b"")
        dirs.append(d)
    (root / "dt=0" / "sub").mkdir()
    (root / "dt=0" / "sub" / "f").write_bytes(b"y" * 11)
    gone = root / "dt=gone"
    journal = Journal(sqlite_journal_url)
    changes = [(f"dt={i}", f"file://{d}", f"file:/w/n{i}") for i, d in enumerate(dirs)]
    changes.append(("dt=gone", f"file://{gone}", "file:/w/ngone"))
    sized(journal, "s1", "t", [("dt=known", None, "file:/elsewhere/k")], {"file:/elsewhere/k": 1_000_000})
    sized(journal, "s2", "t", [*changes, ("dt=known", "file:/elsewhere/k", "file:/w/nk")], {})
    journal.close()

    plain = status()["pending"]
    assert plain["count"] == 27 and plain["known_bytes"] == 1_000_000 and plain["unknown_size_count"] == 26

    result = CliRunner().invoke(main, ["janitor", "status", "--measure", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    got = json.loads(result.stdout)
    expected = sum(100 + i for i in range(25)) + 11
    assert got["measured"]["locations"] == 26 and got["measured"]["gone"] == 1 and got["measured"]["failed"] == 0
    assert got["measured"]["bytes"] == expected
    assert got["pending"]["bytes_known"] and got["pending"]["bytes"] == expected + 1_000_000
    assert got["pending"]["unknown_size_count"] == 0
    assert "measuring pending locations: 26/26" in result.stderr
    assert status()["pending"]["unknown_size_count"] == 26  # read-only: nothing was stored

    text = CliRunner().invoke(main, ["janitor", "status", "--measure"], catch_exceptions=False).stdout
    assert "measured: 26 location(s) of unknown size listed on storage in" in text and "1 already gone" in text
    assert f"pending: 27 location(s), {human_bytes(expected + 1_000_000)}\n" in text


@pytest.mark.integration
def test_real_swaps_carry_their_sizes_to_the_queue_and_the_janitor_drops_them(spark, db, tmp_path, ts_env):
    """Partitions and a table written by real swaps: when a later swap displaces them, the queue row holds the
    bytes of their data files (the staging listing's); data Spark wrote outside tableswap stays unknown;
    ``janitor status --measure`` completes the total; a janitor run frees them and forgets their sizes."""
    from tableswap import swap_partitions, swap_table
    from tableswap.ops.janitor.run import run_janitor

    from ..support.helpers import batch_df, create_events, data_files, today

    events = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "b0").write.insertInto(events)  # not by tableswap
    first = swap_partitions(batch_df(spark, {(today(0),): 3, (today(1),): 3}, "b1"), events)
    second = swap_partitions(batch_df(spark, {(today(0),): 4}, "b2"), events)
    dim = f"{db}.dim"
    spark.sql(f"CREATE TABLE {dim} (id bigint, name string) USING parquet LOCATION '{(tmp_path / 'dim').as_uri()}'")
    t1 = swap_table(spark.createDataFrame([(1, "a"), (2, "b")], "id bigint, name string"), dim)
    swap_table(spark.createDataFrame([(3, "c")], "id bigint, name string"), dim)

    def data_bytes(location: str) -> int:
        return sum(p.stat().st_size for p in data_files(Path(loc.to_local_path(location))))

    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    queued = {d.location: d.bytes for d in journal.deletions()}
    b1_today = next(c.new_location for c in first.replaced if c.partition == f"dt={today(0)}")
    assert second.replaced[0].old_location == b1_today
    assert queued[b1_today] == data_bytes(b1_today) > 0
    assert queued[t1.table_change.new_location] == data_bytes(t1.table_change.new_location) > 0
    b0 = [c.old_location for c in first.replaced]  # written by plain Spark: never recorded
    assert {x for x, b in queued.items() if b is None} == {*b0, t1.table_change.old_location}
    journal.close()

    got = status("--table", events)
    assert got["pending"]["known_bytes"] == data_bytes(b1_today) and got["pending"]["unknown_size_count"] == 2
    measured = status("--table", events, "--measure")
    assert measured["pending"]["bytes_known"] and measured["measured"]["locations"] == 2
    assert measured["measured"]["bytes"] >= sum(data_bytes(x) for x in b0) > 0
    assert measured["pending"]["bytes"] == got["pending"]["known_bytes"] + measured["measured"]["bytes"]

    report = run_janitor(table=events, dry_run=False, grace="0", force_short_grace=True,
                         now=dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=3))
    assert report.ok and len(report.deleted) == 3
    freed = {o.location: o.bytes for o in report.deleted}
    assert freed[loc.normalize(b1_today)] >= queued[b1_today]  # the janitor counts every file (.crc too)
    assert report.bytes_freed == sum(freed.values())
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    with journal.engine.connect() as conn:
        recorded = {r[0] for r in conn.execute(sa.text("SELECT location FROM tableswap_location_sizes"))}
    journal.close()
    assert b1_today not in recorded  # deleted: its size is forgotten
    assert second.replaced[0].new_location in recorded  # live: kept for when a swap displaces it
    assert status("--table", events)["pending"]["count"] == 0
