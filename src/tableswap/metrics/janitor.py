"""The janitor's metrics for Prometheus: a run's report and the journal's backlog, pushed to a Pushgateway
and/or written to a node_exporter textfile (docs/janitor.md#metrics).

    targets = metrics_targets(pushgateway="http://pushgateway:9091", textfile=None)  # checked before the run
    published = publish_janitor_metrics(report, journal, targets)                  # after it

A scheduled batch job is not scraped while it runs, so it hands its metrics over when it ends, as
Prometheus documents for batch jobs: every value is a gauge describing the last run (a counter would reset
with each process). prometheus-client is an optional extra (``tableswap[metrics]``), imported only when a
target is configured; without it, asking for metrics is a :class:`~tableswap.errors.ConfigurationError`
before the run starts.

Publishing never changes a run's result: a Pushgateway that cannot be reached or a textfile that cannot be
written is logged as a warning and reported in :class:`Published`, and the run's exit code stays what the
run made it.

The last success (``tableswap_janitor_last_success_timestamp_seconds``) is set only by a run without errors;
a failed run must not overwrite the previous one. So the Pushgateway receives a POST (replacing only the
metrics of the names pushed, and a failed run does not push that one), and a textfile rewrite carries the
value of the file it replaces over.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tableswap.metrics import prometheus
from tableswap.config import janitor_metrics_settings
from tableswap.core.durations import parse_time
from tableswap.errors import ConfigurationError
from tableswap.logs import get_logger
from tableswap.redact import mask_text

if TYPE_CHECKING:  # pragma: no cover
    from tableswap.journal.store import Journal
    from tableswap.ops.janitor.run import JanitorReport

log = get_logger("tableswap.metrics")

#: The Pushgateway's ``job`` grouping key.
JOB = "tableswap_janitor"
EXTRA = "tableswap[metrics]"
PUSH_TIMEOUT_S = 10.0
LAST_SUCCESS = "tableswap_janitor_last_success_timestamp_seconds"

#: Every metric: name -> help. All gauges; labels: ``table`` when the run had ``--table``.
METRICS: dict[str, str] = {
    LAST_SUCCESS: "When the last janitor run without errors ended (unix seconds). Refusals do not make a run fail.",
    "tableswap_janitor_last_run_timestamp_seconds":
        "When the last janitor run ended (unix seconds), whatever its result.",
    "tableswap_janitor_last_run_success": "1 if the last janitor run had no errors, else 0.",
    "tableswap_janitor_last_run_duration_seconds": "How long the last janitor run took.",
    "tableswap_janitor_last_run_deleted_directories":
        "Displaced locations the last run deleted (or found already gone).",
    "tableswap_janitor_last_run_deleted_bytes": "Bytes the last run deleted.",
    "tableswap_janitor_last_run_refused_directories": "Locations the last run refused to delete (they stay queued).",
    "tableswap_janitor_last_run_errors":
        "Locations and temporary tables the last run failed to delete (retried next run).",
    "tableswap_janitor_backlog_past_grace_directories":
        "Pending deletions queued longer ago than the grace, after the run.",
    "tableswap_janitor_backlog_past_grace_bytes": "Known bytes of the backlog past grace (a lower bound while "
                                                  "tableswap_janitor_backlog_past_grace_unknown_size_directories > 0).",
    "tableswap_janitor_backlog_past_grace_unknown_size_directories": "Entries of the backlog past grace whose size "
                                                                     "the journal does not know.",
}


@dataclass(frozen=True)
class Targets:
    """Where to publish (``None``: not there) and where each setting came from."""

    pushgateway: str | None = None
    textfile: str | None = None
    sources: dict[str, str] = field(default_factory=dict)

    @property
    def wanted(self) -> bool:
        return bool(self.pushgateway or self.textfile)


@dataclass(frozen=True)
class Published:
    """What publishing did: per target, whether it worked and the error when not."""

    pushgateway: dict[str, Any] | None = None
    textfile: dict[str, Any] | None = None
    skipped: str | None = None  # why nothing was published (a dry run)
    metrics: dict[str, float] = field(default_factory=dict)  # name -> value (labels: ``labels``)
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def warnings(self) -> list[str]:
        out = []
        for what in (self.pushgateway, self.textfile):
            if what is not None and not what["ok"]:
                out.append(what["warning"])
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"pushgateway": self.pushgateway, "textfile": self.textfile, "skipped": self.skipped,
                "labels": dict(self.labels), "values": dict(self.metrics), "warnings": self.warnings}

    def lines(self) -> list[str]:
        """The text output's lines."""
        if self.skipped:
            return [f"metrics: not published ({self.skipped})"]
        out = []
        if self.pushgateway is not None:
            p = self.pushgateway
            out.append(f"metrics: pushed to {p['url']} (job {p['job']}"
                       + "".join(f", {k} {v}" for k, v in p["grouping_key"].items()) + ")" if p["ok"]
                       else f"WARNING: {p['warning']}")
        if self.textfile is not None:
            t = self.textfile
            out.append(f"metrics: written to {t['path']}" if t["ok"] else f"WARNING: {t['warning']}")
        return out


def prometheus_client() -> Any:
    """The prometheus_client module, or a ConfigurationError naming the extra that brings it."""
    return prometheus.client("janitor metrics (--metrics-pushgateway, --metrics-textfile, [janitor] metrics_*)")


