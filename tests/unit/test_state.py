"""State tokens (pure): encoding, malformed and foreign tokens, what counts as a change, the token a
committed plan leaves, and serial planning of staged batches."""

from __future__ import annotations

import base64
import json
import zlib
from types import SimpleNamespace

import pytest

from tableswap import errors
from tableswap.core.checks import unchanged_checks, conflicts
from tableswap.core.plan import WrittenPartitions, WrittenTable, plan_partitions
from tableswap.core.state import ABSENT, TableState, fingerprint, partition_state, state_after, table_only_state
from tableswap.core.catalog import SWAP_ID_PARAM, Column, PartitionInfo, TableInfo

TABLE = TableInfo("db", "events", "EXTERNAL_TABLE", "file:///w/events", (Column("id", "bigint"),),
                  (Column("dt", "string"),))
FLAT = TableInfo("db", "dim", "EXTERNAL_TABLE", "file:///w/dim", (Column("id", "bigint"),), ())


def part(dt: str, location: str, stamp: str | None = None, ddl: str | None = None) -> PartitionInfo:
    params = {**({SWAP_ID_PARAM: stamp} if stamp else {}), **({"transient_lastDdlTime": ddl} if ddl else {})}
    return PartitionInfo((dt,), location, params)


def snap(table: TableInfo = TABLE, **parts: PartitionInfo) -> SimpleNamespace:
    return SimpleNamespace(table=table, partitions={(k.removeprefix("dt="),): p for k, p in parts.items()})


def test_token_round_trips_and_is_opaque_and_versioned():
    state = partition_state("db.events", [("dt=1", part("1", "file:/w/events/dt=1", ddl="5")), ("dt=2", None)],
                            complete=True)
    token = state.encode()
    assert token.startswith("tswap1.") and "dt=1" not in token and "/w/events" not in token
    assert TableState.decode(token) == state
    assert state.then("dt=2") == ABSENT and state.then("dt=9") == ABSENT and state.covers("dt=9")


@pytest.mark.parametrize("bad", ["", "hello", "tswap1.", "tswap1.!!!", "tswap1.aGVsbG8",
                                 "tswap1." + base64.urlsafe_b64encode(zlib.compress(b'{"t": 1}')).decode()])
def test_malformed_tokens_fail_clearly(bad):
    with pytest.raises(errors.InvalidInputError, match="is not a tableswap state token.*Nothing was changed"):
        TableState.decode(bad)


def test_non_string_and_other_version_tokens_fail_clearly():
    with pytest.raises(errors.InvalidInputError, match="must be a state token string.*got int"):
        TableState.decode(42)
    body = base64.urlsafe_b64encode(zlib.compress(json.dumps({"t": "db.e"}).encode())).decode()
    with pytest.raises(errors.InvalidInputError, match="version 2, this tableswap reads version 1"):
        TableState.decode("tswap2." + body)


def test_a_token_of_another_table_or_shape_is_refused():
    state = table_only_state("db.dim", FLAT)
    assert state.require_for("db.dim", partitioned=False) is state
    with pytest.raises(errors.InvalidInputError, match="taken of db.dim, not of db.events"):
        state.require_for("db.events", partitioned=False)
    with pytest.raises(errors.InvalidInputError, match="as an unpartitioned table; swap_partitions takes a token of a partitioned"):
        state.require_for("db.dim", partitioned=True)


def test_fingerprint_tracks_location_and_stamp_or_ddl_time():
    assert fingerprint("file:/w/x", "s1") == fingerprint("file:///w/x/", "s1")  # normalized
    assert fingerprint("file:/w/x", "s1") != fingerprint("file:/w/y", "s1")
    assert fingerprint("file:/w/x", "s1") != fingerprint("file:/w/x", "s2")
    assert fingerprint("file:/w/x", None, "100") != fingerprint("file:/w/x", None, "101")  # rewritten in place
    assert fingerprint("file:/w/x", "s1", "100") == fingerprint("file:/w/x", "s1", "101")  # stamp decides


