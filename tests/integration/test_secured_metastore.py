"""Secured metastores (docs/security.md): Kerberos (SASL/GSSAPI) and TLS on the Thrift port, against real
servers: an MIT KDC on loopback in a temporary realm (tests/support/kdc.py), a Hive Metastore that logs in from its
keytab and requires SASL, one that requires TLS with a keystore made by ``keytool``, and a Kerberized one that
requires SASL privacy. All are the release
``$TABLESWAP_TEST_HIVE_VERSION`` selects (2.3 by default, 4.0.1 in CI's second run) on the backend
``$TABLESWAP_TEST_METASTORE_DB`` selects, started once for this module.

The main flows run against the Kerberized server: swaps in a Spark process of its own (its staging write and
temporary table through Spark's own Kerberized metastore client), recover after a crash, rollback and the
janitor through the CLI with a keytab login. Each authentication failure is an error of its own kind that
says what to do, and leaves no lock, intent or temporary table behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner

from tableswap import errors
from tableswap.cli import main
from tableswap.core import locations as loc
from tableswap.core.security import MetastoreSecurity
from tableswap.devmetastore import DevMetastore
from tableswap.devmetastore.security import ServerSecurity
from tableswap.journal import Journal
from tableswap.metastore.catalog import HiveMetastoreCatalog

from ..support import kdc as kdc_module
from ..support import hive_client, kerberos_env, schema_templates
from ..conftest import THROWAWAY_GRACE_S, selected_hive_version, selected_metastore_db
from ..support.helpers import SRC, release_locks_of_killed_writer, today, wait_or_kill
from ..support.needs import missing
from ..support.tls_proxy import TlsProxy

pytestmark = pytest.mark.integration

SERVICE_HOST = "localhost"  # the metastores' principal is hive/localhost@REALM; clients use thrift://localhost
KEYSTORE_PASSWORD = "keystore-secret-1"
TRUSTSTORE_PASSWORD = "truststore-secret-2"
KERBEROS_ENV = ("KRB5_CONFIG", "KRB5CCNAME", "KRB5_CLIENT_KTNAME")


def _needs_mit_kerberos() -> None:
    """Every test here runs against the realm's servers: without a KDC, or without the ``kerberos`` binding
    and the parts to build it, the module is one line, a skip saying what to install (a failure in CI)."""
    __tracebackhide__ = True  # the skip's line is the module's call below
    kdc_reason, binding_reason = kdc_module.unavailable_reason(), kerberos_env.unavailable_reason()
    if kdc_reason or binding_reason:
        packages = [*kdc_module.missing_packages(), *(kerberos_env.PACKAGES if binding_reason else ())]
        missing("MIT Kerberos (a KDC on loopback and the kerberos binding)",
                "; ".join(reason for reason in (kdc_reason, binding_reason) if reason),
                f"apt-get install {' '.join(packages)} (what .ci/run does)", module=True)


_needs_mit_kerberos()


# ------------------------------------------------------------------------------ the realm and the servers
@pytest.fixture(scope="module")
def realm(tmp_path_factory: pytest.TempPathFactory):
    """The KDC with the metastore's principal and two clients' (``etl`` with a keytab, ``other`` without one
    in any keytab the tests use), and a second service principal no server runs as; the ``kerberos`` binding
    importable (tests/support/kerberos_env.py: built into a cache of its own when the environment lacks it)."""
    kerberos_env.ensure()
    directory = tmp_path_factory.mktemp("kdc")
    kdc = kdc_module.Kdc.start(directory)
    kdc.add_principal(f"hive/{SERVICE_HOST}", keytab=directory / "hive.keytab")
    kdc.add_principal("hive/elsewhere")  # known to the KDC, but no metastore runs as it
    kdc.add_principal("etl", keytab=directory / "etl.keytab")
    kdc.add_principal("other")
    kdc.add_principal("shortlived", keytab=directory / "shortlived.keytab", maxlife="3 seconds")
    yield kdc
    kdc.stop()


def _metastore(tmp_path_factory, name: str, security: ServerSecurity, stack: contextlib.ExitStack) -> DevMetastore:
    db = None
    backend = selected_metastore_db()
    if backend != "derby":
        from ..support import mysql_metastore, pg_metastore

        server = pg_metastore if backend == "postgresql" else mysql_metastore
        # A standalone release's schema: a copy of its template (tests/support/schema_templates.py).
        db = stack.enter_context(server.fresh_database(f"tswap_{name}", selected_hive_version())).spec()
    ms = DevMetastore(state_dir=tmp_path_factory.mktemp(name), host=SERVICE_HOST, lock_timeout_seconds=60, db=db,
                      hive_version=selected_hive_version(), security=security)
    schema_templates.prepare_derby(ms)
    stack.callback(ms.stop, THROWAWAY_GRACE_S)  # thrown away with the module
    return ms


@pytest.fixture(scope="module")
def keystore(tmp_path_factory):
    """A self-signed certificate for localhost in a PKCS12 keystore made by ``keytool``, its certificate as
    the clients' CA file (PEM) and in a trust store for Java clients, and an unrelated certificate (a CA file
    that does not trust the server)."""
    directory = tmp_path_factory.mktemp("tls")
    files = {}
    for name in ("server", "stranger"):
        store = directory / f"{name}.p12"
        subprocess.run(["keytool", "-genkeypair", "-alias", name, "-keyalg", "RSA", "-keysize", "2048",
                        "-dname", f"CN={SERVICE_HOST}", "-ext", f"SAN=dns:{SERVICE_HOST},ip:127.0.0.1",
                        "-validity", "3", "-storetype", "PKCS12", "-keystore", str(store),
                        "-storepass", KEYSTORE_PASSWORD], check=True, capture_output=True)
        subprocess.run(["keytool", "-exportcert", "-rfc", "-alias", name, "-keystore", str(store),
                        "-storepass", KEYSTORE_PASSWORD, "-file", str(directory / f"{name}.pem")],
                       check=True, capture_output=True)
        files[name] = (store, directory / f"{name}.pem")
    # The Java clients' (Spark's) trust store: the server's certificate as a trusted entry.
    files["truststore"] = directory / "truststore.p12"
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "hms", "-file", str(files["server"][1]),
                    "-storetype", "PKCS12", "-keystore", str(files["truststore"]), "-storepass", TRUSTSTORE_PASSWORD],
                   check=True, capture_output=True)
    return files


@pytest.fixture(scope="module")
def secured_servers(realm, keystore, tmp_path_factory):
    """The metastores, started at the same time (each start is mostly the JVM's and the schema's wait): one
    that requires Kerberos (SASL/GSSAPI as hive/localhost@REALM from its keytab), one that requires TLS, and a
    Kerberized one that requires SASL privacy (``hadoop.rpc.protection=privacy``: QOP auth-conf)."""
    kerberos = ServerSecurity(kerberos_principal=realm.principal(f"hive/{SERVICE_HOST}"),
                              kerberos_keytab=realm.directory / "hive.keytab", krb5_conf=realm.krb5_conf)
    tls = ServerSecurity(keystore=keystore["server"][0], keystore_password=KEYSTORE_PASSWORD)
    privacy = dataclasses.replace(kerberos, rpc_protection="privacy")
    with contextlib.ExitStack() as stack:
        servers = {name: _metastore(tmp_path_factory, name, security, stack)
                   for name, security in (("hms_krb", kerberos), ("hms_tls", tls), ("hms_privacy", privacy))}
        with ThreadPoolExecutor(len(servers)) as pool:
            for started in [pool.submit(ms.start, wait_timeout=300) for ms in servers.values()]:
                started.result()
        yield servers


@pytest.fixture(scope="module")
def kerberized(secured_servers) -> DevMetastore:
    return secured_servers["hms_krb"]


@pytest.fixture(scope="module")
def tls_metastore(secured_servers) -> DevMetastore:
    return secured_servers["hms_tls"]


@pytest.fixture
def krb_env(realm, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """This process in the realm, with no ticket yet (its own empty ticket cache); restored after."""
    for name in (*KERBEROS_ENV, *(f"TABLESWAP_METASTORE_{k}" for k in ("KERBEROS", "KERBEROS_KEYTAB",
                                                                       "KERBEROS_PRINCIPAL", "TLS"))):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KRB5_CONFIG", str(realm.krb5_conf))
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'krb5cc'}")
    return tmp_path / "krb5cc"


def keytab_login(realm) -> MetastoreSecurity:
    return MetastoreSecurity(kerberos=True, kerberos_principal=realm.principal("etl"),
                             kerberos_keytab=str(realm.directory / "etl.keytab"))


def uri_of(ms: DevMetastore) -> str:
    return f"thrift://{SERVICE_HOST}:{ms.port}"


def dbs(uri: str, security: MetastoreSecurity, **options) -> tuple[list[str], str | None]:
    with HiveMetastoreCatalog(uri, security=security, **options) as client:
        return client.read("get_all_databases", lambda c: c.get_all_databases()), client.authenticated_as


@pytest.mark.hms_release
def test_the_servers_leave_most_of_postgresqls_connections_free(secured_servers):
    """The three servers of this module run beside the suite's own, on one PostgreSQL with its default
    max_connections (100). Each JDBC pool of a 3.1/4.x server opens its maxPoolSize connections at start (10
    by default: 29 per server here); four such servers exhausted PostgreSQL, and the last one's transaction
    handler could not start (its lock and show_locks calls: "Internal error processing lock")."""
    if selected_metastore_db() != "postgresql":
        pytest.skip("counts PostgreSQL connections (TABLESWAP_TEST_METASTORE_DB=postgresql)")
    from ..support.pg_metastore import admin

    databases = [ms.backend.database for ms in secured_servers.values()]
    held = schema_templates.pg_execute(
        admin(), "SELECT datname, count(*) FROM pg_stat_activity WHERE datname = ANY(%s) GROUP BY datname",
        databases)
    assert {name for name, _ in held} == set(databases)
    assert all(count <= 20 for _, count in held), held  # datanucleus.connectionPool.maxPoolSize 5: 19 each
    assert sum(count for _, count in held) <= 60, held


# ------------------------------------------------------------------------------ Kerberos: who connects
def test_a_ticket_from_kinit_is_accepted(kerberized, realm, krb_env):
    realm.kinit("etl", realm.directory / "etl.keytab", krb_env)
    names, who = dbs(uri_of(kerberized), MetastoreSecurity(kerberos=True))
    assert "default" in names
    assert who == realm.principal("etl")


@pytest.mark.release_independent  # the client's tickets; its connections are those of the tests above
def test_a_keytab_login_needs_no_kinit_and_gets_a_new_ticket_when_it_expires(kerberized, realm, krb_env):
    """A janitor that runs for days: its tickets (3 s here) expire between two connections; GSSAPI gets new
    ones from the keytab by itself, with no kinit and no renewal thread."""
    security = MetastoreSecurity(kerberos=True, kerberos_principal=realm.principal("shortlived"),
                                 kerberos_keytab=str(realm.directory / "shortlived.keytab"))
    names, who = dbs(uri_of(kerberized), security)
    assert "default" in names and who == realm.principal("shortlived")
    assert not krb_env.exists()  # the login's tickets live in tableswap's own cache, not the user's
    assert os.environ["KRB5CCNAME"].startswith("MEMORY:")
    logins = _logins(realm, "shortlived")
    assert logins
    time.sleep(4)
    _, who = dbs(uri_of(kerberized), security)
    assert who == realm.principal("shortlived")
    assert _logins(realm, "shortlived") > logins  # the second connection logged in again from the keytab


def _logins(realm, name: str) -> int:
    """How many tickets the KDC issued to ``name`` from its key (AS exchanges: kinit or a keytab login)."""
    return sum(1 for line in (realm.directory / "kdc.log").read_text().splitlines()
               if "AS_REQ" in line and "ISSUE" in line and f"{realm.principal(name)} for krbtgt" in line)


def test_a_plain_client_at_the_kerberized_port_is_told_to_turn_kerberos_on(kerberized, krb_env):
    with pytest.raises(errors.CatalogUnavailableError) as caught:
        dbs(uri_of(kerberized), MetastoreSecurity(), connect_attempts=1)
    assert "TABLESWAP_METASTORE_KERBEROS=true" in str(caught.value)


def test_a_metastore_that_requires_sasl_integrity_or_privacy_is_refused_at_the_handshake(secured_servers, realm,
                                                                                         krb_env):
    """tableswap's client speaks SASL QOP ``auth`` only: a server with ``hadoop.rpc.protection=privacy`` is a
    clear error at the handshake, not a first call that waits for its answer until the client's timeout (30 s
    here: what the old client did ends as a timeout, not as this error)."""
    with pytest.raises(errors.MetastoreAuthenticationError) as caught:
        dbs(uri_of(secured_servers["hms_privacy"]), keytab_login(realm), connect_attempts=1, timeout_s=30)
    assert caught.value.reason == "sasl_qop", caught.value
    assert "hadoop.rpc.protection" in str(caught.value) and "docs/security.md" in str(caught.value)


#: The Kerberos failures the client meets before the metastore answers (no ticket, an expired one, or the KDC
#: refusing the client or the service's principal): decided by this process and the KDC, the same against every
#: metastore release, so runs against further releases leave them out (marker release_independent,
#: docs/metastores.md#test-status); the server's own refusal (it runs as another principal) runs against each.
KDC_SIDE_CASES = ("no_ticket", "expired_ticket", "unknown_client", "wrong_realm", "wrong_service", "wrong_host")


@pytest.mark.parametrize("case", [*(pytest.param(c, marks=pytest.mark.release_independent) for c in KDC_SIDE_CASES),
                                  "server_runs_as_another"])
def test_each_kerberos_failure_is_an_error_that_says_what_to_do_and_changes_nothing(
        case, kerberized, realm, krb_env, monkeypatch, tmp_path):
    uri = uri_of(kerberized)
    etl_keytab = str(realm.directory / "etl.keytab")
    security, expected, reason, says = {
        "no_ticket": (MetastoreSecurity(kerberos=True), errors.KerberosTicketError, "no_ticket", "kinit"),
        "expired_ticket": (MetastoreSecurity(kerberos=True), errors.KerberosTicketError, "expired_ticket", "kinit"),
        "unknown_client": (MetastoreSecurity(kerberos=True, kerberos_principal=realm.principal("other"),
                                             kerberos_keytab=etl_keytab),
                           errors.KerberosTicketError, "client_rejected", "klist -kt"),
        "wrong_realm": (MetastoreSecurity(kerberos=True, kerberos_principal="etl@ELSEWHERE.TEST",
                                          kerberos_keytab=etl_keytab),
                        errors.KerberosTicketError, "client_rejected", "kerberos_principal"),
        "wrong_service": (MetastoreSecurity(kerberos=True, kerberos_service="hive2", kerberos_principal=realm.principal("etl"),
                                            kerberos_keytab=etl_keytab),
                          errors.KerberosServicePrincipalError, "unknown_service", "kerberos_service"),
        "wrong_host": (MetastoreSecurity(kerberos=True, kerberos_host="hms.unknown", kerberos_principal=realm.principal("etl"),
                                         kerberos_keytab=etl_keytab),
                       errors.KerberosServicePrincipalError, "unknown_service", "kerberos_host"),
        "server_runs_as_another": (MetastoreSecurity(kerberos=True, kerberos_host="elsewhere",
                                                     kerberos_principal=realm.principal("etl"), kerberos_keytab=etl_keytab),
                                   errors.KerberosServicePrincipalError, "rejected", "hive.metastore.kerberos.principal"),
    }[case]
    if case == "expired_ticket":
        realm.kinit("etl", realm.directory / "etl.keytab", krb_env, lifetime="2s")
        time.sleep(3)
    began = time.monotonic()
    with pytest.raises(expected) as caught:
        dbs(uri, security)
    assert time.monotonic() - began < 5  # refused at once: an authentication failure is not retried
    error = caught.value
    assert error.reason == reason and says in str(error), str(error)
    assert isinstance(error, errors.TableSwapError) and not error.retryable
    assert error.to_dict()["reason"] == reason

    # The commands that lock, journal and flip stop there too, with the same error, and change nothing.
    for name, value in _env_of(security).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TABLESWAP_METASTORE_URI", uri)
    journal_url = f"sqlite:///{tmp_path / 'journal.db'}"
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", journal_url)
    for command in (["recover", "--stale-after", "0s"], ["janitor", "run", "--grace", "0", "--force-short-grace"],
                    ["rollback", "secured.events", "--yes"]):
        result = CliRunner().invoke(main, [*command, "--json"], catch_exceptions=False)
        payload = json.loads(result.stdout)
        assert result.exit_code == 1 and payload["error_type"] == expected.__name__, result.output
        assert payload["reason"] == reason
    with HiveMetastoreCatalog(uri, security=keytab_login(realm)) as good:
        assert good.count_locks() == 0
        assert not [t for d in good.list_databases() for t in good.list_tables(d) if "__tswap_" in t]
    assert not os.path.exists(tmp_path / "journal.db") or not Journal(journal_url).list_swaps("secured")


def _env_of(security: MetastoreSecurity) -> dict[str, str]:
    """The environment that configures ``security`` (what a scheduled job sets)."""
    from tableswap.config import ENV_SECURITY

    default = MetastoreSecurity()
    return {ENV_SECURITY[name]: str(getattr(security, name)).lower() if name in ("kerberos", "tls")
            else str(getattr(security, name))
            for name in ENV_SECURITY if getattr(security, name) != getattr(default, name)}


# ------------------------------------------------------------------------------ the flows


def _spark_conf(realm, keystore, *, kerberos: bool) -> dict[str, str]:
    """What a Spark job sets for a Kerberized metastore or for a TLS one (docs/security.md#spark), with Spark's
    Hive client for the release under test (a 4.x server needs Spark's Hive 4 client: docs/metastores.md).
    Both phases set the same keys: a stopped session's settings stay in the JVM's defaults for the next one.
    Spark's built-in Hive 2.3 client uses TLS only without SASL (HiveMetaStoreClient.open: the SASL branch opens
    a plain socket), so a phase is one or the other; the JVM's Hadoop login is Kerberos in both (core-site.xml)."""
    return {
        **hive_client.client_conf(selected_hive_version()),
        "spark.hadoop.hadoop.security.authentication": "kerberos",
        "spark.driver.extraJavaOptions": f"-Djava.security.krb5.conf={realm.krb5_conf}",
        "spark.hadoop.hive.metastore.sasl.enabled": str(kerberos).lower(),
        "spark.hadoop.hive.metastore.kerberos.principal": f"hive/_HOST@{realm.realm}",
        "spark.hadoop.hive.metastore.use.SSL": str(not kerberos).lower(),
        "spark.hadoop.hive.metastore.truststore.path": str(keystore["truststore"]),
        "spark.hadoop.hive.metastore.truststore.password": TRUSTSTORE_PASSWORD,
    }


CORE_SITE = """<?xml version="1.0"?>
<configuration>
  <property><name>hadoop.security.authentication</name><value>kerberos</value></property>
</configuration>
"""


def _cli(*args: str, expect: int = 0) -> dict:
    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == expect, f"exit {result.exit_code}: {result.output}"
    return json.loads(result.stdout)


def _locations(client: HiveMetastoreCatalog, db: str, table: str) -> dict[str, str]:
    return {"/".join(p.values): loc.normalize(p.location) for p in client.list_partitions(db, table)}


def _rows(batch: str, days: dict[str, int]) -> list[list]:
    return [[i, batch, d] for d, n in days.items() for i in range(n)]


@pytest.fixture(scope="module")
def spark_job(kerberized, tls_metastore, realm, keystore, tmp_path_factory):
    """One Spark process (one JVM start for both metastores), a job of its own: against the TLS metastore, with
    the CA file, it swaps once and leaves its second swap stopped between the two flip calls; then against the
    Kerberized one, holding a ticket, it swaps once and is SIGKILLed in its second swap between the two flip
    calls, which ends the stopped TLS swap there too. Each phase has its journal; the returned dict holds the
    process and, per phase, what the test needs."""
    tmp = tmp_path_factory.mktemp("spark_job")
    ticket = tmp / "spark-ticket"
    realm.kinit("etl", realm.directory / "etl.keytab", ticket)
    work = tmp / "job"
    work.mkdir()
    phases = {}
    for name, ms, kerberos in (("tls", tls_metastore, False), ("krb", kerberized, True)):
        db = f"secured_{name}"
        journal_url = f"sqlite:///{tmp / f'journal-{name}.db'}"
        env = ({"TABLESWAP_METASTORE_KERBEROS": "true"} if kerberos
               else {"TABLESWAP_METASTORE_TLS": "true", "TABLESWAP_METASTORE_TLS_CA_FILE": str(keystore["server"][1])})
        second = _rows("second", {today(1): 2, today(2): 1})
        phases[name] = {
            "name": name, "metastore_uri": uri_of(ms), "spark_conf": _spark_conf(realm, keystore, kerberos=kerberos),
            "env": {**env, "TABLESWAP_JOURNAL_URL": journal_url},
            "db": db, "db_location": (tmp / "wh" / f"{db}.db").as_uri(), "table": "events",
            "table_location": (tmp / "wh" / f"{db}.db" / "events").as_uri(),
            "batches": [{"rows": _rows("first", {today(0): 3, today(1): 3})},
                        {"rows": second, "crash_at": "after_add"} if kerberos
                        else {"rows": second, "park_at": "after_add"}],
            "journal_url": journal_url, "cli_env": env,
        }
    assert phases["tls"]["spark_conf"].keys() == phases["krb"]["spark_conf"].keys()
    config = {"dir": str(work), "phases": [phases["tls"], phases["krb"]]}
    (work / "config.json").write_text(json.dumps(config))
    # Hadoop's login (UserGroupInformation) reads hadoop.security.authentication from core-site.xml in
    # HADOOP_CONF_DIR (Spark puts it on the classpath); spark.hadoop.* comes too late for it.
    hadoop_conf = tmp / "hadoop-conf"
    hadoop_conf.mkdir()
    (hadoop_conf / "core-site.xml").write_text(CORE_SITE)
    # KRB5CCNAME as a path: Hadoop hands it to Java's Kerberos login as is, which does not take MIT's "FILE:".
    env = {**realm.env(), "KRB5CCNAME": str(ticket), "HADOOP_CONF_DIR": str(hadoop_conf),
           "PYTHONPATH": os.pathsep.join([SRC, str(Path(__file__).resolve().parents[2]),
                                          *kerberos_env.search_path()])}
    for name in [k for k in env if k.startswith(("TABLESWAP_METASTORE_", "TABLESWAP_PAUSE_"))] + [
            "TABLESWAP_CRASH_AT", "TABLESWAP_JOURNAL_URL", "KRB5_CLIENT_KTNAME"]:
        env.pop(name, None)
    began = time.monotonic()
    with open(work / "output.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.secured_swap_process", str(work / "config.json")],
                                env=env, stdout=log, stderr=subprocess.STDOUT,
                                cwd=Path(__file__).resolve().parents[2])
        wait_or_kill(proc, timeout=600)
    output = (work / "output.log").read_text(errors="replace")[-4000:]
    assert proc.returncode == -9, output  # killed at the crash point of the Kerberized phase's second swap
    assert (work / "tls-parked-2.reached").read_text() == "after_add", output
    yield {"proc": proc, "dir": work, "phases": phases, "seconds": time.monotonic() - began}


