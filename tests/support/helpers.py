"""Shared helpers for integration tests: build tables, read what a reader sees, snapshot state."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, Iterator, Sequence

from tableswap.core import locations as loc
from tableswap.metastore.client import MetastoreClient


@contextlib.contextmanager
def raw_hms(port: int, host: str = "127.0.0.1") -> Iterator[Any]:
    """A bare hmsclient connection, for tests that check the server itself or change a table behind
    tableswap's back. Raw Thrift appears only in tests; the library goes through tableswap.metastore."""
    from hmsclient import hmsclient

    client = hmsclient.HMSClient(host=host, port=port)
    client.open()
    try:
        yield client
    finally:
        client.close()


#: The source tree, for the PYTHONPATH of subprocesses that import tableswap.
SRC = str(Path(__file__).resolve().parents[2] / "src")


def create_events(spark, db: str, root: Path | str, *, fmt: str = "parquet", hive_format: bool = False,
                  partition_cols: tuple[str, ...] = ("dt",), name: str = "events") -> str:
    """An EXTERNAL partitioned table ``db.name`` (id bigint, value string, batch string, + partitions),
    at ``<root>/<name>`` (``root`` a local directory, or a location URI such as ``s3a://bucket/x``)."""
    table = f"{db}.{name}"
    location = (root / name).as_uri() if isinstance(root, Path) else loc.join(root, name)
    types = {"dt": "string", "country": "string", "hour": "int", "day": "date"}
    if hive_format:
        parts = ", ".join(f"{c} {types[c]}" for c in partition_cols)
        spark.sql(
            f"CREATE EXTERNAL TABLE {table} (id bigint, value string, batch string) "
            f"PARTITIONED BY ({parts}) STORED AS {fmt.upper()} LOCATION '{location}'"
        )
    else:
        cols = ", ".join(f"{c} {types[c]}" for c in partition_cols)
        spark.sql(
            f"CREATE TABLE {table} (id bigint, value string, batch string, {cols}) USING {fmt} "
            f"PARTITIONED BY ({', '.join(partition_cols)}) LOCATION '{location}'"
        )
    return table


def batch_df(spark, rows_per_partition: dict[tuple, int], batch: str, partition_cols=("dt",)):
    """Rows for each partition (values tuple → row count), tagged with ``batch``."""
    rows = []
    n = 0
    for values, count in rows_per_partition.items():
        for i in range(count):
            n += 1
            rows.append((n, f"v{i}", batch, *values))
    schema = "id bigint, value string, batch string, " + ", ".join(
        f"{c} {dict(dt='string', country='string', hour='int', day='date')[c]}" for c in partition_cols
    )
    return spark.createDataFrame(rows, schema)


def reader_view(spark, table: str, partition_cols=("dt",)) -> dict[tuple, tuple[int, tuple[str, ...]]]:
    """What a reader sees: per partition, the row count and the distinct batches present."""
    cols = ", ".join(partition_cols)
    out = {}
    for row in spark.sql(
        f"SELECT {cols}, count(*) AS n, sort_array(collect_set(batch)) AS b FROM {table} GROUP BY {cols}"
    ).collect():
        key = tuple(row[c] for c in partition_cols)
        out[key] = (row["n"], tuple(row["b"]))
    return out


def partition_locations(client: MetastoreClient, db: str, table: str) -> dict[tuple[str, ...], str]:
    return {p.values: loc.normalize(p.location) for p in client.list_partitions(db, table)}


def metastore_snapshot(client: MetastoreClient, db: str) -> dict[str, Any]:
    """Tables of ``db`` with their location, parameters and partitions (for unchanged-state checks)."""
    snap: dict[str, Any] = {}
    for name in sorted(client.list_tables(db)):
        t = client.get_table(db, name)
        params = {k: v for k, v in t.parameters.items() if k != "transient_lastDdlTime"}
        parts = {}
        if t.is_partitioned:
            for p in client.list_partitions(db, name):
                parts[p.values] = (p.location, {k: v for k, v in p.parameters.items() if k != "transient_lastDdlTime"})
        snap[name] = (t.location, params, parts)
    return snap


