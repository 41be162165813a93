"""A ``replace_where`` scope's drops are planned under the table lock (guarantee 5), against the real metastore and
SparkSession: a partition another swap adds inside the scope, and commits, while the scoped swap waits between its
staging write and its lock is dropped by the scoped swap, as running the two one after the other (in lock order) gives.

The scoped swap waits in its ``audit=`` check: after its staging write and its unlocked read of the table, before
its lock. A staged swap's publish (``tableswap publish``, no Spark) plans its drops under the lock too: a spec-list
scope is evaluated there; a predicate scope with no Spark at hand is refused (retryable, nothing changed, the swap
stays staged) when the table has partitions its stage never classified, and the ``StagedSwap`` of the process that
staged it (with its SparkSession) publishes it, dropping them.
"""

from __future__ import annotations

import threading

import pytest

from tableswap import stage_partitions, swap_partitions
from tableswap.errors import SwapConflictError
from tableswap.journal import Journal
from tableswap.ops.write import staged as staged_ops

from ..support.helpers import batch_df, create_events, reader_view, today

pytestmark = pytest.mark.integration

PREDICATE = f"dt >= '{today(1)}' AND dt <= '{today(5)}'"
SPECS = [f"dt={today(i)}" for i in range(1, 6)]


def _table(spark, db, tmp_path) -> str:
    """Days 0, 1 and 9 exist (batch 'old'); days 2 to 5 do not."""
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(i),): 3 for i in (0, 1, 9)}, "old").write.insertInto(table)
    return table


class Paused:
    """An ``audit=`` check that holds the swap until :meth:`release` (it passes the batch)."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.go = threading.Event()

    def __call__(self, staged) -> bool:
        self.reached.set()
        assert self.go.wait(600), "the test never released the paused swap"
        return True

    def release(self) -> None:
        self.go.set()


@pytest.mark.parametrize("scope", [PREDICATE, SPECS], ids=["predicate", "specs"])
def test_a_partition_added_inside_the_scope_while_the_swap_waits_is_dropped(spark, db, tmp_path, hms, ts_env, scope):
    table = _table(spark, db, tmp_path)
    pause, outcome = Paused(), {}

    def scoped_swap() -> None:
        try:
            outcome["result"] = swap_partitions(batch_df(spark, {(today(1),): 2, (today(3),): 2}, "scoped"), table,
                                                replace_where=scope, audit=pause)
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            outcome["error"] = exc

    worker = threading.Thread(target=scoped_swap)
    worker.start()
    try:
        assert pause.reached.wait(600), f"the scoped swap never reached its audit: {outcome}"
        # Meanwhile another swap adds day 4, inside the scope, and commits first.
        other = swap_partitions(batch_df(spark, {(today(4),): 5}, "other"), table)
        assert [c.partition for c in other.added] == [f"dt={today(4)}"]
    finally:
        pause.release()
        worker.join(600)
    assert "error" not in outcome, outcome.get("error")
    result = outcome["result"]
    # Serial order (lock order): the other swap, then the scoped one, which owns every day of its scope.
    assert [c.partition for c in result.dropped] == [f"dt={today(4)}"]
    assert reader_view(spark, table) == {(today(0),): (3, ("old",)), (today(1),): (2, ("scoped",)),
                                         (today(3),): (2, ("scoped",)), (today(9),): (3, ("old",))}


def test_a_staged_spec_scope_published_without_spark_drops_a_partition_added_meanwhile(spark, db, tmp_path, hms,
                                                                                       ts_env):
    table = _table(spark, db, tmp_path)
    staged = stage_partitions(batch_df(spark, {(today(1),): 2}, "staged"), table, replace_where=SPECS)
    swap_partitions(batch_df(spark, {(today(2),): 4}, "other"), table)
    # A publish from another process, with no Spark (the library call the CLI makes).
    result = staged_ops.publish(staged.swap_id)
    assert [c.partition for c in result.dropped] == [f"dt={today(2)}"]
    assert reader_view(spark, table) == {(today(0),): (3, ("old",)), (today(1),): (2, ("staged",)),
                                         (today(9),): (3, ("old",))}


def test_a_staged_predicate_scope_is_refused_without_spark_and_published_with_it(spark, db, tmp_path, hms, ts_env):
    table = _table(spark, db, tmp_path)
    staged = stage_partitions(batch_df(spark, {(today(1),): 2}, "staged"), table, replace_where=PREDICATE)
    swap_partitions(batch_df(spark, {(today(2),): 4, (today(7),): 1}, "other"), table)
    before = reader_view(spark, table)
    with pytest.raises(SwapConflictError) as info:
        staged_ops.publish(staged.swap_id)  # no Spark at hand to evaluate the predicate on day 2 and day 7
    error = info.value
    assert error.retryable and f"dt={today(2)}" in str(error) and f"dt={today(7)}" in str(error)
    assert "Nothing was changed" in str(error) or "nothing was changed" in str(error)
    assert reader_view(spark, table) == before
    assert Journal(ts_env["TABLESWAP_JOURNAL_URL"]).get_swap(staged.swap_id).state == "staged"
    # The StagedSwap of the job that staged it evaluates the predicate with its SparkSession: day 2 is inside
    # the scope (dropped), day 7 outside (kept).
    result = staged.publish()
    assert [c.partition for c in result.dropped] == [f"dt={today(2)}"]
    assert reader_view(spark, table) == {(today(0),): (3, ("old",)), (today(1),): (2, ("staged",)),
                                         (today(7),): (1, ("other",)), (today(9),): (3, ("old",))}