def _recover_rollback_and_janitor(job: dict, phase: str, security: MetastoreSecurity, monkeypatch) -> None:
    """What follows the crash, as a scheduled job with the phase's settings in its environment: recover
    completes the crashed swap, rollback restores the day it replaced, and the janitor deletes the directory
    the rollback displaced and nothing live."""
    config = job["phases"][phase]
    work, db, table, uri = job["dir"], config["db"], config["table"], config["metastore_uri"]
    first = json.loads((work / f"{phase}-result-1.json").read_text())
    assert first["swap_id"] and json.loads((work / f"{phase}-read-1.json").read_text()) == [
        [today(0), "first", 3], [today(1), "first", 3]]
    assert not (work / f"{phase}-result-2.json").exists()  # the second swap never finished

    monkeypatch.setenv("TABLESWAP_METASTORE_URI", uri)
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", config["journal_url"])
    for name, value in _env_of(security).items():
        monkeypatch.setenv(name, value)
    with HiveMetastoreCatalog(uri, security=security) as client:
        before = _locations(client, db, table)
        assert set(before) == {today(0), today(1), today(2)}  # the crashed swap added day 2, replaced nothing yet
        assert release_locks_of_killed_writer(client, db, table, job["proc"])  # what the lock timeout does
        recovered = _cli("recover", "--stale-after", "0s")
        assert [r["outcome"] for r in recovered["resolutions"]] == ["completed"], recovered
        after_recover = _locations(client, db, table)
        assert after_recover[today(1)] != before[today(1)]  # the crashed swap's day 1 is in
        assert not [t for t in client.list_tables(db) if "__tswap_" in t]  # no temporary table left

        _cli("rollback", f"{db}.{table}", "--partition", f"dt={today(1)}", "--yes")
        after_rollback = _locations(client, db, table)
        assert after_rollback[today(1)] == before[today(1)]  # day 1 is the first swap's again
        assert after_rollback[today(0)] == after_recover[today(0)] and after_rollback[today(2)] == after_recover[today(2)]
        assert client.lock_holders(db, table) == []

        swept = _cli("janitor", "run", "--table", f"{db}.{table}", "--grace", "0", "--force-short-grace")
        deleted = {o["location"] for o in swept["outcomes"] if o["outcome"] == "deleted"}
        # The day 1 the rollback displaced (the crashed swap's, completed by recover); nothing live.
        assert deleted == {after_recover[today(1)]}, swept
        assert not Path(urlsplit(after_recover[today(1)]).path).exists()
        for location in after_rollback.values():  # nothing live was deleted
            assert any(Path(urlsplit(location).path).rglob("*.parquet")), location
    assert not Journal(config["journal_url"]).list_swaps(db, states=["pending"])


