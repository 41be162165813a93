"""A Kerberized HDFS for the tests: the local HDFS of tests/support/hdfs.py with Kerberos on, its NameNode and
DataNode logged in from keytabs of the suite's MIT KDC (tests/support/kdc.py, realm ``TABLESWAP.TEST``).

What Hadoop's own ``SaslDataTransferTestCase`` sets for a secured ``MiniDFSCluster``, without privileged ports
and without HTTPS: ``hadoop.security.authentication=kerberos`` and ``hadoop.security.authorization``, the
NameNode and DataNode as ``hdfs/localhost@TABLESWAP.TEST`` (SPNEGO as ``HTTP/localhost``) from one keytab,
block access tokens, SASL on the data transfer port (``dfs.data.transfer.protection=authentication``) and
``ignore.secure.ports.for.testing`` (a DataNode on an ordinary port with SASL and plain HTTP). The JVM reads
the realm from the KDC's ``krb5.conf`` (``-Djava.security.krb5.conf``). The client ``HADOOP_CONF_DIR`` it
writes says ``kerberos`` and names the NameNode's principal and the data transfer protection, so that Hadoop's
client (Spark's) and hdfs-native (tableswap's) both authenticate with the ticket cache ``KRB5CCNAME`` names.

The NameNode's user is ``hdfs`` (its principal's short name): its superuser. Clients are principals of the
realm, mapped to users by their first component (``etl@TABLESWAP.TEST`` is ``etl``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tableswap.devmetastore import hdfs as local_hdfs
from tableswap.devmetastore.security import ServerSecurity

from .hdfs import MiniHdfs
from .kdc import Kdc

SERVICE_HOST = "localhost"  # the servers' principals' host part: Hadoop's and hdfs-native's clients ask for
#                             hdfs/<the host in the NameNode's principal>


def secured_properties(kdc: Kdc, keytab: Path) -> dict[str, str]:
    """The cluster's Kerberos settings (the servers' principals' keys in ``keytab``)."""
    hdfs = kdc.principal(f"hdfs/{SERVICE_HOST}")
    return {
        "hadoop.security.authentication": "kerberos",
        "hadoop.security.authorization": "true",
        "dfs.namenode.kerberos.principal": hdfs,
        "dfs.namenode.keytab.file": str(keytab),
        "dfs.datanode.kerberos.principal": hdfs,
        "dfs.datanode.keytab.file": str(keytab),
        "dfs.web.authentication.kerberos.principal": kdc.principal(f"HTTP/{SERVICE_HOST}"),
        "dfs.web.authentication.kerberos.keytab": str(keytab),
        "dfs.block.access.token.enable": "true",
        "dfs.data.transfer.protection": "authentication",
        "ignore.secure.ports.for.testing": "true",
        "dfs.http.policy": "HTTP_ONLY",
    }


#: What a client needs beside the NameNode's addresses (the rest stays the servers' own).
CLIENT_KEYS = ("hadoop.security.authentication", "dfs.namenode.kerberos.principal", "dfs.data.transfer.protection",
               "dfs.block.access.token.enable")


class KerberizedMiniHdfs(MiniHdfs):
    """A NameNode and a DataNode that require Kerberos, logged in as ``hdfs/localhost`` from ``keytab``."""

    def __init__(self, state_dir: Path, classpath: tuple[Path, ...], kdc: Kdc, keytab: Path, **kwargs) -> None:
        self.kdc = kdc
        self.keytab = keytab
        self.secured = secured_properties(kdc, keytab)
        # Kerberos also in a core-site.xml on the JVM's class path: what UserGroupInformation reads by default.
        super().__init__(state_dir, classpath, properties={**self.secured, **kwargs.pop("properties", {})},
                         core_site={"hadoop.security.authentication": "kerberos"}, **kwargs)

    @classmethod
    def with_principals(cls, state_dir: Path, classpath: tuple[Path, ...], kdc: Kdc) -> "KerberizedMiniHdfs":
        """The servers' principals added to ``kdc``, their keys in ``state_dir/hdfs.keytab``."""
        state_dir.mkdir(parents=True, exist_ok=True)
        keytab = state_dir / "hdfs.keytab"
        kdc.add_principal(f"hdfs/{SERVICE_HOST}", keytab=keytab)
        kdc.add_principal(f"HTTP/{SERVICE_HOST}", keytab=keytab)
        return cls(state_dir, classpath, kdc, keytab)

    def command(self) -> list[str]:
        """The local HDFS's command line with the realm's ``krb5.conf`` as the JVM's first options."""
        java, *rest = super().command()
        return [java, f"-Djava.security.krb5.conf={self.kdc.krb5_conf}", "-Dsun.security.krb5.disableReferrals=true",
                *rest]

    def start(self) -> "KerberizedMiniHdfs":
        super().start()
        assert self.port is not None
        # The client's configuration: the NameNode's addresses (local_hdfs) and how to authenticate to it.
        site = self.conf_dir / "hdfs-site.xml"
        client = {**local_hdfs.read_site(site), **{k: self.secured[k] for k in CLIENT_KEYS if k in self.secured}}
        site.write_text(local_hdfs.site_xml(client))
        core = self.conf_dir / "core-site.xml"
        core.write_text(local_hdfs.site_xml({**local_hdfs.read_site(core),
                                             "hadoop.security.authentication": "kerberos"}))
        return self


@dataclass(frozen=True)
class _HadoopClientSecurity(ServerSecurity):
    """A development metastore's security that secures no Thrift port, only its Hadoop client: Kerberos in its
    ``core-site.xml`` (what Hadoop's ``UserGroupInformation`` reads), the realm's ``krb5.conf`` for its JVM."""

    core_site: tuple[tuple[str, str], ...] = ()

    def core_site_properties(self) -> list[tuple[str, str]]:
        return list(self.core_site)

    def java_options(self) -> list[str]:
        return [f"-Djava.security.krb5.conf={self.krb5_conf}"]


class MetastoreHdfsClient:
    """What a plain-Thrift development metastore needs to reach ``hdfs``: its Hadoop client says ``kerberos``, and
    the metastore works on HDFS as its own login user (``hive.metastore.execute.setugi`` off: Hive would
    otherwise act as each client's name, with no credentials of that user's). The login is the ticket cache
    ``KRB5CCNAME`` names in the server's environment."""

    def __init__(self, kdc: Kdc, hdfs: KerberizedMiniHdfs) -> None:
        self.kdc = kdc
        self.hdfs = hdfs  # its settings are all it needs: the server may start at the same time

    def security(self) -> ServerSecurity:
        return _HadoopClientSecurity(krb5_conf=self.kdc.krb5_conf, core_site=(
            ("hadoop.security.authentication", "kerberos"),))

    def hive_site(self) -> dict[str, str]:
        client = {k: self.hdfs.secured[k] for k in CLIENT_KEYS if k in self.hdfs.secured}
        return {"hive.metastore.execute.setugi": "false", **client}