def test_only_touched_partitions_the_token_covers_are_checked():
    before = snap(**{"dt=1": part("1", "file:/w/a", "s1"), "dt=2": part("2", "file:/w/b", "s1")})
    state = partition_state("db.events", [(f"dt={v[0]}", p) for v, p in before.partitions.items()], complete=True)
    now = snap(**{"dt=1": part("1", "file:/w/c", "s2"), "dt=2": part("2", "file:/w/b", "s1"),
                  "dt=3": part("3", "file:/w/d", "s3")})
    touched = [("dt=2", ("2",))]  # dt=1 changed, but the batch does not touch it
    assert conflicts(unchanged_checks(state, touched), now) == []
    found = conflicts(unchanged_checks(state, [("dt=1", ("1",)), ("dt=3", ("3",)), ("dt=4", ("4",))]), now)
    assert found == ["dt=1 changed since the state token was taken (now at file:/w/c, by swap s2)",
                     "dt=3 was added since the state token was taken (now at file:/w/d)"]
    dropped = conflicts(unchanged_checks(state, [("dt=2", ("2",))]), snap())
    assert dropped == ["dt=2 was dropped since the state token was taken"]
    # A token for some partitions only leaves the others unchecked, even if they appeared meanwhile.
    partial = partition_state("db.events", [("dt=2", before.partitions[("2",)])], complete=False)
    assert conflicts(unchanged_checks(partial, [("dt=3", ("3",))]), now) == []


def test_unpartitioned_token_checks_the_table():
    state = table_only_state("db.dim", FLAT)
    assert conflicts(unchanged_checks(state, []), snap(FLAT)) == []
    moved = TableInfo("db", "dim", "EXTERNAL_TABLE", "file:///w/dim/_tableswap/s9", FLAT.columns, (),
                      {SWAP_ID_PARAM: "s9"})
    assert conflicts(unchanged_checks(state, []), snap(moved)) == [
        "the table changed since the state token was taken (now at file:///w/dim/_tableswap/s9, by swap s9)"]


def test_state_after_a_plan_is_what_a_fresh_read_would_fingerprint():
    written = [part("1", "file:/w/events/_tableswap/s2/dt=1"), part("5", "file:/w/events/_tableswap/s2/dt=5")]
    plan = plan_partitions("s2", TABLE, written, {("1",): part("1", "file:/w/events/dt=1")})
    after = state_after(plan)
    assert not after.complete and set(after.entries) == {"dt=1", "dt=5"}
    flipped = snap(**{"dt=1": part("1", "file:/w/events/_tableswap/s2/dt=1", "s2", ddl="7"),
                      "dt=5": part("5", "file:/w/events/_tableswap/s2/dt=5", "s2")})
    assert conflicts(unchanged_checks(after, [("dt=1", ("1",)), ("dt=5", ("5",))]), flipped) == []
    table_plan = WrittenTable("s3", "db", "dim", "file:/w/dim/_tableswap/s3").plan_against(snap(FLAT))
    assert TableState.decode(state_after(table_plan).encode()).entries[""] == fingerprint("file:/w/dim/_tableswap/s3", "s3")


def test_staged_batches_plan_from_the_state_they_are_given():
    """Two batches staged from the same read, planned one after the other (as the lock orders them):
    the second replaces what the first left, not what both saw at first."""
    original = snap(**{"dt=1": part("1", "file:/w/events/dt=1")})
    a = WrittenPartitions("sa", "db", "events", (part("1", "file:/w/events/_tableswap/sa/dt=1"),))
    b = WrittenPartitions("sb", "db", "events", (part("1", "file:/w/events/_tableswap/sb/dt=1"),))
    plan_a = a.plan_against(original)
    after_a = snap(**{"dt=1": part("1", plan_a.replaces[0].new_location, "sa")})
    plan_b = b.plan_against(after_a)
    assert plan_a.displaced() == [("dt=1", "file:/w/events/dt=1")]
    assert plan_b.displaced() == [("dt=1", "file:/w/events/_tableswap/sa/dt=1")]
    assert a.reads() == [("1",)] and WrittenTable("s", "db", "dim", "x").reads() == []