# Not marked spark_processes: their subject is the secured server of the release under test (2.3 and 4.0.1 in
# CI), which Spark's own Hive client and tableswap's both talk to.
def test_swap_recover_rollback_and_janitor_against_a_kerberized_metastore(spark_job, realm, krb_env, monkeypatch):
    """A Spark job holding a ticket swaps (its staging write and temporary table through Spark's own Kerberized
    client, the flip through tableswap's) and is SIGKILLed in its second swap between the two flip calls; then a
    scheduled job that logs in from its keytab (no ticket in KRB5CCNAME) recovers, rolls back and cleans."""
    _recover_rollback_and_janitor(spark_job, "krb", keytab_login(realm), monkeypatch)


def test_swap_recover_rollback_and_janitor_against_a_tls_metastore(spark_job, keystore, krb_env, monkeypatch):
    """The same through the TLS port: the Spark job's staging write and temporary table through Spark's Hive
    client with a truststore (hive.metastore.use.SSL), the flip through tableswap's with the CA file; the job dies
    between the two flip calls of its second swap; recover, rollback and the janitor with the CA file."""
    _recover_rollback_and_janitor(spark_job, "tls", tls(keystore), monkeypatch)


# ------------------------------------------------------------------------------ TLS
def tls(keystore, name: str = "server") -> MetastoreSecurity:
    return MetastoreSecurity(tls=True, tls_ca_file=str(keystore[name][1]))


