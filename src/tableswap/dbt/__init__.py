"""tableswap's dbt adapter plugin (``pip install 'tableswap[dbt]'``; docs/sql.md#dbt).

The adapter type ``tableswap`` is dbt-spark's adapter (it depends on ``spark``: every macro, materialization
and connection method of dbt-spark stays as it is) plus the incremental strategy ``tableswap``: a model with
``incremental_strategy='tableswap'`` runs its overwrite through :func:`tableswap.sql` in the dbt process's own
SparkSession (the ``session`` connection method), so that each run is a tableswap swap. dbt finds the plugin
as ``dbt.adapters.tableswap`` (``src/dbt/adapters/tableswap/__init__.py``, which only names
:data:`INCLUDE_PATH` and the classes of :mod:`tableswap.dbt.adapter`). This module imports nothing of dbt;
``import tableswap`` never imports it.
"""

from __future__ import annotations

from pathlib import Path

#: The plugin's dbt project (its macros: the ``incremental`` materialization of the adapter type).
INCLUDE_PATH = str(Path(__file__).resolve().parent / "include")
PROJECT_NAME = "dbt_tableswap"
