"""The notification log's messages as the janitor decodes them, and what each event means for its reference
index (tableswap.core.notifications); the index's fallback on an event it cannot follow (a fake log: a real
server writes no unknown event type)."""

from __future__ import annotations

import base64
import gzip
import json

from tableswap import errors
from tableswap.core import notifications as ev
from tableswap.core.catalog import Column, TableInfo
from tableswap.journal import Journal
from tableswap.journal.refindex import ReferenceIndexStore
from tableswap.ops.janitor.refs import ReferenceScan

ADD = {"server": "thrift://h:9083", "db": "d", "table": "t", "tableType": "EXTERNAL_TABLE",
       "partitions": [{"dt": "2026-11-29", "hour": "01"}], "partitionListJson": ["..."]}


def thrift_json_partition(*values: str) -> str:
    """A Partition in Thrift's TJSONProtocol, as Hive's messages carry it (field 1: the values)."""
    return json.dumps({"1": {"lst": ["str", len(values), *values]}, "2": {"str": "d"}, "3": {"str": "t"}})


def test_json_and_gzip_json_messages_decode_to_the_same_object():
    text = json.dumps(ADD)
    assert ev.decode_message(text, "json-0.2") == ADD
    packed = base64.b64encode(gzip.compress(text.encode())).decode()
    assert ev.decode_message(packed, "gzip(json-2.0)") == ADD  # Hive 4's GzipJSONMessageEncoder
    assert ev.decode_message(packed, "json-0.2") is None  # not JSON: unread, not guessed
    assert ev.decode_message(text, "avro-1") is None and ev.decode_message("", "json-0.2") is None
    assert ev.decode_message("not json", "gzip(json-2.0)") is None


def test_partition_events_name_their_partitions():
    assert ev.partition_values("ADD_PARTITION", ADD) == ({"dt": "2026-11-29", "hour": "01"},)
    assert ev.partition_values("DROP_PARTITION", {"partitions": [{"dt": "a"}, {"dt": "b"}]}) == (
        {"dt": "a"}, {"dt": "b"})
    alter = {"keyValues": {"dt": "a"}, "partitionObjAfterJson": thrift_json_partition("b")}
    assert ev.partition_values("ALTER_PARTITION", alter) == ({"dt": "a"}, {"0": "b"})  # a rename: both
    assert ev.partition_values("ALTER_PARTITION", {"keyValues": {"dt": "a"}}) is None  # after unknown
    assert ev.partition_values("ADD_PARTITION", {"partitions": "?"}) is None
    assert ev.partition_values("ADD_PARTITION", None) is None


def test_a_renamed_table_is_read_from_the_message():
    after = json.dumps({"1": {"str": "New_Name"}, "2": {"str": "DB"}})
    assert ev.renamed_table("ALTER_TABLE", {"tableObjAfterJson": after}) == ("db", "new_name")
    assert ev.renamed_table("ALTER_TABLE", {"tableObjAfterJson": "{}"}) is None
    assert ev.renamed_table("CREATE_TABLE", {"tableObjAfterJson": after}) is None


def test_what_each_event_means_for_the_references():
    def kind(event_type, partitions=None, catalog=None, table="t"):
        return ev.effect(ev.NotificationEvent(1, event_type, "d", table, partitions, catalog))

    assert kind("INSERT") == kind("COMMIT_TXN") == kind("UPDATE_PARTITION_COLUMN_STAT") == ev.NONE
    assert kind("ADD_PARTITION", ({"dt": "a"},)) == ev.PARTITIONS
    assert kind("ALTER_PARTITION") == ev.TABLE  # partitions not named: the table in full
    assert kind("ALTER_TABLE") == kind("CREATE_TABLE") == kind("DROP_TABLE") == ev.TABLE
    assert kind("DROP_DATABASE") == ev.DATABASE
    assert kind("RELOAD") == kind("CREATE_CATALOG") == kind("SOMETHING_NEW") == ev.UNKNOWN
    assert kind("ADD_PARTITION", ({"dt": "a"},), catalog="spark") == ev.UNKNOWN
    assert kind("DROP_TABLE", table=None) == ev.UNKNOWN


class LoggedCatalog:
    """One table ``d.t`` (root file:/w/t, partitions dt=a, dt=b) and a notification log (fault injection)."""

    uri = "thrift://fake:9083"

    def __init__(self) -> None:
        self.info = TableInfo("d", "t", "EXTERNAL_TABLE", "file:/w/t", (), (Column("dt", "string"),))
        self.parts = {"dt=a": "file:/w/t/dt=a", "dt=b": "file:/w/t/dt=b"}
        self.events: list[ev.NotificationEvent] = []
        self.partition_reads = 0

    def current_event_id(self) -> int:
        return self.events[-1].event_id if self.events else 0

    def events_after(self, last: int, limit: int = 1000) -> list[ev.NotificationEvent]:
        return [e for e in self.events if e.event_id > last][:limit]

    def list_databases(self) -> list[str]:
        return ["d"]

    def list_tables(self, db: str, pattern: str = "*") -> list[str]:
        return ["t"]

    def get_table(self, db: str, name: str) -> TableInfo:
        if (db, name) != ("d", "t"):
            raise errors.TableNotFoundError(f"{db}.{name}")
        return self.info

    def get_tables(self, db: str, names) -> list[TableInfo]:
        return [self.info] if "t" in names else []

    def partition_names(self, db: str, name: str) -> list[str]:
        return sorted(self.parts)

    def partition_locations(self, db: str, name: str, names):
        self.partition_reads += len(names)
        yield [((n[3:],), self.parts[n]) for n in names if n in self.parts]


def test_an_event_the_index_cannot_follow_means_a_full_scan(tmp_path):
    catalog = LoggedCatalog()
    catalog.events.append(ev.NotificationEvent(1, "CREATE_TABLE", "d", "t"))
    journal = Journal(f"sqlite:///{tmp_path / 'j.db'}")
    store = ReferenceIndexStore(journal, "metastore thrift://fake:9083")

    def run() -> ReferenceScan:
        refs = ReferenceScan(catalog, index=store, names=None)
        refs.set_targets([("d", "t")])
        refs.ensure()
        refs.save_index()
        return refs

    assert run().source == "full scan"
    catalog.parts["dt=c"] = "file:/w/t/dt=c"
    catalog.events.append(ev.NotificationEvent(2, "ADD_PARTITION", "d", "t", ({"dt": "c"},)))
    followed = run()
    assert followed.source == "index" and followed.stats.partitions == 1
    assert [r.partition for r in followed.view("d", "t").refs if r.partition] == ["dt=a", "dt=b", "dt=c"]

    catalog.events.append(ev.NotificationEvent(3, "A_TYPE_OF_A_LATER_RELEASE", "d", "t"))
    unknown = run()
    assert unknown.source == "full scan" and "A_TYPE_OF_A_LATER_RELEASE" in (unknown.full_scan_reason or "")
    assert unknown.stats.partitions == 3  # everything read again
    assert store.state() is not None and store.state().last_event_id == 3  # rebuilt
    journal.close()
