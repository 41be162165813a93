"""Trino reading the AWS Glue Data Catalog while tableswap swaps partitions on it: the Glue side of the proof
that a reader never sees a partial or missing partition (tests/integration/test_trino_readers.py is the Hive Metastore's).

Real servers only: moto's server (the session's ``moto_endpoint``: Glue, S3 and DynamoDB on one loopback port)
and a real Trino 476 whose Hive connector reads that Glue catalog (``hive.metastore=glue`` with the endpoint
override, :func:`tests.support.trino_server.glue_catalog`) and its data on that S3. No Spark: the batches are parquet
files written with pyarrow into fresh staging directories under the table's root, committed through
tableswap's commit protocol on the Glue adapter (as tests/integration/test_glue.py does), rolled back with ``rollback``.

The Trino server is the session's (``trino_server``, shared with tests/integration/test_trino_readers.py): two of its catalogs
are on the Glue endpoint, ``glue`` (Trino's defaults: no metastore cache) and ``glue_cached`` (metastore and
file-status caches on, as teams turn them on).
"""

from __future__ import annotations

import io
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from tableswap.config import resolve
from tableswap.core.catalog import SWAP_ID_PARAM, PartitionInfo
from tableswap.core.plan import WrittenPartitions
from tableswap.runtime import Runtime

from ..support.helpers import (assert_readers_saw_whole_partitions, count_anomalies, loop_reader, reads_across_flips,
                      record_flips)
from ..support.report import REPORT
from ..support.s3 import ACCESS_KEY, REGION, SECRET_KEY

pytestmark = [pytest.mark.integration, pytest.mark.trino, pytest.mark.glue]

COLUMNS = [{"Name": "id", "Type": "bigint"}, {"Name": "value", "Type": "string"}]
PARQUET_SD = {
    "Columns": COLUMNS,
    "InputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat",
    "OutputFormat": "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat",
    "SerdeInfo": {"SerializationLibrary": "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe",
                  "Parameters": {"serialization.format": "1"}},
}



# --------------------------------------------------------------------------- the servers
@pytest.fixture
def glue_trino(trino_server):
    """The session's Trino server: its ``glue`` and ``glue_cached`` catalogs read the session's Glue emulator
    (tests/support/trino_server.py: :func:`glue_catalogs`)."""
    return trino_server


@pytest.fixture
def trino_aws(moto_endpoint, monkeypatch):
    """boto3's standard configuration (the Glue adapter's) and tableswap's storage (the recovery manifests)
    pointed at the emulator; a lease table of the test's own."""
    from tableswap import storage

    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_GLUE", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {"AWS_ENDPOINT_URL": moto_endpoint.url, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                        "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TABLESWAP_GLUE_LOCK_TABLE", f"tsl_{uuid.uuid4().hex[:8]}")  # a lease table of its own
    storage.configure("s3", endpoint_url=moto_endpoint.url, key=ACCESS_KEY, secret=SECRET_KEY)
    yield moto_endpoint
    storage.configure("s3")