def test_a_tls_metastore_is_reached_with_its_ca_file(tls_metastore, keystore, krb_env):
    names, who = dbs(uri_of(tls_metastore), tls(keystore))
    assert "default" in names and who is None


def test_a_certificate_the_ca_file_does_not_trust_is_refused_at_once(tls_metastore, keystore, krb_env):
    began = time.monotonic()
    with pytest.raises(errors.MetastoreTlsError) as caught:
        dbs(uri_of(tls_metastore), tls(keystore, "stranger"))
    assert time.monotonic() - began < 5
    assert caught.value.reason == "untrusted" and "tls_ca_file" in str(caught.value)


def test_a_plain_client_at_the_tls_port_is_told_to_turn_tls_on(tls_metastore, krb_env):
    # The server answers the plain request with a TLS alert, which is not the metastore's protocol.
    with pytest.raises(errors.CatalogError) as caught:
        dbs(uri_of(tls_metastore), MetastoreSecurity(), connect_attempts=1, timeout_s=10)
    assert "TABLESWAP_METASTORE_TLS=true" in str(caught.value)


def test_tls_or_kerberos_at_a_plain_port_is_a_clear_error(tls_metastore, kerberized, keystore, realm, krb_env):
    """The reverse: a TLS client at the Kerberized (not TLS) port, a Kerberos client at the TLS (not SASL) one."""
    with pytest.raises(errors.MetastoreTlsError) as caught:
        dbs(uri_of(kerberized), tls(keystore), connect_attempts=1, timeout_s=10)
    assert caught.value.reason == "not_tls" and "TABLESWAP_METASTORE_TLS=false" in str(caught.value)
    with pytest.raises(errors.MetastoreSecurityMismatchError) as caught:
        dbs(uri_of(tls_metastore), keytab_login(realm), connect_attempts=1, timeout_s=10)
    assert caught.value.reason == "not_sasl"