def metrics_targets(pushgateway: str | None = None, textfile: str | None = None, *,
                    explicit_source: str = "keyword argument") -> Targets:
    """The targets (option > env > config file), checked: a Pushgateway URL is http(s) with a host, a
    textfile ends in ``.prom`` (the textfile collector reads nothing else), and prometheus-client is
    installed when either is set. Raises :class:`ConfigurationError` otherwise (before any run)."""
    settings = janitor_metrics_settings(pushgateway, textfile, explicit_source)
    (url, url_source), (path, path_source) = settings["metrics_pushgateway"], settings["metrics_textfile"]
    if url:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(f"metrics Pushgateway {mask_text(url)!r} (from {url_source}) is not an http:// "
                                     "or https:// URL with a host, e.g. http://pushgateway:9091")
    if path:
        if not path.endswith(".prom"):
            raise ConfigurationError(f"metrics textfile {path!r} (from {path_source}) must end in .prom: "
                                     "node_exporter's textfile collector reads only *.prom files")
    targets = Targets(url or None, path or None, {"metrics_pushgateway": url_source, "metrics_textfile": path_source})
    if targets.wanted:
        prometheus_client()
    return targets


def janitor_values(report: "JanitorReport", backlog: Any | None) -> dict[str, float]:
    """The metrics' values for ``report`` (``backlog``: the journal's :class:`JanitorStatus` after the run, or
    ``None`` when it could not be read: the backlog metrics are left out)."""
    started = parse_time(report.started_at) or dt.datetime.now(dt.timezone.utc)
    ended = started.timestamp() + report.seconds
    ok = not report.errors
    values = {
        "tableswap_janitor_last_run_timestamp_seconds": ended,
        "tableswap_janitor_last_run_success": 1.0 if ok else 0.0,
        "tableswap_janitor_last_run_duration_seconds": float(report.seconds),
        "tableswap_janitor_last_run_deleted_directories": float(len(report.deleted)),
        "tableswap_janitor_last_run_deleted_bytes": float(report.bytes_freed),
        "tableswap_janitor_last_run_refused_directories": float(len(report.refused)),
        "tableswap_janitor_last_run_errors": float(len(report.errors)),
    }
    if ok:
        values[LAST_SUCCESS] = ended
    if backlog is not None:
        values["tableswap_janitor_backlog_past_grace_directories"] = float(backlog.past_grace)
        values["tableswap_janitor_backlog_past_grace_bytes"] = float(backlog.past_grace_bytes.known)
        values["tableswap_janitor_backlog_past_grace_unknown_size_directories"] = float(
            backlog.past_grace_bytes.unknown_count)
    return values


def _registry(values: dict[str, float], labels: dict[str, str]) -> Any:
    client = prometheus_client()
    registry = client.CollectorRegistry()
    for name in METRICS:  # in the documented order
        if name in values:
            gauge = client.Gauge(name, METRICS[name], labelnames=tuple(labels), registry=registry)
            (gauge.labels(**labels) if labels else gauge).set(values[name])
    return registry


def previous_last_success(path: str, labels: dict[str, str]) -> float | None:
    """The last success recorded in the textfile ``path`` for ``labels``, if the file exists and has one."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return None
    try:
        for family in prometheus_client().parser.text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == LAST_SUCCESS and dict(sample.labels) == labels:
                    return float(sample.value)
    except ValueError:  # not a metrics file: it is replaced
        return None
    return None


def publish_janitor_metrics(report: "JanitorReport", journal: "Journal | None", targets: Targets) -> Published:
    """Push and/or write the metrics of ``report``, with the backlog past grace read from ``journal`` (the
    reads of ``tableswap janitor status``). Never raises for a target that fails: see :class:`Published`."""
    if report.dry_run:
        return Published(skipped="a dry run publishes no metrics")
    client = prometheus_client()
    labels = {"table": report.table_filter} if report.table_filter else {}
    backlog = None
    if journal is not None:
        from tableswap.ops.janitor.status import janitor_status

        try:
            backlog = janitor_status(journal, table=report.table_filter, runs=1,
                                     grace=dt.timedelta(seconds=report.grace_seconds))
        except Exception as exc:  # noqa: BLE001 - the run's metrics are still worth publishing
            log.warning("janitor.metrics_backlog_unread", error=f"{type(exc).__name__}: {exc}")
    values = janitor_values(report, backlog)
    pushed = written = None
    if targets.pushgateway:
        url = targets.pushgateway
        grouping = dict(labels)
        pushed = {"url": mask_text(url), "job": JOB, "grouping_key": grouping, "ok": True, "error": None}
        try:
            client.pushadd_to_gateway(url, job=JOB, registry=_registry(values, labels), grouping_key=grouping,
                                      timeout=PUSH_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - urllib's errors, the gateway's answers: never the run's failure
            error = mask_text(f"{type(exc).__name__}: {exc}")
            pushed.update(ok=False, error=error, warning=f"metrics not pushed to {pushed['url']}: {error} "
                                                        "(the run's result is unchanged)")
            log.warning("janitor.metrics_not_pushed", url=pushed["url"], error=error, run_id=report.run_id)
    if targets.textfile:
        path = targets.textfile
        written = {"path": path, "ok": True, "error": None}
        file_values = dict(values)
        if LAST_SUCCESS not in file_values:
            before = previous_last_success(path, labels)
            if before is not None:
                file_values[LAST_SUCCESS] = before
        try:
            # prometheus-client writes a temporary file beside it and renames it: a reader never sees half.
            client.write_to_textfile(path, _registry(file_values, labels))
        except Exception as exc:  # noqa: BLE001 - a missing directory, permissions, a full disk
            error = f"{type(exc).__name__}: {exc}"
            written.update(ok=False, error=error, warning=f"metrics not written to {path}: {error} "
                                                          "(the run's result is unchanged)")
            log.warning("janitor.metrics_not_written", path=path, error=error, run_id=report.run_id)
    return Published(pushgateway=pushed, textfile=written, metrics=values, labels=labels)


__all__ = ["JOB", "METRICS", "Published", "Targets", "janitor_values", "metrics_targets", "prometheus_client",
           "publish_janitor_metrics"]
