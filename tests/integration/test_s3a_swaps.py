"""What only an object store can show: server-side copies, a missing bucket, the endpoint going away.

The endpoint is moto's S3 emulator (not AWS) on loopback, with a log of every request it received
(tests/support/s3.py): "no COPY" below is counted from what the server saw, not inferred.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tableswap import errors, storage, swap_partitions
from tableswap.core import locations as loc
from tableswap.ops import commit as commit_module
from tableswap.ops.write import swap as swap_module
from tableswap.ops.janitor.run import run_janitor
from tableswap.journal import Journal
from tableswap.jvm.jars import s3a_spark_conf
from tableswap.ops.restore.recover import recover

from ..support.helpers import (SRC, batch_df, create_events, metastore_snapshot, partition_locations, reader_view,
                      release_locks_of_killed_writer, start_crashing_writer, today, wait_or_kill)
from ..support.s3 import ACCESS_KEY, REGION, SECRET_KEY

pytestmark = pytest.mark.integration


@pytest.fixture
def s3root(s3_endpoint, s3_bucket, spark, monkeypatch) -> str:
    """A fresh prefix in the session's bucket; tableswap's storage (s3fs) pointed at the endpoint, here
    and in child processes."""
    for name, value in {"AWS_ENDPOINT_URL": s3_endpoint.url, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                        "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    storage.configure("s3", endpoint_url=s3_endpoint.url, key=ACCESS_KEY, secret=SECRET_KEY)
    yield f"s3a://{s3_bucket}/{uuid.uuid4().hex[:10]}"
    storage.configure("s3")


def _request_log_marks(monkeypatch, endpoint) -> dict[str, int]:
    """The fault-injection hook (the swap's and the commit protocol's crash points) used as a stopwatch:
    the endpoint's request-log position when a swap first passes each point, by the point's name."""
    marks: dict[str, int] = {}
    real_crash_point = swap_module.crash_point

    def remember(name: str) -> None:
        marks.setdefault(name, endpoint.mark())
        real_crash_point(name)

    monkeypatch.setattr(swap_module, "crash_point", remember)
    monkeypatch.setattr(commit_module, "crash_point", remember)
    return marks


def test_classic_committer_copies_in_the_staging_write_and_tableswap_copies_nothing_after(
        spark, db, s3root, s3_endpoint, hms, ts_env, monkeypatch):
    """The session's committer is Hadoop's classic one (FileOutputCommitter): it renames (= copies, on S3)
    each file at task and job commit, as in every such Spark write to S3A; from the end of the staging
    write to the end of the swap, nothing is copied."""
    table = create_events(spark, db, s3root)
    batch_df(spark, {(today(0),): 3, (today(1),): 3}, "old").write.insertInto(table)
    batch = batch_df(spark, {(today(1),): 4, (today(2),): 2}, "new").cache()
    batch.count()
    marks = _request_log_marks(monkeypatch, s3_endpoint)
    start = s3_endpoint.mark()
    result = swap_partitions(batch, table)
    end = s3_endpoint.mark()

    write = s3_endpoint.counts(start)
    after = s3_endpoint.counts(marks["after_staging_write"])
    write_only = {k: write.get(k, 0) - after.get(k, 0) for k in write}
    assert write_only.get("COPY", 0) >= 2, write_only  # each data file: task commit + job commit
    assert after.get("COPY", 0) == 0 and after.get("DELETE", 0) == 0, after
    assert end > marks["after_staging_write"]
    assert {c.partition for c in result.replaced} == {f"dt={today(1)}"}
    assert reader_view(spark, table) == {(today(0),): (3, ("old",)), (today(1),): (4, ("new",)),
                                         (today(2),): (2, ("new",))}


def test_the_metastore_checks_each_added_partition_once_and_does_not_list_it_for_statistics(
        spark, db, s3root, s3_endpoint, hms, ts_env, monkeypatch):
    """The partitions a swap adds carry all of the release's fast statistics (Hive 3+ counts erasure-coded
    files among them), so the metastore's ``add_partitions`` only checks that each directory exists (one
    LIST of it through its S3A client) instead of also listing it to compute them (a second one, seen on
    HMS 4.0.1 before)."""
    from urllib.parse import parse_qs

    table = create_events(spark, db, s3root)
    batch_df(spark, {(today(0),): 2}, "old").write.insertInto(table)
    batch = batch_df(spark, {(today(1),): 3, (today(2),): 2, (today(3),): 1}, "new").cache()
    batch.count()
    marks = _request_log_marks(monkeypatch, s3_endpoint)
    result = swap_partitions(batch, table)
    added = {c.partition: c.new_location for c in result.added}
    assert set(added) == {f"dt={today(d)}" for d in (1, 2, 3)}

    lists: dict[str, int] = {}
    for request in s3_endpoint.requests_since(marks["after_intent"])[:marks["after_add"] - marks["after_intent"]]:
        if request.kind == "LIST":
            prefix = parse_qs(request.query).get("prefix", [""])[0].rstrip("/")
            lists[prefix] = lists.get(prefix, 0) + 1
    for partition, location in added.items():
        key = loc.path_of(location).strip("/")  # s3a://<bucket>/<key>: the bucket is the authority
        assert lists.get(key, 0) <= 1, (partition, lists)
    assert reader_view(spark, table) == {(today(0),): (2, ("old",)), (today(1),): (3, ("new",)),
                                         (today(2),): (2, ("new",)), (today(3),): (1, ("new",))}


def _start_process(tmp_path: Path, config: dict) -> tuple[subprocess.Popen, Path]:
    work = tmp_path / f"proc-{uuid.uuid4().hex[:6]}"
    work.mkdir()
    config = {**config, "dir": str(work)}
    (work / "config.json").write_text(json.dumps(config))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, str(Path(SRC).parent), os.environ.get("PYTHONPATH", "")])}
    with open(work / "output.log", "w") as log:  # a file, not a pipe: Spark's JVM child may hold it open
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.s3_swap_process", str(work / "config.json")],
                                env=env, cwd=Path(SRC).parent, stdout=log, stderr=subprocess.STDOUT)
    return proc, work


def _wait_file(proc: subprocess.Popen, path: Path, timeout: float = 420.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"no {path.name} (exit {proc.poll()}):\n"
                                 + (path.parent / "output.log").read_text()[-4000:])
        time.sleep(0.1)


@pytest.mark.spark_processes
def test_magic_committer_swap_issues_no_copy_and_a_crashed_one_is_recovered(
        spark, db, s3root, s3_endpoint, s3_jars, s3_access, metastore_uri, hms, ts_env, tmp_path):
    """A Spark process with the S3A magic committer: the whole swap — staging write included — makes the
    server copy nothing. A second swap of that process is killed right after its staging write;
    ``recover`` aborts it and the janitor deletes its staged files from the bucket."""
    table = create_events(spark, db, s3root)
    batch_df(spark, {(today(0),): 3, (today(1),): 3}, "old").write.insertInto(table)
    rows = lambda batch, days: [[i, "v", batch, d] for d, n in days.items() for i in range(n)]  # noqa: E731
    proc, work = _start_process(tmp_path, {
        "metastore_uri": metastore_uri, "table": table,
        "spark_conf": s3a_spark_conf(s3_jars, s3_access, committer="magic"),
        "schema": "id bigint, value string, batch string, dt string",
        "swaps": [{"rows": rows("magic", {today(1): 4, today(2): 2})},
                  {"rows": rows("crashed", {today(0): 1}), "crash_at": "after_staging_write"}],
    })
    try:
        _wait_file(proc, work / "ready-1")
        start = s3_endpoint.mark()
        (work / "go-1").write_text("")
        _wait_file(proc, work / "result-1.json")
        during = s3_endpoint.counts(start)
        result = json.loads((work / "result-1.json").read_text())

        assert during.get("COPY", 0) == 0, during
        assert during.get("MULTIPART", 0) > 0, during  # the magic committer's uploads, completed at job commit
        # Hadoop >= 3.4 (the wheel's): pending uploads tracked in the task's memory, one .pendingset per task
        # in the store, no per-file .pending record nor marker.
        puts = [r.path for r in s3_endpoint.requests_since(start) if r.kind == "PUT"]
        assert [p for p in puts if p.endswith(".pending")] == [], puts
        assert [p for p in puts if "/__magic" in p and p.endswith(".parquet")] == [], puts  # no 0-byte markers
        assert any(p.endswith(".pendingset") for p in puts), puts
        assert {c["partition"] for c in result["replaced"]} == {f"dt={today(1)}"}
        assert reader_view(spark, table) == {(today(0),): (3, ("old",)), (today(1),): (4, ("magic",)),
                                             (today(2),): (2, ("magic",))}
        magic_dirs = [k for k in s3_endpoint.keys(s3root.split("/")[2], s3root.split("/", 3)[3])
                      if "__magic" in k]
        assert magic_dirs == [], magic_dirs  # the committer cleaned up after itself

        before = metastore_snapshot(hms, db)
        (work / "go-2").write_text("")
        proc.wait(timeout=300)
        assert proc.returncode == -9, (work / "output.log").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    [crashed] = [s for s in journal.list_swaps(db, "events") if s.state == "staging"]
    staged = crashed.staging_location
    assert storage.has_data_files(loc.join(staged, f"dt={today(0)}"))
    # Only the in-flight swap's temporary table differs; the target is untouched.
    assert {k: v for k, v in metastore_snapshot(hms, db).items() if "__tswap_" not in k} == \
        {k: v for k, v in before.items() if "__tswap_" not in k}

    report = recover(table, stale_after_s=0)
    assert [r.outcome for r in report.resolutions] == ["aborted"]
    assert journal.get_swap(crashed.swap_id).state == "aborted"
    swept = run_janitor(table=table, grace="0", force_short_grace=True, dry_run=False)
    assert loc.normalize(staged) in {o.location for o in swept.deleted}
    assert not storage.exists(staged) or not storage.has_data_files(loc.join(staged, f"dt={today(0)}"))
    assert reader_view(spark, table)[(today(0),)] == (3, ("old",))


@pytest.mark.release_independent
def test_recover_resolves_a_crash_at_each_step_of_the_flip_on_s3a(spark, db, s3root, hms, ts_env, tmp_path):
    """Three writers whose batches this session wrote through S3A are SIGKILLed between journal intent and flip,
    between the two flip calls, and between flip and journal commit (their catalog steps in processes of their
    own: tests/support/helpers.py's start_crashing_writer). One ``recover`` (their abandoned locks released first, as the
    server would after its lock timeout) resolves each from the metastore's state, the janitor then deletes
    exactly the displaced objects from the bucket, and readers see each partition entirely old or entirely new
    throughout. (Spark writers killed at each step: tests/integration/test_crash_every_step.py; a Spark process writing
    through S3A's magic committer killed: the test above.)"""
    points = ("after_intent", "after_add", "after_alter")
    tables, procs = {}, {}
    for point in points:
        tables[point] = create_events(spark, db, f"{s3root}/{point}", name=f"ev_{point}")
        batch_df(spark, {(today(0),): 5, (today(1),): 5}, "good").write.insertInto(tables[point])
    for point in points:
        procs[point] = start_crashing_writer(spark, hms, tables[point], tmp_path / f"proc-{point}", crash_at=point,
                                             rows_per_day={today(1): 3, today(2): 2}, batch="new", env=ts_env)
    for point, (proc, log) in procs.items():
        wait_or_kill(proc)
        assert proc.returncode == -9, log.read_text()[-3000:]
        assert release_locks_of_killed_writer(hms, db, f"ev_{point}", proc)  # it died holding the lock

    good = {(today(0),): (5, ("good",)), (today(1),): (5, ("good",))}
    new = {(today(0),): (5, ("good",)), (today(1),): (3, ("new",)), (today(2),): (2, ("new",))}
    assert reader_view(spark, tables["after_intent"]) == good
    assert reader_view(spark, tables["after_add"]) == {**good, (today(2),): (2, ("new",))}
    assert reader_view(spark, tables["after_alter"]) == new
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    pending = {s.table_name: s for s in journal.list_swaps(db, states=["pending"])}
    assert sorted(pending) == ["ev_after_add", "ev_after_alter", "ev_after_intent"]

    report = recover(stale_after_s=0)
    outcomes = {r.table.split(".")[1]: r.outcome for r in report.resolutions}
    assert outcomes == {"ev_after_intent": "aborted", "ev_after_add": "completed", "ev_after_alter": "committed"}
    assert reader_view(spark, tables["after_intent"]) == good
    assert reader_view(spark, tables["after_add"]) == new
    assert reader_view(spark, tables["after_alter"]) == new
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]
    for point in ("after_add", "after_alter"):
        swap = pending[f"ev_{point}"]
        [old_day1] = [i.old_location for i in swap.items if i.action == "replace"]
        assert old_day1.startswith("s3a://") and storage.has_data_files(old_day1)
        locations = {p: loc.normalize(u) for p, u in partition_locations(hms, db, f"ev_{point}").items()}
        assert all(u.startswith("s3a://") and "/_tableswap/" in u for p, u in locations.items() if p != (today(0),))
        swept = run_janitor(table=tables[point], grace="0", force_short_grace=True, dry_run=False)
        assert {o.location for o in swept.deleted} == {loc.normalize(old_day1)}
        assert not storage.exists(old_day1) or not storage.has_data_files(old_day1)
        assert reader_view(spark, tables[point]) == new  # nothing live was deleted
    aborted = pending["ev_after_intent"]
    swept = run_janitor(table=tables["after_intent"], grace="0", force_short_grace=True, dry_run=False)
    assert {o.location for o in swept.deleted} == {loc.normalize(aborted.staging_location)}
    assert not storage.exists(aborted.staging_location) or not storage.has_data_files(aborted.staging_location)
    assert reader_view(spark, tables["after_intent"]) == good


