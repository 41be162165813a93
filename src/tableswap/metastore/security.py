"""The secured Thrift transports of the metastore client: TLS (Python's ``ssl``) and Kerberos (SASL/GSSAPI
through thrift-sasl and pure-sasl, with the ``kerberos`` binding of MIT Kerberos; the ``kerberos`` extra),
and what their failures mean.

A keytab login (``kerberos_keytab`` + ``kerberos_principal``) uses MIT Kerberos' client keytab: the process's
``KRB5_CLIENT_KTNAME`` names the keytab and ``KRB5CCNAME`` a ticket cache of tableswap's own in the process's
memory, so GSSAPI gets a ticket from the keytab when there is none and gets a new one when it expires: a janitor
that runs for days needs no ``kinit`` and no renewal thread.
"""

from __future__ import annotations

import hashlib
import os
import re
import ssl
from typing import Any

from thrift.transport import TSocket, TSSLSocket, TTransport
from thrift.transport.TTransport import TTransportException

from tableswap import errors
from tableswap.core.security import MetastoreSecurity

ENV_CLIENT_KEYTAB = "KRB5_CLIENT_KTNAME"
ENV_CCACHE = "KRB5CCNAME"


def _kerberos_modules() -> tuple[Any, Any, Any]:
    """``(kerberos, puresasl.client, thrift_sasl)``, or :class:`KerberosSetupError` saying what to install."""
    try:
        import kerberos  # noqa: F401  (pure-sasl's GSSAPI mechanism calls it)
        import thrift_sasl
        from puresasl import client as sasl_client
    except ImportError as exc:
        raise errors.KerberosSetupError(
            f"Kerberos for the metastore needs thrift-sasl, pure-sasl and kerberos ({exc}): "
            "pip install 'tableswap[kerberos]' (the kerberos binding builds against MIT Kerberos: "
            "apt-get install libkrb5-dev gcc)", reason="missing_dependency") from exc
    return kerberos, sasl_client, thrift_sasl


def keytab_ccache(principal: str) -> str:
    """The ticket cache of a keytab login: in this process's memory (never a file another process or a
    later run could find stale tickets in), one per principal."""
    return f"MEMORY:tableswap_{hashlib.sha256(principal.encode()).hexdigest()[:12]}"


def login(security: MetastoreSecurity) -> None:
    """Prepare the process's Kerberos credentials: with a keytab, point MIT Kerberos at it and at
    tableswap's own ticket cache (idempotent); without one, the ticket cache ``kinit`` filled is used."""
    if not security.kerberos or not security.kerberos_keytab:
        return
    keytab = security.kerberos_keytab
    if not os.access(keytab, os.R_OK):
        raise errors.KerberosTicketError(
            f"cannot read the keytab {keytab}: check kerberos_keytab (TABLESWAP_METASTORE_KERBEROS_KEYTAB) and "
            "that this user may read the file", reason="keytab_unreadable", principal=security.kerberos_principal)
    os.environ[ENV_CLIENT_KEYTAB] = f"FILE:{os.path.abspath(keytab)}"
    os.environ[ENV_CCACHE] = keytab_ccache(str(security.kerberos_principal))


class _SaslClient:
    """The interface thrift-sasl calls (``start``, ``step``, ``encode``, ``decode``, ``getError``) over a
    pure-sasl client (pyhive and impyla wrap it the same way). ``user``: who the server accepted."""

    def __init__(self, host: str, service: str, principal: str | None) -> None:
        _, sasl_client, _ = _kerberos_modules()
        props = {"principal": principal} if principal else {}
        # Authentication only: with integrity or privacy (hadoop.rpc.protection) negotiated, the first call waited
        # for its answer until the read timeout (seen with HMS 2.3); refused at the handshake instead.
        self._sasl = sasl_client.SASLClient(host, service, mechanism="GSSAPI", qops=[b"auth"], **props)
        self._error: str | None = None

    @property
    def user(self) -> str | None:
        mech = getattr(self._sasl, "_chosen_mech", None)
        return getattr(mech, "user", None)

    def start(self, mechanism: str) -> tuple[bool, str, bytes]:
        return True, mechanism, self._sasl.process() or b""

    def step(self, challenge: bytes) -> tuple[bool, bytes]:
        return True, self._sasl.process(challenge) or b""

    def encode(self, data: bytes) -> tuple[bool, bytes]:
        return True, self._sasl.wrap(data)

    def decode(self, data: bytes) -> tuple[bool, bytes]:
        return True, self._sasl.unwrap(data)

    def getError(self) -> str | None:  # noqa: N802 - thrift-sasl's name
        return self._error

    def dispose(self) -> None:
        try:
            self._sasl.dispose()
        except Exception:  # noqa: BLE001 - freeing a GSSAPI context that failed half-way
            pass


