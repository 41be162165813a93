"""The AWS Glue Data Catalog adapter (src/tableswap/glue/) against a real emulator: moto's server on loopback
(the session's ``moto_endpoint``, which also serves S3 and DynamoDB), reached through boto3's standard
configuration (``AWS_ENDPOINT_URL``) as a user reaches AWS.

What the emulator does not do is added by fault injection on the adapter's own boto3 client (botocore's event
hooks, the request still going to the emulator): Glue's paging (moto returns everything in one page), its
``VersionId`` check (moto accepts a stale one), a lost response (the request applied, its answer dropped), a
request that never arrived. Measured on moto 5.2.5: VersionId ignored, MaxResults/NextToken ignored, batch
limits not enforced; per-entry errors (AlreadyExists, EntityNotFound) reported as Glue does. No Spark here.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from typing import Any

import pytest

from tableswap import errors
from tableswap.config import resolve
from tableswap.core.catalog import SWAP_ID_PARAM, LocationChange, NewPartition
from tableswap.glue.catalog import GlueCatalog
from tableswap.glue.uri import parse_glue_uri
from tableswap.runtime import Runtime, open_catalog

from ..support.glue_tables import PARQUET_SD
from ..support.s3 import ACCESS_KEY, REGION, SECRET_KEY



# --------------------------------------------------------------------------- fixtures
@pytest.fixture
def glue_aws(moto_endpoint, monkeypatch):
    """boto3's standard configuration pointed at the emulator (as a user points it at AWS)."""
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_GLUE", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint.url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    return moto_endpoint


@pytest.fixture(scope="module")
def plain_glue(moto_endpoint):
    import boto3

    return boto3.client("glue", endpoint_url=moto_endpoint.url, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                        aws_secret_access_key=SECRET_KEY)


@pytest.fixture
def glue_api(glue_aws, plain_glue):
    """A plain boto3 Glue client on the emulator (the test's own view, never hooked)."""
    return plain_glue


@pytest.fixture
def glue_db(glue_api) -> str:
    name = f"tsg_{uuid.uuid4().hex[:10]}"
    glue_api.create_database(DatabaseInput={"Name": name})
    return name


@pytest.fixture
def catalog(glue_aws) -> GlueCatalog:
    cat = GlueCatalog(f"glue://{REGION}", lock_table=f"tsl_{uuid.uuid4().hex[:8]}").open()
    yield cat
    cat.close()


def create_table(glue_api, db: str, name: str = "events", *, partitioned: bool = True, table_type: str = "EXTERNAL_TABLE",
                 location: str | None = None, parameters: dict[str, str] | None = None) -> None:
    glue_api.create_table(DatabaseName=db, TableInput={
        "Name": name, "TableType": table_type,
        "StorageDescriptor": {**PARQUET_SD, "Location": location or f"s3://bucket/{db}/{name}"},
        "PartitionKeys": [{"Name": "dt", "Type": "string"}] if partitioned else [],
        "Parameters": {"EXTERNAL": "TRUE", "classification": "parquet", **(parameters or {})}})


def add_raw(glue_api, db: str, values: list[str], name: str = "events", stamp: str | None = None) -> None:
    for start in range(0, len(values), 100):
        glue_api.batch_create_partition(DatabaseName=db, TableName=name, PartitionInputList=[
            {"Values": [v], "StorageDescriptor": {**PARQUET_SD, "Location": f"s3://bucket/{db}/{name}/dt={v}"},
             "Parameters": {SWAP_ID_PARAM: stamp} if stamp else {}} for v in values[start:start + 100]])


def raw_partitions(glue_api, db: str, name: str = "events") -> dict[str, dict[str, Any]]:
    return {p["Values"][0]: p for p in glue_api.get_partitions(DatabaseName=db, TableName=name)["Partitions"]}


DAYS = [f"2026-{1 + i // 28:02d}-{1 + i % 28:02d}" for i in range(230)]