def queue_deletions_by_hand(journal_url: str, db: str, table: str, root: str, locations: list[str]) -> str:
    """Journal a committed swap of ``db.table`` that displaced ``locations`` long ago (2020), as if
    tableswap had done it: the janitor must judge each (live? inside the root?) before deleting."""
    import sqlalchemy as sa

    from tableswap.journal import STAGING, Journal, SwapRecord, utcnow

    journal = Journal(journal_url)
    swap_id = f"hand_{uuid.uuid4().hex[:8]}"
    journal.begin_swap(SwapRecord(swap_id=swap_id, db_name=db, table_name=table, kind="partitions",
                                  state=STAGING, table_root=root, started_at=utcnow()))
    journal.commit(swap_id, [("dt=x", x) for x in locations])
    with journal.engine.begin() as conn:
        conn.execute(sa.text("UPDATE tableswap_deletions SET queued_at = '2020-01-01T00:00:00+00:00' "
                             "WHERE swap_id = :s"), {"s": swap_id})
    return swap_id


def file_tree(root: Path) -> set[str]:
    """Every file and directory below ``root``, relative (Spark's .crc files included)."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            out.add(os.path.relpath(os.path.join(dirpath, n), root))
    return out


def today(offset: int = 0) -> str:
    return (dt.date(2026, 6, 1) + dt.timedelta(days=offset)).isoformat()


@contextlib.contextmanager
def spark_conf(spark, settings: dict[str, str]) -> Iterator[None]:
    """Set runtime SQL settings of the shared session for the block, then restore them."""
    before = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def spark_overwrite(spark, df, table: str) -> None:
    """What tableswap is measured against: Spark's own ``INSERT OVERWRITE`` in dynamic partition
    mode (a plain ``INSERT OVERWRITE`` for an unpartitioned table), columns matched by name as
    tableswap does. SQL rather than ``DataFrameWriter.insertInto``: on Spark 4.3 the latter's dynamic
    overwrite of a Hive-format bucketed table writes unbucketed files, the SQL statement bucketed."""
    import uuid

    view = f"tswap_src_{uuid.uuid4().hex[:8]}"
    target = spark.table(table)
    columns = ", ".join(f"`{c}`" for c in target.columns)
    keys = [c.name for c in spark.catalog.listColumns(table) if c.isPartition]
    spec = f" PARTITION ({', '.join(f'`{k}`' for k in keys)})" if keys else ""
    df.createOrReplaceTempView(view)
    try:
        with spark_conf(spark, {"spark.sql.sources.partitionOverwriteMode": "dynamic",
                                "hive.exec.dynamic.partition.mode": "nonstrict"}):
            spark.sql(f"INSERT OVERWRITE TABLE {table}{spec} SELECT {columns} FROM {view}")
    finally:
        spark.catalog.dropTempView(view)


def data_files(root: Path) -> list[Path]:
    """The data files below ``root`` (no ``_``/``.`` names, no ``_tableswap`` of older batches
    unless ``root`` is inside it)."""
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(("_", "."))]
        out.extend(Path(dirpath) / n for n in filenames if not n.startswith(("_", ".")))
    return sorted(out)


def file_format(path: Path) -> str:
    """A data file's format from its first bytes (``PAR1``: Parquet, ``ORC``: ORC), whatever its name."""
    with open(path, "rb") as f:
        head = f.read(4)
    return "parquet" if head == b"PAR1" else "orc" if head[:3] == b"ORC" else repr(head)


def file_codecs(files: list[Path]) -> set[str]:
    """The compression codecs of Parquet or ORC data ``files`` (the conformance suite's file layout)."""
    import pyarrow.orc as orc
    import pyarrow.parquet as pq

    out = set()
    for f in files:
        if f.name.endswith(".orc") or "orc" in f.parent.parent.name:
            out.add(str(orc.ORCFile(str(f)).compression).upper())
        else:
            meta = pq.ParquetFile(f).metadata
            out.add(meta.row_group(0).column(0).compression.upper() if meta.num_row_groups else "NO ROWS")
    return out


def live_data_files(hms: Any, table: str) -> list[Path]:
    """The data files of ``db.table``'s live partitions, as the metastore points at them (local storage)."""
    db, name = table.split(".")
    return [f for p in hms.list_partitions(db, name) for f in data_files(Path(loc.to_local_path(p.location)))]


def file_layout(hms: Any, table: str) -> dict[tuple[str, ...], tuple[frozenset[str], frozenset[str]]]:
    """Each live partition of ``db.table`` (its values) → (its data files' formats, their codecs): the file
    layout the conformance suite compares (how many files a partition has is the write's own choice)."""
    db, name = table.split(".")
    out = {}
    for p in hms.list_partitions(db, name):
        files = data_files(Path(loc.to_local_path(p.location)))
        out[tuple(p.values)] = (frozenset(file_format(f) for f in files), frozenset(file_codecs(files)))
    return out


