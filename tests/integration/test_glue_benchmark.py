"""The Glue benchmark (tests/benchmarks/bench_glue.py) kept honest without running it in full: K = 1 and 3 on the
session's moto server, one untimed warm-up and one run each. The requests it counts are those the commit protocol
must make on Glue and DynamoDB, and those of the delete-then-write it imitates; the swaps it times really happened.
Timings are printed by the benchmark, never asserted here."""

from __future__ import annotations

import json

import pytest

from tests.benchmarks import bench_glue

from ..support.s3 import ACCESS_KEY, REGION, SECRET_KEY


@pytest.fixture(scope="module")
def figures(moto_endpoint, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "glue.json"
    assert bench_glue.main(["--k", "1,3", "--repeat", "1", "--json", str(out)],
                           endpoint_url=moto_endpoint.url) == 0
    return json.loads(out.read_text())


def _client(moto_endpoint, service: str):
    import boto3

    return boto3.client(service, endpoint_url=moto_endpoint.url, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY)


@pytest.mark.parametrize("k", [1, 3])
def test_a_swap_of_k_partitions_makes_the_calls_the_protocol_needs(figures, k):
    ts = figures["by_k"][str(k)]["tableswap"]
    # Under the lease: the table and the K partitions read once (K <= 100: one BatchGetPartition), one
    # BatchUpdatePartition for the K repoints, nothing added or dropped.
    assert ts["calls"]["commit"] == {
        "glue.GetTable": 1, "glue.BatchGetPartition": 1, "glue.BatchUpdatePartition": 1,
        # the lease: taken, confirmed right before the flip (its one chunk goes out on that), released
        "dynamodb.PutItem": 1, "dynamodb.UpdateItem": 1, "dynamodb.DeleteItem": 1}
    # Around it: the validation's GetTable, the temporary table created and deleted, the K staged files.
    assert ts["calls_total"] == {
        "glue.GetTable": 2, "glue.BatchGetPartition": 1, "glue.BatchUpdatePartition": 1, "glue.CreateTable": 1,
        "glue.DeleteTable": 1, "dynamodb.PutItem": 1, "dynamodb.UpdateItem": 1, "dynamodb.DeleteItem": 1,
        "s3.PutObject": k}
    assert not ts["calls_vary"] and ts["exposed_s"] == 0
    # The run's first lease (a fresh lease store: the lease table is the run's own) asks DynamoDB once
    # whether the lease table exists; later swaps of the same process do not.
    first = figures["by_k"]["1"]["tableswap"]["warmup"]["calls"]["commit"]
    assert first == {**ts["calls"]["commit"], "dynamodb.DescribeTable": 1}
    assert 0 < ts["commit_s"] < ts["total_s"] and 0 < ts["write_s"] < ts["total_s"]


@pytest.mark.parametrize("k", [1, 3])
def test_delete_then_write_lists_deletes_and_puts_each_partition(figures, k):
    dw = figures["by_k"][str(k)]["delete_then_write"]
    assert dw["calls_total"] == {"s3.ListObjectsV2": k, "s3.DeleteObjects": k, "s3.PutObject": k,
                                 "glue.GetTable": 1, "glue.BatchCreatePartition": 1}
    assert 0 < dw["exposed_max_s"] <= dw["exposed_s"] <= dw["write_s"] <= dw["total_s"]
    assert 0 <= dw["exposed_lower_s"] <= dw["exposed_s"]


def test_the_benchmark_really_swapped_and_rewrote(figures, moto_endpoint):
    glue, s3 = _client(moto_endpoint, "glue"), _client(moto_endpoint, "s3")
    r = figures["by_k"]["3"]
    swap_id = r["tableswap"]["runs"][-1]["swap_id"]
    parts = glue.get_partitions(DatabaseName=r["database"], TableName="events_ts")["Partitions"]
    assert len(parts) == 3
    for p in parts:
        assert p["Parameters"]["tableswap.swap_id"] == swap_id
        assert p["StorageDescriptor"]["Location"].endswith(f"/_tableswap/{swap_id}/dt={p['Values'][0]}")
    # the temporary tables are gone: only the two tables remain
    assert len(glue.get_tables(DatabaseName=r["database"])["TableList"]) == 2
    parts = glue.get_partitions(DatabaseName=r["database"], TableName="events_dw")["Partitions"]
    assert len(parts) == 3
    for p in parts:  # in place: one file, the new one, in each partition's own directory
        bucket, _, prefix = p["StorageDescriptor"]["Location"].removeprefix("s3://").partition("/")
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=prefix + "/").get("Contents", [])]
        assert len(keys) == 1 and "/part-" not in keys[0], keys
