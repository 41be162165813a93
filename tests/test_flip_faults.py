"""The flip and what follows it, against the real metastore and SparkSession: a journal that fails
right after the flip."""

from __future__ import annotations

import pytest

from tableswap import errors, swap_partitions
from tableswap.config import resolve
from tableswap.core import locations as loc
from tableswap.journal import Journal
from tableswap.runtime import Runtime

from .helpers import batch_df, create_events, partition_locations, reader_view, today

pytestmark = pytest.mark.integration


class JournalGoneReadOnly(Journal):
    """A real journal that turns read-only once the swap's intent is recorded (its disk filled up,
    its database went read-only): every later write fails as the real one would, reads still work.
    An emulator cannot produce this fault at that exact moment."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.read_only = False

    def _refuse(self) -> None:
        if self.read_only:
            raise errors.JournalError(f"the swap journal at {self.url} is not writable: attempt to write a "
                                      "readonly database (injected)")

    def record_intent(self, *args, **kwargs):
        super().record_intent(*args, **kwargs)
        self.read_only = True

    def commit(self, *args, **kwargs):
        self._refuse()
        return super().commit(*args, **kwargs)

    def finish(self, *args, **kwargs):
        self._refuse()
        return super().finish(*args, **kwargs)

    def queue_orphans(self, *args, **kwargs):
        self._refuse()
        return super().queue_orphans(*args, **kwargs)


@pytest.mark.fault
def test_a_journal_failure_after_the_flip_says_the_flip_happened_and_recover_converges(
        spark, db, tmp_path, hms, ts_env):
    from tableswap.ops.recover import recover

    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "old").write.insertInto(table)
    before = partition_locations(hms, db, "events")
    url = ts_env["TABLESWAP_JOURNAL_URL"]
    broken = JournalGoneReadOnly(url)
    runtime = Runtime(resolve(metastore_uri=ts_env["TABLESWAP_METASTORE_URI"], journal_url=url), journal=broken)
    with pytest.raises(errors.CommitStateUnknownError) as info:
        swap_partitions(batch_df(spark, {(today(0),): 3, (today(2),): 1}, "new"), table, runtime=runtime)
    error = info.value
    assert broken.read_only  # the fault struck after the intent, as intended
    message = str(error)
    assert "flipped" in message and f"tableswap recover --table {table}" in message
    assert isinstance(error.__cause__, errors.JournalError)
    swap_id = error.swap_id
    assert swap_id and error.table == table
    # The flip landed (readers see the new data); the journal still says pending; the temporary table
    # is left for recover.
    assert reader_view(spark, table) == {(today(0),): (3, ("new",)), (today(1),): (2, ("old",)),
                                         (today(2),): (1, ("new",))}
    journal = Journal(url)
    assert journal.get_swap(swap_id).state == "pending"
    assert [t for t in hms.list_tables(db) if "__tswap_" in t]
    assert hms.lock_holders(db, "events") == []

    report = recover(table)
    assert [(r.swap_id, r.outcome) for r in report.resolutions] == [(swap_id, "committed")]
    assert journal.get_swap(swap_id).state == "committed"
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]
    queued = [loc.normalize(d.location) for d in journal.deletions(db=db, table="events")]
    assert queued == [before[(today(0),)]]  # the displaced directory, queued exactly once
    # Converged: a second recover finds nothing to do and queues nothing again.
    assert recover(table).resolutions == ()
    assert [loc.normalize(d.location) for d in journal.deletions(db=db, table="events")] == queued
    assert reader_view(spark, table)[(today(0),)] == (3, ("new",))