class _KeyIsEncrypted(Exception):
    """The client certificate's key asks for a password (raised by the password callback)."""


def _no_password() -> str:
    raise _KeyIsEncrypted()


def tls_context(security: MetastoreSecurity, *, uri: str) -> ssl.SSLContext:
    """The client's TLS context: the CA file (else the system's trust store) and the client certificate, or
    :class:`MetastoreTlsError` (``files``, ``key_encrypted``) naming the setting when a file cannot be used.
    An encrypted key is refused, never prompted for (a scheduled job has no terminal)."""
    what = f"tls_ca_file {security.tls_ca_file}"
    try:
        context = ssl.create_default_context(cafile=security.tls_ca_file)
        if security.tls_cert_file:
            what = f"tls_cert_file {security.tls_cert_file}" + (
                f" with tls_key_file {security.tls_key_file}" if security.tls_key_file else "")
            context.load_cert_chain(security.tls_cert_file, security.tls_key_file, password=_no_password)
    except _KeyIsEncrypted:
        raise errors.MetastoreTlsError(
            f"the key of the client certificate ({what}) is encrypted: tableswap does not ask for its password; "
            "give it the key decrypted (`openssl pkey -in KEY -out KEY.pem`), readable by this job's user only",
            reason="key_encrypted", uri=uri) from None
    except (OSError, ssl.SSLError, ValueError) as exc:
        raise errors.MetastoreTlsError(
            f"cannot use {what} for the metastore at {uri} ({exc}): check the path, that this user may read it, "
            "that it is PEM, and that the key belongs to the certificate (TABLESWAP_METASTORE_TLS_CA_FILE, "
            "..._TLS_CERT_FILE, ..._TLS_KEY_FILE)", reason="files", uri=uri) from exc
    return context


# TLS alerts a server (or the TLS proxy in front of it) sends when it does not accept this client's certificate.
_CLIENT_CERT_ALERTS = ("CERTIFICATE_REQUIRED", "ALERT_UNKNOWN_CA", "ALERT_BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN",
                       "ALERT_CERTIFICATE_EXPIRED", "ALERT_CERTIFICATE_REVOKED", "ALERT_UNSUPPORTED_CERTIFICATE",
                       "ALERT_ACCESS_DENIED")


def _client_certificate_refused(tls: ssl.SSLError, *, server: str, uri: str,
                                security: MetastoreSecurity) -> errors.MetastoreTlsError | None:
    text = str(tls)
    if not any(alert in text.upper() for alert in _CLIENT_CERT_ALERTS):
        return None
    if not security.tls_cert_file:
        return errors.MetastoreTlsError(
            f"the metastore at {server} ({uri}), or the TLS proxy in front of it, requires a client certificate "
            f"({text}); set tls_cert_file and tls_key_file (TABLESWAP_METASTORE_TLS_CERT_FILE, "
            "TABLESWAP_METASTORE_TLS_KEY_FILE) to this job's certificate and key (PEM), signed by a CA the server "
            "trusts", reason="client_certificate_required", uri=uri)
    return errors.MetastoreTlsError(
        f"the metastore at {server} ({uri}), or the TLS proxy in front of it, refused the client certificate "
        f"{security.tls_cert_file} ({text}); it does not trust the CA that signed it, or the certificate has "
        "expired or is not for client authentication: use a certificate (tls_cert_file, tls_key_file) issued by "
        "a CA the server trusts", reason="client_certificate_refused", uri=uri)


