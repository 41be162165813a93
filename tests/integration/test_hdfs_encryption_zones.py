"""Tables inside an HDFS encryption zone, on the suite's HDFS with the trash on (``hdfs_trash_cluster``) and the
key management server beside it (tests/support/kms.py: Hadoop's MiniKMS). Each test makes a zone of its own
(``hdfs crypto -createZone``, which provisions the zone's trash, ``<zone>/.Trash``, mode 1777).

Spark writes and reads through its Hadoop client, which asks the KMS to decrypt each file's key; tableswap's
own manifests are written and read through hdfs-native, which asks it too (``hadoop.security.key.provider.path``
in ``HADOOP_CONF_DIR``). A rename out of the zone is refused by the NameNode, so the janitor cannot move a
displaced directory into the user's trash (``/user/<user>/.Trash``) as hdfs-native's trash call does: it moves it
into the zone's trash, where Hadoop's ``getTrashRoot`` puts it, and where the zone has none it follows Hive's
rule (the trash, else a delete) unless told ``trash = "always"``.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import uuid

import pytest
from click.testing import CliRunner

from tableswap import storage, swap_partitions
from tableswap.cli import main as cli_main
from tableswap.core import locations as loc
from tableswap.devmetastore.hdfs import KEY_PROVIDER, read_site, site_xml
from tableswap.ops.janitor.run import O_DELETED, O_ERROR, run_janitor

from ..support import hdfs, kms
from ..support.helpers import batch_df, create_events, partition_locations, reader_view, today

pytestmark = [pytest.mark.integration, pytest.mark.hdfs]


def _user() -> str:
    return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()


@pytest.fixture
def zone(hdfs_trash_cluster, monkeypatch) -> str:
    """A fresh encryption zone on the HDFS with the trash on (its path); ``HADOOP_CONF_DIR`` names that HDFS's
    client configuration, the key management server's address included."""
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_trash_cluster.conf_dir))
    path = f"/warehouse/ez-{uuid.uuid4().hex[:10]}"
    hdfs.create_encryption_zone(hdfs_trash_cluster, path, kms.KEY)
    return path


def _swapped_once(spark, db: str, root: str, hms) -> tuple[str, str]:
    """A table at ``root`` whose partition a swap replaced: ``(table, the displaced location)``."""
    table = create_events(spark, db, root)
    batch_df(spark, {(today(0),): 2}, "v1").write.insertInto(table)
    displaced = partition_locations(hms, db, "events")[(today(0),)]
    swap_partitions(batch_df(spark, {(today(0),): 3}, "v2"), table)
    return table, displaced


def test_inside_an_encryption_zone_the_janitor_moves_a_displaced_directory_into_the_zones_trash(
        spark, db, hdfs_trash_cluster, zone, hms, ts_env, tmp_path, monkeypatch):
    """A swap of a table whose root is inside an encryption zone: Spark reads the swapped rows (decrypted through
    the KMS). The janitor moves the displaced directory into the zone's trash, ``<zone>/.Trash/<user>/Current/
    <its path>`` (the user's trash is outside the zone: HDFS refuses that rename), and says where; its files are
    still encrypted there. With --skip-trash it deletes."""
    url = hdfs_trash_cluster.url
    table, displaced = _swapped_once(spark, db, f"{url}{zone}/t", hms)
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",))}

    report = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)

    in_zone_trash = f"{url}{zone}/.Trash/{_user()}/Current{loc.split(displaced)[2]}"
    [moved] = [o for o in report.outcomes if loc.same(o.location, displaced)]
    assert moved.outcome == O_DELETED and moved.trash == (in_zone_trash,), moved
    assert f"moved to its encryption zone's trash: {in_zone_trash}" in moved.reason, moved.reason
    assert not storage.exists(displaced) and storage.has_data_files(in_zone_trash)
    assert not storage.exists(f"{url}/user/{_user()}/.Trash/Current{loc.split(displaced)[2]}")
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",))}

    # Still encrypted in the zone's trash: a client that does not know the KMS cannot read a file there.
    from hdfs_native import Client

    blind = tmp_path / "conf-without-kms"
    shutil.copytree(hdfs_trash_cluster.conf_dir, blind)
    core = read_site(blind / "core-site.xml")
    core.pop(KEY_PROVIDER)
    (blind / "core-site.xml").write_text(site_xml(core))
    monkeypatch.setenv("HADOOP_CONF_DIR", str(blind))
    client = Client(url)
    [data_file, *_] = [s.path for s in client.list_status(loc.split(in_zone_trash)[2], recursive=True)
                       if not s.isdir and not s.path.rsplit("/", 1)[-1].startswith(("_", "."))]
    with pytest.raises(RuntimeError, match="encryption zone"):
        client.read(data_file).read()
    monkeypatch.setenv("HADOOP_CONF_DIR", str(hdfs_trash_cluster.conf_dir))

    second = partition_locations(hms, db, "events")[(today(0),)]
    swap_partitions(batch_df(spark, {(today(0),): 4}, "v3"), table)
    skipped = CliRunner().invoke(cli_main, ["janitor", "run", "--table", table, "--grace", "0", "--force-short-grace",
                                            "--skip-trash", "--json"], catch_exceptions=False)

    assert skipped.exit_code == 0, skipped.output
    [deleted] = [o for o in json.loads(skipped.stdout)["outcomes"] if loc.same(o["location"], second)]
    assert deleted["outcome"] == O_DELETED and deleted["trash"] == [], deleted
    assert not storage.exists(second)
    assert not storage.exists(f"{url}{zone}/.Trash/{_user()}/Current{loc.split(second)[2]}")
    assert reader_view(spark, table) == {(today(0),): (4, ("v3",))}


def test_inside_an_encryption_zone_without_a_trash_the_janitor_deletes_as_hive_does_unless_told_always(
        spark, db, hdfs_trash_cluster, zone, hms, ts_env):
    """A zone whose trash was never provisioned (no ``<zone>/.Trash``): trash "always" keeps the displaced
    directory and says why and what to do; "auto" (the default) deletes it, as Hive's metastore does when the
    trash cannot take a directory, and says so."""
    from hdfs_native import Client

    url = hdfs_trash_cluster.url
    Client(url).delete(f"{zone}/.Trash", True)
    table, displaced = _swapped_once(spark, db, f"{url}{zone}/t", hms)

    refused = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False, trash="always")

    [kept] = [o for o in refused.outcomes if loc.same(o.location, displaced)]
    assert kept.outcome == O_ERROR and "encryption zone" in kept.reason, kept
    assert "-provisionTrash" in kept.reason and "--skip-trash" in kept.reason, kept.reason
    assert storage.has_data_files(displaced)

    report = run_janitor(grace="0", force_short_grace=True, table=table, dry_run=False)

    [deleted] = [o for o in report.outcomes if loc.same(o.location, displaced)]
    assert deleted.outcome == O_DELETED and deleted.trash == (), deleted
    assert "deleted without the trash" in deleted.reason and "as Hive does" in deleted.reason, deleted.reason
    assert not storage.exists(displaced)
    assert not storage.exists(f"{url}/user/{_user()}/.Trash/Current{loc.split(displaced)[2]}")
    assert reader_view(spark, table) == {(today(0),): (3, ("v2",))}
