"""A Kerberized HDFS (docs/hdfs.md#kerberos): a NameNode and a DataNode that require Kerberos, logged in from
keytabs of the suite's MIT KDC (tests/support/hdfs_kerberos.py, tests/support/kdc.py), with block access tokens
and SASL on the data transfer port; started once for this module.

A Spark job of its own logged in with a ticket cache swaps into an ``hdfs://`` table on it; the janitor deletes
the directory the swap displaced, logged in from a keytab (``[hdfs] kerberos_keytab`` and
``kerberos_principal``). Without a ticket, with a principal its keytab does not hold, or with an expired
ticket, the janitor fails with one error saying what to do, at once, and nothing is deleted or changed.

The metastore is not secured (tests/integration/test_secured_metastore.py covers that): a metastore of this
module's own whose Hadoop client logs in to the HDFS with the ``hive/localhost`` principal's ticket, as a
production metastore's does (it checks and creates table and partition directories itself).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from tableswap import storage
from tableswap.cli import main as cli_main
from tableswap.core import locations as loc
from tableswap.devmetastore import DevMetastore
from tableswap.journal import Journal
from tableswap.metastore.catalog import HiveMetastoreCatalog

from ..conftest import THROWAWAY_GRACE_S, _hdfs_classpath, _hdfs_startup
from ..support import kdc as kdc_module
from ..support.hdfs_kerberos import KerberizedMiniHdfs, MetastoreHdfsClient
from ..support.helpers import SRC, today, wait_or_kill
from ..support.needs import missing

pytestmark = [pytest.mark.integration, pytest.mark.hdfs, pytest.mark.hdfs_kerberos]

DB, TABLE = "kerb", "events"


def _needs_a_kdc() -> None:
    __tracebackhide__ = True
    reason = kdc_module.unavailable_reason()
    if reason:
        missing("an MIT Kerberos KDC on loopback", reason,
                f"apt-get install {' '.join(kdc_module.missing_packages())} (what .ci/run does)", module=True)


_needs_a_kdc()


@dataclass
class Realm:
    kdc: kdc_module.Kdc
    hdfs: KerberizedMiniHdfs
    dir: Path
    ccaches: dict[str, Path] = field(default_factory=dict)
    metastore: DevMetastore | None = None

    def keytab(self, user: str) -> Path:
        if user == "hdfs/localhost":
            return self.hdfs.keytab  # the servers' own
        return self.dir / f"{user.replace('/', '_')}.keytab"

    def login(self, user: str, *, lifetime: str | None = None) -> Path:
        """A ticket cache of ``user``'s, filled by ``kinit`` from its keytab."""
        ccache = self.dir / f"{user.replace('/', '_')}-{len(self.ccaches)}.ccache"
        self.kdc.kinit(user, self.keytab(user), ccache, lifetime=lifetime)
        self.ccaches[user] = ccache
        return ccache

    def client(self, ccache: Path) -> "_AsUser":
        """hdfs-native's client as the user of ``ccache``."""
        import hdfs_native

        return _AsUser(hdfs_native.Client(self.hdfs.url), ccache)


@dataclass
class _AsUser:
    """A client whose every call runs with ``KRB5CCNAME`` naming ``ccache`` (hdfs-native reads the ticket cache
    when it connects, at a call)."""

    client: object
    ccache: Path

    def __getattr__(self, name: str):
        method = getattr(self.client, name)

        def call(*args, **kwargs):
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("KRB5CCNAME", f"FILE:{self.ccache}")
                result = method(*args, **kwargs)
                return list(result) if name == "list_status" else result
        return call


