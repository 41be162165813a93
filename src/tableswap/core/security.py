"""How tableswap authenticates to a secured Hive Metastore: Kerberos (SASL/GSSAPI) and TLS on its Thrift port.

Pure data; resolved by :mod:`tableswap.config` (keyword > environment > config file ``[metastore]``) and used by
the Thrift client (:mod:`tableswap.metastore.security`). docs/security.md describes each setting.
"""

from __future__ import annotations

from dataclasses import dataclass

from tableswap.errors import ConfigurationError

#: The Kerberos service name of a Hive Metastore's principal (``hive/HOST@REALM``).
DEFAULT_SERVICE = "hive"


@dataclass(frozen=True)
class MetastoreSecurity:
    """``kerberos``: SASL/GSSAPI with the service principal ``SERVICE/HOST@REALM``: ``kerberos_service``
    (default ``hive``) and ``kerberos_host`` (default: the host of the metastore URI being connected to; the
    realm is the one krb5.conf maps that host to). The process authenticates with its ticket cache
    (``KRB5CCNAME``, ``kinit``) or, given ``kerberos_keytab`` and ``kerberos_principal``, logs in from the
    keytab itself and renews its tickets from it. ``tls``: TLS on the Thrift port, the server's certificate
    checked against ``tls_ca_file`` (default: the system's trust store); ``tls_cert_file`` / ``tls_key_file``:
    a client certificate for servers that ask for one."""

    kerberos: bool = False
    kerberos_service: str = DEFAULT_SERVICE
    kerberos_host: str | None = None
    kerberos_principal: str | None = None
    kerberos_keytab: str | None = None
    tls: bool = False
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    #: The server name TLS checks the certificate against (default: the URI's host).
    tls_server_name: str | None = None

    def __post_init__(self) -> None:
        if not self.kerberos_service or "/" in self.kerberos_service or "@" in self.kerberos_service:
            raise ConfigurationError(
                f"kerberos_service={self.kerberos_service!r}: expected the service part of the metastore's "
                "principal alone (hive for hive/HOST@REALM)")
        if self.kerberos_keytab and not self.kerberos_principal:
            raise ConfigurationError(
                "kerberos_keytab is set but kerberos_principal is not: name the principal to log in as from "
                "the keytab (e.g. etl@EXAMPLE.COM; `klist -kt KEYTAB` lists the keytab's principals)")
        if self.kerberos_principal and not self.kerberos:
            raise ConfigurationError("kerberos_principal is set but kerberos is off: set kerberos = true "
                                     "(TABLESWAP_METASTORE_KERBEROS=true) to authenticate with Kerberos")
        if self.kerberos_keytab and not self.kerberos:
            raise ConfigurationError("kerberos_keytab is set but kerberos is off: set kerberos = true "
                                     "(TABLESWAP_METASTORE_KERBEROS=true) to authenticate with Kerberos")
        if (self.tls_cert_file or self.tls_key_file or self.tls_ca_file) and not self.tls:
            raise ConfigurationError("a TLS file is set but tls is off: set tls = true "
                                     "(TABLESWAP_METASTORE_TLS=true) to reach the metastore over TLS")
        if self.tls_key_file and not self.tls_cert_file:
            raise ConfigurationError("tls_key_file is set without tls_cert_file: the client certificate's key "
                                     "needs its certificate")

    @property
    def secured(self) -> bool:
        return self.kerberos or self.tls

    def describe(self) -> str:
        """One line for ``doctor``: what the client does, no secret (a keytab is named by its path)."""
        parts = []
        if self.kerberos:
            who = (f"as {self.kerberos_principal} from the keytab {self.kerberos_keytab}" if self.kerberos_keytab
                   else "with the ticket cache")
            host = self.kerberos_host or "HOST of the URI"
            parts.append(f"Kerberos (SASL/GSSAPI, service principal {self.kerberos_service}/{host}) {who}")
        if self.tls:
            parts.append("TLS" + (f" (CA file {self.tls_ca_file})" if self.tls_ca_file else " (system trust store)")
                         + (" with a client certificate" if self.tls_cert_file else ""))
        return "; ".join(parts) or "none (plain Thrift)"


NONE = MetastoreSecurity()
