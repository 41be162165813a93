"""Many processes on one journal: every displaced location is queued once, and of several janitors
claiming the same queue each location is claimed (and deleted) by exactly one. PostgreSQL is the
shared-journal case; SQLite (one machine) must hold the same contract."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tableswap.journal import Journal, PartitionChange, SwapRecord, utcnow

from ..support.journal_workers import janitor_claims, queue_displaced, run_together

WORKERS = 4
LOCATIONS = [f"file:/w/events/_tableswap/s0/p={i}" for i in range(40)]


def _begin(journal: Journal, swap_id: str) -> None:
    journal.begin_swap(SwapRecord(swap_id=swap_id, db_name="db", table_name="events", kind="partitions",
                                  state="staging", table_root="file:/w/events", started_at=utcnow()))
    journal.record_intent(swap_id, [PartitionChange(f"p={i}", "replace", x, x + "_new") for i, x in enumerate(LOCATIONS)])


@pytest.mark.parametrize("url_fixture", ["pg_journal_url", "sqlite_journal_url"])
def test_concurrent_writers_queue_each_location_once_and_janitors_claim_each_once(request, url_fixture):
    url = request.getfixturevalue(url_fixture)
    journal = Journal(url)
    _begin(journal, "s0")

    results = run_together(queue_displaced, [(url, "s0", LOCATIONS, 3)] * WORKERS)
    assert results == ["ok"] * WORKERS, results
    rows = journal.deletions()
    assert sorted(d.location for d in rows) == sorted(LOCATIONS)  # each exactly once
    assert {d.reason for d in rows} == {"displaced"}  # the first queueing wins, later ones change nothing
    assert journal.get_swap("s0").state == "committed"

    claimed = run_together(janitor_claims, [(url, f"T{i}", "s0", LOCATIONS, 600) for i in range(WORKERS)])
    assert all(isinstance(c, list) for c in claimed), claimed
    flat = [location for mine in claimed for location in mine]
    assert sorted(flat) == sorted(LOCATIONS)  # every location claimed, none by two janitors
    rows = journal.deletions(states=("pending", "deleted"))
    assert {d.state for d in rows} == {"deleted"} and {d.attempts for d in rows} == {1}  # deleted once each
    with journal.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM tableswap_janitor_claims")).scalar() == 0
    journal.close()


@pytest.mark.parametrize("url_fixture", ["pg_journal_url", "sqlite_journal_url"])
def test_concurrent_janitors_take_over_a_dead_janitors_claims_once(request, url_fixture):
    """Claims left by a janitor that died: several janitors race to take each over; one wins each."""
    url = request.getfixturevalue(url_fixture)
    journal = Journal(url)
    _begin(journal, "s0")
    journal.commit("s0", [(f"p={i}", x) for i, x in enumerate(LOCATIONS)])
    with journal.engine.begin() as conn:
        conn.execute(sa.text(
            "INSERT INTO tableswap_janitor_claims (swap_id, location, token, holder, claimed_at, expires_at) "
            "VALUES ('s0', :l, 'dead', 'gone:1', :t, '9999-12-31T00:00:00.000000+00:00')"
        ), [{"l": x, "t": utcnow()} for x in LOCATIONS])

    claimed = run_together(janitor_claims, [(url, f"T{i}", "s0", LOCATIONS, 600) for i in range(WORKERS)])
    assert all(isinstance(c, list) for c in claimed), claimed
    flat = [location for mine in claimed for location in mine]
    assert sorted(flat) == sorted(LOCATIONS)
    assert {d.attempts for d in journal.deletions(states=("deleted",))} == {1}
    assert len(journal.deletions(states=("deleted",))) == len(LOCATIONS)
    journal.close()


def test_a_sqlite_write_transaction_holds_the_write_lock_from_its_start(tmp_path):
    """``write_transaction`` on SQLite begins with ``BEGIN IMMEDIATE``: while it has only read, another
    writer already cannot begin; after its commit, what it wrote is there."""
    import sqlite3

    from tableswap.journal.db import write_transaction

    journal = Journal(f"sqlite:///{tmp_path / 'journal.db'}")
    other = sqlite3.connect(tmp_path / "journal.db", timeout=0, isolation_level=None)
    with write_transaction(journal.engine) as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM tableswap_backfills")).scalar() == 0
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            other.execute("BEGIN IMMEDIATE")
        conn.execute(sa.text("INSERT INTO tableswap_backfills (name, db_name, table_name, created_at, updated_at) "
                             "VALUES ('b', 'db', 't', 'now', 'now')"))
    other.execute("BEGIN IMMEDIATE")  # free again
    assert other.execute("SELECT name FROM tableswap_backfills").fetchall() == [("b",)]
    other.execute("ROLLBACK")
    other.close()
    journal.close()


def test_every_journal_write_goes_through_write_transaction():
    """A journal write begun with ``engine.begin()`` (or ``conn.begin()``) would be a deferred transaction on
    SQLite: its reads ran outside it (tableswap.journal.db.write_transaction says why)."""
    from pathlib import Path

    import tableswap

    source = Path(tableswap.__file__).parent
    found = [f"{path.relative_to(source)}:{n}" for path in sorted(source.rglob("*.py"))
             if path != source / "journal" / "db.py"  # where write_transaction is
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if ".begin()" in line and "trans = conn.begin()" not in line]  # check_writable's probe: rolled back
    assert found == []
