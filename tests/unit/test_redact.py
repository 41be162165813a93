"""The one masking function (``tableswap.redact``): URL passwords (also with an unescaped ``@``),
secret-looking parameters, secret settings in free text, and text that is no URL at all. Pure."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tableswap import errors
from tableswap.redact import MASK, is_secret_name, known_secrets, mask_data, mask_text, mask_url, secrets_of

pytestmark = pytest.mark.hostile


@pytest.mark.parametrize("url, shown", [
    ("postgresql://u:secret@host:5432/db", "postgresql://u:***@host:5432/db"),
    # An unescaped @ in the password: the last @ before the host ends the user-info.
    ("postgresql://u:secret@pw@host/db", "postgresql://u:***@host/db"),
    ("postgresql://u:a@b/c?d#e@host:5432/db", "postgresql://u:***@host:5432/db"),
    ("postgresql://u:12/3@host:5432/db", "postgresql://u:***@host:5432/db"),
    ("postgresql://u@h/db?password=secret&sslmode=require&sslpassword=pw2",
     "postgresql://u@h/db?password=***&sslmode=require&sslpassword=***"),
    ("postgresql://h/db?application_name=x&token=t0k&api_key=k&key=k2&PassWord=p",
     "postgresql://h/db?application_name=x&token=***&api_key=***&key=***&PassWord=***"),
    ("s3a://AKIA:SK@bucket/p?X-Amz-Signature=abc&X-Amz-Credential=c&X-Amz-Security-Token=t",
     "s3a://AKIA:***@bucket/p?X-Amz-Signature=***&X-Amz-Credential=***&X-Amz-Security-Token=***"),
    ("https://h/cb#access_token=zzz&state=1", "https://h/cb#access_token=***&state=1"),
    ("thrift://a:9083,thrift://u:p@b:9083", "thrift://a:***@b:9083"),  # a list: masked from the first user-info
    ("thrift://a:9083,thrift://b:9083", "thrift://a:9083,thrift://b:9083"),
    # Unparsable (bad bracket, bad port): masked all the same.
    ("postgresql://u:s3cret@[::1:5/db", "postgresql://u:***@[::1:5/db"),
    ("postgresql://u:s3cret@h:99999999/db", "postgresql://u:***@h:99999999/db"),
    # Nothing secret: unchanged.
    ("postgresql://u@h/db", "postgresql://u@h/db"),
    ("sqlite:////tmp/journal.db", "sqlite:////tmp/journal.db"),
    ("s3a://bucket/path@2026/x", "s3a://bucket/path@2026/x"),
    ("glue://eu-west-1", "glue://eu-west-1"),
    ("not a url", "not a url"),
    # Usage texts' placeholders stay readable.
    ("postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME", "postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME"),
    ("mysql://USER:PASSWORD@...", "mysql://USER:PASSWORD@..."),
    # ... but only the pair: a real user's password that reads "PASSWORD" is masked.
    ("postgresql://etl:PASSWORD@db:5432/j", "postgresql://etl:***@db:5432/j"),
    ("", ""),
    # Not a URL but libpq key=value: the password is masked.
    ("host=h password=secret dbname=d", "host=h password=*** dbname=d"),
])
def test_mask_url(url, shown):
    assert mask_url(url) == shown


@given(st.text(alphabet=string.ascii_letters + string.digits + string.punctuation, min_size=1, max_size=40))
@settings(max_examples=300, deadline=None)
def test_any_password_is_masked_and_the_host_stays(password):
    shown = mask_url(f"postgresql://user:{password}@db.example:5432/journal?sslmode=require")
    assert shown == "postgresql://user:***@db.example:5432/journal?sslmode=require"


@given(st.text(max_size=80))
@settings(max_examples=300, deadline=None)
def test_never_raises(text):
    for fn in (mask_url, mask_text):
        assert isinstance(fn(text), str)
        assert isinstance(fn("postgresql://" + text), str)
    secrets_of(text)


def test_mask_text_masks_urls_settings_and_known_values():
    text = ("journal URL 'postgresql://u:secret@pw@h/db' is bad; fs.s3a.secret.key=S3SECRET "
            "AWS_SECRET_ACCESS_KEY: awsSECRET \"password\": \"hunter2\" driver said: hunter2!; "
            "partition key=1/dt=2 (gives no password: the server)")
    shown = mask_text(text, {"hunter2"})
    for secret in ("secret@pw", "pw@h", "S3SECRET", "awsSECRET", "hunter2"):
        assert secret not in shown
    assert "postgresql://u:***@h/db" in shown and "key=1/dt=2" in shown and "no password: the server" in shown
    # A known value is also scrubbed percent-encoded; short ones (< 4 characters) are left to the URL rules.
    assert mask_text("x p%40ss%40w0rd y", {"p@ss@w0rd"}) == "x *** y"
    assert mask_text("a b c", {"b"}) == "a b c"


def test_secrets_of_and_known_secrets(monkeypatch):
    assert secrets_of("postgresql://u:p%40ss@h/db?sslpassword=s2&x=1") == {"p%40ss", "p@ss", "s2"}
    assert secrets_of(None) == set() and secrets_of("sqlite:///x.db") == set()
    monkeypatch.setenv("TABLESWAP_JOURNAL_URL", "postgresql://u:envpass@h/db")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "awsKEYvalue")
    monkeypatch.setenv("SOME_TOKEN_ENABLED", "true")  # not a secret: the name does not end like one
    found = known_secrets("thrift://m:mspass@h:9083")
    assert {"envpass", "awsKEYvalue", "mspass"} <= found and "true" not in found
    assert os_pwd_not_a_secret(found)


def os_pwd_not_a_secret(found: set[str]) -> bool:
    import os

    return os.environ.get("PWD") not in found or not os.environ.get("PWD")


def test_mask_data_and_secret_names():
    data = {"error": "at postgresql://u:pw1234@h/db", "fs.s3a.secret.key": "SK", "key": "dt",
            "items": ["thrift://u:p@h:1", ("token=abc",)], "n": 3}
    assert mask_data(data) == {"error": "at postgresql://u:***@h/db", "fs.s3a.secret.key": MASK, "key": "dt",
                               "items": ["thrift://u:***@h:1", ("token=***",)], "n": 3}
    assert all(map(is_secret_name, ["password", "sslpassword", "PGPASSWORD", "token", "access_token", "key",
                                    "api-key", "X-Amz-Signature", "fs.s3a.secret.key", "AWS_SECRET_ACCESS_KEY"]))
    assert not any(map(is_secret_name, ["sslmode", "application_name", "dt", "host", "connect_timeout"]))


def test_every_tableswap_error_message_is_masked():
    exc = errors.JournalError("cannot open postgresql://u:secret@pw@h/db?token=tk123")
    assert str(exc) == "cannot open postgresql://u:***@h/db?token=***"
    assert exc.to_dict()["error"] == str(exc)


def test_the_journal_stores_and_shows_no_secret(tmp_path):
    import sqlalchemy as sa

    from tableswap.core.records import SwapRecord
    from tableswap.journal import Journal

    journal = Journal(f"sqlite:///{tmp_path / 'j.db'}")
    journal.begin_swap(SwapRecord(swap_id="20260101_000000_aaaa0001", db_name="db", table_name="t",
                                  kind="partitions", state="staging", table_root="file:///x"))
    journal.finish("20260101_000000_aaaa0001", state="failed",
                   error="cannot reach thrift://u:hms-s3cret@h:9083?token=tok3nvalue (fs.s3a.secret.key=S3KEY99)")
    with journal.engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT error FROM tableswap_swaps")).scalar()
    shown = journal.get_swap("20260101_000000_aaaa0001").error
    for text in (stored, shown):
        assert "thrift://u:***@h:9083?token=***" in text
        assert not any(s in text for s in ("hms-s3cret", "tok3nvalue", "S3KEY99"))
    journal.close()


def test_the_journal_reads_an_unescaped_at_in_the_password():
    from tableswap.journal import db as journal_db

    url = journal_db.parse_url("postgresql://u:p@ss@db.example:5432/j?sslmode=require")
    assert (url.username, url.password, url.host, url.port, url.database) == ("u", "p@ss", "db.example", 5432, "j")
    assert journal_db.safe_url("postgresql://u:p@ss@db.example:5432/j") == "postgresql://u:***@db.example:5432/j"
