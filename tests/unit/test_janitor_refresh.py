"""The janitor's batches re-read only the partitions of their own locations (docs/janitor.md, cost model).

A property test of that strategy: tables, histories of swaps and rollbacks, a deletion queue in batches,
and swaps and rollbacks re-pointing partitions between batches (each under the table lock, as the janitor
holds it during a batch). It checks the rule of docs/janitor.md: no location referenced by the live
metastore at the moment of its deletion is ever deleted. The view a batch checks against is built by the
code the executor runs (``LiveView.refreshed`` and ``check_location``) from the true state of the
partitions it re-reads.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tableswap.core import locations as loc
from tableswap.core.janitor_plan import LiveRef, LiveView, check_location

ROOT = "s3a://bucket/wh/events"
TABLE = "db.events"


def _refs(current: dict[str, str]) -> list[LiveRef]:
    return [LiveRef(loc.normalize(where), f"partition {name} of table {TABLE}", partition=name)
            for name, where in current.items()]


def _view(current: dict[str, str]) -> LiveView:
    """A full read: the root, the partitioned table's location (a container) and every partition."""
    return LiveView("db", "events", True, loc.normalize(ROOT), (
        LiveRef(loc.normalize(ROOT), f"the storage root of {TABLE}", container=True),
        LiveRef(loc.normalize(ROOT), f"table {TABLE}", container=True),
        *_refs(current)), location=loc.normalize(ROOT))


@st.composite
def histories(draw):
    names = [f"dt=d{i}" for i in range(draw(st.integers(1, 6)))]
    history = {}
    swap = 0
    for name in names:
        places = [f"{ROOT}/{name}"]  # Spark's default location, before the first swap
        for _ in range(draw(st.integers(1, 4))):
            swap += 1
            places.append(f"{ROOT}/_tableswap/s{swap:03d}/{name}")
        history[name] = places
    return history, swap


@settings(max_examples=300, deadline=None)
@given(histories(), st.data())
def test_no_location_live_at_the_moment_of_its_deletion_is_deleted(built, data):
    history, swaps = built
    # Each partition currently at its newest location, unless a rollback left it at an older one.
    current = {name: data.draw(st.sampled_from(places), label=f"current {name}") for name, places in history.items()}
    queued = [(name, where) for name, places in history.items() for where in places if where != current[name]]
    queued = data.draw(st.permutations(queued), label="queue order")
    size = data.draw(st.integers(1, 4), label="batch size")
    view = _view(current)  # the discovery's full read
    deleted: set[str] = set()
    moves = 0
    for first in range(0, len(queued), size):
        batch = queued[first:first + size]
        # Between batches (the lock released): rollbacks and swaps re-point partitions.
        for _ in range(data.draw(st.integers(0, 2), label="moves")):
            name = data.draw(st.sampled_from(sorted(history)), label="partition moved")
            if data.draw(st.booleans(), label="swap, else rollback"):
                swaps += 1
                history[name].append(f"{ROOT}/_tableswap/s{swaps:03d}/{name}")
                current[name] = history[name][-1]
            else:
                alive = [p for p in history[name] if p not in deleted]
                current[name] = data.draw(st.sampled_from(alive), label="rolled back to")
            moves += 1
        # The batch, under the lock: the table and this batch's partitions read again, by name.
        names = {name for name, _ in batch}
        view = view.refreshed(names, ROOT, ROOT, _refs({n: current[n] for n in names}))
        assert view is not None
        for _, where in batch:
            reason, partial = check_location(where, ROOT, view)
            if reason is None and not partial:
                live = [c for c in current.values() if loc.is_within(c, where) or loc.is_within(where, c)]
                assert not live, f"deleted {where} while {live} referenced it"
                deleted.add(where)
    if moves == 0:  # nothing moved: every queued location goes
        assert deleted == {where for _, where in queued}


def test_a_moved_table_or_root_needs_a_full_read():
    view = _view({"dt=d0": f"{ROOT}/dt=d0"})
    assert view.refreshed({"dt=d0"}, ROOT, ROOT, []) is not None
    assert view.refreshed({"dt=d0"}, ROOT + "_v2", ROOT, []) is None  # the table's location moved
    assert view.refreshed({"dt=d0"}, ROOT, "s3a://bucket/elsewhere", []) is None  # its root moved
    gone = view.refreshed({"dt=d0"}, ROOT, ROOT, [])  # the partition no longer exists
    assert gone is not None and [r for r in gone.refs if r.partition] == []