def _files_in(location: str) -> int:
    """Data files (Spark's ``part-`` files) directly under a partition's location."""
    return sum(1 for child, is_dir in storage.children(location)
               if not is_dir and child.rstrip("/").rpartition("/")[2].startswith("part-"))


@pytest.mark.release_independent
def test_a_default_swap_of_many_partitions_onto_s3_is_clustered_and_an_explicit_none_wins(
        spark, db, s3root, hms, ts_env, monkeypatch):
    """``write_distribution = "auto"`` (the default) clusters the batch of a swap known to touch many
    partitions (its replace_where lists them); an explicit ``"none"`` wins, even where the table's last swap
    would have told ``"auto"`` to cluster. The rule's threshold (100 partitions) is lowered to 4 here so that 5
    partitions stand for many (the threshold itself: tests/unit/test_distribution_rule.py; the count from the
    table's last swap: tests/integration/test_write_distribution.py); the batch is dealt round-robin over 3
    tasks, each holding rows of every day, so that written as it comes each day gets up to 3 files."""
    from tableswap.core import distribution

    monkeypatch.setattr(distribution, "AUTO_MIN_PARTITIONS", 4, raising=False)
    days = [today(i) for i in range(5)]
    table = create_events(spark, db, s3root)
    batch = batch_df(spark, {(d,): 12 for d in days}, "new").repartition(3)

    def files(result) -> dict[str, int]:
        return {c.partition: _files_in(c.new_location) for c in (*result.added, *result.replaced)}

    scoped = swap_partitions(batch, table, replace_where=[f"dt={d}" for d in days])
    assert files(scoped) == {f"dt={d}": 1 for d in days}, files(scoped)
    assert scoped.to_dict()["write_distribution"] == {
        "applied": "partition", "asked": "auto", "reason": "object store, 5 partitions (its replace_where lists them): 4 or more"}

    as_is = swap_partitions(batch, table, write_distribution="none")  # the last swap wrote 5: "auto" would cluster
    assert max(files(as_is).values()) > 1, files(as_is)
    assert (as_is.write_distribution.applied, as_is.write_distribution.reason) == ("none", "asked for")
    assert reader_view(spark, table) == {(d,): (12, ("new",)) for d in days}


