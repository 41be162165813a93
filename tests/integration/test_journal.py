"""The journal's contract, on SQLite and on PostgreSQL alike (no metastore, no Spark).

Every test taking ``any_journal_url`` runs once per dialect, each time on a fresh, empty journal
(a new SQLite file, or a new PostgreSQL schema dropped afterwards: see tests/support/pg.py).
"""

from __future__ import annotations

import datetime as dt
import secrets

import pytest
import sqlalchemy as sa

from tableswap import errors
from tableswap.journal import db as journal_db
from tableswap.journal.queue import JanitorQueue
from tableswap.journal import ABORTED, COMMITTED, PENDING, STAGING, Journal, PartitionChange, SwapRecord, utcnow

from ..support import pg
from ..support.journal_workers import open_journal, register_units, run_together

ALL_VERSIONS = {v for v, _ in journal_db.migrations("sqlite")}


def _swap(journal: Journal, swap_id: str, *, table: str = "events", started_at: str | None = None,
          state: str = STAGING) -> None:
    journal.begin_swap(SwapRecord(swap_id=swap_id, db_name="db", table_name=table, kind="partitions", state=state,
                                  table_root="file:/w/events", started_at=started_at or utcnow(),
                                  user_name="me", host_name="host"))


def _committed(journal: Journal, swap_id: str, displaced=(), **kw) -> None:
    _swap(journal, swap_id, **kw)
    journal.record_intent(swap_id, [PartitionChange(p, "replace", old, f"{old}_new") for p, old in displaced])
    journal.commit(swap_id, displaced)


# ---------------------------------------------------------------------- schema and migrations
def test_migration_files_per_dialect():
    sqlite, postgres = dict(journal_db.migrations("sqlite")), dict(journal_db.migrations("postgresql"))
    assert sorted(sqlite) == sorted(postgres) == sorted(ALL_VERSIONS) and {1, 2, 3, 4} <= ALL_VERSIONS
    assert sqlite[1] == postgres[1] and "CREATE TABLE IF NOT EXISTS tableswap_swaps" in sqlite[1]
    assert sqlite[4] == ""  # the collation migration exists for PostgreSQL only
    assert 'COLLATE "C"' in postgres[4]
    for script in sqlite.values():  # nothing SQLite-only in what both dialects run
        assert "AUTOINCREMENT" not in script.upper() and "INSERT OR" not in script.upper()


def test_urls_map_to_psycopg_and_hide_passwords():
    assert journal_db.parse_url("postgresql://u@h/d").drivername == "postgresql+psycopg"
    assert journal_db.parse_url("postgres://u@h/d").drivername == "postgresql+psycopg"
    assert journal_db.parse_url("postgresql+psycopg2://u@h/d").drivername == "postgresql+psycopg2"
    assert "s3cret" not in journal_db.safe_url("postgresql://u:s3cret@h/d")
    with pytest.raises(errors.JournalError, match="not a valid SQLAlchemy URL"):
        journal_db.parse_url("::nonsense::")


def test_open_creates_every_version_once_and_reopen_changes_nothing(any_journal_url):
    journal = Journal(any_journal_url)
    assert journal.dialect == any_journal_url.split(":")[0]
    with journal.engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT version, applied_at FROM tableswap_schema ORDER BY version")).all()
    assert [r.version for r in rows] == sorted(ALL_VERSIONS)
    assert all(r.applied_at for r in rows)
    assert journal_db.migrate(journal.engine) == []
    again = Journal(any_journal_url)
    assert journal_db.applied_versions(again.engine) == ALL_VERSIONS
    journal.close(), again.close()


