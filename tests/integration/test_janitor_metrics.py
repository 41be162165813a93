"""The janitor's metrics for Prometheus (``tableswap janitor run --metrics-pushgateway / --metrics-textfile``):
real runs against the real metastore, pushed to a real Pushgateway (built from its Go module,
tests/support/pushgateway_server.py) and read back from what it serves to Prometheus, and written to a textfile;
both parsed with prometheus-client's own parser. A Pushgateway that cannot be reached changes neither the
run's result nor its exit code. Also: the settings (option > env > config file), the extra that must be
installed, the atomic textfile, and docs/janitor.md's list of the metrics."""

from __future__ import annotations

import errno
import json
import re
import socket
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from tableswap import swap_partitions
from tableswap.cli import main
from tableswap.errors import ConfigurationError
from tableswap.metrics.janitor import JOB, METRICS, metrics_targets, publish_janitor_metrics
from tableswap.ops.janitor.run import JanitorReport, Outcome

from ..support.helpers import batch_df, create_events, queue_deletions_by_hand, today

ROOT = Path(__file__).resolve().parents[2]


def samples(text: str, **labels: str) -> dict[str, float]:
    """name -> value of the tableswap_janitor_* samples whose labels include ``labels``."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("tableswap_janitor_") and labels.items() <= sample.labels.items():
                out[sample.name] = sample.value
    return out


def types(text: str) -> dict[str, str]:
    return {f.name: f.type for f in text_string_to_metric_families(text) if f.name.startswith("tableswap_janitor_")}


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def janitor_cli(*args: str):
    return CliRunner().invoke(main, ["janitor", "run", "--grace", "0", "--force-short-grace", *args],
                              catch_exceptions=False)


@pytest.fixture
def metrics_events(spark, db, tmp_path):
    table = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(i),): 2 for i in range(2)}, "b0").write.insertInto(table)
    return table


# --------------------------------------------------------------------------- real runs, real Pushgateway


@pytest.mark.integration
@pytest.mark.release_independent  # the metrics are the subject, not the metastore
def test_a_real_run_pushed_to_a_real_pushgateway_and_written_to_a_textfile(spark, db, metrics_events, ts_env, tmp_path,
                                                                          pushgateway, monkeypatch):
    swap_partitions(batch_df(spark, {(today(1),): 1}, "b1"), metrics_events)
    # A location outside the table's root, queued long ago: refused, and left in the backlog past grace.
    outside = (tmp_path / "elsewhere" / "dt=x").as_uri()
    queue_deletions_by_hand(ts_env["TABLESWAP_JOURNAL_URL"], db, "events", (tmp_path / "events").as_uri(), [outside])
    textfile = tmp_path / "textfile" / "tableswap_janitor.prom"
    textfile.parent.mkdir()

    before = time.time()
    result = janitor_cli("--table", metrics_events, "--json", "--metrics-pushgateway", pushgateway.url,
                         "--metrics-textfile", str(textfile))
    after = time.time()
    payload = json.loads(result.stdout)
    assert result.exit_code == 0 and payload["ok"], result.output
    assert payload["counts"] == {"deleted": 1, "refused": 1}
    assert payload["metrics"]["pushgateway"] == {"url": pushgateway.url, "job": JOB, "grouping_key": {"table": metrics_events},
                                                 "ok": True, "error": None}
    assert payload["metrics"]["textfile"] == {"path": str(textfile), "ok": True, "error": None}
    assert payload["metrics"]["warnings"] == []

    # What Prometheus scrapes from the Pushgateway, parsed by prometheus-client's parser.
    served = pushgateway.metrics_text()
    got = samples(served, job=JOB, table=metrics_events)
    written = textfile.read_text()
    assert samples(written, table=metrics_events) == got  # the same values in both places
    assert set(got) == set(METRICS)
    assert set(types(served).values()) == {"gauge"} and set(types(written)) == set(METRICS)
    assert got["tableswap_janitor_last_run_deleted_directories"] == 1
    assert got["tableswap_janitor_last_run_deleted_bytes"] == payload["bytes_freed"] > 0
    assert got["tableswap_janitor_last_run_refused_directories"] == 1
    assert got["tableswap_janitor_last_run_errors"] == 0
    assert got["tableswap_janitor_last_run_success"] == 1
    assert got["tableswap_janitor_last_run_duration_seconds"] == pytest.approx(payload["seconds"])
    assert before - 1 <= got["tableswap_janitor_last_run_timestamp_seconds"] <= after + 1
    assert got["tableswap_janitor_last_success_timestamp_seconds"] == got["tableswap_janitor_last_run_timestamp_seconds"]
    # The backlog past grace: what `tableswap janitor status` reads from the journal after the run.
    status = json.loads(CliRunner().invoke(main, ["janitor", "status", "--table", metrics_events, "--grace", "0",
                                                  "--json"]).stdout)
    assert status["past_grace"]["count"] == 1 == got["tableswap_janitor_backlog_past_grace_directories"]
    assert got["tableswap_janitor_backlog_past_grace_bytes"] == status["past_grace"]["known_bytes"] == 0
    assert got["tableswap_janitor_backlog_past_grace_unknown_size_directories"] == 1  # queued by hand: no size
    # The Pushgateway's own view: one group, job and table, and a push time.
    [group] = [g for g in pushgateway.groups() if g["labels"].get("table") == metrics_events]
    assert group["labels"] == {"job": JOB, "table": metrics_events}
    assert "push_time_seconds" in group and "tableswap_janitor_last_run_errors" in group
    assert sorted(p.name for p in textfile.parent.iterdir()) == ["tableswap_janitor.prom"]  # no temporary left

    # A run that fails to delete: its errors are published, the last success stays the earlier run's (on the
    # Pushgateway and in the textfile, rewritten), and the exit code is the run's own.
    first_success = got["tableswap_janitor_last_success_timestamp_seconds"]
    swap_partitions(batch_df(spark, {(today(0),): 1}, "b2"), metrics_events)
    from tableswap import storage

    monkeypatch.setattr(storage, "delete_many",
                        lambda locations, surveyed=None: {x: OSError(errno.EROFS, "read-only file system") for x in locations})
    time.sleep(1.1)  # a later second
    failed = janitor_cli("--table", metrics_events, "--json", "--metrics-pushgateway", pushgateway.url,
                         "--metrics-textfile", str(textfile))
    payload = json.loads(failed.stdout)
    assert failed.exit_code == 1 and payload["counts"] == {"error": 1, "refused": 1} and not payload["metrics"]["warnings"]
    for text in (pushgateway.metrics_text(), textfile.read_text()):
        now = samples(text, table=metrics_events)
        assert now["tableswap_janitor_last_run_errors"] == 1 and now["tableswap_janitor_last_run_success"] == 0
        assert now["tableswap_janitor_last_run_deleted_directories"] == 0
        assert now["tableswap_janitor_last_run_timestamp_seconds"] > first_success
        assert now["tableswap_janitor_last_success_timestamp_seconds"] == first_success
        assert now["tableswap_janitor_backlog_past_grace_directories"] == 2


@pytest.mark.integration
@pytest.mark.release_independent
def test_an_unreachable_pushgateway_changes_neither_the_result_nor_the_exit_code(spark, db, metrics_events, ts_env, tmp_path):
    swap_partitions(batch_df(spark, {(today(1),): 1}, "b1"), metrics_events)
    url = f"http://127.0.0.1:{closed_port()}"
    result = janitor_cli("--table", metrics_events, "--json", "--metrics-pushgateway", url)
    payload = json.loads(result.stdout)
    assert result.exit_code == 0 and payload["ok"] and payload["exit_code"] == 0, result.output
    assert payload["counts"] == {"deleted": 1} and payload["bytes_freed"] > 0  # the run did its work
    pushed = payload["metrics"]["pushgateway"]
    assert pushed["ok"] is False and "Connection refused" in pushed["error"], pushed
    assert payload["metrics"]["warnings"] == [f"metrics not pushed to {url}: {pushed['error']} "
                                              "(the run's result is unchanged)"]
    assert "janitor.metrics_not_pushed" in result.stderr  # the warning in the log (stderr)

    # --strict with a refusal: exit 5 stays exit 5; the text output says what went wrong.
    queue_deletions_by_hand(ts_env["TABLESWAP_JOURNAL_URL"], db, "events", (tmp_path / "events").as_uri(),
                            [(tmp_path / "elsewhere").as_uri()])
    text = janitor_cli("--table", metrics_events, "--strict", "--metrics-pushgateway", url)
    assert text.exit_code == 5, text.output
    assert "refused 1; errors 0" in text.stdout
    assert f"WARNING: metrics not pushed to {url}: " in text.stdout and "unchanged" in text.stdout


# --------------------------------------------------------------------------- settings, the extra, the textfile


@pytest.fixture
def metrics_journal_env(clean_env, monkeypatch):
    from tableswap.journal import Journal

    url = f"sqlite:///{clean_env}/j.db"
    Journal(url).close()
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", url)
    monkeypatch.setenv("TABLESWAP_METASTORE_URI", "thrift://127.0.0.1:1")  # never reached by these tests
    return clean_env


def test_without_prometheus_client_asking_for_metrics_names_the_extra_before_any_run(metrics_journal_env, monkeypatch):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # what `import` does when it is not installed
    for args in (["--metrics-textfile", str(metrics_journal_env / "j.prom")], ["--metrics-pushgateway", "pushgateway:9091"]):
        result = janitor_cli(*args, "--json")
        payload = json.loads(result.stdout)
        assert result.exit_code == 1 and payload["error_type"] == "ConfigurationError", result.output
        assert "pip install 'tableswap[metrics]'" in payload["error"]
    from tableswap.journal import Journal
    from tableswap.journal.queue import JanitorQueue

    assert JanitorQueue(Journal(f"sqlite:///{metrics_journal_env}/j.db")).runs() == []  # stopped before any run
    assert not metrics_targets().wanted  # without a target, nothing asks for prometheus-client


def test_targets_option_over_env_over_config_file_and_checked(metrics_journal_env, monkeypatch):
    config = metrics_journal_env / "config.toml"
    config.write_text('[janitor]\nmetrics_pushgateway = "http://file:9091"\nmetrics_textfile = "/f/t.prom"\n')
    monkeypatch.setenv("TABLESWAP_CONFIG", str(config))
    t = metrics_targets()
    assert (t.pushgateway, t.textfile) == ("http://file:9091", "/f/t.prom")
    assert t.sources == {"metrics_pushgateway": f"config file {config}", "metrics_textfile": f"config file {config}"}
    monkeypatch.setenv("TABLESWAP_JANITOR_METRICS_PUSHGATEWAY", "https://env:9091")
    monkeypatch.setenv("TABLESWAP_JANITOR_METRICS_TEXTFILE", "/e/t.prom")
    t = metrics_targets()
    assert (t.pushgateway, t.textfile) == ("https://env:9091", "/e/t.prom")
    assert t.sources["metrics_textfile"] == "env TABLESWAP_JANITOR_METRICS_TEXTFILE"
    t = metrics_targets("opt:9091", "/o/t.prom", explicit_source="command line")
    assert (t.pushgateway, t.textfile, t.sources["metrics_pushgateway"]) == ("opt:9091", "/o/t.prom", "command line")
    with pytest.raises(ConfigurationError, match=r"must end in \.prom"):
        metrics_targets(textfile="/o/t.txt")
    with pytest.raises(ConfigurationError, match="not an http:// or https:// URL"):
        metrics_targets(pushgateway="ftp://gw:21")
    config.write_text("[janitor]\nmetrics_textfile = 3\n")
    with pytest.raises(ConfigurationError, match=r"\[janitor\] metrics_textfile' must be a string"):
        metrics_targets()
    # The CLI: a malformed target is a configuration error before the run (nothing contacted).
    monkeypatch.delenv("TABLESWAP_CONFIG")
    result = janitor_cli("--metrics-textfile", "/o/metrics.txt")
    assert result.exit_code == 1 and "must end in .prom" in result.stderr


def _report(**kw) -> JanitorReport:
    base = dict(run_id="janitor_x", dry_run=False, grace_seconds=86400.0, keep=0, table_filter=None,
                started_at="2026-11-25T03:15:00+00:00", seconds=12.5,
                outcomes=(Outcome("deleted", "displaced", "db.t", "file:/w/t/a", bytes=2048),
                          Outcome("refused", "displaced", "db.t", "file:/x/b", reason="outside")))
    return JanitorReport(**{**base, **kw})


def test_the_textfile_is_replaced_by_a_rename_and_a_failed_run_keeps_the_last_success(tmp_path):
    path = tmp_path / "tableswap_janitor.prom"
    targets = metrics_targets(textfile=str(path))
    first = publish_janitor_metrics(_report(), None, targets)
    assert first.textfile["ok"], first.textfile
    values = samples(path.read_text())
    assert values["tableswap_janitor_last_success_timestamp_seconds"] == 1795576500 + 12.5
    assert values["tableswap_janitor_last_run_deleted_bytes"] == 2048
    assert "tableswap_janitor_backlog_past_grace_directories" not in values  # no journal read: left out
    inode = path.stat().st_ino
    failed = _report(started_at="2026-11-26T03:15:00+00:00",
                     outcomes=(Outcome("error", "displaced", "db.t", "file:/w/t/c", reason="EACCES"),))
    publish_janitor_metrics(failed, None, targets)
    assert path.stat().st_ino != inode  # a new file renamed over the old one, never rewritten in place
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
    values = samples(path.read_text())
    assert values["tableswap_janitor_last_run_success"] == 0
    assert values["tableswap_janitor_last_run_timestamp_seconds"] == 1795662900 + 12.5
    assert values["tableswap_janitor_last_success_timestamp_seconds"] == 1795576500 + 12.5  # carried over
    # A dry run publishes nothing; a directory that does not exist is a warning, not an exception.
    inode = path.stat().st_ino
    assert publish_janitor_metrics(_report(dry_run=True), None, targets).skipped
    assert path.stat().st_ino == inode and samples(path.read_text()) == values
    missing = publish_janitor_metrics(_report(), None, metrics_targets(textfile=str(tmp_path / "no" / "t.prom")))
    assert not missing.textfile["ok"] and "No such file or directory" in missing.warnings[0]
    # --table: a label on every metric.
    labelled = publish_janitor_metrics(_report(table_filter="db.t"), None, metrics_targets(textfile=str(path)))
    assert labelled.labels == {"table": "db.t"} and samples(path.read_text(), table="db.t")


def test_docs_janitor_md_lists_every_metric_with_its_type_and_labels():
    text = (ROOT / "docs" / "janitor.md").read_text()
    section = re.search(r"^## Metrics\n(.*?)(?=^## )", text, flags=re.S | re.M).group(1)
    rows = dict(re.findall(r"^\| `(tableswap_janitor_[a-z_]+)` \| (\w+) \|", section, flags=re.M))
    assert rows == {name: "gauge" for name in METRICS}
    for name in re.findall(r"tableswap_janitor_[a-z_]+", section):  # the alert rules name real metrics
        assert name in METRICS or name == "tableswap_janitor", name
    for option in ("--metrics-pushgateway", "--metrics-textfile", "metrics_pushgateway", "metrics_textfile",
                   "TABLESWAP_JANITOR_METRICS_PUSHGATEWAY", "TABLESWAP_JANITOR_METRICS_TEXTFILE", "tableswap[metrics]"):
        assert option in section, option


def test_only_the_prometheus_module_imports_prometheus_client():
    """tableswap/metrics/prometheus.py, shared by the janitor's metrics and the swaps' hook (tableswap.hooks)."""
    users = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "src" / "tableswap").rglob("*.py")
                   if re.search(r"^\s*(import|from) prometheus_client", p.read_text(), flags=re.M))
    assert users == ["src/tableswap/metrics/prometheus.py"]