# ------------------------------------------------------------------------------ client certificates (mutual TLS)
def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@pytest.fixture(scope="module")
def client_certs(tmp_path_factory):
    """Made with ``openssl``: a CA of clients and this job's certificate it signed (``etl``, for client
    authentication), a self-signed ``stranger`` the proxy does not trust, the proxy's own certificate for
    localhost, and the job's key encrypted with a password."""
    import shutil

    if shutil.which("openssl") is None:
        missing("the openssl command", "not on PATH", "apt-get install openssl (what .ci/run does)")
    d = tmp_path_factory.mktemp("mtls")
    days = ["-days", "3"]
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"),
             *days, "-subj", "/CN=tableswap test clients CA")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / "etl.key"), "-out", str(d / "etl.csr"),
             "-subj", "/CN=etl")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    _openssl("x509", "-req", "-in", str(d / "etl.csr"), "-CA", str(d / "ca.pem"), "-CAkey", str(d / "ca.key"),
             "-CAcreateserial", "-out", str(d / "etl.pem"), *days, "-extfile", str(d / "client.ext"))
    for name, subject, extra in (("stranger", "/CN=stranger", []),
                                 ("proxy", f"/CN={SERVICE_HOST}",
                                  ["-addext", f"subjectAltName=DNS:{SERVICE_HOST},IP:127.0.0.1"])):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(d / f"{name}.key"),
                 "-out", str(d / f"{name}.pem"), *days, "-subj", subject, *extra)
    _openssl("pkey", "-in", str(d / "etl.key"), "-aes256", "-passout", "pass:key-secret-3",
             "-out", str(d / "etl-encrypted.key"))
    return d


