"""The dbt adapter plugin ``tableswap`` (profiles.yml ``type: tableswap``): dbt imports it by this name; the
adapter is tableswap.dbt's (docs/sql.md#dbt)."""

from dbt.adapters.base import AdapterPlugin

from tableswap.dbt import INCLUDE_PATH, PROJECT_NAME
from tableswap.dbt.adapter import TableswapAdapter, TableswapCredentials

Plugin = AdapterPlugin(adapter=TableswapAdapter, credentials=TableswapCredentials,
                       include_path=INCLUDE_PATH, dependencies=["spark"], project_name=PROJECT_NAME)
