"""The plugin's version, where dbt reads every adapter's (``dbt --version``, its logs): tableswap's."""

from tableswap import __version__ as version

__all__ = ["version"]
