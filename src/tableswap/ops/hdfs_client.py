"""tableswap's own HDFS client configured from ``[hdfs]`` (docs/hdfs.md): every CLI command and the library's janitor
and doctor entries call :func:`configure_hdfs_client` before they first reach storage, so that each logs in to a
Kerberized HDFS the same way (a keytab login, else the ticket cache ``kinit`` filled) and gives up on a NameNode
that does not answer after the same ``connect_timeout_s``."""

from __future__ import annotations

from tableswap import storage
from tableswap.config import hdfs_settings


def configure_hdfs_client() -> None:
    """Hand ``[hdfs]``'s settings (environment > config file > defaults) to the storage layer. Nothing is reached
    here: the keytab login is done when the process first reaches a Kerberized HDFS. Raises
    :class:`~tableswap.errors.ConfigurationError` for a half-set keytab login or a bad timeout."""
    settings = hdfs_settings()
    storage.use_kerberos_keytab(settings.kerberos_principal, settings.kerberos_keytab)
    storage.use_connect_timeout(settings.connect_timeout_s)