def test_upgrade_applies_only_missing_versions(any_journal_url):
    """A journal created by an older tableswap (versions 1-2) gets 3 and later, in order, on open."""
    engine = journal_db.create_engine(any_journal_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE tableswap_schema (version INTEGER PRIMARY KEY, applied_at VARCHAR(40) NOT NULL)"))
        for version, script in journal_db.migrations(engine.dialect.name)[:2]:
            for statement in journal_db.statements(script):
                conn.execute(sa.text(statement))
            conn.execute(sa.text("INSERT INTO tableswap_schema VALUES (:v, 'old')"), {"v": version})
    applied = journal_db.migrate(engine)
    assert applied == sorted(ALL_VERSIONS - {1, 2})
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT applied_at FROM tableswap_schema WHERE version = 1")).scalar() == "old"
        conn.execute(sa.text("SELECT rollback_id FROM tableswap_undone"))  # version 3's table exists
    engine.dispose()


def test_a_failing_migration_leaves_its_version_unapplied(any_journal_url, monkeypatch):
    """Each version is one transaction: a broken script changes nothing and is retried next open."""
    good = journal_db.migrations
    broken = lambda dialect="sqlite": [*good(dialect), (99, "CREATE TABLE tswap_half (x INTEGER); SELEC nonsense")]  # noqa: E731
    monkeypatch.setattr(journal_db, "migrations", broken)
    with pytest.raises(errors.JournalError, match="cannot open the swap journal"):
        Journal(any_journal_url)
    monkeypatch.setattr(journal_db, "migrations", good)
    journal = Journal(any_journal_url)
    assert journal_db.applied_versions(journal.engine) == ALL_VERSIONS  # 1..4 were committed before 99 failed
    assert not sa.inspect(journal.engine).has_table("tswap_half")  # 99's first statement was rolled back
    journal.close()


def test_many_processes_opening_an_empty_journal_at_once(any_journal_url):
    results = run_together(open_journal, [(any_journal_url,)] * 4)
    assert all(r == "ok" for r in results), results
    journal = Journal(any_journal_url)
    with journal.engine.connect() as conn:
        versions = [r[0] for r in conn.execute(sa.text("SELECT version FROM tableswap_schema"))]
    assert sorted(versions) == sorted(ALL_VERSIONS)  # each applied exactly once
    journal.close()



def test_read_then_write_transactions_of_many_processes_and_threads_on_one_journal_are_serial(any_journal_url):
    """Registering a backfill's unit reads how many units it has, then writes the new unit after them: on
    SQLite each such transaction takes the write lock at its start (BEGIN IMMEDIATE), so that no other
    process or thread commits between its read and its write (a deferred transaction would either read
    outside the lock, and two units would take one position, or fail with "database is locked" at once,
    without waiting, when its read snapshot went stale: SQLite's busy timeout does not wait that out); on
    PostgreSQL (read committed) the backfill's row is locked first (``SELECT ... FOR UPDATE``)."""
    from tableswap.journal.backfills import BackfillLog

    journal = Journal(any_journal_url)
    processes, threads, rounds = 3, 4, 8
    results = run_together(register_units, [(any_journal_url, f"w{i}", threads, rounds) for i in range(processes)])
    assert results == ["ok"] * processes, results
    with journal.engine.connect() as conn:
        positions = sorted(r[0] for r in conn.execute(sa.text(
            "SELECT position FROM tableswap_backfill_units WHERE name = 'b'")))
    assert positions == list(range(processes * threads * rounds))  # one position each, in registration order
    assert len(BackfillLog(journal).status("b").units) == processes * threads * rounds
    journal.close()


# ---------------------------------------------------------------------- swaps
def test_swap_lifecycle_and_listing(any_journal_url):
    journal = Journal(any_journal_url)
    _swap(journal, "20260601_000000_aaaa0001", started_at="2026-06-01T00:00:00.000000+00:00")
    journal.record_intent("20260601_000000_aaaa0001", [
        PartitionChange("dt=2", "add", None, "file:/w/events/_tableswap/a/dt=2"),
        PartitionChange("dt=1", "replace", "file:/w/events/dt=1", "file:/w/events/_tableswap/a/dt=1"),
    ])
    assert journal.get_swap("20260601_000000_aaaa0001").state == PENDING
    journal.commit("20260601_000000_aaaa0001", [("dt=1", "file:/w/events/dt=1")])
    journal.finish("20260601_000000_aaaa0001")
    _swap(journal, "20260602_000000_aaaa0002", started_at="2026-06-02T00:00:00.000000+00:00")
    journal.finish("20260602_000000_aaaa0002", state="failed", error="x" * 5000)
    _swap(journal, "other", table="other")

    first = journal.get_swap("20260601_000000_aaaa0001")
    assert first.state == COMMITTED and first.committed_at and first.finished_at and first.intent_at
    assert [i.partition_name for i in first.items] == ["dt=1", "dt=2"]
    assert first.items[0] == PartitionChange("dt=1", "replace", "file:/w/events/dt=1", "file:/w/events/_tableswap/a/dt=1")
    failed = journal.get_swap("20260602_000000_aaaa0002")
    assert failed.state == "failed" and len(failed.error) == 4000
    assert journal.get_swap("nope") is None
    assert [s.swap_id for s in journal.list_swaps("db", "events")] == [
        "20260602_000000_aaaa0002", "20260601_000000_aaaa0001"]
    assert [s.swap_id for s in journal.list_swaps("db", "events", limit=1)] == ["20260602_000000_aaaa0002"]
    assert [s.swap_id for s in journal.list_swaps(states=[COMMITTED])] == ["20260601_000000_aaaa0001"]
    assert [s.swap_id for s in journal.list_swaps(table="other")] == ["other"]
    assert JanitorQueue(journal).swapped_tables() == [("db", "events"), ("db", "other")]
    journal.close()


def test_the_janitor_abandons_a_staging_swap_only_if_its_heartbeat_is_the_one_it_judged(any_journal_url):
    """The janitor plans from one read and aborts later: a beat in between (the writer alive after all) wins."""
    journal = Journal(any_journal_url)
    queue = JanitorQueue(journal)
    _swap(journal, "s1")
    judged = queue.swap_states("db", "events")["s1"].heartbeat_at
    assert judged is None
    assert journal.heartbeat("s1")
    assert queue.abandon_swap("s1", "stale", heartbeat_at=judged) is False  # it beat since the plan
    assert journal.get_swap("s1").state == STAGING
    beat = queue.swap_states("db", "events")["s1"].heartbeat_at
    assert beat is not None and queue.abandon_swap("s1", "stale", heartbeat_at=beat) is True
    assert journal.get_swap("s1").state == "aborted"
    journal.close()


def test_intent_of_a_swap_that_left_staging_is_refused(any_journal_url):
    journal = Journal(any_journal_url)
    _swap(journal, "s1")
    assert JanitorQueue(journal).abandon_swap("s1", "stale") is True
    assert JanitorQueue(journal).abandon_swap("s1", "stale") is False  # only from staging
    with pytest.raises(errors.SwapConflictError, match="no longer in progress"):
        journal.record_intent("s1", [PartitionChange("dt=1", "add", None, "file:/n")])
    assert journal.get_swap("s1").state == ABORTED and journal.get_swap("s1").items == ()  # rolled back
    journal.close()


def test_text_order_is_byte_order_on_both_dialects(any_journal_url):
    """Ordering is the same whatever the database's collation: byte order (upper case first)."""
    journal = Journal(any_journal_url)
    _swap(journal, "B_swap", started_at="2026-06-01T00:00:00.000000+00:00")
    _swap(journal, "a_swap", started_at="2026-06-01T00:00:00.000000+00:00")
    journal.record_intent("a_swap", [PartitionChange(p, "add", None, f"file:/n/{p}") for p in ("dt=b", "dt=B", "dt=_", "dt=a")])
    assert [s.swap_id for s in journal.list_swaps()] == ["a_swap", "B_swap"]
    assert [i.partition_name for i in journal.get_swap("a_swap").items] == ["dt=B", "dt=_", "dt=a", "dt=b"]
    if journal.dialect == "postgresql":  # the test database may be C already: check the columns themselves
        with journal.engine.connect() as conn:
            collations = dict(conn.execute(sa.text(
                "SELECT table_name || '.' || column_name, collation_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND table_name || '.' || column_name IN ("
                "'tableswap_swaps.swap_id', 'tableswap_swaps.started_at', 'tableswap_swap_items.partition_name', "
                "'tableswap_deletions.location', 'tableswap_deletions.queued_at', 'tableswap_janitor_claims.expires_at', "
                "'tableswap_janitor_runs.started_at')")).all())
        assert len(collations) == 7 and set(collations.values()) == {"C"}, collations
    journal.close()


# ---------------------------------------------------------------------- deletion queue
def test_each_displaced_location_is_queued_once(any_journal_url):
    journal = Journal(any_journal_url)
    _committed(journal, "s1", [("dt=1", "file:/w/events/dt=1"), ("dt=2", "file:/w/events/dt=2")])
    journal.commit("s1", [("dt=1", "file:/w/events/dt=1")])  # recover committing it again
    journal.queue_orphans("s1", [("dt=2", "file:/w/events/dt=2"), ("", "file:/w/events/_tableswap/s1")])
    rows = journal.deletions()
    assert sorted((d.location, d.reason) for d in rows) == [
        ("file:/w/events/_tableswap/s1", "orphan"), ("file:/w/events/dt=1", "displaced"),
        ("file:/w/events/dt=2", "displaced")]
    assert all(d.state == "pending" and d.attempts == 0 and d.db_name == "db" for d in rows)
    journal.set_deletion_state("s1", "file:/w/events/dt=1", "deleted")
    journal.set_deletion_state("s1", "file:/w/events/dt=2", "refused", "live again")
    by_location = {d.location: d for d in journal.deletions_of("db", "events")}
    assert by_location["file:/w/events/dt=1"].state == "deleted" and by_location["file:/w/events/dt=1"].deleted_at
    assert by_location["file:/w/events/dt=2"].deleted_at is None
    assert by_location["file:/w/events/dt=2"].last_error == "live again" and by_location["file:/w/events/dt=2"].attempts == 1
    assert [d.location for d in journal.deletions()] == ["file:/w/events/_tableswap/s1"]
    assert journal.deletions(db="db", table="other") == []
    journal.close()


def test_restore_unrestore_and_undone(any_journal_url):
    journal = Journal(any_journal_url)
    _committed(journal, "s1", [("dt=1", "file:/w/events/dt=1")])
    _swap(journal, "r1")
    journal.record_undone("r1", [("s1", "dt=1"), ("s1", "dt=1")])
    assert journal.undone("db", "events") == []  # effective once the rollback commits
    assert journal.mark_restored("r1", "db", "events", ["file:///w/events/dt=1/"]) == [("s1", "file:/w/events/dt=1")]
    assert journal.deletions() == []
    assert journal.unmark_restored("r1") == 1
    assert [d.state for d in journal.deletions()] == ["pending"]
    journal.record_intent("r1", [])
    journal.commit("r1", [])
    assert journal.undone("db", "events") == [("r1", "s1", "dt=1")]
    journal.close()


# ---------------------------------------------------------------------- janitor claims and results
def test_claims_are_exclusive_leases(any_journal_url):
    journal = Journal(any_journal_url)
    queue = JanitorQueue(journal)
    _committed(journal, "s1", [("dt=1", "file:/w/events/dt=1"), ("dt=2", "file:/w/events/dt=2")])
    alive = lambda holder: False  # noqa: E731
    assert queue.claim("s1", "file:/w/events/dt=1", token="A", lease_s=600, queued=True, is_dead=alive)
    assert not queue.claim("s1", "file:/w/events/dt=1", token="B", lease_s=600, queued=True, is_dead=alive)
    assert queue.claim("s1", "file:/w/events/dt=1", token="A", lease_s=600, queued=True, is_dead=alive)  # renew
    assert journal.janitor_claims_on(["file:///w/events/dt=1", "file:/w/events/dt=2"]) == ["file:/w/events/dt=1"]
    # A dead holder's claim is taken over at once; an expired one too.
    assert queue.claim("s1", "file:/w/events/dt=1", token="B", lease_s=600, queued=True, is_dead=lambda h: True)
    assert queue.claim("s1", "file:/w/events/dt=2", token="C", lease_s=-1, queued=True, is_dead=alive)
    assert journal.janitor_claims_on(["file:/w/events/dt=2"]) == []  # expired
    assert queue.claim("s1", "file:/w/events/dt=2", token="D", lease_s=600, queued=True, is_dead=alive)
    # Results: deleted marks the row and releases the claim; anything else notes it and stays pending.
    queue.record([("s1", "file:/w/events/dt=1", "deleted", None), ("s1", "file:/w/events/dt=2", "error", "boom")], "B")
    by_location = {d.location: d for d in journal.deletions_of("db", "events")}
    assert by_location["file:/w/events/dt=1"].state == "deleted" and by_location["file:/w/events/dt=1"].attempts == 1
    assert by_location["file:/w/events/dt=2"].state == "pending" and by_location["file:/w/events/dt=2"].last_error == "error: boom"
    assert journal.janitor_claims_on(["file:/w/events/dt=1", "file:/w/events/dt=2"]) == ["file:/w/events/dt=2"]  # D's
    # A row that is no longer pending cannot be claimed as queued; an unqueued leftover can.
    assert not queue.claim("s1", "file:/w/events/dt=1", token="E", lease_s=600, queued=True, is_dead=alive)
    assert queue.claim("s1", "file:/w/events/_tableswap/s1", token="E", lease_s=600, queued=False, is_dead=alive)
    queue.release([("s1", "file:/w/events/dt=2"), ("s1", "file:/w/events/_tableswap/s1")], "E")  # not E's
    assert journal.janitor_claims_on(["file:/w/events/dt=2", "file:/w/events/_tableswap/s1"]) == ["file:/w/events/dt=2"]
    assert queue.is_pending("s1", "file:/w/events/dt=2") and not queue.is_pending("s1", "file:/w/events/dt=1")
    journal.close()


def test_janitor_runs_are_recorded(any_journal_url):
    journal = Journal(any_journal_url)
    queue = JanitorQueue(journal)
    for i, started in enumerate(("2026-06-02T00:00:00.000000+00:00", "2026-06-10T00:00:00.000000+00:00")):
        queue.record_run({"run_id": f"run{i}", "started_at": started, "finished_at": started, "host_name": "h",
                          "table_filter": None, "grace_seconds": 86400, "keep_count": 0, "deleted": i,
                          "bytes_freed": 5_000_000_000, "refused": 0, "errors": 0})
    runs = queue.runs()
    assert [r["run_id"] for r in runs] == ["run1", "run0"]
    assert runs[0]["bytes_freed"] == 5_000_000_000 and runs[0]["deleted"] == 1  # BIGINT, integers
    journal.close()


def test_unfinished_cleanups_and_locations(any_journal_url):
    journal = Journal(any_journal_url)
    _committed(journal, "s1", [("dt=1", "file:/w/events/dt=1")])
    journal.begin_swap(SwapRecord(swap_id="s2", db_name="db", table_name="events", kind="partitions", state=STAGING,
                                  table_root="file:/w/events", temp_table="events__tswap_s2", started_at=utcnow()))
    journal.record_intent("s2", [PartitionChange("dt=1", "replace", "file:/w/events/dt=1_new", "file:/n/dt=1")])
    assert JanitorQueue(journal).unfinished_locations("db", "events") == [("s2", "file:/w/events/dt=1_new"),
                                                                          ("s2", "file:/n/dt=1")]
    journal.commit("s2", [])
    assert journal.unfinished_cleanups() == [("s2", "db", "events", "events__tswap_s2")]
    assert set(JanitorQueue(journal).swap_states("db", "events")) == {"s1", "s2"}
    journal.close()


# ---------------------------------------------------------------------- PostgreSQL errors and privileges
@pytest.mark.parametrize("mutate,expected", [
    (lambda u: u.set(port=1), "cannot reach the PostgreSQL journal at 127.0.0.1:1"),
    (lambda u: u.set(database="tswap_no_such_db"), "database 'tswap_no_such_db' does not exist"),
    (lambda u: u.set(username="tswap_no_such_role", password="pw"), "refused the login of user tswap_no_such_role"),
    (lambda u: u.set(host="no-such-host.invalid"), "cannot reach the PostgreSQL journal at no-such-host.invalid"),
])
def test_postgres_connection_problems_say_what_to_check(pg_server, mutate, expected):
    url = mutate(sa.engine.make_url(pg_server.url)).render_as_string(hide_password=False)
    if "127.0.0.1:1" in expected and sa.engine.make_url(pg_server.url).host != "127.0.0.1":
        expected = "cannot reach the PostgreSQL journal"
    with pytest.raises(errors.JournalError, match=expected) as info:
        Journal(url)
    assert "TABLESWAP_JOURNAL_URL" in str(info.value) or "CREATE DATABASE" in str(info.value)
    assert ":pw@" not in str(info.value)


def test_postgres_missing_schema_is_explained(pg_server):
    with pytest.raises(errors.JournalError, match="no usable schema"):
        Journal(pg.schema_url(pg_server.url, "tswap_no_such_schema"))


def test_postgres_error_after_open_is_a_journal_error(pg_journal_url, pg_server):
    """The server going away under an open journal: JournalError, not a SQLAlchemy exception."""
    journal = Journal(pg_journal_url)
    with journal.engine.connect() as conn:
        pid = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar()
        with pg_server.engine.connect() as admin:
            admin.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid})
        with pytest.raises(errors.JournalError, match="cannot reach the PostgreSQL journal"):
            conn.execute(sa.text("SELECT 1"))
    assert journal.list_swaps() == []  # pre-ping: the next operation reconnects
    journal.close()