@pytest.fixture(scope="module")
def mtls_proxy(tls_metastore, keystore, client_certs):
    """The proxy that requires a client certificate signed by the clients' CA, forwarding to the TLS
    metastore over TLS (what a sidecar in front of a metastore does)."""
    import ssl

    upstream = ssl.create_default_context(cafile=str(keystore["server"][1]))
    with TlsProxy(cert=client_certs / "proxy.pem", key=client_certs / "proxy.key", client_ca=client_certs / "ca.pem",
                  upstream=("127.0.0.1", tls_metastore.port), upstream_context=upstream,
                  upstream_server_name=SERVICE_HOST) as proxy:
        yield proxy


def mtls(certs: Path, name: str | None = "etl", key: str | None = None) -> MetastoreSecurity:
    if name is None:
        return MetastoreSecurity(tls=True, tls_ca_file=str(certs / "proxy.pem"))
    return MetastoreSecurity(tls=True, tls_ca_file=str(certs / "proxy.pem"), tls_cert_file=str(certs / f"{name}.pem"),
                             tls_key_file=str(certs / (key or f"{name}.key")))


def test_a_client_certificate_gets_through_a_proxy_that_requires_one(mtls_proxy, client_certs, krb_env):
    forwarded = len(mtls_proxy.forwarded)
    for _ in range(5):  # a stalled connection would be retried after timeout_s: none may stall
        with HiveMetastoreCatalog(mtls_proxy.uri, security=mtls(client_certs), timeout_s=20) as client:
            assert "default" in client.list_databases()
            assert client.count_locks() == 0
    assert mtls_proxy.forwarded[forwarded:] == ["etl"] * 5  # the proxy checked each certificate and forwarded