def assert_serial_equivalence(client: MetastoreClient, journal: Any, db: str, table: str,
                              initial: dict[str, str]) -> list[Any]:
    """Guarantee 5: the committed swaps of ``db.table``, replayed one after the other in their lock
    order (the journal's intent order, recorded under the lock) from ``initial`` (partition name →
    location before them), give exactly the metastore's partitions now, each swap found every
    partition where the one before it left it (its journaled old location), and the journal's
    displaced set is exactly the replay's, each location once. Returns the records in that order."""
    from tableswap.core import lineage
    from tableswap.core import partitions as pn

    state = {name: loc.normalize(x) for name, x in initial.items()}
    displaced: list[str] = []
    order = lineage.committed(journal.list_swaps(db, table))
    for record in order:
        for change in lineage.changes(record):
            before = state.get(change.partition)
            assert (before is None) == (change.action == "add"), (record.swap_id, change, before)
            if before is not None:
                assert before == loc.normalize(change.old_location), (record.swap_id, change, before)
                displaced.append(before)
            state[change.partition] = loc.normalize(change.new_location)
    info = client.get_table(db, table)
    now = {pn.partition_name(info.partition_key_names, v): x for v, x in partition_locations(client, db, table).items()}
    assert now == state
    queued = [loc.normalize(d.location) for d in journal.deletions(db=db, table=table)]
    assert len(queued) == len(set(queued)), "a displaced location was queued twice"
    assert sorted(queued) == sorted(displaced)
    return order


def count_anomalies(observations: list[dict], valid: dict) -> dict:
    """What concurrent readers saw that they must not: per observation (``{"parts": {key: value}}`` or
    ``{"error": text}``) and per partition key of ``valid`` (key → the acceptable values), a value not
    acceptable (a partial or mixed partition), a missing partition, or a failed query."""
    bad_value = missing = errors_seen = 0
    examples = []
    for obs in observations:
        if "error" in obs:
            errors_seen += 1
            examples.append(obs["error"][:160])
            continue
        for key, acceptable in valid.items():
            got = obs["parts"].get(key)
            if got is None:
                missing += 1
            elif tuple(got) not in acceptable:
                bad_value += 1
                examples.append(f"{key}: {got}")
    return {"observations": len(observations), "mixed_or_partial": bad_value, "missing_partition": missing,
            "errors": errors_seen, "examples": examples[:3]}


def record_flips(monkeypatch, module: Any = None) -> list[tuple[float, float]]:
    """Time every metastore flip this process makes (the real one, in ``tableswap.ops.commit``, or in
    ``module``: ``tableswap.ops.group_commit`` for a group's tables): the list fills with each flip's (start, end),
    wall clock, to compare with when concurrent reads ran."""
    import time

    from tableswap.ops import commit as commit_module

    module = module or commit_module
    real = module.flip
    windows: list[tuple[float, float]] = []

    def timed(*args, **kwargs):
        began = time.time()
        try:
            return real(*args, **kwargs)
        finally:
            windows.append((began, time.time()))

    monkeypatch.setattr(module, "flip", timed)
    return windows


def reads_across_flips(observations: list[dict], flips: list[tuple[float, float]]) -> dict:
    """How a reader's reads (observations with ``t`` and ``t_end``: a read's start and end) lay against the
    flips: ``in_flight``, the flips a read was running across (started before the flip began, ended after it
    ended); ``unwatched``, the flips that no read was running across and that were not both preceded and
    followed by a read (the reader was not running then), as indexes. A reader test whose reads overlap no
    flip would pass vacuously: assert ``in_flight`` > 0 and no flip ``unwatched``."""
    reads = [(o["t"], o["t_end"]) for o in observations]
    in_flight = 0
    missed = []
    for i, (f0, f1) in enumerate(flips):
        if any(r0 < f0 and r1 > f1 for r0, r1 in reads):
            in_flight += 1
        elif not (any(r1 <= f0 for _, r1 in reads) and any(r0 >= f1 for r0, _ in reads)):
            missed.append(i)
    return {"flips": len(flips), "reads": len(reads), "in_flight": in_flight, "unwatched": missed}


