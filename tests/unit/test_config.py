"""Configuration precedence (keyword > environment > config file > Spark conf / defaults) and bad files.

Unit tests: no metastore, no Spark. The Spark conf level uses a stand-in with ``conf.get`` only.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
import structlog
from click.testing import CliRunner

from tableswap import config
from tableswap.cli import main
from tableswap.errors import ConfigurationError, UnsafeOperationError

ENV = ("TABLESWAP_METASTORE_URI", "TABLESWAP_JOURNAL_URL", "TABLESWAP_CONFIG", "TABLESWAP_LOG_FORMAT",
       "TABLESWAP_LOG_LEVEL", "TABLESWAP_JANITOR_MIN_GRACE")


class SparkConf:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str, default=None):
        return self.values.get(key, default)


class FakeSpark:
    def __init__(self, uri: str | None) -> None:
        self.conf = SparkConf({"spark.hadoop.hive.metastore.uris": uri} if uri else {})


@pytest.fixture
def config_env(monkeypatch, tmp_path):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    xdg = tmp_path / "xdg"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(xdg))
    yield xdg
    structlog.reset_defaults()


def write_default(xdg: Path, text: str) -> Path:
    path = xdg / "tableswap" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


FILE = """
metastore_uri = "thrift://file:1"
journal_url = "sqlite:////file/journal.db"
[swap]
lock_timeout_s = 42
connect_attempts = 7
write_distribution = "partition"
"""


# ---------------------------------------------------------------------- precedence
def test_metastore_uri_precedence_at_every_level(config_env, monkeypatch):
    spark = FakeSpark("thrift://spark:1")
    settings, sources = config.resolve_detailed(spark=spark)
    assert (settings.metastore_uri, sources["metastore_uri"]) == ("thrift://spark:1", config.SRC_SPARK)

    path = write_default(config_env, FILE)
    settings, sources = config.resolve_detailed(spark=spark)
    assert settings.metastore_uri == "thrift://file:1"
    assert sources["metastore_uri"] == f"config file {path}"

    monkeypatch.setenv("TABLESWAP_METASTORE_URI", "thrift://env:1")
    settings, sources = config.resolve_detailed(spark=spark)
    assert (settings.metastore_uri, sources["metastore_uri"]) == ("thrift://env:1", "env TABLESWAP_METASTORE_URI")

    settings, sources = config.resolve_detailed(spark=spark, metastore_uri="thrift://kw:1")
    assert (settings.metastore_uri, sources["metastore_uri"]) == ("thrift://kw:1", config.SRC_KEYWORD)


def test_journal_url_precedence(config_env, monkeypatch):
    spark = FakeSpark("thrift://spark:1")
    assert config.resolve(spark=spark).journal_url is None  # the default SQLite file
    assert config.resolve_journal_url() is None
    write_default(config_env, FILE)
    assert config.resolve(spark=spark).journal_url == "sqlite:////file/journal.db"
    assert config.resolve_journal_url() == "sqlite:////file/journal.db"
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", "sqlite:////env/j.db")
    assert config.resolve(spark=spark).journal_url == "sqlite:////env/j.db"
    assert config.resolve_journal_url() == "sqlite:////env/j.db"
    assert config.resolve(spark=spark, journal_url="sqlite:////kw/j.db").journal_url == "sqlite:////kw/j.db"
    assert config.resolve_journal_url("sqlite:////kw/j.db") == "sqlite:////kw/j.db"


# ---------------------------------------------------------------------- a journal that outlives the process
CLUSTER_DRIVER = {"spark.hadoop.hive.metastore.uris": "thrift://spark:1", "spark.master": "yarn",
                  "spark.submit.deployMode": "cluster"}


@pytest.mark.parametrize("journal_url", [None, "sqlite:////tmp/j.db", "sqlite://", "sqlite+pysqlite:////tmp/j.db"])
def test_a_cluster_mode_driver_refuses_a_sqlite_journal_naming_the_shared_journal_setting(
        config_env, monkeypatch, journal_url):
    """A Spark driver in cluster mode (on YARN: in the ApplicationMaster's container) would keep a SQLite journal on
    that container's disk, gone with it; the SQLite default is refused as an explicit SQLite URL is, before
    anything is opened. tests/integration/test_yarn.py runs it on a real YARN."""
    monkeypatch.delenv("CONTAINER_ID", raising=False)
    spark = FakeSpark(None)
    spark.conf = SparkConf(CLUSTER_DRIVER)
    with pytest.raises(ConfigurationError) as caught:
        config.resolve(spark=spark, journal_url=journal_url)
    message = str(caught.value)
    assert "cluster mode" in message and "Nothing was written" in message
    assert "TABLESWAP_JOURNAL_URL" in message and "journal_url" in message
    assert "spark.yarn.appMasterEnv.TABLESWAP_JOURNAL_URL" in message
    shared = "postgresql://tableswap@journal-db/tableswap"
    assert config.resolve(spark=spark, journal_url=shared).journal_url == shared


def test_a_process_in_a_yarn_container_refuses_a_sqlite_journal(config_env, monkeypatch):
    """Any tableswap process in a YARN container (the NodeManager sets CONTAINER_ID), with or without Spark."""
    monkeypatch.setenv("CONTAINER_ID", "container_1795945851437_0003_01_000001")
    with pytest.raises(ConfigurationError, match="YARN container container_1795945851437_0003_01_000001"):
        config.resolve(metastore_uri="thrift://kw:1")
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", "postgresql://tableswap@journal-db/tableswap")
    assert config.resolve(metastore_uri="thrift://kw:1").journal_url.startswith("postgresql://")


def test_a_client_mode_driver_and_a_process_outside_containers_keep_the_sqlite_default(config_env, monkeypatch):
    monkeypatch.delenv("CONTAINER_ID", raising=False)
    spark = FakeSpark(None)
    spark.conf = SparkConf({**CLUSTER_DRIVER, "spark.submit.deployMode": "client"})
    assert config.resolve(spark=spark).journal_url is None
    assert config.resolve(metastore_uri="thrift://kw:1").journal_url is None
    monkeypatch.setenv("CONTAINER_ID", "not-a-yarn-container")  # another system's variable of that name
    assert config.resolve(metastore_uri="thrift://kw:1").journal_url is None


def test_swap_options_keyword_over_file_over_default(config_env):
    spark = FakeSpark("thrift://spark:1")
    settings, sources = config.resolve_detailed(spark=spark)
    assert settings.lock_timeout_s == 300.0 and sources["lock_timeout_s"] == config.SRC_DEFAULT
    path = write_default(config_env, FILE)
    settings, sources = config.resolve_detailed(spark=spark)
    assert settings.lock_timeout_s == 42.0 and isinstance(settings.lock_timeout_s, float)
    assert settings.connect_attempts == 7 and sources["connect_attempts"] == f"config file {path}"
    assert settings.heartbeat_s == 20.0 and sources["heartbeat_s"] == config.SRC_DEFAULT
    settings, sources = config.resolve_detailed(spark=spark, lock_timeout_s=5, connect_attempts=None)
    assert settings.lock_timeout_s == 5 and sources["lock_timeout_s"] == config.SRC_KEYWORD
    assert settings.connect_attempts == 7  # None means "not given"


def test_write_distribution_keyword_over_file_over_default(config_env):
    """A choice-valued swap option resolves as the numeric ones do."""
    spark = FakeSpark("thrift://spark:1")
    settings, sources = config.resolve_detailed(spark=spark)
    assert (settings.write_distribution, sources["write_distribution"]) == ("auto", config.SRC_DEFAULT)
    path = write_default(config_env, FILE)
    settings, sources = config.resolve_detailed(spark=spark)
    assert (settings.write_distribution, sources["write_distribution"]) == ("partition", f"config file {path}")
    settings, sources = config.resolve_detailed(spark=spark, write_distribution="none")
    assert (settings.write_distribution, sources["write_distribution"]) == ("none", config.SRC_KEYWORD)
    assert config.resolve(spark=spark, write_distribution=None).write_distribution == "partition"  # not given
    assert config.Settings("thrift://x:1", write_distribution="partition").write_distribution == "partition"


@pytest.mark.parametrize("value", ["hash", "Partition", 3, True, "", " "])
def test_an_invalid_write_distribution_names_the_key_the_value_and_the_choices(config_env, value):
    """From a keyword (even over a valid file: an empty or wrong keyword never falls back to it), the config
    file, or a Settings built by hand."""
    write_default(config_env, FILE)
    with pytest.raises(ConfigurationError) as info:
        config.resolve(metastore_uri="thrift://kw:1", write_distribution=value)
    assert str(info.value) == f"option write_distribution={value!r} is invalid: it must be one of auto, none, partition"
    with pytest.raises(ConfigurationError, match="write_distribution.*one of auto, none, partition"):
        config.Settings("thrift://x:1", write_distribution=value)
    text = f"[swap]\nwrite_distribution = {json.dumps(value)}\n"
    path = write_default(config_env, text)
    with pytest.raises(ConfigurationError) as info:
        config.resolve(metastore_uri="thrift://kw:1")
    message = str(info.value)
    assert str(path) in message and "'[swap] write_distribution' must be one of auto, none, partition" in message
    assert f"got {value!r}" in message, message


def test_explicit_config_path_wins_over_xdg(config_env, monkeypatch, tmp_path):
    write_default(config_env, 'metastore_uri = "thrift://xdg:1"\n')
    explicit = tmp_path / "other.toml"
    explicit.write_text('metastore_uri = "thrift://explicit:1"\n')
    monkeypatch.setenv("TABLESWAP_CONFIG", str(explicit))
    settings, sources = config.resolve_detailed()
    assert settings.metastore_uri == "thrift://explicit:1" and str(explicit) in sources["metastore_uri"]


def test_missing_explicit_config_is_an_error_missing_default_is_not(config_env, monkeypatch, tmp_path):
    assert config.load_file() is None
    missing = tmp_path / "nope.toml"
    monkeypatch.setenv("TABLESWAP_CONFIG", str(missing))
    with pytest.raises(ConfigurationError, match="does not exist") as info:
        config.resolve(metastore_uri="thrift://kw:1")
    assert str(missing) in str(info.value) and "TABLESWAP_CONFIG" in str(info.value)


def test_nothing_configured_names_every_way_to_configure(config_env):
    with pytest.raises(ConfigurationError) as info:
        config.resolve()
    message = str(info.value)
    for part in ("metastore_uri", "TABLESWAP_METASTORE_URI", "config file", "spark.hadoop.hive.metastore.uris"):
        assert part in message


def test_unknown_keyword_option_lists_allowed(config_env):
    with pytest.raises(ConfigurationError, match="lock_timeout_s"):
        config.resolve(metastore_uri="thrift://kw:1", lock_timeout=3)


# ---------------------------------------------------------------------- bad files
@pytest.mark.parametrize("text, key, fragment", [
    ('metastore_url = "thrift://x:1"\n', "metastore_url", "allowed: metastore_uri, journal_url"),
    ('lock_timeout_s = 3\n', "lock_timeout_s", "put it under [swap]"),
    ('[swap]\nlock_timeout = 3\n', "[swap] lock_timeout", "[swap] lock_timeout_s"),
    ('[swap]\nlock_timeout_s = "soon"\n', "[swap] lock_timeout_s", "a number of seconds > 0"),
    ('[swap]\nlock_timeout_s = -1\n', "[swap] lock_timeout_s", "a number of seconds > 0"),
    ('[swap]\nconnect_attempts = 2.5\n', "[swap] connect_attempts", "an integer >= 1"),
    ('[swap]\nwrite_batch_size = true\n', "[swap] write_batch_size", "an integer >= 1"),
    ('[swap]\nwrite_batch_size = 0\n', "[swap] write_batch_size", "an integer >= 1"),
    ('metastore_uri = 9083\n', "metastore_uri", "a string thrift://HOST:PORT"),
    ('[janitor]\ngrace = "forever"\n', "[janitor] grace", "a duration string"),
    ('[janitor]\nkeep = -1\n', "[janitor] keep", "an integer >= 0"),
    ('[log]\nformat = "xml"\n', "[log] format", "one of auto, json, text"),
    ('[colour]\nx = 1\n', "colour", "allowed:"),
    ('swap = 3\n', "swap", "must be a table ([swap])"),
])
def test_bad_file_names_file_key_and_what_is_allowed(config_env, text, key, fragment):
    path = write_default(config_env, text)
    with pytest.raises(ConfigurationError) as info:
        config.resolve(metastore_uri="thrift://kw:1")
    message = str(info.value)
    assert str(path) in message and key in message and fragment in message, message


def test_invalid_toml_names_the_file(config_env):
    path = write_default(config_env, "metastore_uri = \n")
    with pytest.raises(ConfigurationError, match="not valid TOML") as info:
        config.resolve(metastore_uri="thrift://kw:1")
    assert str(path) in str(info.value)


def test_bad_file_is_reported_even_when_every_value_comes_from_elsewhere(config_env, monkeypatch):
    """A typo never silently falls back: the keyword and env values do not hide a broken file."""
    write_default(config_env, '[swap]\nlock_timout_s = 1\n')
    monkeypatch.setenv("TABLESWAP_METASTORE_URI", "thrift://env:1")
    with pytest.raises(ConfigurationError, match="lock_timout_s"):
        config.resolve(metastore_uri="thrift://kw:1")


# ---------------------------------------------------------------------- janitor and log settings
def test_janitor_min_grace_env_over_file_over_default(config_env, monkeypatch):
    from tableswap.ops.janitor.run import min_grace_from_env

    assert min_grace_from_env() == dt.timedelta(hours=1)
    write_default(config_env, '[janitor]\nmin_grace = "2h"\n')
    assert min_grace_from_env() == dt.timedelta(hours=2)
    monkeypatch.setenv("TABLESWAP_JANITOR_MIN_GRACE", "3h")
    assert min_grace_from_env() == dt.timedelta(hours=3)


def test_janitor_grace_from_file_is_checked_against_the_floor(config_env):
    """run_janitor takes [janitor] grace when none is passed; below the floor it refuses before any I/O."""
    from tableswap.ops.janitor.run import run_janitor

    write_default(config_env, '[janitor]\ngrace = "10m"\n')
    with pytest.raises(UnsafeOperationError, match="10m|0:10:00|600"):
        run_janitor(dry_run=True, metastore_uri="thrift://127.0.0.1:1")


def test_log_settings_precedence(config_env, monkeypatch):
    assert config.log_settings() == ("auto", "warning")
    write_default(config_env, '[log]\nformat = "text"\nlevel = "info"\n')
    assert config.log_settings() == ("text", "info")
    monkeypatch.setenv("TABLESWAP_LOG_FORMAT", "json")
    monkeypatch.setenv("TABLESWAP_LOG_LEVEL", "debug")
    assert config.log_settings() == ("json", "debug")
    assert config.log_settings("text", "error") == ("text", "error")
    monkeypatch.setenv("TABLESWAP_LOG_FORMAT", "yaml")
    with pytest.raises(ConfigurationError, match="TABLESWAP_LOG_FORMAT"):
        config.log_settings()


# ---------------------------------------------------------------------- the CLI resolves the same way
def test_cli_reports_where_each_value_came_from(config_env, monkeypatch, tmp_path):
    """doctor shows the sources; the metastore is unreachable (port 1), so only the config check passes."""
    path = write_default(config_env, FILE.replace("thrift://file:1", "thrift://127.0.0.1:1").replace(
        "sqlite:////file/journal.db", f"sqlite:///{tmp_path / 'j.db'}"))
    monkeypatch.setenv("TABLESWAP_LOG_LEVEL", "error")
    result = CliRunner().invoke(main, ["doctor", "--json", "--journal-url", f"sqlite:///{tmp_path / 'cli.db'}"])
    payload = json.loads(result.stdout)
    sources = {e["key"]: (e["value"], e["source"]) for e in payload["config"]}
    assert sources["metastore_uri"] == ("thrift://127.0.0.1:1", f"config file {path}")
    assert sources["journal_url"] == (f"sqlite:///{tmp_path / 'cli.db'}", "command line")
    assert sources["swap.lock_timeout_s"] == (42.0, f"config file {path}")
    assert sources["swap.heartbeat_s"] == (20.0, "default")
    assert sources["swap.write_distribution"] == ("partition", f"config file {path}")
    assert sources["log.level"][1].startswith("env TABLESWAP_LOG_LEVEL")
    assert result.exit_code == 1 and payload["ok"] is False


def test_doctor_says_the_rule_of_the_default_write_distribution(config_env, tmp_path, monkeypatch):
    """``write_distribution = "auto"`` (the default): doctor shows it and, beside it, the rule it follows."""
    monkeypatch.setenv("TABLESWAP_LOG_LEVEL", "error")
    result = CliRunner().invoke(main, ["doctor", "--json", "--metastore-uri", "thrift://127.0.0.1:1",
                                       "--journal-url", f"sqlite:///{tmp_path / 'cli.db'}"])
    sources = {e["key"]: (e["value"], e["source"]) for e in json.loads(result.stdout)["config"]}
    assert sources["swap.write_distribution"] == ("auto", "default")
    rule, source = sources["swap.write_distribution.rule"]
    assert source == 'write_distribution = "auto"'
    assert "100 partitions or more" in rule and "the table's last swap" in rule, rule


def test_cli_command_with_bad_config_file_fails_with_the_files_message(config_env):
    path = write_default(config_env, '[swap]\nheartbeat = 3\n')
    result = CliRunner().invoke(main, ["show", "db.t", "--metastore-uri", "thrift://127.0.0.1:1"])
    assert result.exit_code == 1
    assert str(path) in result.stderr and "[swap] heartbeat" in result.stderr


# ---------------------------------------------------------------------- [hdfs]: the janitor's keytab login
def test_hdfs_keytab_login_env_over_file_and_both_or_neither(config_env, monkeypatch):
    for name in (config.ENV_HDFS_KERBEROS_PRINCIPAL, config.ENV_HDFS_KERBEROS_KEYTAB):
        monkeypatch.delenv(name, raising=False)
    assert config.hdfs_settings() == config.HdfsSettings()  # neither: the ticket cache kinit filled
    write_default(config_env, '[hdfs]\nkerberos_principal = "janitor@FILE"\nkerberos_keytab = "/file.keytab"\n')
    assert config.hdfs_settings() == config.HdfsSettings("janitor@FILE", "/file.keytab")
    monkeypatch.setenv(config.ENV_HDFS_KERBEROS_PRINCIPAL, "janitor@ENV")
    assert config.hdfs_settings() == config.HdfsSettings("janitor@ENV", "/file.keytab")

    write_default(config_env, '[hdfs]\nkerberos_keytab = "/file.keytab"\n')
    monkeypatch.delenv(config.ENV_HDFS_KERBEROS_PRINCIPAL)
    with pytest.raises(ConfigurationError, match="needs both kerberos_principal and kerberos_keytab.*Nothing was"):
        config.hdfs_settings()
    write_default(config_env, '[hdfs]\nkeytab = "/file.keytab"\n')
    with pytest.raises(ConfigurationError, match=r"unknown key '\[hdfs\] keytab'"):
        config.hdfs_settings()


def test_hdfs_connect_timeout_env_over_file_default_30_and_positive(config_env, monkeypatch):
    monkeypatch.delenv(config.ENV_HDFS_CONNECT_TIMEOUT_S, raising=False)
    for name in (config.ENV_HDFS_KERBEROS_PRINCIPAL, config.ENV_HDFS_KERBEROS_KEYTAB):
        monkeypatch.delenv(name, raising=False)
    assert config.hdfs_settings().connect_timeout_s == 30.0
    write_default(config_env, '[hdfs]\nconnect_timeout_s = 7\n')
    assert config.hdfs_settings().connect_timeout_s == 7.0
    monkeypatch.setenv(config.ENV_HDFS_CONNECT_TIMEOUT_S, "2.5")
    assert config.hdfs_settings().connect_timeout_s == 2.5
    for bad in ("soon", "0"):
        monkeypatch.setenv(config.ENV_HDFS_CONNECT_TIMEOUT_S, bad)
        with pytest.raises(ConfigurationError, match="TABLESWAP_HDFS_CONNECT_TIMEOUT_S.*nothing was changed"):
            config.hdfs_settings()
