"""The representative subset of the integration suite run against every further metastore release.

``pytest -m hms_subset`` selects these tests (e.g. with ``TABLESWAP_TEST_HIVE_VERSION=3.1.3``): swap
partitions, swap table, lock conflict, writer conflict, table compare-and-swap, rollback, recover, the
janitor refusing a live path, the release on MySQL/MariaDB, erasure-coded partitions on HDFS (3.1 counts no
``numFilesErasureCoded``), plus tests/integration/test_hms_versions.py and the tests of the janitor's reference
index kept from the notification log (marker ``notification_log``: the session's metastore writes one only in a
3.1.x release, so they run in that run alone). A name that no longer matches a
collected test fails the collection, so the subset cannot silently shrink.
"""

from __future__ import annotations

import pytest

#: "file::test name" (parametrized variants all included).
SUBSET = (
    "test_swap_partitions.py::test_backfill_replaces_existing_adds_new_and_rerun_is_idempotent",
    "test_swap_table.py::test_swap_table_repoints_location_and_keeps_old_files",
    "test_concurrency.py::test_lock_timeout_names_the_holder_and_changes_nothing",
    "test_concurrency.py::test_a_writer_that_commits_first_is_followed_not_refused",
    "test_concurrency.py::test_table_cas_rejects_a_stale_expected_stamp",
    "test_concurrency.py::test_failure_during_the_flip_says_recover_and_recover_completes_it",
    "test_admin_cli.py::test_rollback_partition_then_rollback_of_rollback_then_to",
    "test_admin_cli.py::test_rollback_unpartitioned_table",
    "test_admin_cli.py::test_recover_resolves_each_crash_point",
    "test_janitor.py::test_a_location_made_live_again_by_a_rollback_is_never_deleted",
    "test_janitor.py::test_the_executor_rechecks_the_live_metastore_right_before_deleting",
    "test_mysql_metastore.py::test_the_release_runs_on_mysql",
    "test_hdfs_erasure_coding.py::test_partitions_swapped_under_an_erasure_coded_root_are_erasure_coded_and_their_statistics_say_so_rightly",
)
_WHOLE_FILES = ("test_hms_versions.py",)


def mark(items: list[pytest.Item]) -> None:
    modules = {}
    for item in items:
        key = f"{item.path.name}::{item.originalname}"
        module = getattr(item, "module", None)
        if module is not None:
            modules[item.path.name] = module
        if key in SUBSET or item.path.name in _WHOLE_FILES or item.get_closest_marker("notification_log"):
            item.add_marker(pytest.mark.hms_subset)
    missing = [key for key in SUBSET
               if key.split("::")[0] in modules and not hasattr(modules[key.split("::")[0]], key.split("::")[1])]
    if missing:
        raise pytest.UsageError(f"tests/support/hms_subset.py names tests that do not exist: {', '.join(missing)}")