def loop_reader(read, stop, out: list) -> None:
    """Call ``read()`` (a reader's view: partition key → value) until ``stop`` is set; each observation goes to
    ``out``: ``{"parts": view}`` or ``{"error": text}``, with when the read started and ended (``t``, ``t_end``,
    wall clock), for :func:`count_anomalies` and :func:`reads_across_flips`."""
    import time

    while not stop.is_set():
        t = time.time()
        try:
            record = {"t": t, "parts": read()}
        except Exception as exc:  # noqa: BLE001 - every failure is an observation
            record = {"t": t, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        out.append({**record, "t_end": time.time()})


def assert_readers_saw_whole_partitions(results: dict, overlaps: dict, swaps: int) -> None:
    """Per reader (:func:`count_anomalies` and :func:`reads_across_flips` of its observations): at least 4 reads
    (1 before the swaps, the others during them), no partial, mixed or missing partition, no failed query, and
    not vacuously: a read was in flight across a flip, and no flip happened while the reader was idle."""
    for reader, r in results.items():
        assert r["observations"] >= 4, (reader, r)
        assert r["mixed_or_partial"] == r["missing_partition"] == r["errors"] == 0, (reader, r)
        overlap = overlaps[reader]
        assert overlap["flips"] == swaps and overlap["unwatched"] == [] and overlap["in_flight"] >= 1, (reader,
                                                                                                       overlap)


def release_locks_of_killed_writer(client, db: str, name: str, proc: subprocess.Popen) -> list[int]:
    """Unlock the table locks a writer left when it was SIGKILLed: what the metastore's reaper does on its own
    once the lock timeout has passed without a heartbeat (60 s in the default run; tests/integration/test_devmetastore.py
    and tests/integration/test_hms_versions.py test that expiry itself), done at once. Returns their ids.

    Only for a writer this test started and has reaped (exit by SIGKILL or an unhandled SIGTERM, so no heartbeat
    will follow). Killed at a random moment, its last metastore call may still be in flight: the server goes on
    with a request it has read in full after its client died (a ``lock`` then takes a lock nobody heartbeats).
    So this first waits until the server has closed every connection whose client is gone
    (:func:`wait_for_metastore_to_close_dead_connections`): the server closes one only after its last request,
    and from then on nothing of the dead writer can reach the metastore. Every lock of the dead writer goes,
    granted (ACQUIRED) or queued (WAITING: it died waiting for another holder, and its request, first in the
    queue, would hold up every later one); they are recognised by the host and process id tableswap writes into
    each lock's agent info."""
    import signal

    # SIGTERM under Python's default handler kills as SIGKILL does: no cleanup runs.
    assert proc.returncode in (-signal.SIGKILL, -signal.SIGTERM), "only a writer killed and reaped is known dead"
    return release_locks_of_dead_process(client, db, name, proc.pid)


def process_gone(pid: int) -> bool:
    """True once process ``pid`` of this machine has ended (gone, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def release_locks_of_dead_process(client, db: str, name: str, pid: int) -> list[int]:
    """:func:`release_locks_of_killed_writer` for a writer process of this machine that is not this test's child
    (a Spark driver in a YARN container the test killed): ``pid`` must be gone, not merely exited. Returns the
    ids of the locks released."""
    import socket

    from hmsclient.genthrift.hive_metastore import ttypes as tt

    assert process_gone(pid), f"process {pid} is still running"
    wait_for_metastore_to_close_dead_connections(client.uri)
    host = socket.gethostname()
    mine = [h for h in client.lock_holders(db, name)
            if h.hostname == host and (h.agent_info or "").endswith(f" pid={pid}")]
    for holder in mine:
        client.read(f"unlock({holder.lock_id})",
                    lambda c, lock_id=holder.lock_id: c.unlock(tt.UnlockRequest(lockid=lock_id)))
    return [h.lock_id for h in mine]


#: The state of a TCP socket whose peer has closed its end and whose own end is still open (/proc/net/tcp).
_CLOSE_WAIT = "08"


def metastore_connections_closing(uri: str) -> int:
    """How many connections the metastore at ``uri`` (on this machine) has whose client is gone (its process
    died or closed the connection) and which the server has not closed yet (TCP state CLOSE_WAIT on the
    server's port): a server thread still handling a request of such a client, or about to notice it left."""
    port = int(uri.rsplit(":", 1)[1].rstrip("/"))
    closing = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == _CLOSE_WAIT:
                    closing += 1
    return closing


def wait_for_metastore_to_close_dead_connections(uri: str, limit_s: float = 120.0) -> None:
    """Wait until the metastore at ``uri`` has closed every connection whose client is gone. A Thrift server
    thread reads a request, handles it, answers, then reads the next: it sees its client gone, and closes the
    connection, only once the request in flight is handled. Fails after ``limit_s`` (a server thread stuck)."""
    import time

    deadline = time.monotonic() + limit_s
    while metastore_connections_closing(uri):
        assert time.monotonic() < deadline, \
            f"the metastore at {uri} still has connections of dead clients open after {limit_s:g}s"
        time.sleep(0.05)


def wait_or_kill(proc: subprocess.Popen, timeout: float = 600.0) -> int:
    """``proc``'s exit code once it ends; after ``timeout`` seconds it is killed and reaped, and the
    ``TimeoutExpired`` goes on (a writer that hangs fails the test, never passes as killed)."""
    try:
        return proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def start_crashing_writer(spark, client, table: str, work: Path, *, crash_at: str, rows_per_day: dict[str, int],
                          batch: str, env: dict[str, str], args: Sequence[str] = ()) -> tuple[subprocess.Popen, Path]:
    """A writer of ``table``'s next swap (a fresh swap id), SIGKILLed at ``crash_at`` (tableswap.faults): its
    batch (``rows_per_day``, tagged ``batch``) written by ``spark`` as Parquet into the swap's fresh staging
    directory, as the swap's staging write leaves it, then the swap's catalog steps run in a process of its own
    (tests/support/protocol_writer.py: journal, temporary table, lock, intent, flip, commit; no Spark, so it starts in
    a second). ``env``: the settings the library reads (``TABLESWAP_METASTORE_URI``, ``TABLESWAP_JOURNAL_URL``:
    the ``ts_env`` fixture; a pause point's variables too: tableswap.faults). ``args``: more options of
    tests/support/protocol_writer.py (``--heartbeat-s``). Returns the process and its output's file."""
    from tableswap.core.names import new_swap_id

    db, name = table.split(".")
    root = client.get_table(db, name).root
    swap_id = new_swap_id()
    batch_df(spark, {(day,): n for day, n in rows_per_day.items()}, batch).write.partitionBy("dt").parquet(
        loc.staging_location(root, swap_id))
    work.mkdir(parents=True, exist_ok=True)
    child_env = {**os.environ, **env, "TABLESWAP_CRASH_AT": crash_at,
                 "PYTHONPATH": os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")]))}
    with open(work / "output.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.protocol_writer", "--metastore-uri", env["TABLESWAP_METASTORE_URI"],
             "--db", db, "--table", name, "--root", root, "--swap-id", swap_id, "--days", ",".join(rows_per_day),
             "--data-written", "--journal-url", env["TABLESWAP_JOURNAL_URL"], *args],
            cwd=Path(SRC).parent, env=child_env, stdout=log, stderr=subprocess.STDOUT)
    return proc, work / "output.log"


TROUBLESHOOTING = Path(__file__).resolve().parents[2] / "docs" / "troubleshooting.md"


def documented_error(start: str) -> str:
    """The error text docs/troubleshooting.md quotes in bold code (``**`...`**`` or ``**``...``**``) that
    starts with ``start``: exactly one."""
    quoted = [m.group(2) for m in re.finditer(r"\*\*(``?)(.+?)\1\*\*", TROUBLESHOOTING.read_text())]
    found = [q for q in quoted if q.startswith(start)]
    assert len(found) == 1, f"docs/troubleshooting.md quotes {len(found)} error texts starting with {start!r}"
    return found[0]


def assert_documented(actual: str, documented: str, examples: Sequence[str] = ()) -> None:
    """``actual`` is the ``documented`` text, but for its ``examples`` (the documented run's table, swap id,
    holder...: each stands for any text) and its numbers (any number)."""
    parts = re.split("(" + "|".join(re.escape(e) for e in sorted(examples, key=len, reverse=True)) + ")",
                     documented) if examples else [documented]
    pattern = "".join(".+?" if i % 2 else re.sub(r"\d+", r"\\d+", re.escape(part)) for i, part in enumerate(parts))
    assert re.fullmatch(pattern, actual, flags=re.S), \
        f"docs/troubleshooting.md quotes\n  {documented}\nbut the real text is\n  {actual}"