# --------------------------------------------------------------------------- a Glue table on S3
@dataclass
class GlueEvents:
    """A partitioned parquet table ``DB.events`` in the Glue emulator, its root in a fresh S3 bucket; batches
    are staged with pyarrow under ``ROOT/_tableswap/SWAP_ID/dt=D`` (a fresh directory per swap, as tableswap
    stages them) and committed through the protocol."""

    endpoint: Any
    db: str = field(default_factory=lambda: f"tg_{uuid.uuid4().hex[:10]}")
    bucket: str = ""
    staged: dict[str, dict[str, int]] = field(default_factory=dict)  # swap id -> {dt: rows}

    def __post_init__(self) -> None:
        self.bucket = self.endpoint.new_bucket("tsglue")
        self.glue.create_database(DatabaseInput={"Name": self.db})
        self.glue.create_table(DatabaseName=self.db, TableInput={
            "Name": "events", "TableType": "EXTERNAL_TABLE",
            "StorageDescriptor": {**PARQUET_SD, "Location": self.root},
            "PartitionKeys": [{"Name": "dt", "Type": "string"}],
            "Parameters": {"EXTERNAL": "TRUE", "classification": "parquet"}})

    @property
    def glue(self):
        import boto3

        return boto3.client("glue", endpoint_url=self.endpoint.url, region_name=REGION,
                            aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY)

    @property
    def root(self) -> str:
        return f"s3://{self.bucket}/events"

    @property
    def name(self) -> str:
        return f"{self.db}.events"

    def stage(self, swap_id: str, rows: dict[str, int]) -> WrittenPartitions:
        """Write ``rows[dt]`` rows per partition (``value`` = the swap id) with pyarrow into fresh directories."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        s3 = self.endpoint.client()
        parts = []
        for dt, n in rows.items():
            buf = io.BytesIO()
            pq.write_table(pa.table({"id": pa.array(range(n), pa.int64()), "value": [swap_id] * n}), buf)
            key = f"events/_tableswap/{swap_id}/dt={dt}"
            s3.put_object(Bucket=self.bucket, Key=f"{key}/part-00000.parquet", Body=buf.getvalue())
            parts.append(PartitionInfo((dt,), f"s3://{self.bucket}/{key}", {"numFiles": "1", "numRows": str(n)}))
        self.staged[swap_id] = dict(rows)
        return WrittenPartitions(swap_id, self.db, "events", tuple(parts))

    def commit(self, rt: Runtime, client, written: WrittenPartitions):
        """Commit staged partitions (a swap of those partitions) through the protocol, under the lease, as
        ``swap_partitions`` does after its Spark write: the journal's record, then ``ops.commit.commit``."""
        from tableswap.core.records import SwapKind
        from tableswap.ops.commit import commit
        from tableswap.ops.operation import Operation, begin

        op = Operation(SwapKind.PARTITIONS, written.swap_id, self.db, "events", self.root)
        begin(rt.journal, op)
        return commit(rt, client.get_table(self.db, "events"), op.planned(written), catalog=client)

    def swap(self, rt: Runtime, client, swap_id: str, rows: dict[str, int]):
        """Stage ``rows`` and commit them."""
        return self.commit(rt, client, self.stage(swap_id, rows))

    def locations(self) -> dict[str, str]:
        """Each partition's location as Glue holds it (a plain boto3 read)."""
        parts = self.glue.get_partitions(DatabaseName=self.db, TableName="events")["Partitions"]
        return {p["Values"][0]: p["StorageDescriptor"]["Location"] for p in parts}


@pytest.fixture
def glue_events_table(trino_aws) -> GlueEvents:
    return GlueEvents(trino_aws)


def runtime(tmp_path, **options) -> Runtime:
    """A runtime on the Glue catalog (``glue://us-east-1``, boto3's configuration: the emulator, see ``aws``)
    with a journal of its own."""
    settings = resolve(metastore_uri=f"glue://{REGION}", journal_url=f"sqlite:///{tmp_path / 'journal.db'}",
                       lock_timeout_s=10, heartbeat_s=5, **options)
    return Runtime(settings)


def trino_view(trino, table: str, catalog: str = "glue") -> dict[str, tuple[int, tuple[str, ...]]]:
    """What Trino reads: per partition, the row count and the distinct values of ``value``."""
    rows = trino.query(f"SELECT dt, count(*), array_sort(array_agg(DISTINCT value)) FROM {catalog}.{table} "
                       f"GROUP BY dt", catalog=catalog)
    return {dt: (n, tuple(values)) for dt, n, values in rows}


def expected_view(glue_events_table: GlueEvents, live: dict[str, str]) -> dict[str, tuple[int, tuple[str, ...]]]:
    """What a reader must see when partition ``dt`` is the batch of swap ``live[dt]``: that batch's staged rows,
    all with that swap's value."""
    return {dt: (glue_events_table.staged[swap_id][dt], (swap_id,)) for dt, swap_id in live.items()}