# ------------------------------------------------------------------------------ failures


def test_a_missing_bucket_is_a_clear_error_and_nothing_changes(spark, db, s3root, s3_endpoint, hms, ts_env):
    """The table's bucket was deleted (objects and all) after the table was made."""
    bucket = s3_endpoint.new_bucket("gone")
    table = create_events(spark, db, f"s3a://{bucket}/wh")
    batch_df(spark, {(today(0),): 2}, "old").write.insertInto(table)
    client = s3_endpoint.client()
    for key in s3_endpoint.keys(bucket):
        client.delete_object(Bucket=bucket, Key=key)
    client.delete_bucket(Bucket=bucket)
    before = metastore_snapshot(hms, db)

    with pytest.raises(errors.StagingWriteError) as caught:
        swap_partitions(batch_df(spark, {(today(0),): 1}, "new"), table)

    assert "The specified bucket does not exist" in str(caught.value)  # the S3 client's own words
    assert metastore_snapshot(hms, db) == before
    assert not [s.state for s in Journal(ts_env["TABLESWAP_JOURNAL_URL"]).list_swaps(db, "events")
                if s.state in ("staging", "pending")]


def test_credentials_the_store_refuses_are_a_clear_error_and_nothing_changes(spark, db, s3root, s3_endpoint, hms,
                                                                             ts_env):
    """The store stops accepting the session's keys (moto's own signature check against its IAM, in which
    these keys do not exist: what S3 answers to a wrong or revoked access key)."""
    from moto.core.authorization import enable_iam_authentication

    table = create_events(spark, db, s3root)
    batch_df(spark, {(today(0),): 2}, "old").write.insertInto(table)
    before = metastore_snapshot(hms, db)
    view = reader_view(spark, table)
    batch = batch_df(spark, {(today(0),): 1, (today(1),): 1}, "new").cache()
    batch.count()  # computed before the keys go bad: only the swap's own requests meet the refusal

    with enable_iam_authentication(), pytest.raises(errors.StagingWriteError) as caught:
        swap_partitions(batch, table)

    message = str(caught.value)
    assert "the target is unchanged" in message
    assert "Access Key Id you provided does not exist" in message and "403" in message, message  # the store's words
    assert {k: v for k, v in metastore_snapshot(hms, db).items() if "__tswap_" not in k} == before
    assert not [s.state for s in Journal(ts_env["TABLESWAP_JOURNAL_URL"]).list_swaps(db, "events")
                if s.state in ("staging", "pending")]
    assert reader_view(spark, table) == view
    recover(table, stale_after_s=0)  # a temporary table left behind, if any, is cleared
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]


