"""A local S3 endpoint for the tests: moto's S3 emulator (not AWS) served on loopback, with a request log.

The endpoint runs moto's own WSGI application (what ``moto_server -H 127.0.0.1 -p PORT`` serves) in a
werkzeug server thread, wrapped by a small middleware that records every request it receives, so that
a test can count what Spark, the metastore and tableswap asked of the store, by type (PUT, COPY, ...).
It can be taken down and brought back on the same port (the emulator's data survives: it lives in
moto's in-process backend).
"""

from __future__ import annotations

import collections
import threading
import uuid
from dataclasses import dataclass
from urllib.parse import parse_qs

ACCESS_KEY = "tableswap-test"
SECRET_KEY = "tableswap-test-secret"
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Request:
    method: str
    path: str  # "/bucket/key..." (path-style)
    query: str
    copy_source: str | None  # x-amz-copy-source: a server-side COPY
    copied_bytes: int = 0  # for a COPY: the size of the source object (whole object; ranges not told apart)

    @property
    def kind(self) -> str:
        """PUT, COPY, DELETE, LIST, HEAD, GET, MULTIPART (initiate/part/complete/abort/list uploads),
        BUCKET (bucket-level calls other than listing) or OTHER."""
        params = parse_qs(self.query, keep_blank_values=True)
        key = self.path.lstrip("/").partition("/")[2]
        if "uploads" in params or "uploadId" in params:
            return "COPY" if self.copy_source else "MULTIPART"
        if self.method == "PUT" and self.copy_source:
            return "COPY"
        if self.method == "POST" and "delete" in params:
            return "DELETE"  # a bulk delete
        if not key:
            if self.method == "GET" and ("list-type" in params or "prefix" in params or not params):
                return "LIST"
            return "BUCKET"
        return {"PUT": "PUT", "DELETE": "DELETE", "HEAD": "HEAD", "GET": "GET"}.get(self.method, "OTHER")


def _object_size(copy_source: str) -> int:
    """Size of the object ``/bucket/key`` (URL-encoded, as in x-amz-copy-source) in moto's backend."""
    from urllib.parse import unquote

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    bucket, _, key = unquote(copy_source.split("?", 1)[0]).lstrip("/").partition("/")
    try:
        return int(s3_backends[DEFAULT_ACCOUNT_ID]["aws"].get_object(bucket, key).size)
    except Exception:  # noqa: BLE001 - a missing source: the COPY fails, nothing is copied
        return 0


class _Recorder:
    """WSGI middleware: remembers each request, then hands it to moto (or refuses it while "down")."""

    def __init__(self, app) -> None:
        self.app = app
        self.requests: list[S3Request] = []
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        source = environ.get("HTTP_X_AMZ_COPY_SOURCE")
        request = S3Request(environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", ""),
                            environ.get("QUERY_STRING", ""), source, _object_size(source) if source else 0)
        with self.lock:
            self.requests.append(request)
        return self.app(environ, start_response)


class S3Endpoint:
    """moto's S3 emulator on ``127.0.0.1:<port>`` (a free port unless given)."""

    def __init__(self, port: int = 0) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

        self._recorder = _Recorder(DomainDispatcherApplication(create_backend_app))
        self._port = port
        self._server = None
        self._thread: threading.Thread | None = None

    def start(self) -> "S3Endpoint":
        import logging

        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request on stderr
        self._server = make_server("127.0.0.1", self._port, self._recorder, threaded=True)
        self._port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Take the endpoint down (connections are refused until :meth:`start`)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    # ---------------------------------------------------------------- request log
    def mark(self) -> int:
        """A position in the request log (count requests after it with :meth:`counts`)."""
        with self._recorder.lock:
            return len(self._recorder.requests)

    def requests_since(self, mark: int = 0) -> list[S3Request]:
        with self._recorder.lock:
            return list(self._recorder.requests[mark:])

    def counts(self, mark: int = 0) -> dict[str, int]:
        """Requests received since ``mark``, by :attr:`S3Request.kind`."""
        return dict(collections.Counter(r.kind for r in self.requests_since(mark)))

    def copied_bytes(self, mark: int = 0) -> int:
        """Bytes the server copied (sum of COPY sources) since ``mark``."""
        return sum(r.copied_bytes for r in self.requests_since(mark) if r.kind == "COPY")

    # ---------------------------------------------------------------- clients
    def client(self, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY):
        import boto3

        return boto3.client("s3", endpoint_url=self.url, aws_access_key_id=access_key,
                            aws_secret_access_key=secret_key, region_name=REGION)

    def new_bucket(self, prefix: str = "tswap") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def purge(self, bucket: str, prefix: str = "") -> int:
        """Delete every object under ``prefix`` and say how many there were.

        For benchmarks, between runs: moto's LIST reads the whole bucket for every request (on a 2-core
        machine, 2.7 ms with 100 objects in the bucket, 6.3 ms with 10,000, 29.3 ms with 40,000; a HEAD
        2.3-2.5 ms whatever the size), where S3's LIST does not depend on the bucket's size. A run that
        finds the objects of every run before it pays for them, the more the more it LISTs.
        """
        client = self.client()
        keys = sorted(self.keys(bucket, prefix))
        for i in range(0, len(keys), 1000):
            client.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key} for key in keys[i:i + 1000]],
                                                         "Quiet": True})
        return len(keys)

    def keys(self, bucket: str, prefix: str = "") -> set[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return {o["Key"] for page in pages for o in page.get("Contents", [])}
