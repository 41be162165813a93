"""The Airflow connection's fields and the provider's description, without Airflow (pure: tableswap.airflow's
``__init__`` and ``connection`` modules import none of it; the provider in a real Airflow: test_airflow.py)."""

from __future__ import annotations

import pytest

from tableswap.airflow import get_provider_info
from tableswap.airflow.connection import EXTRA_KEYS, OPTION_KEYS, ConnectionSettings, from_connection
from tableswap.config import SWAP_OPTIONS
from tableswap.errors import ConfigurationError


def test_every_field_is_read_and_numbers_from_text_are_typed():
    got = from_connection("ts", {"metastore_uri": " thrift://hms:9083 ", "journal_url": "sqlite:////j.db",
                                 "config_file": "/etc/tableswap.toml", "lock_timeout_s": "12.5",
                                 "connect_attempts": "2", "write_batch_size": 500,
                                 "write_distribution": " partition "})
    assert got == ConnectionSettings("ts", "thrift://hms:9083", "sqlite:////j.db", "/etc/tableswap.toml",
                                     {"lock_timeout_s": 12.5, "connect_attempts": 2, "write_batch_size": 500,
                                      "write_distribution": "partition"})
    assert isinstance(got.options["connect_attempts"], int)
    assert from_connection("ts", None) == ConnectionSettings("ts")  # everything left to env / config file
    assert from_connection("ts", {"metastore_uri": ""}).metastore_uri is None
    # the prefixed names older Airflow forms stored
    assert from_connection("ts", {"extra__tableswap__journal_url": "sqlite://"}).journal_url == "sqlite://"


def test_the_password_goes_into_the_journal_url_and_nowhere_else():
    got = from_connection("ts", {"journal_url": "postgresql://tableswap@db:5432/ts"}, "p@ss/word")
    assert got.journal_url == "postgresql://tableswap:p%40ss%2Fword@db:5432/ts"
    for extra, why in (({}, "no journal_url"), ({"journal_url": "postgresql://db/ts"}, "names no user"),
                       ({"journal_url": "postgresql://u:other@db/ts"}, "has a password of its own")):
        with pytest.raises(ConfigurationError, match=why) as caught:
            from_connection("ts", extra, "secret")
        assert "secret" not in str(caught.value)


@pytest.mark.parametrize("extra, message", [
    ({"metastore": "thrift://x:1"}, "unknown extra key.*'metastore'.*allowed: metastore_uri"),
    ({"journal_url": 5}, "'journal_url' = 5 is not a string"),
    ({"lock_timeout_s": "soon"}, "'lock_timeout_s' = 'soon' is not a number"),
    ({"connect_attempts": 1.5}, "'connect_attempts' = 1.5 is not an integer"),
    ({"write_batch_size": True}, "is not an integer"),
    ({"heartbeat_s": "inf"}, "is not a finite number"),
    ({"write_distribution": "hash"}, "'write_distribution' = 'hash' is not one of auto, none, partition"),
    ({"write_distribution": 3}, "'write_distribution' = 3 is not one of auto, none, partition"),
    ({"write_distribution": ""}, "'write_distribution' = '' is not one of auto, none, partition"),
])
def test_a_bad_field_names_the_connection_and_the_key(extra, message):
    with pytest.raises(ConfigurationError, match="Airflow connection 'ts'.*" + message):
        from_connection("ts", extra)


def test_the_provider_info_offers_every_field_and_names_the_hook():
    info = get_provider_info()
    (conn,) = info["connection-types"]
    assert conn["connection-type"] == "tableswap" and conn["hook-class-name"] == "tableswap.airflow.hooks.TableswapHook"
    assert set(conn["conn-fields"]) == set(EXTRA_KEYS) | set(SWAP_OPTIONS) == set(EXTRA_KEYS) | set(OPTION_KEYS)
    assert info["operators"][0]["python-modules"] == ["tableswap.airflow.operators"]
    assert conn["conn-fields"]["connect_attempts"]["schema"] == {"type": ["integer", "null"]}
    assert conn["conn-fields"]["lock_timeout_s"]["schema"] == {"type": ["number", "null"]}
    assert conn["conn-fields"]["write_distribution"]["schema"] == {"type": ["string", "null"],
                                                                   "enum": ["auto", "none", "partition", None]}


def test_the_connections_options_resolve_as_keyword_arguments():
    """What the hook does with them (hooks.py: resolve(..., **options)), without Airflow."""
    from tableswap.config import resolve

    options = from_connection("ts", {"write_distribution": "partition", "merge_retries": "0"}).options
    settings = resolve(metastore_uri="thrift://hms:9083", **options)
    assert (settings.write_distribution, settings.merge_retries) == ("partition", 0)