@pytest.fixture(scope="module")
def kerb_realm(tmp_path_factory: pytest.TempPathFactory):
    """The KDC, its principals (``etl`` with a keytab, ``hive/localhost`` for the metastore's Hadoop client,
    ``brief`` whose tickets live 5 s at most), the Kerberized HDFS with ``/warehouse`` open to all (1777), and a
    metastore of this module's own (plain Thrift) whose Hadoop client logs in to that HDFS with
    ``hive/localhost``'s ticket cache and works as that user (``hive.metastore.execute.setugi`` off). The
    metastore starts while the HDFS does (it reaches HDFS only when a table is made). This process's
    ``KRB5_CONFIG`` and ``HADOOP_CONF_DIR`` name the realm and the HDFS for the module."""
    classpath = _hdfs_classpath()
    directory = tmp_path_factory.mktemp("kerberos-hdfs")
    kdc = kdc_module.Kdc.start(directory / "kdc")
    with contextlib.ExitStack() as stack:
        stack.callback(kdc.stop)
        for user in ("etl", "hive/localhost"):
            kdc.add_principal(user, keytab=directory / f"{user.replace('/', '_')}.keytab")
        kdc.add_principal("brief", keytab=directory / "brief.keytab", maxlife="5 seconds")
        hdfs = KerberizedMiniHdfs.with_principals(directory / "hdfs", classpath, kdc)
        found = Realm(kdc, hdfs, directory)
        client = MetastoreHdfsClient(kdc, hdfs)
        ms = DevMetastore(state_dir=directory / "hms", security=client.security(), hadoop_properties=client.hive_site())
        stack.callback(ms.stop, THROWAWAY_GRACE_S)  # both thrown away with the module
        stack.callback(hdfs.stop, THROWAWAY_GRACE_S)
        began = time.monotonic()
        with pytest.MonkeyPatch.context() as mp, ThreadPoolExecutor(1) as pool:
            mp.setenv("KRB5CCNAME", f"FILE:{found.login('hive/localhost')}")  # what the server's process reads
            metastore = pool.submit(ms.start)
            hdfs.start()
            metastore.result()
        _hdfs_startup.append(f"Kerberized HDFS (NameNode + DataNode) started in {hdfs.startup_seconds}s, its "
                             f"metastore with it, both in {time.monotonic() - began:.1f}s")
        mp = stack.enter_context(pytest.MonkeyPatch.context())
        mp.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
        mp.setenv("HADOOP_CONF_DIR", str(hdfs.conf_dir))
        found.metastore = ms
        admin = found.client(found.login("hdfs/localhost"))  # the NameNode's own user: HDFS's superuser
        admin.mkdirs("/warehouse", 0o777, True)
        admin.set_permission("/warehouse", 0o1777)
        yield found


@pytest.fixture(scope="module")
def kerb_metastore(kerb_realm: Realm):
    """The module's metastore (:func:`kerb_realm`)."""
    return kerb_realm.metastore


@pytest.fixture(scope="module")
def kerb_spark_job(kerb_realm: Realm, kerb_metastore, tmp_path_factory: pytest.TempPathFactory):
    """The Spark job (tests/support/kerberized_hdfs_job.py), run once as ``etl`` with a ``kinit``'d ticket
    cache: two swaps into ``kerb.events`` at ``/warehouse/kerb.db/events``, the second replacing one day."""
    work = tmp_path_factory.mktemp("kerb-job")
    journal_url = f"sqlite:///{work / 'journal.db'}"
    etl = kerb_realm.login("etl")
    db_location = f"{kerb_realm.hdfs.url}/warehouse/{DB}.db"
    table_location = f"{db_location}/{TABLE}"
    kerb_realm.client(etl).mkdirs(f"/warehouse/{DB}.db/{TABLE}", 0o755, True)  # etl's own, as its job's output
    batches = [[[i, "first", today(d)] for d in (0, 1) for i in range(3)],
               [[i, "second", today(1)] for i in range(4)] + [[i, "second", today(2)] for i in range(2)]]
    (work / "config.json").write_text(json.dumps({
        "dir": str(work), "db": DB, "table": TABLE, "db_location": db_location, "table_location": table_location,
        "batches": batches}))
    env = {**os.environ, "KRB5CCNAME": f"FILE:{etl}", "KRB5_CONFIG": str(kerb_realm.kdc.krb5_conf),
           "HADOOP_CONF_DIR": str(kerb_realm.hdfs.conf_dir), "TABLESWAP_METASTORE_URI": kerb_metastore.uri,
           "TABLESWAP_JOURNAL_URL": journal_url,
           "PYTHONPATH": os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")]))}
    for name in ("KRB5_CLIENT_KTNAME", "TABLESWAP_CRASH_AT", "TABLESWAP_PAUSE_AT"):
        env.pop(name, None)
    began = time.monotonic()
    with open(work / "output.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.kerberized_hdfs_job", str(work / "config.json")],
                                env=env, stdout=log, stderr=subprocess.STDOUT, cwd=Path(SRC).parent)
        wait_or_kill(proc, timeout=600)
    _hdfs_startup.append(f"the Kerberized Spark job (two swaps) took {time.monotonic() - began:.1f}s")
    yield {"returncode": proc.returncode, "dir": work, "journal_url": journal_url, "table_location": table_location,
           "output": (work / "output.log").read_text(errors="replace")[-4000:], "etl": etl,
           "seconds": round(time.monotonic() - began, 1)}


def _locations(uri: str) -> dict[str, str]:
    with HiveMetastoreCatalog(uri) as client:
        return {p.values[0]: loc.normalize(p.location) for p in client.list_partitions(DB, TABLE)}