# --------------------------------------------------------------------------- after each swap, after a rollback
def test_trino_reads_exactly_the_swapped_partitions_after_each_glue_swap(glue_trino, glue_events_table, tmp_path):
    """After each swap committed on Glue, Trino's next query reads exactly the swapped batch of every replaced
    partition and the added ones (row counts and the value column), the others unchanged, and every file it
    reads lies under the location Glue holds for that partition."""
    swaps = [("s1", {"2026-01-01": 2, "2026-01-02": 2, "2026-01-03": 2}),
             ("s2", {"2026-01-02": 3, "2026-01-03": 4, "2026-01-04": 5}),
             ("s3", {"2026-01-01": 6})]
    live: dict[str, str] = {}
    with runtime(tmp_path) as rt, rt.catalog() as client:
        assert trino_view(glue_trino, glue_events_table.name) == {}  # the table is there, no partition yet
        for swap_id, rows in swaps:
            done = glue_events_table.swap(rt, client, swap_id, rows)
            assert rt.journal.get_swap(swap_id).state == "committed"
            assert {p.values[0] for p in done.plan.adds} == set(rows) - set(live)
            live.update(dict.fromkeys(rows, swap_id))
            assert trino_view(glue_trino, glue_events_table.name) == expected_view(glue_events_table, live)
            locations = glue_events_table.locations()
            assert {dt: loc.rsplit("/", 2)[-2] for dt, loc in locations.items()} == live  # .../SWAP_ID/dt=D
            paths = glue_trino.query(f'SELECT DISTINCT dt, "$path" FROM glue.{glue_events_table.name}', catalog="glue")
            assert len(paths) == len(live)
            for dt, path in paths:
                assert path.startswith(locations[dt].rstrip("/") + "/"), (dt, path, locations[dt])


def test_a_rollback_on_glue_is_visible_to_trino(glue_trino, glue_events_table, tmp_path):
    """``rollback`` on a Glue table (itself a swap under the lease: the replaced partitions repointed at their
    old files, the added one dropped) is what Trino's next query reads."""
    from tableswap.ops.restore.rollback import rollback

    with runtime(tmp_path) as rt:
        with rt.catalog() as client:
            glue_events_table.swap(rt, client, "s1", {"2026-02-01": 2, "2026-02-02": 2, "2026-02-03": 2})
            before = trino_view(glue_trino, glue_events_table.name)
            assert before == expected_view(glue_events_table, dict.fromkeys(glue_events_table.staged["s1"], "s1"))
            glue_events_table.swap(rt, client, "s2", {"2026-02-02": 3, "2026-02-03": 3, "2026-02-09": 3})
            after = trino_view(glue_trino, glue_events_table.name)
            assert after == expected_view(glue_events_table, {"2026-02-01": "s1", "2026-02-02": "s2", "2026-02-03": "s2",
                                                   "2026-02-09": "s2"})
        result = rollback(glue_events_table.name, runtime=rt)
        assert rt.journal.get_swap(result.swap_id).state == "committed"
    assert trino_view(glue_trino, glue_events_table.name) == before
    assert set(glue_events_table.locations()) == set(before)


# --------------------------------------------------------------------------- readers during swaps
SWAPS = 6
PARTS = ("2026-03-01", "2026-03-02", "2026-03-03", "2026-03-04", "2026-03-05")
CHUNK = 2  # write_batch_size: each flip is 3 BatchUpdatePartition calls (2, 2, 1), so a reader can land between


