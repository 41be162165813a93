"""The janitor's location index answers exactly what a scan with ``locations.is_within`` answers."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tableswap.core import locations as loc
from tableswap.core.refindex import LocationIndex

# Locations over a small alphabet of segments, so that equal prefixes, near-miss names (t vs tx, t vs t#1)
# and spellings of one store (s3a vs s3, hdfs with and without its default port, gs vs gcs, abfs vs wasb)
# occur often.
_segments = st.lists(st.sampled_from(["t", "tx", "dt=1", "dt=10", "_tableswap", "a", "a b", "x%2F", "t#1", "t?x"]),
                     min_size=0, max_size=5)
_bases = st.sampled_from(["file://", "s3a://bucket", "s3://bucket", "s3a://other", "file:", "hdfs://nn", "hdfs://nn:8020",
                          "hdfs://nn:9000", "gs://bucket", "gcs://bucket", "abfss://c@a.dfs.core.windows.net",
                          "wasb://c@a.blob.core.windows.net"])


@st.composite
def locations(draw) -> str:
    base = draw(_bases)
    path = "/".join(draw(_segments))
    trailing = draw(st.sampled_from(["", "/"]))
    return f"{base}/{path}{trailing}" if base != "file:" else f"file:/{path}"


@settings(max_examples=400, deadline=None)
@given(st.lists(locations(), max_size=30), st.lists(locations(), min_size=1, max_size=10))
def test_index_matches_a_scan(indexed: list[str], queries: list[str]):
    index = LocationIndex((location, n) for n, location in enumerate(indexed))
    for q in queries:
        assert sorted(index.at_or_above(q)) == [n for n, r in enumerate(indexed) if loc.is_within(q, r)]
        assert sorted(index.at_or_below(q)) == [n for n, r in enumerate(indexed) if loc.is_within(r, q)]
        assert sorted(index.strictly_below(q)) == [n for n, r in enumerate(indexed)
                                                   if loc.is_within(r, q) and not loc.same(r, q)]
        assert sorted(index.at(q)) == [n for n, r in enumerate(indexed) if loc.same(r, q)]
    assert len(index) == len(indexed)


def test_examples():
    index = LocationIndex([("s3a://b/t", "table"), ("s3a://b/t/dt=1", "p1"), ("s3://b/t/_tableswap/x/dt=2", "p2")])
    assert sorted(index.at_or_above("s3a://b/t/dt=1/part-0.parquet")) == ["p1", "table"]
    assert list(index.at_or_above("s3a://b/tx/dt=1")) == []  # whole segments only
    assert sorted(index.at_or_below("s3a://b/t/_tableswap")) == ["p2"]
    assert sorted(index.strictly_below("s3a://b/t")) == ["p1", "p2"]
    assert index.at("S3A://b/t/") == ["table"]
    hdfs = LocationIndex([("hdfs://nn/t", "table"), ("hdfs://nn:8020/t/x#1", "p1")])
    assert sorted(hdfs.at_or_above("hdfs://NN:8020/t/x#1/part-0")) == ["p1", "table"]
    assert list(hdfs.at_or_below("hdfs://nn/t/x")) == []  # x#1 is not x


def _answers(index: LocationIndex, queries: list[str]) -> list[tuple]:
    return [(sorted(index.at(q)), sorted(index.at_or_above(q)), sorted(index.at_or_below(q)),
             sorted(index.strictly_below(q))) for q in queries]


@settings(max_examples=300, deadline=None)
@given(st.lists(locations(), max_size=20), st.data())
def test_an_updated_index_answers_as_one_built_anew(indexed: list[str], data):
    """``updated`` (the janitor's per-batch view: a few partitions read again) answers every question as an
    index built from the resulting items would; the index it started from is left unchanged."""
    items = list(enumerate(indexed))
    removed = data.draw(st.lists(st.sampled_from(items), unique=True) if items else st.just([]), label="removed")
    added = [(len(items) + n, where) for n, where in enumerate(data.draw(st.lists(locations(), max_size=6),
                                                                        label="added"))]
    known = indexed + [w for _, w in added]
    queries = data.draw(st.lists((st.sampled_from(known) | locations()) if known else locations(), min_size=1,
                                 max_size=10), label="queries")
    index = LocationIndex((where, n) for n, where in items)
    before = _answers(index, queries)
    updated = index.updated(((where, n) for n, where in removed), ((where, n) for n, where in added))
    result = [(n, where) for n, where in items if (n, where) not in removed] + added
    assert _answers(updated, queries) == _answers(LocationIndex((where, n) for n, where in result), queries)
    assert len(updated) == len(result)
    assert _answers(index, queries) == before
