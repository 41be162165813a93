"""tableswap's Airflow provider (``pip install 'tableswap[airflow]'``; docs/airflow.md).

Airflow finds it through the ``apache_airflow_provider`` entry point, which names :func:`get_provider_info`:
the ``tableswap`` connection type (:class:`~tableswap.airflow.hooks.TableswapHook`) and the operators of
:mod:`tableswap.airflow.operators` (janitor, rollback, recover, repair, publish and roll back a group). This
module imports nothing of Airflow (Airflow's providers manager imports it while it starts); ``import tableswap``
never imports it.
"""

from __future__ import annotations

from typing import Any

from tableswap.airflow.connection import EXTRA_KEYS, OPTION_KEYS

HOOK_CLASS = "tableswap.airflow.hooks.TableswapHook"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tableswap")
    except PackageNotFoundError:
        return "0.0.0"


def get_provider_info() -> dict[str, Any]:
    """The provider's description, in the shape of Airflow's ``provider_info.schema.json``."""
    labels = {"metastore_uri": "Metastore URI", "journal_url": "Journal URL", "config_file": "Config file"}
    fields: dict[str, Any] = {
        key: {"label": labels[key], "description": allowed, "schema": {"type": ["string", "null"]}}
        for key, allowed in EXTRA_KEYS.items()
    }
    for key, spec in OPTION_KEYS.items():
        schema: dict[str, Any] = {"type": [{"integer": "integer", "choice": "string"}.get(spec.kind, "number"), "null"]}
        if spec.kind == "choice":
            schema["enum"] = [*spec.choices, None]
        fields[key] = {"label": key, "description": "[swap] " + key + " (docs/configuration.md)", "schema": schema}
    return {
        "package-name": "tableswap",
        "name": "tableswap",
        "description": "Safe Spark table overwrites through Hive Metastore / AWS Glue repoints: the janitor, "
                       "rollback, recover, repair and swap groups as Airflow operators.",
        "versions": [_version()],
        "integrations": [{"integration-name": "tableswap", "tags": ["software"]}],
        "operators": [{"integration-name": "tableswap", "python-modules": ["tableswap.airflow.operators"]}],
        "hooks": [{"integration-name": "tableswap", "python-modules": ["tableswap.airflow.hooks"]}],
        "connection-types": [{
            "hook-class-name": HOOK_CLASS,
            "hook-name": "tableswap",
            "connection-type": "tableswap",
            "conn-fields": fields,
            "ui-field-behaviour": {
                "hidden-fields": ["host", "schema", "login", "port"],
                "relabeling": {"password": "Journal password"},
                "placeholders": {"password": "the journal database's password (its user is in the journal URL)"},
            },
        }],
    }
