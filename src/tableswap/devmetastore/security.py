"""A secured development metastore: Kerberos (SASL/GSSAPI) and TLS on the server's Thrift port.

The settings a real deployment puts into ``hive-site.xml`` (2.3) or ``metastore-site.xml`` (3.1/4.x), and
Hadoop's ``core-site.xml`` (``hadoop.security.authentication=kerberos``: without it the server does not log
in from its keytab). The JVM reads the realm from ``krb5_conf`` (``-Djava.security.krb5.conf``). Pure text;
the launcher writes the files (:mod:`.launcher`). The keystore password goes into the site file, which the
launcher writes readable by its owner only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tableswap.devmetastore.backend import DevMetastoreError

CORE_SITE = "core-site.xml"


@dataclass(frozen=True)
class ServerSecurity:
    """``kerberos_principal`` (e.g. ``hive/_HOST@REALM``; the server replaces ``_HOST`` with its host's
    canonical name) and ``kerberos_keytab``: SASL/GSSAPI on the Thrift port, the realm read from
    ``krb5_conf``. ``keystore`` (a JKS or PKCS12 file) and ``keystore_password``: TLS on the Thrift port."""

    kerberos_principal: str | None = None
    kerberos_keytab: Path | None = None
    krb5_conf: Path | None = None
    keystore: Path | None = None
    keystore_password: str | None = field(default=None, repr=False)
    #: Kerberos: the SASL quality of protection, Hadoop's ``hadoop.rpc.protection`` (``authentication``,
    #: ``integrity``, ``privacy``; None: Hadoop's default, authentication).
    rpc_protection: str | None = None

    def __post_init__(self) -> None:
        if (self.kerberos_principal is None) != (self.kerberos_keytab is None):
            raise DevMetastoreError("a Kerberized metastore needs both its principal and its keytab")
        if (self.keystore is None) != (self.keystore_password is None):
            raise DevMetastoreError("a TLS metastore needs both its keystore and the keystore's password")

    @property
    def kerberos(self) -> bool:
        return self.kerberos_principal is not None

    @property
    def tls(self) -> bool:
        return self.keystore is not None

    def describe(self) -> str:
        parts = []
        if self.kerberos:
            parts.append(f"Kerberos (SASL/GSSAPI) as {self.kerberos_principal}")
        if self.tls:
            parts.append("TLS")
        return ", ".join(parts) or "none"

    def properties(self, *, standalone: bool) -> list[tuple[str, str]]:
        """The site file's settings: ``hive.metastore.*`` names (2.3) or ``metastore.*`` (3.1/4.x)."""
        prefix = "metastore." if standalone else "hive.metastore."
        out: list[tuple[str, str]] = []
        if self.kerberos:
            out += [(f"{prefix}sasl.enabled", "true"),
                    (f"{prefix}kerberos.principal", str(self.kerberos_principal)),
                    (f"{prefix}kerberos.keytab.file", str(self.kerberos_keytab))]
            if standalone:
                out.append(("metastore.authentication", "KERBEROS"))
        if self.tls:
            out += [(f"{prefix}use.SSL", "true"),
                    (f"{prefix}keystore.path", str(self.keystore)),
                    (f"{prefix}keystore.password", str(self.keystore_password))]
        return out

    def core_site_properties(self) -> list[tuple[str, str]]:
        if not self.kerberos:
            return []
        out = [("hadoop.security.authentication", "kerberos"), ("hadoop.security.authorization", "false")]
        if self.rpc_protection:
            out.append(("hadoop.rpc.protection", self.rpc_protection))
        return out

    def java_options(self) -> list[str]:
        if self.kerberos and self.krb5_conf is not None:
            return [f"-Djava.security.krb5.conf={self.krb5_conf}"]
        return []