@pytest.mark.parametrize("case", ["no_certificate", "untrusted_certificate"])
def test_a_proxy_that_refuses_the_client_certificate_is_a_clear_error_and_changes_nothing(
        case, mtls_proxy, client_certs, krb_env, monkeypatch, tmp_path):
    security, reason, says = {
        "no_certificate": (mtls(client_certs, None), "client_certificate_required", "TABLESWAP_METASTORE_TLS_CERT_FILE"),
        "untrusted_certificate": (mtls(client_certs, "stranger"), "client_certificate_refused", "a CA the server trusts"),
    }[case]
    forwarded, refused = len(mtls_proxy.forwarded), len(mtls_proxy.refused)
    began = time.monotonic()
    with pytest.raises(errors.MetastoreTlsError) as caught:
        dbs(mtls_proxy.uri, security)
    assert time.monotonic() - began < 5  # refused at once: not a transport error to retry
    error = caught.value
    assert error.reason == reason and says in str(error), str(error)
    assert isinstance(error, errors.TableSwapError) and not error.retryable
    # The refusal arrives with the first answer (TLS 1.3), or makes the first request's write fail when the
    # proxy has already closed: either way the same error, every time.
    for _ in range(20):
        with pytest.raises(errors.MetastoreTlsError) as again:
            dbs(mtls_proxy.uri, security)
        assert again.value.reason == reason

    # The commands that lock, journal and flip stop there too, and change nothing.
    for name, value in _env_of(security).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TABLESWAP_METASTORE_URI", mtls_proxy.uri)
    journal_url = f"sqlite:///{tmp_path / 'journal.db'}"
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", journal_url)
    for command in (["recover", "--stale-after", "0s"], ["janitor", "run", "--grace", "0", "--force-short-grace"],
                    ["rollback", "secured_tls.events", "--yes"]):
        payload = _cli(*command, expect=1)
        assert payload["error_type"] == "MetastoreTlsError" and payload["reason"] == reason, payload
    assert len(mtls_proxy.forwarded) == forwarded  # nothing reached the metastore
    assert len(mtls_proxy.refused) > refused
    assert not os.path.exists(tmp_path / "journal.db") or not Journal(journal_url).list_swaps("secured_tls")