def _path(location: str) -> str:
    return "/" + location.split("://", 1)[1].split("/", 1)[1]


def _displaced(job) -> list[str]:
    return sorted(d.location for d in Journal(job["journal_url"]).deletions(db=DB, table=TABLE))


# ----------------------------------------------------------------------------------------------- Spark
def test_a_kerberized_spark_job_swaps_into_a_table_on_kerberized_hdfs(kerb_realm, kerb_metastore, kerb_spark_job):
    assert kerb_spark_job["returncode"] == 0, kerb_spark_job["output"]
    work = kerb_spark_job["dir"]
    # The job's Hadoop client was etl, authenticated by Kerberos (its ticket cache), not a simple-auth user.
    assert json.loads((work / "identity.json").read_text()) == {"user": "etl@TABLESWAP.TEST", "method": "KERBEROS"}
    assert json.loads((work / "read-1.json").read_text()) == [[today(0), "first", 3], [today(1), "first", 3]]
    assert json.loads((work / "read-2.json").read_text()) == [
        [today(0), "first", 3], [today(1), "second", 4], [today(2), "second", 2]]
    second = json.loads((work / "result-2.json").read_text())
    assert [c["partition"] for c in second["replaced"]] == [f"dt={today(1)}"]
    assert [c["partition"] for c in second["added"]] == [f"dt={today(2)}"]

    live = _locations(kerb_metastore.uri)
    assert set(live) == {today(0), today(1), today(2)}
    assert all(loc.is_within(p, kerb_spark_job["table_location"] + "/") for p in live.values()), live
    etl = kerb_realm.client(kerb_spark_job["etl"])
    for where in live.values():  # written by the job as etl, on the secured HDFS
        files = [s for s in etl.list_status(_path(where)) if s.path.endswith(".parquet")]
        assert files and {s.owner for s in files} == {"etl"}, where
    displaced = _displaced(kerb_spark_job)
    assert len(displaced) == 1 and loc.same(displaced[0], second["replaced"][0]["old_location"])
    assert etl.get_file_info(_path(displaced[0])).isdir  # kept for its grace period


# ---------------------------------------------------------------------------------------- the janitor
def _janitor(*extra: str):
    return CliRunner().invoke(cli_main, ["--json", "janitor", "run", "--table", f"{DB}.{TABLE}", "--grace", "0",
                                         "--force-short-grace", *extra])


@pytest.fixture
def janitor_env(kerb_realm, kerb_metastore, kerb_spark_job, monkeypatch, tmp_path):
    """The janitor's environment (the module's metastore and the job's journal) with no ticket cache of its own
    yet (``KRB5CCNAME`` an empty one) and no HDFS client of this process's made before."""
    assert kerb_spark_job["returncode"] == 0, kerb_spark_job["output"]
    monkeypatch.setenv("TABLESWAP_METASTORE_URI", kerb_metastore.uri)
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", kerb_spark_job["journal_url"])
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'no-ticket.ccache'}")
    for name in ("KRB5_CLIENT_KTNAME", "TABLESWAP_HDFS_KERBEROS_PRINCIPAL", "TABLESWAP_HDFS_KERBEROS_KEYTAB",
                 "TABLESWAP_CONFIG"):
        monkeypatch.setenv(name, "")  # restored (unset) after the test, also when the janitor sets it
        monkeypatch.delenv(name)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    monkeypatch.setattr(storage, "_HDFS_CLIENTS", {"pid": os.getpid()})
    return monkeypatch


def _expired_ticket(kerb_realm: Realm) -> Path:
    """A ticket cache of ``brief``'s whose ticket has expired (its principal's tickets live 5 s)."""
    ccache = kerb_realm.login("brief")
    deadline = time.monotonic() + 30
    while subprocess.run(["klist", "-s", "-c", f"FILE:{ccache}"], env=kerb_realm.kdc.env()).returncode == 0:
        assert time.monotonic() < deadline, "the 5 s ticket did not expire in 30 s"
        time.sleep(0.5)
    return ccache


