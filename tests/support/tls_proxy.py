"""A TLS-terminating proxy that requires a client certificate (mutual TLS), in front of a metastore.

Neither Hive Metastore 2.3 nor 4.0.1 can ask a client for a certificate on its Thrift port (their server
sockets are made with a keystore only: ``HiveAuthUtils.getServerSSLSocket`` in 2.3,
``SecurityUtils.getServerSSLSocket`` in 4.x; neither calls ``requireClientAuth``), so mutual TLS in front of a
metastore is a proxy's (a sidecar, a service mesh, a load balancer): this is one, with Python's ``ssl`` server
side (``CERT_REQUIRED``). Each accepted connection whose client certificate the proxy trusts is forwarded to the
upstream metastore, over TLS when ``upstream_context`` is given; one it does not trust is closed after the
handshake's alert, and nothing reaches the metastore.
"""

from __future__ import annotations

import select
import socket
import ssl
import threading
from pathlib import Path


class TlsProxy:
    def __init__(self, *, cert: Path, key: Path, client_ca: Path, upstream: tuple[str, int],
                 upstream_context: ssl.SSLContext | None = None, upstream_server_name: str | None = None) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(str(cert), str(key))
        self.context.verify_mode = ssl.CERT_REQUIRED
        self.context.load_verify_locations(cafile=str(client_ca))
        self.upstream = upstream
        self.upstream_context = upstream_context
        self.upstream_server_name = upstream_server_name or upstream[0]
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        #: The subjects (CN) of the client certificates forwarded, in order.
        self.forwarded: list[str] = []
        #: The handshakes refused, with the proxy's own reason.
        self.refused: list[str] = []
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True, name="tls-proxy")

    def __enter__(self) -> "TlsProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed.set()
        self.listener.close()
        self._thread.join(timeout=5)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            client = self.context.wrap_socket(conn, server_side=True)
        except (ssl.SSLError, OSError) as exc:
            self.refused.append(str(exc))
            conn.close()
            return
        subject = dict(item[0] for item in client.getpeercert()["subject"])
        upstream = socket.create_connection(self.upstream, timeout=30)
        if self.upstream_context is not None:
            upstream = self.upstream_context.wrap_socket(upstream, server_hostname=self.upstream_server_name)
        self.forwarded.append(subject.get("commonName", ""))
        _relay(client, upstream)

    @property
    def uri(self) -> str:
        return f"thrift://localhost:{self.port}"


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes, in this one thread: an SSL connection's reads and writes
    must not run at the same time in two threads (a TLS 1.3 read may answer a post-handshake message while
    the other thread writes, and the connection stalls)."""
    peer = {a: b, b: a}
    for s in (a, b):
        s.setblocking(False)
    try:
        while True:
            ready = [s for s in (a, b) if isinstance(s, ssl.SSLSocket) and s.pending()]
            if not ready:
                ready, _, _ = select.select([a, b], [], [], 60)
            for s in ready:
                try:
                    data = s.recv(65536)
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                    continue
                if not data:
                    return
                out = peer[s]
                out.setblocking(True)
                out.sendall(data)
                out.setblocking(False)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.close()
            except OSError:
                pass
