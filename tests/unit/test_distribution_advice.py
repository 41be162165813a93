"""The advice a swap logs when its staging write, laid out as it came, left many small files per partition
(pure: :func:`tableswap.core.distribution.advice`; the swap's log line: tests/integration/test_write_distribution.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tableswap.core import distribution
from tableswap.core.distribution import NONE, PARTITION, advice

MIB = 1024 * 1024


def test_many_partitions_of_several_small_files_each_are_advised_to_cluster():
    text = advice(NONE, 200, 400, 400 * MIB)
    assert text is not None
    assert "400 files in 200 partitions (2.0 per partition, 1.0 MiB each on average)" in text
    assert 'write_distribution="partition"' in text and "configuration.md#write-distribution" in text


@pytest.mark.parametrize("applied, partitions, files, size, why", [
    (PARTITION, 200, 400, 400 * MIB, "clustered already (a large partition split by adaptive execution)"),
    (NONE, 99, 990, 990 * MIB, "fewer partitions than the threshold: the shuffle would cost more"),
    (NONE, 200, 399, 399 * MIB, "under two files per partition on average"),
    (NONE, 200, 400, 400 * 33 * MIB, "files of a sensible size already"),
    (NONE, 200, 0, 0, "nothing written"),
])
def test_no_advice_where_clustering_would_not_help(applied, partitions, files, size, why):
    assert advice(applied, partitions, files, size) is None, why


def test_the_thresholds_are_the_documented_ones():
    # docs/configuration.md#write-distribution states them to users: a change here must change the page.
    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    section = page[page.index("### Write distribution"):]
    section = section[:section.index("\n## ")]
    stated = (f"{distribution.ADVICE_MIN_PARTITIONS} partitions or more",
              f"{distribution.ADVICE_MIN_FILES_PER_PARTITION} files per partition",
              f"{distribution.ADVICE_MAX_MEAN_FILE_BYTES // MIB} MiB")
    for text in stated:
        assert text in " ".join(section.split()), text
    assert advice(NONE, 100, 200, 200 * 32 * MIB) is not None  # each bound is inclusive
