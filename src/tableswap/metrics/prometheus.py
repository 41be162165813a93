"""The one place that imports ``prometheus-client`` (the ``tableswap[metrics]`` extra), lazily: the janitor's
metrics (:mod:`tableswap.metrics.janitor`) and the swaps' (:class:`tableswap.hooks.PrometheusHook`) go through it.

Both follow Prometheus' documented pattern for batch jobs: gauges describing the last run, pushed to a
Pushgateway (``pushadd``: only the metric names pushed are replaced in the group) and/or written to a
node_exporter textfile (written beside it and renamed: a reader never sees half a file).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from tableswap.errors import ConfigurationError

EXTRA = "tableswap[metrics]"


def client(needed_by: str) -> Any:
    """The prometheus_client module (and its parser), or a :class:`ConfigurationError` saying that
    ``needed_by`` needs it and which extra brings it."""
    try:
        import prometheus_client as module
        import prometheus_client.parser  # noqa: F401 - reading a textfile back
    except ImportError as exc:
        raise ConfigurationError(f"{needed_by} need prometheus-client, which is not installed: "
                                 f"pip install '{EXTRA}' ({exc})") from exc
    return module


def gauges(helps: Mapping[str, str], samples: Iterable[tuple[str, Mapping[str, str], float]],
           labelnames: tuple[str, ...], needed_by: str) -> Any:
    """A registry of the gauges ``helps`` (name -> help, in that order) holding ``samples`` (name, labels,
    value); every sample's labels are ``labelnames``."""
    module = client(needed_by)
    registry = module.CollectorRegistry()
    made = {name: module.Gauge(name, text, labelnames=labelnames, registry=registry) for name, text in helps.items()}
    for name, labels, value in samples:
        gauge = made[name]
        (gauge.labels(**labels) if labelnames else gauge).set(value)
    return registry


def push(url: str, job: str, registry: Any, grouping_key: Mapping[str, str], timeout_s: float, needed_by: str) -> None:
    client(needed_by).pushadd_to_gateway(url, job=job, registry=registry, grouping_key=dict(grouping_key),
                                         timeout=timeout_s)


def write_textfile(path: str, registry: Any, needed_by: str) -> None:
    client(needed_by).write_to_textfile(path, registry)


def read_samples(path: str, needed_by: str) -> list[tuple[str, dict[str, str], float]]:
    """The samples of the textfile ``path`` ([] when it does not exist or is not a metrics file)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return []
    try:
        return [(s.name, dict(s.labels), float(s.value))
                for family in client(needed_by).parser.text_string_to_metric_families(text) for s in family.samples]
    except ValueError:  # not a metrics file: it is replaced
        return []


__all__ = ["EXTRA", "client", "gauges", "push", "read_samples", "write_textfile"]
