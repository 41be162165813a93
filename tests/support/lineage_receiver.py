"""A local OpenLineage receiver for the lineage tests: a threading HTTP server on a loopback port that
collects the events POSTed to it (the client's HTTP transport, ``OPENLINEAGE_URL``), and the validation of
each event against the OpenLineage JSON schemas the client names (vendored under tests/data/openlineage/,
see its SOURCE.md) plus tableswap's own facets' schema (``tableswap/lineage/facets.json``)."""

from __future__ import annotations

import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import tableswap

SPEC_DIR = Path(__file__).resolve().parents[1] / "data" / "openlineage"
OWN_FACETS = Path(tableswap.__file__).resolve().parent / "lineage" / "facets.json"


class Receiver:
    """``with Receiver() as r:`` ... ``r.url``, ``r.events``; ``status``: what it answers (200, or an error)."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.events: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with receiver._lock:
                    receiver.paths.append(self.path)
                    receiver.events.append(json.loads(body))
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "Receiver":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def of(self, job_prefix: str) -> list[dict[str, Any]]:
        with self._lock:
            return [e for e in self.events if e["job"]["name"].startswith(job_prefix)]


def _registry() -> Any:
    from referencing import Registry, Resource

    resources = []
    for path in [*SPEC_DIR.rglob("*.json"), OWN_FACETS]:
        contents = json.loads(path.read_text())
        resources.append((contents["$id"], Resource.from_contents(contents)))
    return Registry().with_resources(resources)


REGISTRY = None


def validate(event: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``event`` is a valid RunEvent and each of its facets valid
    against the schema its ``_schemaURL`` names (which must be one of the vendored files or tableswap's own)."""
    import jsonschema

    global REGISTRY
    if REGISTRY is None:
        REGISTRY = _registry()

    def check(schema_url: str, instance: Any) -> None:
        jsonschema.Draft202012Validator({"$ref": schema_url}, registry=REGISTRY).validate(instance)

    check(event["schemaURL"], event)
    facets = [*event["run"].get("facets", {}).values(), *event["job"].get("facets", {}).values()]
    for dataset in [*event.get("inputs", []), *event.get("outputs", [])]:
        facets += [*dataset.get("facets", {}).values(), *dataset.get("inputFacets", {}).values(),
                   *dataset.get("outputFacets", {}).values()]
    for facet in facets:
        base = facet["_schemaURL"].split("#")[0]
        assert REGISTRY.get(base) is not None or base in {r for r in REGISTRY}, \
            f"facet schema {base} is not vendored (tests/data/openlineage/SOURCE.md)"
        check(facet["_schemaURL"], facet)
