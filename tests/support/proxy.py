"""A loopback TCP proxy that can lose one response, to test reconciliation of lost writes."""

from __future__ import annotations

import socket
import threading


class CuttingProxy:
    """Forwards 127.0.0.1:<port> to the metastore. When a request containing ``cut_on`` passes,
    the request reaches the server, but the connection to the client is closed before the
    response is delivered (the client cannot tell whether the call took effect)."""

    def __init__(self, target_host: str, target_port: int, cut_on: bytes | None = None, times: int = 1,
                 *, gone_after_cut: bool = False):
        """``gone_after_cut``: once a response has been dropped, the metastore cannot be reached through the
        proxy again: its port stops listening and every other connection through it is closed, all *before*
        the cut connection is closed (a client reconnecting at once must not find the port still open)."""
        self.target = (target_host, target_port)
        self.cut_on = cut_on
        self.gone_after_cut = gone_after_cut
        self._sockets: list[socket.socket] = []
        self.remaining = times
        self.cuts = 0
        self._lock = threading.Lock()
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(16)
        self.port = self._server.getsockname()[1]
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def uri(self) -> str:
        return f"thrift://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self._lock:
                self._sockets += [client, upstream]
            state = {"cut": False}
            threading.Thread(target=self._pump_up, args=(client, upstream, state), daemon=True).start()
            threading.Thread(target=self._pump_down, args=(upstream, client, state), daemon=True).start()

    def _pump_up(self, client: socket.socket, upstream: socket.socket, state: dict) -> None:
        seen = b""
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                seen = (seen + data)[-4096:]
                if self.cut_on and self.cut_on in seen:
                    with self._lock:
                        if self.remaining > 0:
                            self.remaining -= 1
                            self.cuts += 1
                            state["cut"] = True
                    seen = b""
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            _close(upstream)

    def _pump_down(self, upstream: socket.socket, client: socket.socket, state: dict) -> None:
        try:
            while True:
                data = upstream.recv(65536)
                if not data:
                    break
                if state["cut"]:
                    # The server has answered: drop the answer and the client connection.
                    if self.gone_after_cut:
                        self.close(connections=True)
                    break
                client.sendall(data)
        except OSError:
            pass
        finally:
            _close(client)

    def close(self, *, connections: bool = False) -> None:
        """Stop listening; with ``connections``, also close every connection made through the proxy."""
        self._stop.set()
        _close(self._server)
        if connections:
            with self._lock:
                sockets, self._sockets = self._sockets, []
            for sock in sockets:
                _close(sock)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