class _TlsSocket(TSSLSocket.TSSLSocket):
    """A TLS socket whose reads say when the server refused this client's certificate. With TLS 1.3 the
    client's handshake ends before the server has checked the client's certificate: the server's refusal (an
    alert) arrives with the first read, after the first request was sent but before the server read it. Not a
    transport error to retry, so a :class:`MetastoreTlsError`, raised at once."""

    def __init__(self, host: str, port: int, *, uri: str, security: MetastoreSecurity, **kwargs: Any) -> None:
        super().__init__(host, port, **kwargs)
        self._uri = uri
        self._security = security
        self._answered = False  # a first answer came: the server accepted this client's certificate

    #: How long a failed first write waits for the server's alert.
    VERDICT_WAIT_S = 2.0

    def read(self, sz: int) -> bytes:
        try:
            data = super().read(sz)
        except TTransportException as exc:
            refused = self._refusal(exc)
            if refused:
                raise refused from exc
            raise
        self._answered = True
        return data

    def write(self, buff: bytes) -> None:
        try:
            super().write(buff)
        except TTransportException as exc:
            # The server refused the certificate and closed before the first request arrived: the write fails
            # (EOF, reset), and the refusal is the alert waiting to be read. Only before the first answer.
            if self._answered or self.handle is None:
                raise
            try:
                self.handle.settimeout(self.VERDICT_WAIT_S)
                self.handle.recv(1)
            except (ssl.SSLError, OSError) as verdict:
                refused = self._refusal(verdict)
                if refused:
                    raise refused from exc
            raise

    def _refusal(self, exc: BaseException) -> errors.MetastoreTlsError | None:
        tls = _tls_cause(exc)
        if tls is None:
            return None
        return _client_certificate_refused(tls, server=f"{self.host}:{self.port}", uri=self._uri,
                                           security=self._security)


def transport(host: str, port: int, timeout_ms: int, security: MetastoreSecurity, *, uri: str) -> tuple[Any, Any]:
    """``(transport, sasl client or None)`` for one server: TLS and/or SASL as ``security`` says, else a
    buffered plain socket. Not yet open. ``uri``: the metastore's, for the errors' messages."""
    sock: TSocket.TSocket
    if security.tls:
        sock = _TlsSocket(host, port, uri=uri, security=security, ssl_context=tls_context(security, uri=uri),
                          server_hostname=security.tls_server_name or host)
    else:
        sock = TSocket.TSocket(host, port)
    sock.setTimeout(timeout_ms)
    if not security.kerberos:
        return TTransport.TBufferedTransport(sock), None
    _, _, thrift_sasl = _kerberos_modules()
    login(security)
    principal_host = security.kerberos_host or host
    holder: list[_SaslClient] = []

    def factory() -> _SaslClient:
        holder.append(_SaslClient(principal_host, security.kerberos_service, security.kerberos_principal))
        return holder[-1]

    return thrift_sasl.TSaslClientTransport(factory, "GSSAPI", sock), holder


def authenticated_user(holder: Any) -> str | None:
    """Who the metastore accepted on a Kerberos connection (None without Kerberos)."""
    if not holder:
        return None
    return holder[-1].user


# --------------------------------------------------------------------------- what failures mean
def _gss_text(exc: BaseException) -> str:
    """A GSSError's (major, minor) messages as one line."""
    args = getattr(exc, "args", ())
    parts = []
    for arg in args:
        if isinstance(arg, tuple) and arg:
            parts.append(str(arg[0]))
        elif isinstance(arg, str):
            parts.append(arg)
    return ": ".join(p for p in parts if p) or repr(exc)


def _tls_cause(exc: BaseException) -> ssl.SSLError | None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLError):
            return current
        current = getattr(current, "inner", None) or current.__cause__ or current.__context__
    return None


