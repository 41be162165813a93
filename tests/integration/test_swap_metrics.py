"""The swaps' metrics for Prometheus (tableswap.hooks.PrometheusHook, ``[[hooks.prometheus]]``; docs/operations.md
#metrics): a real swap and rollback against the real metastore push to a real Pushgateway (tests/
pushgateway_server.py) and write a textfile, both read back with prometheus-client's own parser; the textfile
keeps the other tables' and kinds' samples; a Pushgateway that cannot be reached is a failed hook outcome,
never a failed swap. Also the config file's keys and what they refuse."""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from tableswap import config, hooks, swap_partitions
from tableswap.errors import ConfigurationError
from tableswap.hooks import SWAP_JOB, SWAP_METRICS, CommitEvent, PrometheusHook

from ..support.helpers import batch_df, create_events, today


def samples(text: str) -> dict[tuple[str, str, str], float]:
    """(name, table, kind) -> value of the tableswap_swap_* samples."""
    return {(s.name, s.labels["table"], s.labels["kind"]): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name.startswith("tableswap_swap_")}


def _event(table: str, kind: str, **kw) -> CommitEvent:
    base = dict(swap_id="s", kind=kind, db="d", table=table, partition_keys=("dt",), added=(("1",),),
                replaced=(("2",), ("3",)), dropped=(), table_location_changed=False, seconds=1.25)
    return CommitEvent(**{**base, **kw})


def test_the_textfile_keeps_the_other_tables_and_kinds(tmp_path):
    path = tmp_path / "swaps.prom"
    hook = PrometheusHook(textfile=str(path))
    hook(_event("a", "swap"))
    hook(_event("b", "swap", seconds=None))
    hook(_event("a", "rollback", added=(), replaced=(("2",),), dropped=(("1",),)))
    hook(_event("a", "swap", added=(), seconds=2.5))  # replaces a's swap samples only
    got = samples(path.read_text())
    assert got[("tableswap_swap_last_duration_seconds", "d.a", "swap")] == 2.5
    assert got[("tableswap_swap_last_added_partitions", "d.a", "swap")] == 0
    assert got[("tableswap_swap_last_replaced_partitions", "d.a", "swap")] == 2
    assert got[("tableswap_swap_last_added_partitions", "d.b", "swap")] == 1
    assert ("tableswap_swap_last_duration_seconds", "d.b", "swap") not in got  # unknown: left out
    assert got[("tableswap_swap_last_dropped_partitions", "d.a", "rollback")] == 1
    assert {name for name, _, _ in got} == set(SWAP_METRICS)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["swaps.prom"]  # no temporary left


def test_the_config_file_builds_the_hook_and_refuses_a_bad_one(tmp_path, monkeypatch):
    path = tmp_path / "config.toml"
    monkeypatch.setenv("TABLESWAP_CONFIG", str(path))
    path.write_text('[[hooks.prometheus]]\npushgateway = "http://pg:9091"\ntextfile = "/var/lib/ne/swaps.prom"\n')
    [built] = hooks.build(config.resolve(metastore_uri="thrift://h:9083").hooks.hooks)
    assert isinstance(built, PrometheusHook)
    assert (built.pushgateway, built.textfile) == ("http://pg:9091", "/var/lib/ne/swaps.prom")
    for text, message in (('[[hooks.prometheus]]\nname = "x"\n', "needs a pushgateway URL or a textfile"),
                          ('[[hooks.prometheus]]\ntextfile = "swaps.txt"\n', "must end in .prom"),
                          ('[[hooks.prometheus]]\npushgateway = "pg:9091"\n', "is not an http://"),
                          ('[[hooks.prometheus]]\npushgatway = "http://pg"\n', "unknown key 'pushgatway'")):
        path.write_text(text)
        with pytest.raises(ConfigurationError) as err:
            hooks.build(config.resolve(metastore_uri="thrift://h:9083").hooks.hooks)
        assert message in str(err.value)


@pytest.mark.integration
def test_a_real_swap_and_rollback_pushed_and_written(spark, db, ts_env, tmp_path, pushgateway):
    from tableswap.cli import main

    events = create_events(spark, db, tmp_path)
    batch_df(spark, {(today(0),): 1}, "b0").write.insertInto(events)
    textfile = tmp_path / "swaps.prom"
    hook = PrometheusHook(pushgateway=pushgateway.url, textfile=str(textfile))
    result = swap_partitions(batch_df(spark, {(today(0),): 1, (today(1),): 1}, "b1"), events, hooks=[hook])
    assert [(o.hook, o.ok) for o in result_hooks(ts_env, result.swap_id)] == [(hook.name, True)]
    served, written = samples(pushgateway.metrics_text()), samples(textfile.read_text())
    mine = {k: v for k, v in served.items() if k[1] == events}
    assert mine == written  # the same values in both places
    assert written[("tableswap_swap_last_added_partitions", events, "swap")] == 1
    assert written[("tableswap_swap_last_replaced_partitions", events, "swap")] == 1
    assert written[("tableswap_swap_last_dropped_partitions", events, "swap")] == 0
    duration = written[("tableswap_swap_last_duration_seconds", events, "swap")]
    assert 0 < duration <= result.timings["total"] + 0.5
    [group] = [g for g in pushgateway.groups() if g["labels"].get("table") == events]
    assert group["labels"] == {"job": SWAP_JOB, "table": events, "kind": "swap"}

    # The same hook from the config file, for the CLI's rollback: its own kind, the swap's samples kept.
    config_path = tmp_path / "config.toml"
    config_path.write_text(f'[[hooks.prometheus]]\ntextfile = "{textfile}"\n')
    rolled = CliRunner().invoke(main, ["rollback", events, "--yes", "--json"], catch_exceptions=False,
                                env={"TABLESWAP_CONFIG": str(config_path)})
    assert rolled.exit_code == 0, rolled.output
    written = samples(textfile.read_text())
    assert written[("tableswap_swap_last_dropped_partitions", events, "rollback")] == 1
    assert written[("tableswap_swap_last_replaced_partitions", events, "rollback")] == 1
    assert written[("tableswap_swap_last_added_partitions", events, "swap")] == 1  # kept

    # A Pushgateway that cannot be reached: the swap commits, the hook's failure is its recorded outcome.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    unreachable = PrometheusHook(pushgateway=f"http://127.0.0.1:{closed}", textfile=str(textfile))
    again = swap_partitions(batch_df(spark, {(today(2),): 1}, "b2"), events, hooks=[unreachable])
    [outcome] = result_hooks(ts_env, again.swap_id)
    assert not outcome.ok and "pushgateway" in outcome.error
    assert samples(textfile.read_text())[("tableswap_swap_last_added_partitions", events, "swap")] == 1  # still written
    assert journal_state(ts_env, again.swap_id) == "committed"


def journal_state(ts_env, swap_id):
    from tableswap.journal.store import Journal

    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    try:
        return journal.get_swap(swap_id).state
    finally:
        journal.close()


def result_hooks(ts_env, swap_id):
    from tableswap.journal.store import Journal

    journal = Journal(ts_env["TABLESWAP_JOURNAL_URL"])
    try:
        return journal.hook_runs([swap_id]).get(swap_id, [])
    finally:
        journal.close()
