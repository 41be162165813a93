"""An MIT Kerberos KDC on loopback in a temporary realm, for the secured metastore tests.

Debian's ``krb5-kdc`` (``krb5kdc``, ``kdb5_util``) and ``kadmin.local`` (``krb5-admin-server``), ``kinit``
and ``kdestroy`` (``krb5-user``): the database, the stash and the configuration live in one directory,
the KDC listens on a free TCP port of 127.0.0.1 (UDP off: Java and MIT clients both use TCP). Principals
and keytabs are made with ``kadmin.local``. Everything the process runs reads ``krb5.conf`` through
``KRB5_CONFIG`` (C library) or ``-Djava.security.krb5.conf`` (JVM): nothing of the machine's own
Kerberos configuration is read or changed.

    kdc = Kdc.start(tmp)            # realm TABLESWAP.TEST
    kdc.add_principal("hive/localhost", keytab=tmp / "hive.keytab")
    kdc.kinit("alice", keytab, ccache)
    kdc.stop()
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

REALM = "TABLESWAP.TEST"
PROGRAMS = {"krb5kdc": "krb5-kdc", "kdb5_util": "krb5-kdc", "kadmin.local": "krb5-admin-server",
            "kinit": "krb5-user", "klist": "krb5-user"}
SBIN = ("/usr/sbin", "/usr/bin", "/sbin")


def find_program(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for directory in SBIN:
        if os.access(f"{directory}/{name}", os.X_OK):
            return f"{directory}/{name}"
    return None


def missing_packages() -> list[str]:
    """The Debian packages of the programs that are neither on PATH nor in an sbin directory."""
    return sorted({package for program, package in PROGRAMS.items() if find_program(program) is None})


def unavailable_reason() -> str | None:
    """Why no KDC can be started here (None: it can)."""
    missing = sorted(program for program in PROGRAMS if find_program(program) is None)
    if missing:
        return (f"no MIT Kerberos KDC: {', '.join(missing)} not found on PATH or in {', '.join(SBIN)} "
                f"(apt-get install {' '.join(missing_packages())})")
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Kdc:
    directory: Path
    port: int
    process: subprocess.Popen
    realm: str = REALM

    @property
    def krb5_conf(self) -> Path:
        return self.directory / "krb5.conf"

    def env(self, ccache: Path | None = None) -> dict[str, str]:
        """The environment of a process that uses this realm (and ``ccache`` as its ticket cache)."""
        env = {**os.environ, "KRB5_CONFIG": str(self.krb5_conf),
               "KRB5_KDC_PROFILE": str(self.directory / "kdc.conf")}
        if ccache is not None:
            env["KRB5CCNAME"] = f"FILE:{ccache}"
        return env

    @classmethod
    def start(cls, directory: Path, *, realm: str = REALM) -> "Kdc":
        reason = unavailable_reason()
        if reason:
            raise RuntimeError(reason)
        directory.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        (directory / "krb5.conf").write_text(f"""\
[libdefaults]
    default_realm = {realm}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 1h
    forwardable = true
    default_ccache_name = FILE:{directory}/ccache-default

[realms]
    {realm} = {{
        kdc = 127.0.0.1:{port}
        admin_server = 127.0.0.1:{port}
    }}

[domain_realm]
    localhost = {realm}
    127.0.0.1 = {realm}
""")
        (directory / "kdc.conf").write_text(f"""\
[kdcdefaults]
    kdc_listen = 127.0.0.1:{port}
    kdc_tcp_listen = 127.0.0.1:{port}

[realms]
    {realm} = {{
        database_name = {directory}/principal
        key_stash_file = {directory}/stash
        acl_file = {directory}/kadm5.acl
        max_life = 1h
        max_renewable_life = 1d
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{directory}/kdc.log
""")
        (directory / "kadm5.acl").write_text(f"*/admin@{realm} *\n")
        env = {**os.environ, "KRB5_CONFIG": str(directory / "krb5.conf"),
               "KRB5_KDC_PROFILE": str(directory / "kdc.conf")}
        subprocess.run([find_program("kdb5_util"), "create", "-s", "-r", realm, "-P", "kdc-master-key"],
                       env=env, check=True, capture_output=True)
        process = subprocess.Popen([find_program("krb5kdc"), "-n", "-r", realm], env=env,
                                   stdout=subprocess.DEVNULL, stderr=open(directory / "krb5kdc.out", "ab"))
        kdc = cls(directory, port, process, realm)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    kdc.stop()
                    raise RuntimeError(f"the KDC did not start: {(directory / 'krb5kdc.out').read_text()}"
                                       f"{(directory / 'kdc.log').read_text() if (directory / 'kdc.log').exists() else ''}"
                                       ) from None
                time.sleep(0.05)
        return kdc

    def kadmin(self, query: str) -> str:
        out = subprocess.run([find_program("kadmin.local"), "-r", self.realm, "-q", query], env=self.env(),
                             capture_output=True, text=True, check=True)
        if "error" in out.stderr.lower() or "error" in out.stdout.lower():  # kadmin.local exits 0 regardless
            raise RuntimeError(f"kadmin.local -q {query!r}: {out.stdout}{out.stderr}")
        return out.stdout

    def principal(self, name: str) -> str:
        return name if "@" in name else f"{name}@{self.realm}"

    def add_principal(self, name: str, *, keytab: Path | None = None, maxlife: str | None = None) -> str:
        """A principal with a random key; its keys exported to ``keytab`` when given. Returns its full name."""
        full = self.principal(name)
        life = f' -maxlife "{maxlife}"' if maxlife else ""
        self.kadmin(f"addprinc -randkey{life} {full}")
        if keytab is not None:
            self.kadmin(f"ktadd -k {keytab} {full}")
        return full

    def kinit(self, name: str, keytab: Path, ccache: Path, *, lifetime: str | None = None) -> None:
        """Log ``name`` in from ``keytab`` into the ticket cache ``ccache``."""
        command = [find_program("kinit"), "-k", "-t", str(keytab), "-c", f"FILE:{ccache}"]
        if lifetime:
            command += ["-l", lifetime]
        subprocess.run([*command, self.principal(name)], env=self.env(), check=True, capture_output=True)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
