"""The janitor on an object store (moto's S3 emulator, tests/support/s3.py): a directory it has begun to delete is never
restored.

On S3 a directory goes in pages of keys (``DeleteObjects``), so a janitor that dies between two pages leaves part
of it: its claim expires, the queue row is still pending and the prefix still lists. The janitor records in the
journal that it began deleting a location before its first delete; rollback, ``read_as_of``, ``show --as-of``
and repair refuse to point readers at it, and a later run finishes the deletion.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from tableswap import errors, read_as_of, storage, swap_partitions
from tableswap.cli import main
from tableswap.core import locations as loc
from tableswap.journal import Journal
from tableswap.ops.janitor.run import O_DELETED, run_janitor

from ..support.helpers import batch_df, create_events, metastore_snapshot, reader_view, today
from ..support.s3 import ACCESS_KEY, REGION, SECRET_KEY

pytestmark = pytest.mark.integration

LATER = dt.timedelta(days=3)


class Killed(BaseException):
    """The janitor process dying (a SIGKILL runs no handler: nothing of the janitor runs after it)."""


@pytest.fixture
def janitor_s3root(s3_endpoint, s3_bucket, spark, monkeypatch) -> str:
    """A fresh prefix in the session's bucket; tableswap's storage (s3fs) pointed at the endpoint."""
    for name, value in {"AWS_ENDPOINT_URL": s3_endpoint.url, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
                        "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    storage.configure("s3", endpoint_url=s3_endpoint.url, key=ACCESS_KEY, secret=SECRET_KEY)
    yield f"s3a://{s3_bucket}/{uuid.uuid4().hex[:10]}"
    storage.configure("s3")


def keys_below(location: str) -> set[str]:
    found = storage.survey(location)
    return set() if found is None else {name for name in found.files if not storage.is_marker(name)}


def kill_after_first_delete_page(monkeypatch, location: str, page: int = 2) -> dict[str, int]:
    """Fault injection on the janitor's S3 client: the store applies one ``DeleteObjects`` page of ``page``
    keys, then the janitor process dies (before the next page, before it records anything)."""
    fs, _ = storage.filesystem(location)
    real = fs.call_s3
    seen = {"pages": 0}

    def call_s3(method, *args, **kwargs):
        if method == "delete_objects":
            if not seen["pages"]:
                seen["pages"] += 1
                request = kwargs["Delete"]
                real(method, *args, **{**kwargs, "Delete": {**request, "Objects": request["Objects"][:page]}})
            raise Killed("the janitor died between two DeleteObjects pages")
        return real(method, *args, **kwargs)

    monkeypatch.setattr(fs, "call_s3", call_s3)
    return seen


def expire_claims(journal_url: str) -> int:
    with Journal(journal_url).engine.begin() as conn:
        return conn.execute(sa.text(
            "UPDATE tableswap_janitor_claims SET expires_at = '2000-01-01T00:00:00.000000+00:00'")).rowcount


def janitor(table: str):
    return run_janitor(table=table, grace="0", force_short_grace=True, dry_run=False,
                       now=dt.datetime.now(dt.timezone.utc) + LATER)


def test_a_directory_the_janitor_began_to_delete_is_never_restored(spark, db, janitor_s3root, hms, ts_env, monkeypatch):
    table = create_events(spark, db, janitor_s3root)
    day = today(0)
    first = swap_partitions(batch_df(spark, {(day,): 4}, "b1"), table)
    target = loc.normalize(first.added[0].new_location)
    # More objects in the directory than one delete page holds: copies of its data file.
    fs, _ = storage.filesystem(target)
    data = sorted(k for k in keys_below(target) if k.endswith(".parquet"))[0]
    for i in range(4):
        fs.copy(data, data.replace(".parquet", f"-copy{i}.parquet"))
    whole = keys_below(target)
    assert len(whole) >= 5
    swap_partitions(batch_df(spark, {(day,): 2}, "b2"), table)  # displaces `target`: queued for the janitor
    url = ts_env["TABLESWAP_JOURNAL_URL"]

    with monkeypatch.context() as patched:
        seen = kill_after_first_delete_page(patched, target)
        with pytest.raises(Killed):
            janitor(table)
    left = keys_below(target)
    assert seen["pages"] == 1 and 0 < len(left) < len(whole)  # a partial directory
    [row] = [d for d in Journal(url).deletions_of(db, "events") if loc.same(d.location, target)]
    assert row.state == "pending"  # not recorded: the janitor died first
    assert expire_claims(url) == 1  # its claim expires (a janitor on another host: not taken over at once)

    before, view = metastore_snapshot(hms, db), reader_view(spark, table)
    rolled = CliRunner().invoke(main, ["rollback", table, "--partition", f"dt={day}", "--yes", "--json"])

    assert rolled.exit_code != 0, rolled.output
    error = json.loads(rolled.output.strip().splitlines()[-1])["error"]
    assert target in error and "the janitor began deleting it" in error and "Nothing was changed" in error
    assert metastore_snapshot(hms, db) == before and reader_view(spark, table) == view
    assert keys_below(target) == left
    # Nor does a read of the past point a reader at it.
    with pytest.raises(errors.PastDataMissingError, match="deleted by the janitor, in whole or in part"):
        read_as_of(spark, table, swap_id=first.swap_id)
    shown = CliRunner().invoke(main, ["show", table, "--as-of", first.swap_id, "--json"])
    assert json.loads(shown.output)["missing"] == [f"dt={day}"], shown.output

    # The janitor finishes the deletion it began.
    report = janitor(table)
    assert target in {o.location for o in report.of(O_DELETED)} and not keys_below(target)
    [row] = [d for d in Journal(url).deletions_of(db, "events") if loc.same(d.location, target)]
    assert row.state == "deleted"
