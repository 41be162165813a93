"""Campaign: concurrent readers (tableswap vs Spark dynamic partition overwrite) and concurrent writers.

    python -m pytest -m campaign tests/campaign -s
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tableswap import swap_partitions
from tableswap import errors
from tableswap.core import locations as loc
from tableswap.journal import Journal

from ..support.helpers import assert_serial_equivalence, count_anomalies, partition_locations
from .reading import PARTS, batch_frame, create_table, run_with_reader, valid_reads

pytestmark = pytest.mark.campaign

SWAPS = 50
_batch, _expected, _create = batch_frame, valid_reads, create_table


def _run_with_reader(metastore_uri, table, tmp_path, write_once):
    return run_with_reader(metastore_uri, table, tmp_path, write_once, SWAPS)


def _anomalies(observations, valid):
    return count_anomalies(observations, {p: valid[p] for p in PARTS})


def test_concurrent_readers_tableswap_vs_dynamic_overwrite(spark, db, tmp_path, metastore_uri, ts_env, campaign_report):
    valid = _expected(range(0, SWAPS + 1))
    batches = {b: _batch(spark, b) for b in range(1, SWAPS + 1)}

    ts_table = _create(spark, db, tmp_path, "ts")
    obs, ts_secs = _run_with_reader(metastore_uri, ts_table, tmp_path,
                                    lambda b: swap_partitions(batches[b], ts_table))
    ts = _anomalies(obs, valid)

    dyn_table = _create(spark, db, tmp_path, "dyn")

    def dynamic(b):
        spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
        try:
            batches[b].write.insertInto(dyn_table, overwrite=True)
        finally:
            spark.conf.set("spark.sql.sources.partitionOverwriteMode", "static")

    obs, dyn_secs = _run_with_reader(metastore_uri, dyn_table, tmp_path, dynamic)
    dyn = _anomalies(obs, valid)
    for name, r, secs in (("tableswap", ts, ts_secs), ("dynamic overwrite", dyn, dyn_secs)):
        campaign_report.append({"campaign": "concurrent readers", "case": name, "trials": f"{SWAPS} writes, {r['observations']} reads",
                       "result": f"{r['mixed_or_partial'] + r['missing_partition'] + r['errors']} anomalies",
                       "details": f"partial/mixed={r['mixed_or_partial']} missing={r['missing_partition']} "
                                  f"errors={r['errors']} writes={secs:.0f}s {r['examples'][:1]}"})
    assert ts["observations"] >= 20
    assert ts["mixed_or_partial"] == ts["missing_partition"] == ts["errors"] == 0, ts


def test_concurrent_writers_are_serializable(spark, db, tmp_path, hms, ts_env, campaign_report):
    """Four writers swap at once, repeatedly: overlapping and disjoint partition sets, and in each round
    one writer reruns another's batch identically. Every swap commits (no conflict: the lock orders
    them), and the table and the janitor's queue equal running them one after the other in lock order."""
    table = _create(spark, db, tmp_path, "races")
    initial = {f"dt={v[0]}": x for v, x in partition_locations(hms, db, "races").items()}
    rounds, writers = 4, 4
    sets = [PARTS[0:3], PARTS[1:4], PARTS[3:4], PARTS[0:3]]  # overlapping, disjoint, and a rerun of writer 0
    batch_of = {(r, w): 100 + r * writers + (w if w != 3 else 0) for r in range(rounds) for w in range(writers)}
    frames = {k: _batch(spark, b, sets[k[1]]) for k, b in batch_of.items()}
    outcomes = {"committed": 0, "conflict": 0, "lock_timeout": 0, "other": 0}
    written = {}  # swap id -> (batch, partitions)
    lock = threading.Lock()

    def writer(r, w):
        try:
            res = swap_partitions(frames[(r, w)], table, lock_timeout_s=120)
            with lock:
                outcomes["committed"] += 1
                written[res.swap_id] = (batch_of[(r, w)], sets[w])
        except errors.SwapConflictError:
            with lock:
                outcomes["conflict"] += 1
        except errors.LockTimeoutError:
            with lock:
                outcomes["lock_timeout"] += 1
        except Exception as exc:  # noqa: BLE001
            with lock:
                outcomes["other"] += 1
            print("writer failed:", repr(exc))

    for r in range(rounds):
        threads = [threading.Thread(target=writer, args=(r, w)) for w in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    order = assert_serial_equivalence(hms, journal, db, "races", initial)
    # The rows: each partition holds exactly the batch of the last swap (in lock order) that wrote it.
    last = {p: (0, PARTS) for p in PARTS}
    for record in order:
        batch, parts = written[record.swap_id]
        last.update({p: (batch, parts) for p in parts})
    seen = {r["dt"]: (r["b"], r["n"], r["s"]) for r in spark.sql(
        f"SELECT dt, collect_set(batch) AS b, count(*) AS n, sum(chk) AS s FROM {table} GROUP BY dt").collect()}
    want = {}
    for p, (batch, parts) in last.items():
        row = _batch(spark, batch, parts).where(f"dt = '{p}'").groupBy("dt").agg({"*": "count", "chk": "sum"}).collect()[0]
        want[p] = ([str(batch)], row["count(1)"], row["sum(chk)"])
    queued = journal.deletions(db=db, table="races")
    existing = sum(1 for d in queued if Path(loc.to_local_path(d.location)).exists())
    campaign_report.append({"campaign": "concurrent writers", "case": f"{writers} writers x {rounds} rounds "
                                                            "(overlapping, disjoint, identical reruns)",
                   "trials": rounds * writers,
                   "result": f"committed={outcomes['committed']} refused={outcomes['conflict']} "
                             f"serial-equivalent={seen == want}",
                   "details": f"{outcomes} displaced queued={len(queued)} (each once, = the serial order's) "
                              f"still on disk={existing}"})
    assert outcomes == {"committed": rounds * writers, "conflict": 0, "lock_timeout": 0, "other": 0}
    assert len(order) == rounds * writers
    assert seen == want
    assert existing == len(queued)
