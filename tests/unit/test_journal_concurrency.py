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