def test_trino_readers_during_glue_swaps_see_whole_partitions_and_never_fail(glue_trino, glue_events_table, tmp_path,
                                                                             monkeypatch):
    """Trino queries the Glue table in a loop (one reader with Trino's defaults, one with the metastore and
    file-status caches on) while swaps replace every partition, batch after batch, each flip in several
    Glue batch calls: each partition is always one whole batch (its row count is its batch's), never
    missing, and no query fails. The reads really overlapped the flips (timed in the writer): each reader had
    a query in flight across a flip, and no flip happened while a reader was not running."""
    sizes = {b: 2 + b for b in range(SWAPS + 1)}  # batch b has 2+b rows per partition: a mix would show
    valid = {(p,): {(sizes[b], (f"b{b}",)) for b in sizes} for p in PARTS}
    with runtime(tmp_path, write_batch_size=CHUNK) as rt, rt.catalog() as client:
        glue_events_table.swap(rt, client, "b0", dict.fromkeys(PARTS, sizes[0]))
        batches = {b: glue_events_table.stage(f"b{b}", dict.fromkeys(PARTS, sizes[b])) for b in range(1, SWAPS + 1)}
        update_calls: list[int] = []
        client._glue.meta.events.register(  # the sizes of the flip's BatchUpdatePartition calls
            "before-parameter-build.glue.BatchUpdatePartition",
            lambda params, **_: update_calls.append(len(params["Entries"])))
        stop = threading.Event()
        seen: dict[str, list] = {"glue": [], "glue_cached": []}
        readers = [threading.Thread(target=loop_reader, daemon=True, args=(
                       lambda c=c: {(dt,): v for dt, v in trino_view(glue_trino, glue_events_table.name, c).items()},
                       stop, seen[c])) for c in seen]
        for r in readers:
            r.start()
        deadline = time.time() + 120
        while not all(seen.values()) and time.time() < deadline:  # both readers past their first query
            time.sleep(0.2)
        flips = record_flips(monkeypatch)
        started = time.time()
        try:
            for b in range(1, SWAPS + 1):
                glue_events_table.commit(rt, client, batches[b])
                time.sleep(0.5)  # let the readers run between swaps too
        finally:
            elapsed = time.time() - started
            time.sleep(1)
            stop.set()
            for r in readers:
                r.join(timeout=120)
    assert update_calls == [CHUNK, CHUNK, len(PARTS) - 2 * CHUNK] * SWAPS
    results = {c: count_anomalies(obs, valid) for c, obs in seen.items()}
    overlaps = {c: reads_across_flips(obs, flips) for c, obs in seen.items()}
    for catalog, r in results.items():
        batches_read = sorted({v for o in seen[catalog] for _, vs in o.get("parts", {}).values() for v in vs})
        # Reads that landed between two chunks of a flip: whole partitions of two batches (allowed, documented).
        between_chunks = sum(len({vs for _, vs in o.get("parts", {}).values()}) > 1 for o in seen[catalog])
        REPORT.append({"campaign": "concurrent readers", "case": f"Trino on Glue ({catalog})",
                       "trials": f"{SWAPS} swaps, {r['observations']} reads, batches read {','.join(batches_read)}",
                       "result": f"{r['mixed_or_partial'] + r['missing_partition'] + r['errors']} anomalies",
                       "details": f"partial/mixed={r['mixed_or_partial']} missing={r['missing_partition']} "
                                  f"errors={r['errors']} between chunks={between_chunks} writes={elapsed:.0f}s "
                                  f"reads in flight across "
                                  f"{overlaps[catalog]['in_flight']} of {len(flips)} flips {r['examples'][:1]}"})
    assert_readers_saw_whole_partitions(results, overlaps, SWAPS)
    final = {p: (sizes[SWAPS], (f"b{SWAPS}",)) for p in PARTS}
    assert trino_view(glue_trino, glue_events_table.name) == final
    assert {p["Parameters"][SWAP_ID_PARAM] for p in glue_events_table.glue.get_partitions(
        DatabaseName=glue_events_table.db, TableName="events")["Partitions"]} == {f"b{SWAPS}"}