@pytest.mark.parametrize("failure", ["no_ticket", "principal_not_in_keytab", "expired_ticket"])
def test_without_usable_credentials_the_janitor_fails_once_says_what_to_do_and_changes_nothing(
        failure, kerb_realm, kerb_metastore, kerb_spark_job, janitor_env):
    if failure == "principal_not_in_keytab":  # a keytab that does not hold the principal asked for
        janitor_env.setenv("TABLESWAP_HDFS_KERBEROS_PRINCIPAL", "janitor@TABLESWAP.TEST")
        janitor_env.setenv("TABLESWAP_HDFS_KERBEROS_KEYTAB", str(kerb_realm.keytab("etl")))
    elif failure == "expired_ticket":
        janitor_env.setenv("KRB5CCNAME", f"FILE:{_expired_ticket(kerb_realm)}")
    displaced, live = _displaced(kerb_spark_job), _locations(kerb_metastore.uri)
    etl = kerb_realm.client(kerb_spark_job["etl"])

    result = _janitor()  # returns: hdfs-native does not retry a failed authentication

    output = result.output  # stdout and stderr (the CLI's log)
    assert isinstance(result.exception, (SystemExit, type(None))), repr(result.exception)  # no traceback
    assert result.exit_code == 1, output
    assert "Traceback" not in output and "GSSAPIError(" not in output, output
    error = json.loads(result.stdout)  # one error, not one a location
    expected = {"no_ticket": ["no Kerberos ticket", "kinit", "kerberos_keytab"],
                "principal_not_in_keytab": ["janitor@TABLESWAP.TEST", str(kerb_realm.keytab("etl")), "klist -kt"],
                "expired_ticket": ["expired", "kinit", "kerberos_keytab"]}[failure]
    assert all(part in error["error"] for part in expected), error
    assert "nothing was deleted" in error["error"] and error.get("reason") == failure, error
    # Nothing changed: the displaced directory is there and still queued, the table's partitions unchanged.
    assert _displaced(kerb_spark_job) == displaced and len(displaced) == 1
    assert etl.get_file_info(_path(displaced[0])).isdir
    assert _locations(kerb_metastore.uri) == live


def test_every_command_reaching_hdfs_logs_in_from_the_keytab(kerb_realm, kerb_metastore, kerb_spark_job, janitor_env,
                                                             tmp_path):
    """``[hdfs] kerberos_principal``/``kerberos_keytab`` (here their environment variables), the ticket cache
    empty: ``doctor --table`` (its hdfs and storage checks) and ``repair --from-storage`` (the recovery manifests
    under the table's root) log in from the keytab as ``janitor run`` does, and reach the Kerberized HDFS."""
    janitor_env.setenv("TABLESWAP_HDFS_KERBEROS_PRINCIPAL", "etl@TABLESWAP.TEST")
    janitor_env.setenv("TABLESWAP_HDFS_KERBEROS_KEYTAB", str(kerb_realm.keytab("etl")))
    live = _locations(kerb_metastore.uri)

    doctor = CliRunner().invoke(cli_main, ["--json", "doctor", "--table", f"{DB}.{TABLE}"])
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert checks["hdfs"]["status"] == "ok" and "kerberos" in checks["hdfs"]["detail"].lower(), checks["hdfs"]
    assert checks["storage"]["status"] == "ok", checks["storage"]

    _fresh_process(janitor_env, tmp_path / "empty-again.ccache")
    repair = CliRunner().invoke(cli_main, ["--json", "repair", f"{DB}.{TABLE}", "--from-storage", "--dry-run"])
    assert repair.exit_code == 0, repair.output
    assert "GSSAPI" not in repair.output and json.loads(repair.stdout)["dry_run"] is True, repair.output
    assert _locations(kerb_metastore.uri) == live


def _fresh_process(monkeypatch, ccache: Path) -> None:
    """As in a new process: no HDFS client made and no keytab login done yet, the ticket cache an empty one."""
    monkeypatch.setattr(storage, "_HDFS_CLIENTS", {"pid": os.getpid()})
    monkeypatch.setattr(storage, "_KEYTAB_LOGIN", {"wanted": None, "done": None})
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{ccache}")


def test_the_janitor_logs_in_from_its_keytab_and_deletes_the_displaced_directory(
        kerb_realm, kerb_metastore, kerb_spark_job, janitor_env):
    [displaced] = _displaced(kerb_spark_job)
    live = _locations(kerb_metastore.uri)
    janitor_env.setenv("TABLESWAP_HDFS_KERBEROS_PRINCIPAL", "etl@TABLESWAP.TEST")
    janitor_env.setenv("TABLESWAP_HDFS_KERBEROS_KEYTAB", str(kerb_realm.keytab("etl")))

    result = _janitor()

    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [o["location"] for o in report["outcomes"] if o["outcome"] == "deleted"] == [loc.normalize(displaced)]
    etl = kerb_realm.client(kerb_spark_job["etl"])
    with pytest.raises(FileNotFoundError):
        etl.get_file_info(_path(displaced))
    assert _locations(kerb_metastore.uri) == live
    for where in live.values():
        assert any(s.path.endswith(".parquet") for s in etl.list_status(_path(where))), where
