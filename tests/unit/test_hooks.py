"""Post-commit hooks without a server: the config file's [hooks], the statements the Trino hook sends, the
command hook (a real subprocess), failures turned into outcomes, and doctor's grace-versus-TTL check.
The hooks against a real Trino server and a real swap: tests/integration/test_trino_readers.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tableswap import config, hooks
from tableswap.errors import ConfigurationError
from tableswap.ops.inspect.doctor import FAIL, OK, SKIP, WARN, _check_grace_vs_reader_ttl, _check_hooks


def _event(replaced=(("2026-01-01",),), added=(), dropped=(), keys=("dt",), table_change=False):
    return hooks.CommitEvent("sw1", "swap", "sales", "events", keys, tuple(added), tuple(replaced), tuple(dropped),
                             table_change)


def _write(tmp_path: Path, text: str, monkeypatch) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    monkeypatch.setenv("TABLESWAP_CONFIG", str(path))
    return path


def test_config_file_hooks_are_parsed_and_built(tmp_path, monkeypatch):
    _write(tmp_path, '''
[hooks]
timeout_s = 5
reader_cache_ttl = "10m"

[[hooks.trino]]
host = "trino.example"
port = 8443
http_scheme = "https"
password_env = "TRINO_PW"

[[hooks.command]]
argv = ["notify", "{db}.{table}"]
''', monkeypatch)
    settings = config.resolve(metastore_uri="thrift://h:9083")
    assert settings.hooks.timeout_s == 5 and settings.hooks.reader_cache_ttl == "10m"
    built = hooks.build(settings.hooks.hooks)
    assert [type(h).__name__ for h in built] == ["TrinoFlushHook", "CommandHook"]
    trino, command = built
    assert (trino.host, trino.port, trino.http_scheme, trino.catalog, trino.password_env) == (
        "trino.example", 8443, "https", "hive", "TRINO_PW")
    assert command.argv == ["notify", "{db}.{table}"]
    # hooks= replaces the file's; [] means none
    assert config.resolve(metastore_uri="thrift://h:9083", hooks=[]).hooks.hooks == ()


@pytest.mark.parametrize("text,message", [
    ('[[hooks.trino]]\nport = 8080\n', "missing 'host'"),
    ('[[hooks.trino]]\nhost = "h"\nhots = 1\n', "unknown key 'hots'"),
    ('[[hooks.trino]]\nhost = "h"\nhttp_scheme = "ftp"\n', "'http_scheme' must be"),
    ('[[hooks.command]]\nargv = []\n', "'argv' must be"),
    ('[[hooks.command]]\nargv = "notify"\n', "'argv' must be"),
    ('[hooks]\ntrino = 3\n', "must be an array of tables"),
    ('[hooks]\nreader_cache_ttl = "soon"\n', "reader_cache_ttl"),
    ('[hooks]\nwebhook = "x"\n', "unknown key '[hooks] webhook'"),
])
def test_bad_hooks_config_is_refused_naming_the_key(tmp_path, monkeypatch, text, message):
    path = _write(tmp_path, text, monkeypatch)
    with pytest.raises(ConfigurationError) as err:
        config.resolve(metastore_uri="thrift://h:9083")
    assert message in str(err.value) and str(path) in str(err.value)


def test_a_hook_that_is_not_callable_is_refused_before_anything_runs():
    with pytest.raises(ConfigurationError):
        config.resolve(metastore_uri="thrift://h:9083", hooks=print)  # not a list
    settings = config.resolve(metastore_uri="thrift://h:9083", hooks=["not a hook"])
    with pytest.raises(ConfigurationError, match="not a hook"):
        hooks.build(settings.hooks.hooks)


def test_trino_hook_flushes_replaced_partitions_one_by_one_else_the_table():
    hook = hooks.TrinoFlushHook("t", catalog="my hive")
    per_partition = hook.statements(_event(replaced=(("2026-01-01", "it's"), ("__HIVE_DEFAULT_PARTITION__", "x")),
                                           keys=("dt", "c")))
    assert per_partition == [
        "CALL \"my hive\".system.flush_metadata_cache(schema_name => 'sales', table_name => 'events', "
        "partition_columns => ARRAY['dt', 'c'], partition_values => ARRAY['2026-01-01', 'it''s'])",
        "CALL \"my hive\".system.flush_metadata_cache(schema_name => 'sales', table_name => 'events', "
        "partition_columns => ARRAY['dt', 'c'], partition_values => ARRAY['__HIVE_DEFAULT_PARTITION__', 'x'])",
    ]
    whole = "CALL \"my hive\".system.flush_metadata_cache(schema_name => 'sales', table_name => 'events')"
    assert hook.statements(_event(added=(("2026-01-02",),))) == [whole]  # the partition list changed
    assert hook.statements(_event(replaced=(), keys=(), table_change=True)) == [whole]
    many = tuple((f"d{i}",) for i in range(hooks.MAX_PARTITION_FLUSHES + 1))
    assert hook.statements(_event(replaced=many)) == [whole]


def test_command_hook_gets_the_event_and_a_failure_becomes_an_outcome(tmp_path):
    out = tmp_path / "seen.json"
    script = ("import json, sys; e = json.load(sys.stdin); "
              f"open({str(out)!r}, 'w').write(json.dumps([sys.argv[1:], e]))")
    ok = hooks.CommandHook([sys.executable, "-c", script, "{db}.{table}", "{swap_id}", "{kind}"], name="record")
    failing = hooks.CommandHook([sys.executable, "-c", "import sys; sys.stderr.write('no route'); sys.exit(3)"])
    slow = hooks.CommandHook([sys.executable, "-c", "import time; time.sleep(30)"], name="slow")
    seen = []
    outcomes = hooks.run_hooks([ok, failing, slow, seen.append], _event(), timeout_s=2)
    assert [(o.hook, o.ok) for o in outcomes] == [("record", True), (failing.name, False), ("slow", False),
                                                  ("append", True)]
    args, event = json.loads(out.read_text())
    assert args == ["sales.events", "sw1", "swap"]
    assert event["replaced"] == [["2026-01-01"]] and event["partition_keys"] == ["dt"]
    assert "exited with 3: no route" in outcomes[1].error
    assert "did not finish in 2s" in outcomes[2].error and outcomes[2].seconds < 10
    assert seen == [_event()]


def test_command_hook_check_finds_the_executable():
    assert "is executable" in hooks.CommandHook([sys.executable]).check(1)
    with pytest.raises(FileNotFoundError):
        hooks.CommandHook(["no-such-program-xyz"]).check(1)


def _settings(grace=None, ttl=None, hook_list=()):
    return config.Settings("thrift://h:1", janitor=config.JanitorSettings(grace=grace),
                           hooks=config.HookSettings(hooks=tuple(hook_list), reader_cache_ttl=ttl))


def test_doctor_warns_when_the_janitor_grace_does_not_outlast_the_reader_cache_ttl():
    assert _check_grace_vs_reader_ttl(_settings()).status == SKIP
    assert _check_grace_vs_reader_ttl(_settings(ttl="10m")).status == OK  # default grace 24h
    warned = _check_grace_vs_reader_ttl(_settings(grace="30m", ttl="1h"))
    assert warned.status == WARN and "[janitor] grace" in warned.fix
    assert _check_grace_vs_reader_ttl(_settings(grace="1h", ttl="1h")).status == WARN


def test_doctor_checks_that_hooks_connect():
    assert _check_hooks(_settings()).status == SKIP
    good = _check_hooks(_settings(hook_list=[hooks.CommandHook([sys.executable])]))
    assert good.status == OK
    bad = _check_hooks(_settings(hook_list=[hooks.CommandHook([sys.executable]),
                                            hooks.TrinoFlushHook("127.0.0.1", port=1)]))
    assert bad.status == FAIL and "1 of 2 hook(s) cannot connect" in bad.detail


def test_the_journal_records_hook_runs_in_the_order_they_ran(tmp_path):
    from tableswap.journal.store import Journal

    journal = Journal(f"sqlite:///{tmp_path / 'journal.db'}")
    try:
        assert journal.schema_version() >= 6
        outcomes = hooks.run_hooks([hooks.CommandHook(["false"], name="z first"), print], _event(), timeout_s=5)
        journal.record_hook_runs("sw1", outcomes)
        runs = journal.hook_runs(["sw1", "other"])
        assert list(runs) == ["sw1"]
        assert [(o.hook, o.ok) for o in runs["sw1"]] == [("z first", False), ("print", True)]
        assert runs["sw1"][0].error == "RuntimeError: false exited with 1" and runs["sw1"][0].ran_at
    finally:
        journal.close()
