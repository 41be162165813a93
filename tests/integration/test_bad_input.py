"""Bad input gets a clear TableSwapError subclass and changes nothing (metastore and files)."""

from __future__ import annotations

import socket
import threading

import pytest

from tableswap import TableSwapError, swap_partitions, swap_table
from tableswap import errors

from ..support.helpers import batch_df, create_events, file_tree, metastore_snapshot, today
from ..unit.test_error_data import TABLE_ERRORS

pytestmark = pytest.mark.integration


@pytest.fixture
def refused_events(spark, db, tmp_path, hms, ts_env):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 3, (today(1),): 3}, "initial").write.insertInto(table)
    return table


def _assert_unchanged(hms, db, tmp_path, action):
    snap, files = metastore_snapshot(hms, db), file_tree(tmp_path)
    action()
    assert metastore_snapshot(hms, db) == snap
    assert file_tree(tmp_path) == files


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class _NotAMetastore:
    """A loopback TCP server that answers every connection with an HTTP error, then hangs up."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")


def _not_a_metastore_uri() -> str:
    return f"thrift://127.0.0.1:{_NotAMetastore().port}"


CASES = {
    "not-a-dataframe": (errors.InvalidInputError, "df must be a Spark DataFrame",
                        lambda spark, db: swap_partitions(None, f"{db}.events")),
    "list-instead-of-dataframe": (errors.InvalidInputError, "df must be a Spark DataFrame",
                                  lambda spark, db: swap_table([(1, "a", "b")], f"{db}.events")),
    "partition-column-wrong-type": (errors.SchemaMismatchError, "column 'dt' is int in the DataFrame but string",
                                    lambda spark, db: swap_partitions(
                                        batch_df(spark, {(today(0),): 1}, "x").selectExpr("id", "value", "batch", "1 AS dt"),
                                        f"{db}.events")),
    "struct-for-string-column": (errors.SchemaMismatchError, "column 'value' is struct<a:int> in the DataFrame",
                                 lambda spark, db: swap_partitions(
                                     batch_df(spark, {(today(0),): 1}, "x").selectExpr(
                                         "id", "named_struct('a', 1) AS value", "batch", "dt"), f"{db}.events")),
    "newline-in-table-name": (errors.InvalidInputError, "bad table name",
                              lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"),
                                                                f"{db}.events\nDROP TABLE x")),
    "non-ascii-table-name": (errors.InvalidInputError, "bad table name",
                             lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), f"{db}.événements")),
    "port-that-is-not-a-metastore": (errors.CatalogError, "not in the Hive Metastore's Thrift protocol",
                                     lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"),
                                                                       f"{db}.events", metastore_uri=_not_a_metastore_uri())),
    "unknown-table": (errors.TableNotFoundError, "does not exist",
                      lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), f"{db}.nope")),
    "unknown-database": (errors.TableNotFoundError, "database 'no_such_db' does not exist",
                         lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), "no_such_db.events")),
    "bad-name": (errors.InvalidInputError, "bad table name",
                 lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), f"{db}.ev`; DROP TABLE x")),
    "swap_table-on-partitioned": (errors.PartitioningMismatchError, "use swap_partitions",
                                  lambda spark, db: swap_table(batch_df(spark, {(today(0),): 1}, "x"), f"{db}.events")),
    "missing-column": (errors.SchemaMismatchError, "missing column 'value'",
                       lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x").drop("value"), f"{db}.events")),
    "missing-partition-column": (errors.SchemaMismatchError, "missing partition column 'dt'",
                                 lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x").drop("dt"), f"{db}.events")),
    "extra-column": (errors.SchemaMismatchError, "not in the table: 'extra'",
                     lambda spark, db: swap_partitions(
                         batch_df(spark, {(today(0),): 1}, "x").selectExpr("*", "1 AS extra"), f"{db}.events")),
    "incompatible-type": (errors.SchemaMismatchError, "column 'id' is string in the DataFrame but bigint",
                          lambda spark, db: swap_partitions(
                              batch_df(spark, {(today(0),): 1}, "x").selectExpr("CAST(id AS string) AS id", "value", "batch", "dt"),
                              f"{db}.events")),
    "empty-batch": (errors.EmptyBatchError, "no rows",
                    lambda spark, db: swap_partitions(batch_df(spark, {}, "x"), f"{db}.events")),
    "too-long-partition-value": (errors.InvalidPartitionValueError, "at most 255",
                                 lambda spark, db: swap_partitions(batch_df(spark, {("x" * 300,): 1}, "x"), f"{db}.events")),
    "metastore-unreachable": (errors.CatalogUnavailableError, "thrift://127.0.0.1:",
                              lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), f"{db}.events",
                                                                metastore_uri=f"thrift://127.0.0.1:{_free_port()}",
                                                                connect_attempts=2)),
    "bad-journal-url": (errors.JournalError, "journal",
                        lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), f"{db}.events",
                                                          journal_url="nosuchdialect://x")),
    "three-part-name": (errors.InvalidInputError, "bad table name",
                        lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), f"cat.{db}.events")),
    "empty-name": (errors.InvalidInputError, "bad table name",
                   lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), "")),
    "quote-injection-name": (errors.InvalidInputError, "bad table name",
                             lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"),
                                                               f"{db}.events' OR '1'='1")),
    "unqualified-name-not-in-current-db": (errors.TableNotFoundError, "does not exist",
                                           lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"),
                                                                             "events")),
    "narrowing-type": (errors.SchemaMismatchError, "column 'id' is double in the DataFrame but bigint",
                       lambda spark, db: swap_partitions(
                           batch_df(spark, {(today(0),): 1}, "x").selectExpr("CAST(id AS double) AS id", "value", "batch", "dt"),
                           f"{db}.events")),
    "string-column-as-int": (errors.SchemaMismatchError, "column 'value' is int in the DataFrame but string",
                             lambda spark, db: swap_partitions(
                                 batch_df(spark, {(today(0),): 1}, "x").selectExpr("id", "1 AS value", "batch", "dt"),
                                 f"{db}.events")),
    "duplicate-columns": (errors.SchemaMismatchError, "duplicate columns",
                          lambda spark, db: swap_partitions(
                              batch_df(spark, {(today(0),): 1}, "x").selectExpr("*", "id AS ID"), f"{db}.events")),
    "unwritable-journal": (errors.JournalError, "cannot create the directory of the journal",
                           lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), f"{db}.events",
                                                             journal_url="sqlite:////proc/tableswap/journal.db")),
    "non-thrift-metastore-uri": (errors.ConfigurationError, "not of the form thrift://HOST:PORT",
                                 lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), f"{db}.events",
                                                                   metastore_uri="http://127.0.0.1:9083")),
    "negative-lock-timeout": (errors.ConfigurationError, "option lock_timeout_s=-1 is invalid",
                              lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), f"{db}.events",
                                                                lock_timeout_s=-1)),
    "zero-batch-size": (errors.ConfigurationError, "option write_batch_size=0 is invalid: it must be an integer >= 1",
                        lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), f"{db}.events",
                                                          write_batch_size=0)),
    "unknown-option": (errors.ConfigurationError, "unknown tableswap option",
                       lambda spark, db: swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), f"{db}.events",
                                                         lock_timout_s=3)),
}


#: The cases refused before any metastore answer decides anything (the arguments, names, options, URLs, the
#: batch, an endpoint that is not a metastore or not there): what they assert is decided in this process, and
#: the metastore calls they make (the table's set-up and the snapshots) are the other cases' too, so runs
#: against further metastore releases leave them out (marker release_independent,
#: docs/metastores.md#test-status). The cases whose refusal rests on what the server answers (an unknown table
#: or database, the table's columns and partitioning) run against every release.
CLIENT_SIDE_CASES = {
    "not-a-dataframe", "list-instead-of-dataframe", "newline-in-table-name", "non-ascii-table-name", "bad-name",
    "three-part-name", "empty-name", "quote-injection-name", "port-that-is-not-a-metastore", "metastore-unreachable",
    "bad-journal-url", "unwritable-journal", "non-thrift-metastore-uri", "negative-lock-timeout", "zero-batch-size",
    "unknown-option",
}


@pytest.mark.hostile
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.release_independent) if c in CLIENT_SIDE_CASES
                                  else c for c in sorted(CASES)])
def test_bad_input_is_a_clear_error_and_changes_nothing(spark, db, tmp_path, hms, refused_events, case):
    exc_type, message, call = CASES[case]
    def run():
        with pytest.raises(exc_type, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
            call(spark, db)
        assert isinstance(info.value, TableSwapError)
        if type(info.value).__name__ in TABLE_ERRORS:  # errors about one table carry it (--json shows it)
            assert info.value.to_dict()["table"].endswith(".events") or "nope" in info.value.table, info.value
    _assert_unchanged(hms, db, tmp_path, run)
    assert not [t for t in hms.list_tables(db) if "__tswap_" in t]


@pytest.mark.hostile
@pytest.mark.parametrize("kind", ["managed", "view", "unpartitioned", "csv"])
def test_unsupported_targets_are_refused(spark, db, tmp_path, hms, ts_env, kind):
    if kind == "managed":
        spark.sql(f"CREATE TABLE {db}.t (id bigint, value string, batch string, dt string) USING parquet PARTITIONED BY (dt)")
        expected, message = errors.UnsupportedTableError, "MANAGED table.*EXTERNAL"
    elif kind == "view":
        create_events(spark, db, tmp_path)
        spark.sql(f"CREATE VIEW {db}.t AS SELECT * FROM {db}.events")
        expected, message = errors.UnsupportedTableError, "is a view"
    elif kind == "unpartitioned":
        spark.sql(f"CREATE TABLE {db}.t (id bigint, value string, batch string, dt string) USING parquet "
                  f"LOCATION '{(tmp_path / 't').as_uri()}'")
        expected, message = errors.PartitioningMismatchError, "not partitioned: use swap_table"
    else:
        spark.sql(f"CREATE TABLE {db}.t (id bigint, value string, batch string, dt string) USING csv "
                  f"PARTITIONED BY (dt) LOCATION '{(tmp_path / 't').as_uri()}'")
        expected, message = errors.UnsupportedTableError, "stored as csv"

    def run():
        with pytest.raises(expected, match=message):
            swap_partitions(batch_df(spark, {(today(0),): 1}, "x"), f"{db}.t")
    _assert_unchanged(hms, db, tmp_path, run)