def test_the_endpoint_going_down_mid_swap_leaves_the_table_as_it_was(spark, db, s3root, s3_endpoint, hms, ts_env,
                                                                      monkeypatch):
    table = create_events(spark, db, s3root)
    batch_df(spark, {(today(0),): 2, (today(1),): 2}, "old").write.insertInto(table)
    before = metastore_snapshot(hms, db)
    view = reader_view(spark, table)
    real_crash_point = swap_module.crash_point

    def endpoint_goes_down(name: str) -> None:
        if name == "after_staging_write":  # written, not yet enumerated: the listing fails
            s3_endpoint.stop()
        real_crash_point(name)

    monkeypatch.setattr(swap_module, "crash_point", endpoint_goes_down)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    storage.configure("s3", endpoint_url=s3_endpoint.url, key=ACCESS_KEY, secret=SECRET_KEY,
                      config_kwargs={"retries": {"max_attempts": 1}, "connect_timeout": 2})
    try:
        with pytest.raises(errors.StorageError) as caught:
            swap_partitions(batch_df(spark, {(today(1),): 5}, "new"), table)
    finally:
        s3_endpoint.start()
    assert "cannot list the staging location s3a://" in str(caught.value)
    assert "Could not connect to the endpoint" in str(caught.value) and caught.value.retryable
    assert {k: v for k, v in metastore_snapshot(hms, db).items() if "__tswap_" not in k} == before
    assert reader_view(spark, table) == view
    # It never journaled an intent, so it is failed at once, even though discarding its staging failed
    # with the endpoint down; what it left (its temporary table, its staged files) a recover clears.
    assert [s.state for s in Journal(ts_env["TABLESWAP_JOURNAL_URL"]).list_swaps(db, "events")] == ["failed"]
    recover(table, stale_after_s=0)
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]