@pytest.mark.parametrize("case", ["encrypted_key", "key_of_another_certificate", "missing_ca_file"])
def test_a_client_certificate_file_that_cannot_be_used_is_a_clear_error(case, client_certs, krb_env):
    """Refused before any connection; an encrypted key is refused, not prompted for (no terminal in a job)."""
    security, reason, says = {
        "encrypted_key": (mtls(client_certs, key="etl-encrypted.key"), "key_encrypted", "openssl pkey"),
        "key_of_another_certificate": (mtls(client_certs, key="stranger.key"), "files", "the key belongs"),
        "missing_ca_file": (MetastoreSecurity(tls=True, tls_ca_file=str(client_certs / "nowhere.pem")), "files",
                            "tls_ca_file"),
    }[case]
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]  # nothing listens: the files are checked first
    with pytest.raises(errors.MetastoreTlsError) as caught:
        dbs(f"thrift://localhost:{port}", security)
    assert caught.value.reason == reason and says in str(caught.value), str(caught.value)
    assert "key-secret-3" not in str(caught.value)


# ------------------------------------------------------------------------------ doctor
def test_doctor_shows_who_the_process_authenticates_as_and_whether_the_metastore_accepted_it(
        kerberized, realm, krb_env, monkeypatch, tmp_path):
    monkeypatch.setenv("TABLESWAP_METASTORE_URI", uri_of(kerberized))
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", f"sqlite:///{tmp_path / 'journal.db'}")
    monkeypatch.setenv("TABLESWAP_METASTORE_KERBEROS", "true")
    monkeypatch.setenv("TABLESWAP_METASTORE_KERBEROS_PRINCIPAL", realm.principal("etl"))
    monkeypatch.setenv("TABLESWAP_METASTORE_KERBEROS_KEYTAB", str(realm.directory / "etl.keytab"))
    ok = CliRunner().invoke(main, ["doctor"], catch_exceptions=False)
    assert ok.exit_code == 0, ok.output
    assert f"Kerberos: accepted as {realm.principal('etl')}" in ok.output
    assert "metastore.kerberos_principal" in ok.output and "env TABLESWAP_METASTORE_KERBEROS_PRINCIPAL" in ok.output

    monkeypatch.setenv("TABLESWAP_METASTORE_KERBEROS_SERVICE", "hive2")
    refused = CliRunner().invoke(main, ["doctor", "--json"], catch_exceptions=False)
    assert refused.exit_code == 1, refused.output
    [metastore] = [c for c in json.loads(refused.stdout)["checks"] if c["name"] == "metastore"]
    assert metastore["status"] == "fail" and metastore["facts"]["reason"] == "unknown_service"
    assert "hive2/localhost" in metastore["detail"] and "docs/security.md" in metastore["fix"]


def test_a_highly_available_kerberized_metastore_fails_over_with_a_ticket_for_each_server(
        kerberized, realm, krb_env):
    """The principal's host is each server's own: a server that is down is passed over (a transport error),
    the next one is authenticated to as hive/<its host>."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        dead = unused.getsockname()[1]
    uri = f"thrift://{SERVICE_HOST}:{dead},{uri_of(kerberized)}"
    names, who = dbs(uri, keytab_login(realm), connect_attempts=2, max_wait_s=0.1)
    assert "default" in names and who == realm.principal("etl")
