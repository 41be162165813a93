"""The secured metastore's settings (docs/security.md): keyword > environment > config file ``[metastore]`` >
defaults, per key; what is refused; how they reach the metastore client. No server: the servers' side is
tests/integration/test_secured_metastore.py."""

from __future__ import annotations

import pytest

from tableswap import MetastoreSecurity, config
from tableswap.errors import ConfigurationError
from tableswap.runtime import Runtime, open_catalog


def _write(clean_env, text: str) -> None:
    directory = clean_env / "config" / "tableswap"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.toml").write_text(text)


def test_each_key_comes_from_the_environment_else_the_file_else_the_default(clean_env, monkeypatch):
    assert config.security_settings()[0] == MetastoreSecurity()  # plain Thrift
    _write(clean_env, '[metastore]\nkerberos = true\nkerberos_service = "hms"\nkerberos_host = "hms.example.com"\n'
                      'tls = true\ntls_ca_file = "/etc/ca.pem"\n')
    monkeypatch.setenv("TABLESWAP_METASTORE_KERBEROS_SERVICE", "hive")
    monkeypatch.setenv("TABLESWAP_METASTORE_KERBEROS_PRINCIPAL", "etl@EXAMPLE.COM")
    monkeypatch.setenv("TABLESWAP_METASTORE_KERBEROS_KEYTAB", "/etc/etl.keytab")
    security, sources = config.security_settings()
    assert security == MetastoreSecurity(kerberos=True, kerberos_service="hive", kerberos_host="hms.example.com",
                                         kerberos_principal="etl@EXAMPLE.COM", kerberos_keytab="/etc/etl.keytab",
                                         tls=True, tls_ca_file="/etc/ca.pem")
    assert sources["metastore.kerberos_service"] == "env TABLESWAP_METASTORE_KERBEROS_SERVICE"
    assert sources["metastore.kerberos_host"].startswith("config file ")
    assert sources["metastore.tls_cert_file"] == config.SRC_DEFAULT
    monkeypatch.setenv("TABLESWAP_METASTORE_TLS", "false")  # the environment turns the file's TLS off ...
    monkeypatch.delenv("TABLESWAP_METASTORE_KERBEROS_KEYTAB")
    with pytest.raises(ConfigurationError, match="tls is off"):  # ... and its CA file is then refused
        config.security_settings()
    explicit = MetastoreSecurity(kerberos=True)
    assert config.security_settings(explicit)[0] is explicit  # a keyword replaces all of it


@pytest.mark.parametrize("given, says", [
    (dict(kerberos=True, kerberos_keytab="/k"), "kerberos_principal"),
    (dict(kerberos_principal="etl@X"), "kerberos is off"),
    (dict(kerberos=True, kerberos_service="hive/h@R"), "service part"),
    (dict(tls=True, tls_key_file="/k.pem"), "tls_cert_file"),
])
def test_a_setting_that_cannot_work_is_refused_with_what_to_set(given, says):
    with pytest.raises(ConfigurationError, match=says):
        MetastoreSecurity(**given)


@pytest.mark.parametrize("text, says", [
    ("[metastore]\nkerberos = \"yes\"\n", "true or false"),
    ("[metastore]\nkerberos_realm = \"X\"\n", "unknown key"),
])
def test_a_bad_file_value_names_the_key(clean_env, text, says):
    _write(clean_env, text)
    with pytest.raises(ConfigurationError, match=says):
        config.security_settings()


def test_a_bad_environment_boolean_is_refused(clean_env, monkeypatch):
    monkeypatch.setenv("TABLESWAP_METASTORE_KERBEROS", "sometimes")
    with pytest.raises(ConfigurationError, match="TABLESWAP_METASTORE_KERBEROS='sometimes'"):
        config.security_settings()


def test_the_settings_reach_every_client_of_a_runtime_and_its_siblings(clean_env, monkeypatch):
    monkeypatch.setenv("TABLESWAP_METASTORE_KERBEROS", "true")
    runtime = Runtime.from_options(metastore_uri="thrift://hms1:9083,thrift://hms2:9083")
    client = runtime.new_catalog()
    assert client.security == MetastoreSecurity(kerberos=True)
    assert client.sibling().security == client.security  # the lock's heartbeat connection, other threads
    assert runtime.probe_catalog().security == client.security  # doctor's
    # A Glue catalog authenticates through AWS: the metastore's security settings are not passed to it.
    assert not hasattr(open_catalog("glue://us-east-1", security=MetastoreSecurity(kerberos=True)), "security")


def test_kerberos_without_the_extra_says_what_to_install(monkeypatch):
    import sys

    from tableswap import errors
    from tableswap.metastore.client import MetastoreClient

    monkeypatch.setitem(sys.modules, "kerberos", None)  # what `import kerberos` sees without the extra
    client = MetastoreClient("thrift://127.0.0.1:1", security=MetastoreSecurity(kerberos=True), connect_attempts=1)
    with pytest.raises(errors.KerberosSetupError, match=r"pip install 'tableswap\[kerberos\]'") as caught:
        client.open()
    assert isinstance(caught.value, errors.ConfigurationError) and caught.value.reason == "missing_dependency"