def test_postgres_read_only_user_reads_an_up_to_date_journal_but_cannot_create_one(pg_server, pg_journal_url):
    role = f"tswap_ro_{secrets.token_hex(4)}"
    schema = sa.engine.make_url(pg_journal_url).query["options"].split("=", 1)[1]
    journal = Journal(pg_journal_url)
    _committed(journal, "s1", [("dt=1", "file:/w/events/dt=1")])
    journal.close()
    empty = pg_server.new_schema()
    with pg_server.engine.connect() as admin:
        admin.execute(sa.text(f'CREATE ROLE "{role}" LOGIN'))
        admin.execute(sa.text(f'GRANT USAGE ON SCHEMA "{schema}", "{empty}" TO "{role}"'))
        admin.execute(sa.text(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"'))
    try:
        as_role = lambda url: sa.engine.make_url(url).set(username=role).render_as_string(hide_password=False)  # noqa: E731
        reader = Journal(as_role(pg_journal_url))  # up to date: no migration, no write needed
        assert [s.swap_id for s in reader.list_swaps()] == ["s1"]
        with pytest.raises(errors.JournalError, match="denied an operation.*INSERT, UPDATE and DELETE"):
            _swap(reader, "s2")
        reader.close()
        with pytest.raises(errors.JournalError, match="CREATE on the schema"):
            Journal(as_role(pg.schema_url(pg_server.url, empty)))
    finally:
        pg_server.drop_schema(empty)
        with pg_server.engine.connect() as admin:
            admin.execute(sa.text(f'DROP OWNED BY "{role}"'))
            admin.execute(sa.text(f'DROP ROLE "{role}"'))


def test_timestamps_are_comparable_text(any_journal_url):
    """Lease expiry compares ISO-8601 UTC text: later instants compare greater on both dialects."""
    journal = Journal(any_journal_url)
    queue = JanitorQueue(journal)
    _committed(journal, "s1", [("dt=1", "file:/a"), ("dt=2", "file:/b")])
    assert queue.claim("s1", "file:/a", token="A", lease_s=3600, queued=True, is_dead=lambda h: False)
    assert queue.claim("s1", "file:/b", token="A", lease_s=0.000001, queued=True, is_dead=lambda h: False)
    later = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)
    assert later.isoformat(timespec="microseconds") > utcnow()
    assert journal.janitor_claims_on(["file:/a", "file:/b"]) == ["file:/a"]
    journal.close()


def test_backfill_progress_is_kept_per_unit(any_journal_url):
    """Version 5 (additive): a backfill's units go pending → running → done | failed; registering the
    same backfill again keeps their states and adds new units; the name is bound to one table."""
    from tableswap.journal.backfills import BackfillLog

    journal = Journal(any_journal_url)
    blog = BackfillLog(journal)
    blog.start("june", "db", "events", ["dt=1", "dt=2", "dt=3"])
    blog.running("june", "dt=1")
    blog.done("june", "dt=1", "swap1", 1.5)
    blog.running("june", "dt=2")
    blog.failed("june", "dt=2", "ValueError: boom", None, 0.25)
    blog.start("june", "db", "events", ["dt=3", "dt=2", "dt=0"])  # a rerun with one more unit
    status = blog.status("june")
    assert [(u.unit, u.state, u.swap_id, u.attempts) for u in status.units] == [
        ("dt=1", "done", "swap1", 1), ("dt=2", "failed", None, 1), ("dt=3", "pending", None, 0),
        ("dt=0", "pending", None, 0)]
    assert status.failed[0].error == "ValueError: boom" and status.table == "db.events" and not status.complete
    blog.running("june", "dt=2")
    assert blog.status("june").units[1].error is None and blog.status("june").units[1].attempts == 2
    with pytest.raises(errors.InvalidInputError, match="is a backfill of db.events"):
        blog.start("june", "db", "other", ["dt=1"])
    with pytest.raises(errors.NotFoundError):
        blog.status("nope")
    assert blog.names() == ["june"]
    journal.close()