class Faults:
    """Fault injection on one adapter's boto3 Glue client through botocore's event hooks; every request still
    goes to the emulator unless a hook answers it."""

    def __init__(self, catalog: GlueCatalog, plain_glue) -> None:
        self.events = catalog._glue.meta.events
        self.plain = plain_glue
        self.sent: list[tuple[str, dict[str, Any]]] = []  # (operation, API parameters) of every call
        self._params: dict[str, Any] = {}
        self.events.register("before-parameter-build.glue.*", self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self._params = dict(params)
        self.sent.append((model.name, dict(params)))

    def count(self, operation: str) -> int:
        return sum(1 for op, _ in self.sent if op == operation)

    def sizes(self, operation: str, key: str) -> list[int]:
        return [len(p[key]) for op, p in self.sent if op == operation]

    @staticmethod
    def _response(status: int, body: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        from botocore.awsrequest import AWSResponse

        return AWSResponse("http://injected", status, {}, None), {**body, "ResponseMetadata": {"HTTPStatusCode": status}}

    def lose_response(self, operation: str, times: int = 1) -> None:
        """The request reaches the emulator and is applied; its response is lost (a read timeout)."""
        left = [times]

        def hook(**_: Any) -> None:
            if left[0] > 0:
                left[0] -= 1
                from botocore.exceptions import ReadTimeoutError

                raise ReadTimeoutError(endpoint_url="http://injected")
        self.events.register(f"after-call.glue.{operation}", hook)

    def refuse_connection(self, operation: str, times: int = 1) -> None:
        """The request never reaches the emulator (the connection fails)."""
        left = [times]

        def hook(**_: Any) -> None:
            if left[0] > 0:
                left[0] -= 1
                from botocore.exceptions import EndpointConnectionError

                raise EndpointConnectionError(endpoint_url="http://injected")
        self.events.register(f"before-call.glue.{operation}", hook)

    def fail(self, operation: str, code: str, times: int = 1) -> None:
        """Glue refuses the request with ``code`` (nothing applied), ``times`` times."""
        left = [times]

        def hook(**_: Any) -> Any:
            if left[0] > 0:
                left[0] -= 1
                return self._response(400, {"Error": {"Code": code, "Message": f"injected {code}"}})
            return None
        self.events.register(f"before-call.glue.{operation}", hook)

    def fail_after_apply(self, operation: str, code: str, times: int = 1) -> None:
        """The request reaches the emulator and is applied; Glue's answer is then the error ``code`` (a server
        error such as ``InternalServiceException`` says nothing of whether the request was applied)."""
        left = [times]

        def hook(**_: Any) -> None:
            if left[0] > 0:
                left[0] -= 1
                from botocore.exceptions import ClientError

                raise ClientError({"Error": {"Code": code, "Message": f"injected {code} after the call applied"},
                                   "ResponseMetadata": {"HTTPStatusCode": 500}}, operation)
        self.events.register(f"after-call.glue.{operation}", hook)

    def page(self, operation: str, key: str, size: int) -> None:
        """Glue's paging, which moto ignores: answer ``operation`` a page of ``size`` at a time with a
        NextToken, from the emulator's full answer."""
        def hook(**_: Any) -> Any:
            params = dict(self._params)
            start = int(params.pop("NextToken", None) or 0)
            params.pop("MaxResults", None)
            items = getattr(self.plain, _snake(operation))(**params)[key]
            body = {key: items[start:start + size]}
            if start + size < len(items):
                body["NextToken"] = str(start + size)
            return self._response(200, body)
        self.events.register(f"before-call.glue.{operation}", hook)

    def enforce_version_id(self) -> None:
        """Glue's optimistic check, which moto ignores: ``UpdateTable`` with a ``VersionId`` that is not the
        table's current one is refused with ConcurrentModificationException (nothing applied)."""
        def hook(**_: Any) -> Any:
            params = self._params
            if "VersionId" not in params:
                return None
            current = self.plain.get_table(DatabaseName=params["DatabaseName"],
                                           Name=params["TableInput"]["Name"])["Table"]["VersionId"]
            if str(params["VersionId"]) != str(current):
                return self._response(400, {"Error": {"Code": "ConcurrentModificationException",
                                                      "Message": f"VersionId {params['VersionId']} is not the "
                                                                 f"current version {current}"}})
            return None
        self.events.register("before-call.glue.UpdateTable", hook)


def _snake(operation: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in operation).lstrip("_")


# --------------------------------------------------------------------------- URI, settings, extra
@pytest.mark.parametrize("uri, region", [("glue://us-east-1", "us-east-1"), ("glue://", None),
                                         ("GLUE://eu-west-3", "eu-west-3"), ("glue://us-gov-west-1", "us-gov-west-1")])
def test_glue_uris(uri, region):
    assert parse_glue_uri(uri) == region
    assert isinstance(open_catalog(uri), GlueCatalog)


@pytest.mark.parametrize("uri", ["glue://us-east-1/db", "glue://us-east-1?x=1", "glue://key:secret@us-east-1",
                                 "glue://us_east_1", "glue://127.0.0.1:9083"])
def test_malformed_glue_uris_are_configuration_errors_without_secrets(uri):
    with pytest.raises(errors.ConfigurationError, match="not of the form glue://REGION") as info:
        open_catalog(uri)
    assert "secret" not in str(info.value)


def test_a_thrift_uri_still_selects_the_hive_metastore_and_the_error_names_glue():
    from tableswap.metastore.catalog import HiveMetastoreCatalog

    assert isinstance(open_catalog("thrift://127.0.0.1:9083"), HiveMetastoreCatalog)
    with pytest.raises(errors.ConfigurationError, match="not of the form thrift://HOST:PORT.*glue://REGION"):
        open_catalog("http://127.0.0.1:9083")


def test_the_lease_table_setting(monkeypatch, tmp_path):
    assert resolve(metastore_uri="glue://us-east-1").glue_lock_table == "tableswap_locks"
    config = tmp_path / "c.toml"
    config.write_text('[glue]\nlock_table = "from_file"\n')
    monkeypatch.setenv("TABLESWAP_CONFIG", str(config))
    settings = resolve(metastore_uri="glue://us-east-1")
    assert settings.glue_lock_table == "from_file"
    assert Runtime(settings).new_catalog().lock_table == "from_file"
    monkeypatch.setenv("TABLESWAP_GLUE_LOCK_TABLE", "from_env")
    assert resolve(metastore_uri="glue://us-east-1").glue_lock_table == "from_env"
    config.write_text('[glue]\nlock_table = 3\n')
    with pytest.raises(errors.ConfigurationError, match="lock_table"):
        resolve(metastore_uri="glue://us-east-1")


def test_without_boto3_opening_a_glue_catalog_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 → ImportError
    with pytest.raises(errors.ConfigurationError, match=r"pip install 'tableswap\[glue\]'"):
        GlueCatalog("glue://us-east-1").open()


def test_no_region_is_a_configuration_error(monkeypatch, tmp_path):
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    with pytest.raises(errors.ConfigurationError, match="no AWS region"):
        GlueCatalog("glue://").open()


def test_the_region_comes_from_the_sdk_chain(glue_aws, glue_db):
    cat = GlueCatalog("glue://").open()
    assert cat.region == REGION and glue_db in cat.list_databases()


# --------------------------------------------------------------------------- reads
def test_reads_against_the_emulator(catalog, glue_api, glue_db):
    create_table(glue_api, glue_db)
    create_table(glue_api, glue_db, "dim", partitioned=False)
    add_raw(glue_api, glue_db, DAYS)
    assert catalog.database_exists(glue_db) and not catalog.database_exists(glue_db + "_nope")
    assert glue_db in catalog.list_databases()
    assert sorted(catalog.list_tables(glue_db)) == ["dim", "events"]
    assert catalog.list_tables(glue_db, "ev*|nope") == ["events"]
    table = catalog.get_table(glue_db, "events")
    assert (table.db, table.name, table.is_external, table.partition_key_names) == (glue_db, "events", True, ("dt",))
    assert table.storage_format == "parquet" and [c.name for c in table.columns] == ["id", "value"]
    assert [t.name for t in catalog.get_tables(glue_db, ["dim", "nope", "events"])] == ["dim", "events"]
    assert catalog.table_exists(glue_db, "dim") and not catalog.table_exists(glue_db, "nope")
    assert sorted(catalog.partition_names(glue_db, "events")) == sorted(f"dt={d}" for d in DAYS)
    assert sorted(catalog.list_partition_values(table)) == sorted((d,) for d in DAYS)
    assert len(catalog.list_partitions(glue_db, "events")) == 230
    pages = list(catalog.partitions_by_names(glue_db, "events", [f"dt={d}" for d in DAYS] + ["dt=1999-01-01"], page=150))
    assert [len(p) for p in pages] == [150, 80]
    got = catalog.get_partitions(table, [(d,) for d in DAYS[:120]] + [("1999-01-01",)])
    assert set(got) == {(d,) for d in DAYS[:120]} and got[(DAYS[0],)].location.endswith(f"dt={DAYS[0]}")
    snap = catalog.snapshot(glue_db, "events", [(DAYS[5],), ("1999-01-01",)])
    assert snap.table == table and set(snap.partitions) == {(DAYS[5],)}
    assert catalog.server_version() is None and catalog.config_value("x") is None
    catalog.ping()


def test_missing_objects_are_table_not_found(catalog, glue_db):
    with pytest.raises(errors.TableNotFoundError, match=f"table {glue_db}.nope does not exist"):
        catalog.get_table(glue_db, "nope")
    with pytest.raises(errors.TableNotFoundError, match="database 'nope_db' does not exist"):
        catalog.get_table("nope_db", "t")


def test_reads_follow_next_token_and_batch_get_takes_at_most_100_keys(catalog, glue_api, glue_db):
    create_table(glue_api, glue_db)
    for i in range(5):
        create_table(glue_api, glue_db, f"t{i}", partitioned=False)
    add_raw(glue_api, glue_db, DAYS)
    faults = Faults(catalog, glue_api)
    faults.page("GetPartitions", "Partitions", 40)
    faults.page("GetTables", "TableList", 2)
    faults.page("GetDatabases", "DatabaseList", 1)
    table = catalog.get_table(glue_db, "events")
    assert sorted(catalog.list_partition_values(table)) == sorted((d,) for d in DAYS)
    assert faults.count("GetPartitions") == 6  # 230 in pages of 40
    assert len(catalog.list_tables(glue_db)) == 6 and faults.count("GetTables") == 3
    assert glue_db in catalog.list_databases()
    got = catalog.get_partitions(table, [(d,) for d in DAYS])
    assert len(got) == 230 and faults.sizes("BatchGetPartition", "PartitionsToGet") == [100, 100, 30]


def test_glue_errors_map_onto_tableswaps(catalog, glue_api, glue_db):
    create_table(glue_api, glue_db)
    table = catalog.get_table(glue_db, "events")
    faults = Faults(catalog, glue_api)
    faults.fail("GetTable", "ThrottlingException")  # a read is retried
    assert catalog.get_table(glue_db, "events") == table
    faults.fail("BatchCreatePartition", "ThrottlingException")  # refused, not applied: sent again
    assert catalog.add_partitions(table, [NewPartition(("d1",), "s3://a/d1")], {SWAP_ID_PARAM: "s1"}) == 1
    assert faults.count("BatchCreatePartition") == 2 and len(raw_partitions(glue_api, glue_db)) == 1
    faults.fail("GetTable", "InternalServiceException", times=catalog.connect_attempts)
    with pytest.raises(errors.CatalogUnavailableError, match="busy or unavailable") as info:
        catalog.get_table(glue_db, "events")
    assert info.value.retryable
    faults.fail("GetTable", "AccessDeniedException")
    with pytest.raises(errors.ConfigurationError, match="refused the credentials"):
        catalog.get_table(glue_db, "events")
    faults.fail("UpdateTable", "ConcurrentModificationException")
    with pytest.raises(errors.SwapConflictError):
        catalog.alter_table_location(table, table.location, "s3://x", {SWAP_ID_PARAM: "s2"})
    faults.fail("GetPartitions", "InvalidInputException")
    with pytest.raises(errors.CatalogError, match="InvalidInputException: injected"):
        catalog.list_partitions(glue_db, "events")


# --------------------------------------------------------------------------- temporary tables
def test_a_temporary_table_copies_the_source_and_its_drop_keeps_data(catalog, glue_api, glue_db):
    create_table(glue_api, glue_db, parameters={"numRows": "5", "tableswap.swap_id": "old", "owner_note": "x"})
    source = catalog.get_table(glue_db, "events")
    created = catalog.create_staging_table(source, "events__ts_tmp", "s3://bucket/staging/1",
                                           {"tableswap.temp_for": f"{glue_db}.events"})
    raw = glue_api.get_table(DatabaseName=glue_db, Name="events__ts_tmp")["Table"]
    assert raw["TableType"] == "EXTERNAL_TABLE" and raw["StorageDescriptor"]["Location"] == "s3://bucket/staging/1"
    assert raw["StorageDescriptor"]["SerdeInfo"] == PARQUET_SD["SerdeInfo"]
    assert [k["Name"] for k in raw["PartitionKeys"]] == ["dt"]
    assert raw["Parameters"]["owner_note"] == "x" and raw["Parameters"]["tableswap.temp_for"] == f"{glue_db}.events"
    assert "numRows" not in raw["Parameters"] and "tableswap.swap_id" not in raw["Parameters"]
    assert created.location == "s3://bucket/staging/1" and created.columns == source.columns
    catalog.drop_table_keep_data(glue_db, "events__ts_tmp", created=created)
    assert not catalog.table_exists(glue_db, "events__ts_tmp")
    catalog.drop_table_keep_data(glue_db, "events__ts_tmp")  # gone already: nothing to do
    create_table(glue_api, glue_db, "managed", table_type="MANAGED_TABLE", parameters={"EXTERNAL": "FALSE"})
    with pytest.raises(errors.UnsafeOperationError, match="not an EXTERNAL table"):
        catalog.drop_table_keep_data(glue_db, "managed")
    assert catalog.table_exists(glue_db, "managed")


# --------------------------------------------------------------------------- the flip calls
def test_add_update_delete_over_the_limits_in_chunks(catalog, glue_api, glue_db):
    create_table(glue_api, glue_db)
    table = catalog.get_table(glue_db, "events")
    faults = Faults(catalog, glue_api)
    stamp = {SWAP_ID_PARAM: "s1"}
    adds = [NewPartition((d,), f"s3://bucket/{glue_db}/events/_tableswap/s1/dt={d}", {"numFiles": "1"}) for d in DAYS]
    assert catalog.add_partitions(table, adds, stamp) == 3
    assert faults.sizes("BatchCreatePartition", "PartitionInputList") == [100, 100, 30]
    parts = raw_partitions(glue_api, glue_db)
    assert len(parts) == 230 and all(p["Parameters"][SWAP_ID_PARAM] == "s1" for p in parts.values())
    assert parts[DAYS[0]]["StorageDescriptor"]["SerdeInfo"]["SerializationLibrary"].endswith("ParquetHiveSerDe")
    changes = [LocationChange((d,), f"s3://bucket/{glue_db}/events/_tableswap/s1/dt={d}",
                              f"s3://bucket/{glue_db}/events/_tableswap/s2/dt={d}", {"numFiles": "2"}) for d in DAYS]
    snap = catalog.snapshot(glue_db, "events", [c.values for c in changes])
    assert catalog.alter_partition_locations(table, changes, {SWAP_ID_PARAM: "s2"}, snapshot=snap) == 3
    assert faults.sizes("BatchUpdatePartition", "Entries") == [100, 100, 30]
    parts = raw_partitions(glue_api, glue_db)
    assert {p["StorageDescriptor"]["Location"].split("/")[-2] for p in parts.values()} == {"s2"}
    assert {(p["Parameters"][SWAP_ID_PARAM], p["Parameters"]["numFiles"]) for p in parts.values()} == {("s2", "2")}
    assert catalog.drop_partitions_keep_data(table, [(d,) for d in DAYS]) == 10
    assert faults.sizes("BatchDeletePartition", "PartitionsToDelete") == [25] * 9 + [5]
    assert raw_partitions(glue_api, glue_db) == {}
    # write_batch_size below Glue's limits is honoured too
    catalog.write_batch_size = 7
    assert catalog.add_partitions(table, adds[:20], stamp) == 3


def test_a_repoint_from_a_stale_plan_is_refused_and_changes_nothing(catalog, glue_api, glue_db):
    create_table(glue_api, glue_db)
    add_raw(glue_api, glue_db, DAYS[:3])
    table = catalog.get_table(glue_db, "events")
    changes = [LocationChange((d,), f"s3://bucket/{glue_db}/events/dt={d}", f"s3://x/{d}") for d in DAYS[:3]]
    changes[1] = LocationChange((DAYS[1],), "s3://elsewhere", "s3://x/1")
    before = raw_partitions(glue_api, glue_db)
    with pytest.raises(errors.SwapConflictError, match="nothing was altered"):
        catalog.alter_partition_locations(table, changes, {SWAP_ID_PARAM: "s2"})
    assert raw_partitions(glue_api, glue_db) == before


def test_a_batch_entry_that_fails_is_an_error_unless_it_landed_with_our_stamp(catalog, glue_api, glue_db):
    create_table(glue_api, glue_db)
    table = catalog.get_table(glue_db, "events")
    # One partition already there with this swap's stamp (an earlier send of ours landed): Glue reports
    # AlreadyExists for that entry, and it counts as landed.
    add_raw(glue_api, glue_db, [DAYS[3]], stamp="s1")
    adds = [NewPartition((d,), f"s3://new/{d}") for d in DAYS[:150]]
    assert catalog.add_partitions(table, adds, {SWAP_ID_PARAM: "s1"}) == 2
    assert len(raw_partitions(glue_api, glue_db)) == 150
    # One partition there with another stamp: that entry fails, the others of the batch are applied (Glue's
    # batches are not transactions), and the error names it.
    add_raw(glue_api, glue_db, [DAYS[160]], stamp="other")
    adds = [NewPartition((d,), f"s3://new/{d}") for d in DAYS[150:170]]
    with pytest.raises(errors.CatalogError, match=rf"refused 1 of 20 entries.*dt={DAYS[160]}: AlreadyExists"):
        catalog.add_partitions(table, adds, {SWAP_ID_PARAM: "s2"})
    parts = raw_partitions(glue_api, glue_db)
    assert len(parts) == 170 and parts[DAYS[160]]["Parameters"][SWAP_ID_PARAM] == "other"
    # An update whose partition was dropped after the plan's read: that entry fails, the rest apply.
    changes = [LocationChange((d,), f"s3://new/{d}", f"s3://newer/{d}") for d in DAYS[5:10]]
    snap = catalog.snapshot(glue_db, "events", [c.values for c in changes])
    glue_api.batch_delete_partition(DatabaseName=glue_db, TableName="events", PartitionsToDelete=[{"Values": [DAYS[7]]}])
    with pytest.raises(errors.CatalogError, match=rf"refused 1 of 5 entries.*dt={DAYS[7]}: EntityNotFound"):
        catalog.alter_partition_locations(table, changes, {SWAP_ID_PARAM: "s3"}, snapshot=snap)
    parts = raw_partitions(glue_api, glue_db)
    assert parts[DAYS[5]]["StorageDescriptor"]["Location"] == f"s3://newer/{DAYS[5]}"
    assert parts[DAYS[5]]["Parameters"][SWAP_ID_PARAM] == "s3"
    # A drop of a partition already gone is no error.
    assert catalog.drop_partitions_keep_data(table, [(DAYS[7],), (DAYS[5],)]) == 1
    assert DAYS[5] not in raw_partitions(glue_api, glue_db)


def test_a_lost_response_is_reconciled_by_the_stamps_never_resent(catalog, glue_api, glue_db):
    create_table(glue_api, glue_db)
    table = catalog.get_table(glue_db, "events")
    faults = Faults(catalog, glue_api)
    # The batch landed, its answer was lost: the re-read finds every stamp; nothing is sent again.
    faults.lose_response("BatchCreatePartition")
    assert catalog.add_partitions(table, [NewPartition((d,), f"s3://a/{d}") for d in DAYS[:30]],
                                  {SWAP_ID_PARAM: "s1"}) == 1
    assert faults.count("BatchCreatePartition") == 1 and len(raw_partitions(glue_api, glue_db)) == 30
    # The batch never arrived: the re-read finds no stamp; sent once more, it lands.
    faults.refuse_connection("BatchCreatePartition")
    assert catalog.add_partitions(table, [NewPartition((d,), f"s3://a/{d}") for d in DAYS[30:40]],
                                  {SWAP_ID_PARAM: "s1"}) == 2
    assert faults.count("BatchCreatePartition") == 3 and len(raw_partitions(glue_api, glue_db)) == 40
    # A repoint whose answer was lost: reconciled as landed.
    faults.lose_response("BatchUpdatePartition")
    changes = [LocationChange((d,), f"s3://a/{d}", f"s3://b/{d}") for d in DAYS[:10]]
    assert catalog.alter_partition_locations(table, changes, {SWAP_ID_PARAM: "s2"}) == 1
    assert faults.count("BatchUpdatePartition") == 1
    assert {raw_partitions(glue_api, glue_db)[d]["StorageDescriptor"]["Location"] for d in DAYS[:10]} == \
        {f"s3://b/{d}" for d in DAYS[:10]}
    # A drop whose answer was lost.
    faults.lose_response("BatchDeletePartition")
    assert catalog.drop_partitions_keep_data(table, [(d,) for d in DAYS[:10]]) == 1
    assert faults.count("BatchDeletePartition") == 1 and len(raw_partitions(glue_api, glue_db)) == 30
    # Lost twice with nothing landed: the outcome is not guessed.
    faults.refuse_connection("BatchCreatePartition", times=2)
    with pytest.raises(errors.CommitStateUnknownError, match="tableswap recover"):
        catalog.add_partitions(table, [NewPartition(("2030-01-01",), "s3://a/x")], {SWAP_ID_PARAM: "s3"})
    # A temporary table whose answer was lost.
    faults.lose_response("CreateTable")
    catalog.create_staging_table(table, "tmp1", "s3://t/1", {})
    assert catalog.table_exists(glue_db, "tmp1") and faults.count("CreateTable") == 1


@pytest.mark.parametrize("code", ["InternalServiceException", "OperationTimeoutException"])
def test_a_server_error_that_may_hide_an_applied_write_is_reconciled_by_the_stamps(catalog, glue_api, glue_db, code):
    """Glue answers a write with a server error after applying it: the adapter reads back and decides from the
    stamps, as after a lost response; it never resends a batch that landed. One that did not land is sent
    again."""
    create_table(glue_api, glue_db)
    table = catalog.get_table(glue_db, "events")
    faults = Faults(catalog, glue_api)
    faults.fail_after_apply("BatchCreatePartition", code)
    assert catalog.add_partitions(table, [NewPartition((d,), f"s3://a/{d}") for d in DAYS[:30]],
                                  {SWAP_ID_PARAM: "s1"}) == 1
    assert faults.count("BatchCreatePartition") == 1 and len(raw_partitions(glue_api, glue_db)) == 30
    faults.fail("BatchCreatePartition", code)  # refused before it was applied: not landed, sent again
    assert catalog.add_partitions(table, [NewPartition((d,), f"s3://a/{d}") for d in DAYS[30:40]],
                                  {SWAP_ID_PARAM: "s1"}) == 2
    assert faults.count("BatchCreatePartition") == 3 and len(raw_partitions(glue_api, glue_db)) == 40
    faults.fail_after_apply("BatchUpdatePartition", code)
    changes = [LocationChange((d,), f"s3://a/{d}", f"s3://b/{d}") for d in DAYS[:10]]
    assert catalog.alter_partition_locations(table, changes, {SWAP_ID_PARAM: "s2"}) == 1
    assert faults.count("BatchUpdatePartition") == 1
    assert {raw_partitions(glue_api, glue_db)[d]["StorageDescriptor"]["Location"] for d in DAYS[:10]} == \
        {f"s3://b/{d}" for d in DAYS[:10]}
    faults.fail_after_apply("BatchDeletePartition", code)
    assert catalog.drop_partitions_keep_data(table, [(d,) for d in DAYS[:10]]) == 1
    assert faults.count("BatchDeletePartition") == 1 and len(raw_partitions(glue_api, glue_db)) == 30
    faults.fail_after_apply("CreateTable", code)
    catalog.create_staging_table(table, "tmp1", "s3://t/1", {})
    assert catalog.table_exists(glue_db, "tmp1") and faults.count("CreateTable") == 1
    # The table repoint, fenced by VersionId: a blind resend would be refused as a conflict ("nothing was
    # altered") although the first send applied it.
    create_table(glue_api, glue_db, "dim", partitioned=False, location="s3://bucket/dim/v0")
    dim = catalog.get_table(glue_db, "dim")
    faults.enforce_version_id()
    faults.fail_after_apply("UpdateTable", code)
    catalog.alter_table_location(dim, "s3://bucket/dim/v0", "s3://bucket/dim/v1", {SWAP_ID_PARAM: "s3"})
    assert faults.count("UpdateTable") == 1
    raw = glue_api.get_table(DatabaseName=glue_db, Name="dim")["Table"]
    assert raw["StorageDescriptor"]["Location"] == "s3://bucket/dim/v1" and raw["Parameters"][SWAP_ID_PARAM] == "s3"
    # Neither landed nor answered, twice: the outcome is not guessed.
    faults.fail("BatchCreatePartition", code, times=2)
    with pytest.raises(errors.CommitStateUnknownError, match=f"{code}.*tableswap recover"):
        catalog.add_partitions(table, [NewPartition(("2030-01-01",), "s3://a/x")], {SWAP_ID_PARAM: "s4"})


def test_the_table_repoint_is_fenced_by_version_id(catalog, glue_api, glue_db):
    create_table(glue_api, glue_db, "dim", partitioned=False, location="s3://bucket/dim/v0",
                 parameters={"numRows": "3", "spark.sql.statistics.totalSize": "9"})
    faults = Faults(catalog, glue_api)
    snap = catalog.snapshot(glue_db, "dim")
    table = snap.table
    catalog.alter_table_location(table, "s3://bucket/dim/v0", "s3://bucket/dim/v1", {SWAP_ID_PARAM: "s1"},
                                 {"tableswap.root": "s3://bucket/dim"}, snapshot=snap)
    raw = glue_api.get_table(DatabaseName=glue_db, Name="dim")["Table"]
    assert raw["StorageDescriptor"]["Location"] == "s3://bucket/dim/v1"
    assert raw["Parameters"][SWAP_ID_PARAM] == "s1" and "numRows" not in raw["Parameters"]
    assert "spark.sql.statistics.totalSize" not in raw["Parameters"]
    sent = [p for op, p in faults.sent if op == "UpdateTable"][-1]
    assert sent["VersionId"] == snap._raw_table["VersionId"] and sent["SkipArchive"] is True
    # The location moved since the read: refused before anything is sent.
    stale = catalog.snapshot(glue_db, "dim")
    with pytest.raises(errors.SwapConflictError, match="nothing was altered"):
        catalog.alter_table_location(stale.table, "s3://bucket/dim/v0", "s3://bucket/dim/v2", {SWAP_ID_PARAM: "s2"},
                                     snapshot=stale)
    # moto accepts a stale VersionId (measured): the fence is Glue's, so it is proven with Glue's check
    # added in front of the emulator. Another writer changes the table after our read under the lock.
    faults.enforce_version_id()
    glue_api.update_table(DatabaseName=glue_db, TableInput={**{k: raw[k] for k in ("Name", "StorageDescriptor", "TableType")},
                                                    "Parameters": {**raw["Parameters"], "comment": "other"}})
    with pytest.raises(errors.SwapConflictError, match="VersionId"):
        catalog.alter_table_location(stale.table, "s3://bucket/dim/v1", "s3://bucket/dim/v2", {SWAP_ID_PARAM: "s2"},
                                     snapshot=stale)
    now = glue_api.get_table(DatabaseName=glue_db, Name="dim")["Table"]
    assert now["StorageDescriptor"]["Location"] == "s3://bucket/dim/v1" and now["Parameters"]["comment"] == "other"
    # A repoint whose answer was lost is reconciled, not resent.
    faults.lose_response("UpdateTable")
    fresh = catalog.snapshot(glue_db, "dim")
    n = faults.count("UpdateTable")
    catalog.alter_table_location(fresh.table, "s3://bucket/dim/v1", "s3://bucket/dim/v3", {SWAP_ID_PARAM: "s3"},
                                 snapshot=fresh)
    assert faults.count("UpdateTable") == n + 1
    assert glue_api.get_table(DatabaseName=glue_db, Name="dim")["Table"]["StorageDescriptor"]["Location"] == "s3://bucket/dim/v3"


def test_the_version_id_fence_is_not_honoured_by_moto(catalog, glue_api, glue_db):
    """What the emulator does (measured): if moto starts honouring VersionId this fails, and the injected check
    above can give way to the emulator's own."""
    create_table(glue_api, glue_db, "dim", partitioned=False)
    raw = glue_api.get_table(DatabaseName=glue_db, Name="dim")["Table"]
    ti = {k: raw[k] for k in ("Name", "StorageDescriptor", "TableType")}
    glue_api.update_table(DatabaseName=glue_db, TableInput=ti, VersionId=raw["VersionId"])
    glue_api.update_table(DatabaseName=glue_db, TableInput=ti, VersionId=raw["VersionId"])  # stale, yet accepted


def test_clear_table_statistics(catalog, glue_api, glue_db):
    create_table(glue_api, glue_db, parameters={"numRows": "3", "keep": "1"})
    table = catalog.get_table(glue_db, "events")
    assert catalog.clear_table_statistics(table) == 1
    params = glue_api.get_table(DatabaseName=glue_db, Name="events")["Table"]["Parameters"]
    assert "numRows" not in params and params["keep"] == "1"
    assert catalog.clear_table_statistics(catalog.get_table(glue_db, "events")) == 0


# --------------------------------------------------------------------------- the lease
def test_a_second_holder_waits_and_times_out_naming_the_first(catalog, glue_db):
    # A lease of 3 s against a wait of 2 s: the second cannot take it over however slow the machine.
    first = catalog.table_lock(glue_db, "events", owner="swap-one", timeout_s=5, heartbeat_s=1)
    with first:
        assert first.lock_id
        holders = catalog.lock_holders(glue_db, "events")
        assert len(holders) == 1 and "swap=swap-one " in holders[0].agent_info + " "
        assert catalog.count_locks() == 1
        started = time.monotonic()
        second = catalog.sibling().open().table_lock(glue_db, "events", owner="swap-two", timeout_s=2, heartbeat_s=1)
        with pytest.raises(errors.LockTimeoutError, match="held by swap-one") as info:
            second.acquire()
        assert time.monotonic() - started >= 2 and info.value.retryable
        first.ensure_held()
        first.confirm()
        assert first.heartbeats >= 2  # 2 s of heartbeats every second, and the confirmation
    assert catalog.lock_holders(glue_db, "events") == [] and catalog.count_locks() == 0
    with catalog.table_lock(glue_db, "events", owner="swap-two", timeout_s=1, heartbeat_s=0.5):
        pass  # released: taken at once


def test_a_long_wait_for_a_lease_says_who_holds_it_while_waiting(catalog, glue_db, caplog, monkeypatch):
    """As for the Hive Metastore's lock (tests/integration/test_lock_safety.py): a warning names the holder after
    WAIT_NOTICE_S and again every WAIT_NOTICE_EVERY_S, with how long its lease lasts."""
    import logging

    from tableswap.glue import lease as lease_module

    monkeypatch.setattr(lease_module, "WAIT_NOTICE_S", 0.5)
    monkeypatch.setattr(lease_module, "WAIT_NOTICE_EVERY_S", 1.0)
    caplog.set_level(logging.WARNING, logger="tableswap.lock")
    with catalog.table_lock(glue_db, "events", owner="the_holder", timeout_s=30, heartbeat_s=1):
        waiter = catalog.sibling().open().table_lock(glue_db, "events", owner="the_waiter", timeout_s=2.8, heartbeat_s=1)
        with pytest.raises(errors.LockTimeoutError):
            waiter.acquire()
    notices = [r.getMessage() for r in caplog.records if "lock.waiting" in r.getMessage()]
    assert 2 <= len(notices) <= 3, notices
    assert all("swap=the_holder" in n and f"{glue_db}.events" in n and "unrenewed for 3s" in n for n in notices), notices


def test_an_expired_lease_is_taken_over_and_its_holder_loses_the_lock(catalog, glue_db):
    dead = catalog.table_lock(glue_db, "events", owner="swap-dead", timeout_s=5, heartbeat_s=0.3).acquire()
    dead._stop.set()  # its process stops renewing (paused, or killed without releasing)
    dead._thread.join()
    assert catalog.lock_holders(glue_db, "events")[0].state == "ACQUIRED"
    started = time.monotonic()
    other = catalog.sibling().open()
    with other.table_lock(glue_db, "events", owner="swap-next", timeout_s=10, heartbeat_s=1) as taker:
        waited = time.monotonic() - started
        assert taker.taken_over == "swap-dead"
        assert waited >= dead.lease_s  # not before a whole lease unrenewed, on the taker's clock
        with pytest.raises(errors.LockLostError, match="taken over by swap-next"):
            dead.confirm()
        with pytest.raises(errors.LockLostError):
            dead.ensure_held()
        dead.release()  # its release does not remove the new holder's lease
        assert [h.agent_info.split()[1] for h in catalog.lock_holders(glue_db, "events")] == ["swap=swap-next"]
        taker.confirm()


def test_ensure_held_renews_an_overdue_lease_and_notices_a_takeover(catalog, glue_db):
    lock = catalog.table_lock(glue_db, "t", owner="a", timeout_s=5, heartbeat_s=0.2).acquire()
    lock._stop.set()
    lock._thread.join()
    n = lock.heartbeats
    time.sleep(0.3)
    lock.ensure_held()  # overdue: renewed now
    assert lock.heartbeats == n + 1
    store = catalog.lease_store()
    item = store.get(lock.key)
    assert store.put({"lock_key": lock.key, "holder": "thief", "owner": "b", "version": "v2", "lease_ms": 1000,
                      "renewed_ms": int(time.time() * 1000)}, "version = :v", {":v": item["version"]})
    time.sleep(0.3)
    with pytest.raises(errors.LockLostError, match="taken over by b"):
        lock.ensure_held()
    lock.release()


def test_the_heartbeat_keeps_a_lease_past_its_duration(catalog, glue_db):
    with catalog.table_lock(glue_db, "t", owner="long", timeout_s=5, heartbeat_s=0.5) as lock:
        time.sleep(lock.lease_s * 2)  # two leases long: renewed meanwhile
        assert lock.heartbeats >= 3
        # A waiter long enough to take over a dead lease (as the test above shows) finds this one alive.
        second = catalog.sibling().open().table_lock(glue_db, "t", owner="b", timeout_s=lock.lease_s + 1, heartbeat_s=0.5)
        with pytest.raises(errors.LockTimeoutError, match="held by long"):
            second.acquire()
        lock.ensure_held()


def test_two_threads_contend_and_serialize(catalog, glue_db):
    order: list[str] = []
    overlaps: list[str] = []
    inside = threading.Lock()

    def worker(name: str) -> None:
        cat = catalog.sibling().open()
        with cat.table_lock(glue_db, "t", owner=name, timeout_s=20, heartbeat_s=2):
            if not inside.acquire(blocking=False):
                overlaps.append(name)
                return
            order.append(name)
            time.sleep(0.3)
            inside.release()

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == [] and sorted(order) == ["w0", "w1", "w2"]


# --------------------------------------------------------------------------- through the commit protocol
def _begin(rt: Runtime, swap_id: str, db: str, root: str):
    """Begin a swap of ``db.events`` as ``swap_partitions`` does before its Spark write; the operation."""
    from tableswap.core.records import SwapKind
    from tableswap.ops.operation import Operation, begin

    op = Operation(SwapKind.PARTITIONS, swap_id, db, "events", root)
    begin(rt.journal, op)
    return op


def _written(swap_id: str, db: str, root: str, days: list[str]):
    from tableswap.core.catalog import PartitionInfo
    from tableswap.core.plan import WrittenPartitions

    return WrittenPartitions(swap_id, db, "events", tuple(
        PartitionInfo((d,), f"{root}/_tableswap/{swap_id}/dt={d}", {"numFiles": "1"}) for d in days))


def test_the_commit_protocol_flips_a_glue_table_in_chunks_under_the_lease(glue_aws, glue_api, glue_db, tmp_path):
    """ops/commit.py on the Glue adapter, through a runtime built from a glue:// URI (no Spark): the lease is
    taken, the plan made from the snapshot read under it, the intent journaled, and the flip sent in Glue's
    chunk sizes with the lease confirmed before each chunk."""
    from tableswap.ops.commit import commit

    root = f"file://{tmp_path}/events"
    create_table(glue_api, glue_db, location=root)
    settings = resolve(metastore_uri=f"glue://{REGION}", journal_url=f"sqlite:///{tmp_path / 'j.db'}",
                       lock_timeout_s=10, heartbeat_s=5)
    with Runtime(settings) as rt, rt.catalog() as client:
        table = client.get_table(glue_db, "events")
        op = _begin(rt, "s1", glue_db, root)
        done = commit(rt, table, op.planned(_written("s1", glue_db, root, DAYS)), catalog=client)
        assert len(done.plan.adds) == 230
        assert rt.journal.get_swap("s1").state == "committed"
        parts = raw_partitions(glue_api, glue_db)
        assert len(parts) == 230 and {p["Parameters"][SWAP_ID_PARAM] for p in parts.values()} == {"s1"}
        # A second swap replaces 150 of them and adds 20: 2 repoint chunks, 1 add chunk.
        faults = Faults(client, glue_api)
        op = _begin(rt, "s2", glue_db, root)
        done = commit(rt, table, op.planned(_written("s2", glue_db, root, DAYS[:150] + [f"2031-01-{i:02d}"
                                                                                    for i in range(1, 21)])),
                      catalog=client)
        assert (len(done.plan.adds), len(done.plan.replaces)) == (20, 150)
        assert faults.sizes("BatchUpdatePartition", "Entries") == [100, 50]
        assert faults.sizes("BatchCreatePartition", "PartitionInputList") == [20]
        swap = rt.journal.get_swap("s2")
        assert swap.state == "committed"
        parts = raw_partitions(glue_api, glue_db)
        assert sum(p["Parameters"][SWAP_ID_PARAM] == "s2" for p in parts.values()) == 170 and len(parts) == 250


def test_a_lease_lost_between_chunks_stops_the_flip_and_recover_completes_it(glue_aws, glue_api, glue_db, tmp_path):
    from tableswap.ops.commit import commit

    root = f"file://{tmp_path}/events"
    create_table(glue_api, glue_db, location=root)
    settings = resolve(metastore_uri=f"glue://{REGION}", journal_url=f"sqlite:///{tmp_path / 'j.db'}",
                       lock_timeout_s=10, heartbeat_s=5)
    with Runtime(settings) as rt, rt.catalog() as client:
        table = client.get_table(glue_db, "events")
        store = client.lease_store()
        faults = Faults(client, glue_api)

        def steal(**_: Any) -> None:  # after the first chunk landed, another process takes the lease
            key = f"glue/{REGION}/{glue_db}.events"
            item = store.get(key)
            if item and item["owner"] == "s1":
                store.put({"lock_key": key, "holder": "other", "owner": "thief", "version": "x", "lease_ms": 60000,
                           "renewed_ms": int(time.time() * 1000)}, "version = :v", {":v": item["version"]})
        faults.events.register("after-call.glue.BatchCreatePartition", steal)
        op = _begin(rt, "s1", glue_db, root)
        with pytest.raises(errors.TableSwapError) as info:
            commit(rt, table, op.planned(_written("s1", glue_db, root, DAYS)), catalog=client)
        # The flip stops before its next chunk; the swap is half applied, each partition old or new: recover's.
        assert isinstance(info.value, errors.CommitStateUnknownError), repr(info.value)
        assert isinstance(info.value.__cause__, errors.LockLostError) and "taken over by thief" in str(info.value)
        # Exactly the first chunk landed: the second was never sent.
        assert faults.count("BatchCreatePartition") == 1 and len(raw_partitions(glue_api, glue_db)) == 100
        assert rt.journal.get_swap("s1").state != "committed"
        # The other process is gone; recover finishes the half-applied flip from the journal.
        from tableswap.ops.restore.recover import recover

        faults.events.unregister("after-call.glue.BatchCreatePartition", steal)
        store.delete(f"glue/{REGION}/{glue_db}.events", "other")
        resolution, = recover(f"{glue_db}.events", runtime=rt).resolutions
        assert (resolution.outcome, resolution.state_after) == ("completed", "committed"), resolution.detail
        assert sum(i.verdict == "landed" for i in resolution.items) == 100
        parts = raw_partitions(glue_api, glue_db)
        assert len(parts) == 230 and {p["Parameters"][SWAP_ID_PARAM] for p in parts.values()} == {"s1"}
        assert rt.journal.get_swap("s1").state == "committed"


def test_rollback_history_recover_and_janitor_run_on_a_glue_table(glue_aws, glue_api, glue_db, tmp_path):
    """The operations above the port, on Glue, without Spark: swaps committed through the protocol, rolled back
    (itself a journaled, leased swap), the history read, recover finding nothing to do, and the janitor deleting
    the displaced directories while keeping those the rollback made live again."""
    from tableswap.ops.commit import commit
    from tableswap.ops.inspect.history import show
    from tableswap.ops.janitor.run import run_janitor
    from tableswap.ops.restore.recover import recover
    from tableswap.ops.restore.rollback import rollback

    root = tmp_path / "events"
    create_table(glue_api, glue_db, location=f"file://{root}")
    settings = resolve(metastore_uri=f"glue://{REGION}", journal_url=f"sqlite:///{tmp_path / 'j.db'}",
                       lock_timeout_s=10, heartbeat_s=5)
    days = DAYS[:120]
    for swap_id, chosen in (("s1", days), ("s2", days[:110] + ["2031-01-01"])):
        for d in chosen:  # the staged files the swap would have written
            (root / "_tableswap" / swap_id / f"dt={d}").mkdir(parents=True)
            (root / "_tableswap" / swap_id / f"dt={d}" / "part-0.parquet").write_bytes(b"x")
    with Runtime(settings) as rt:
        with rt.catalog() as client:
            table = client.get_table(glue_db, "events")
            for swap_id, chosen in (("s1", days), ("s2", days[:110] + ["2031-01-01"])):
                op = _begin(rt, swap_id, glue_db, f"file://{root}")
                commit(rt, table, op.planned(_written(swap_id, glue_db, f"file://{root}", chosen)), catalog=client)
        assert sum(p["Parameters"][SWAP_ID_PARAM] == "s2" for p in raw_partitions(glue_api, glue_db).values()) == 111
        result = rollback(f"{glue_db}.events", runtime=rt)
        parts = raw_partitions(glue_api, glue_db)
        assert "2031-01-01" not in parts and len(parts) == 120
        assert {p["StorageDescriptor"]["Location"].split("/")[-2] for p in parts.values()} == {"s1"}
        swaps = {r.swap_id: r.state for r in rt.journal.list_swaps(glue_db, "events")}
        assert swaps == {"s1": "committed", "s2": "committed", result.swap_id: "committed"}
        show(f"{glue_db}.events", runtime=rt)  # the history command's read, through the port
        assert recover(f"{glue_db}.events", runtime=rt).resolutions == ()
        # The janitor deletes what the rollback displaced (s2's directories), never what is live again (s1's).
        report = run_janitor(grace="0s", force_short_grace=True, dry_run=False, table=f"{glue_db}.events", runtime=rt)
        assert len(report.deleted) == 111 and all("/_tableswap/s2/" in o.location for o in report.deleted), report
    assert not (root / "_tableswap" / "s2").exists() or not any((root / "_tableswap" / "s2").rglob("*.parquet"))
    assert len(list((root / "_tableswap" / "s1").rglob("*.parquet"))) == 120


def test_doctor_on_a_glue_catalog(glue_aws, glue_api, glue_db, tmp_path, monkeypatch):
    """`tableswap doctor` through the port: Glue answers, a lease is taken and released on the table, and the lock
    expiry check speaks of the lease (no Hive Metastore setting decides it)."""
    from tableswap.ops.inspect.doctor import run_doctor

    monkeypatch.setenv("TABLESWAP_GLUE_LOCK_TABLE", f"tsl_{uuid.uuid4().hex[:8]}")
    create_table(glue_api, glue_db, location=f"file://{tmp_path}/events")
    report = run_doctor(table=f"{glue_db}.events", metastore_uri=f"glue://{REGION}",
                        journal_url=f"sqlite:///{tmp_path / 'j.db'}")
    got = {c.name: c for c in report.checks}
    assert got["metastore"].status == "ok" and "glue://us-east-1 answered" in got["metastore"].detail
    assert got["locks"].status == "ok" and got["locks"].facts["lock_id"] and "lease on" in got["locks"].detail
    assert got["lock expiry"].status == "ok" and "leases of tableswap's own" in got["lock expiry"].detail
    assert got["lock expiry"].facts["lease_s"] == 60
    assert {e.key: e.source for e in report.config}["glue.lock_table"] == "env TABLESWAP_GLUE_LOCK_TABLE"