def handshake_error(exc: BaseException, *, uri: str, host: str, port: int,
                    security: MetastoreSecurity) -> errors.TableSwapError | None:
    """The :class:`~tableswap.errors.MetastoreAuthenticationError` an exception raised while opening a
    secured connection stands for, or None when it is not a security failure (a refused connection, a
    timeout: the caller's retry and "unavailable" handling apply)."""
    if isinstance(exc, errors.TableSwapError):
        return exc  # already says what it means (a refused client certificate during the SASL exchange)
    server = f"{host}:{port}"
    service = f"{security.kerberos_service}/{security.kerberos_host or host}"
    tls = _tls_cause(exc) if security.tls else None
    if tls is not None:
        text = str(tls)
        refused = _client_certificate_refused(tls, server=server, uri=uri, security=security)
        if refused is not None:
            return refused
        if isinstance(tls, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in text:
            return errors.MetastoreTlsError(
                f"the metastore at {server} ({uri}) presented a certificate this client does not trust ({text}); "
                "set tls_ca_file (TABLESWAP_METASTORE_TLS_CA_FILE) to the CA file that signed the metastore's "
                "certificate (PEM), or check that the certificate names the host of the URI", reason="untrusted",
                uri=uri)
        if "WRONG_VERSION_NUMBER" in text or "record layer failure" in text or "UNEXPECTED_EOF" in text \
                or "EOF occurred" in text:
            return errors.MetastoreTlsError(
                f"the metastore at {server} ({uri}) does not speak TLS ({text}); it is a plain Thrift port: turn "
                "tls off (TABLESWAP_METASTORE_TLS=false) or point the URI at the TLS port "
                "(hive.metastore.use.SSL=true on the server)", reason="not_tls", uri=uri)
        return errors.MetastoreTlsError(
            f"the TLS handshake with the metastore at {server} ({uri}) failed ({text}); check tls_ca_file, "
            "tls_cert_file and tls_key_file and the server's keystore", reason="handshake", uri=uri)
    if not security.kerberos:
        return None
    try:
        kerberos, _, _ = _kerberos_modules()
    except errors.TableSwapError:
        return None
    if isinstance(exc, kerberos.KrbError):
        text = _gss_text(exc)
        low = text.lower()
        principal = security.kerberos_principal
        if "expired" in low:
            return errors.KerberosTicketError(
                f"the Kerberos ticket of this process has expired ({text}); renew it with `kinit` (or `kinit -R`), "
                "or let tableswap log in from a keytab (kerberos_keytab and kerberos_principal)",
                reason="expired_ticket", principal=principal, uri=uri)
        if re.search(r"no kerberos credentials|no credentials cache found|credentials cache .*not found", low):
            return errors.KerberosTicketError(
                f"no Kerberos ticket to authenticate to the metastore at {server} ({text}); run `kinit` "
                "(KRB5CCNAME names the ticket cache) or set kerberos_keytab and kerberos_principal "
                "(TABLESWAP_METASTORE_KERBEROS_KEYTAB, ..._PRINCIPAL) so that tableswap logs in itself",
                reason="no_ticket", principal=principal, uri=uri)
        if re.search(r"client .*not found in kerberos database|can't find client principal|no key table entry|"
                     r"keytab contains no suitable keys|preauthentication failed|cannot find kdc for realm", low):
            return errors.KerberosTicketError(
                f"no Kerberos credentials for the client principal {principal or '(of the ticket cache)'} ({text}); "
                "check kerberos_principal (name@REALM, the realm in capitals as krb5.conf names it) against "
                "`klist -kt KEYTAB`, and that the keytab is current (a new key version invalidates old keytabs)",
                reason="client_rejected", principal=principal, uri=uri)
        if re.search(r"server .*not found in kerberos database|cannot determine realm", low):
            return errors.KerberosServicePrincipalError(
                f"the KDC knows no service principal {service} for the metastore at {server} ({text}); set "
                "kerberos_service (default hive) and kerberos_host (default: the URI's host) to the service "
                "and host of the metastore's hive.metastore.kerberos.principal, and check that krb5.conf maps "
                "that host to the metastore's realm ([domain_realm])", reason="unknown_service",
                principal=principal, service_principal=service, uri=uri)
        return errors.MetastoreAuthenticationError(
            f"Kerberos authentication to the metastore at {server} failed ({text}); check the ticket "
            "(`klist`), kerberos_service and kerberos_host", reason="kerberos", principal=principal,
            service_principal=service, uri=uri)
    if "quality of protection" in str(exc):
        return errors.MetastoreAuthenticationError(
            f"the metastore at {server} ({uri}) requires a SASL quality of protection above authentication ({exc}): "
            "it runs with hadoop.rpc.protection=integrity or privacy, which "
            "tableswap's client does not speak; use authentication on the metastore's port and TLS for "
            "confidentiality (docs/security.md#sasl-quality-of-protection)", reason="sasl_qop",
            principal=security.kerberos_principal, service_principal=service, uri=uri)
    if isinstance(exc, TTransportException):
        message = str(exc)
        if message.startswith("Bad status") or message.startswith("Bad SASL"):
            # The server rejected the handshake: a ticket for another principal than its keytab's.
            return errors.KerberosServicePrincipalError(
                f"the metastore at {server} rejected the Kerberos handshake ({message}); the ticket is for "
                f"{service} but the server runs as another principal: set kerberos_service and kerberos_host to "
                "the service and host of its hive.metastore.kerberos.principal", reason="rejected",
                principal=security.kerberos_principal, service_principal=service, uri=uri)
        if exc.type == TTransportException.END_OF_FILE:
            return errors.MetastoreSecurityMismatchError(
                f"the metastore at {server} ({uri}) closed the connection during the Kerberos (SASL) handshake: "
                "it does not expect SASL (hive.metastore.sasl.enabled=false) or expects TLS; turn kerberos off "
                "(TABLESWAP_METASTORE_KERBEROS=false) for this metastore, or set tls if it needs TLS",
                reason="not_sasl", uri=uri)
    return None
