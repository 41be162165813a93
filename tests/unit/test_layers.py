"""The layer contract, checked on the source: which part of the package may import which (docs:
CONTRIBUTING.md, Layers).

Every ``import`` / ``from ... import`` in ``src/tableswap`` (top level, inside functions, type-only) is
resolved to a module of the package (``tests/support/importgraph.py``) and held to the table below. Every module
belongs to one row; there is no module every layer may import and no package left out. Pure: reads files,
imports nothing.
"""

from __future__ import annotations

import pytest

from ..support.importgraph import module_graph, unit

# What each part may import from tableswap, besides itself: the parts, from the inside out. A row names
# only rows above it, so the table is also the order in which the package can be read.
LAYERS: dict[str, tuple[str, ...]] = {
    # shared leaves: messages without secrets, the exception root, structured logs, crash points for tests
    "tableswap.redact": (),
    "tableswap.errors": ("tableswap.redact",),
    "tableswap.logs": ("tableswap.redact",),
    "tableswap.faults": (),
    # where files live for the user
    "tableswap.dirs": (),
    # pure: names, locations, plans, checks, eligibility, the catalog's data model; no I/O
    "tableswap.core": ("tableswap.errors", "tableswap.redact"),
    # settings: the config file, then their resolution
    "tableswap.config_file": ("tableswap.core", "tableswap.dirs", "tableswap.errors"),
    "tableswap.config": ("tableswap.config_file", "tableswap.core", "tableswap.errors"),
    # adapters: each speaks core's vocabulary, none imports another
    "tableswap.metastore": ("tableswap.core", "tableswap.errors", "tableswap.logs"),
    "tableswap.glue": ("tableswap.core", "tableswap.errors", "tableswap.logs"),
    "tableswap.journal": ("tableswap.core", "tableswap.dirs", "tableswap.errors", "tableswap.logs",
                          "tableswap.redact"),
    "tableswap.storage": ("tableswap.core", "tableswap.errors"),
    # the one importer of prometheus_client (lazily), for the janitor's metrics and the swaps'
    "tableswap.metrics.prometheus": ("tableswap.errors",),
    "tableswap.hooks": ("tableswap.config", "tableswap.core", "tableswap.errors", "tableswap.metrics.prometheus"),
    # OpenLineage events (the only part that imports openlineage, lazily): configured by the client's own
    # settings, not tableswap's, so the operations call it without a runtime
    "tableswap.lineage": ("tableswap.core", "tableswap.logs", "tableswap.redact"),
    # the JVM parts by Maven coordinates: the download cache, Maven, the jars
    "tableswap.jvm": ("tableswap.dirs", "tableswap.errors"),
    "tableswap.spark": ("tableswap.core", "tableswap.errors", "tableswap.storage"),
    # one runtime built from resolved settings
    "tableswap.runtime": ("tableswap.config", "tableswap.core", "tableswap.errors", "tableswap.glue",
                          "tableswap.hooks", "tableswap.journal", "tableswap.logs", "tableswap.metastore"),
    # the operations
    # (through the catalog port, core/catalog_port.py: never an adapter of a catalog)
    "tableswap.ops": ("tableswap.config", "tableswap.core", "tableswap.errors", "tableswap.faults",
                      "tableswap.hooks", "tableswap.journal", "tableswap.lineage", "tableswap.logs",
                      "tableswap.redact", "tableswap.runtime", "tableswap.spark", "tableswap.storage"),
    # the package's face (the public API)
    "tableswap": ("tableswap.core", "tableswap.errors", "tableswap.ops"),
    # edges: the development metastore, the demo, the command line
    "tableswap.devmetastore": ("tableswap.core", "tableswap.dirs", "tableswap.errors",
                               "tableswap.jvm", "tableswap.redact"),
    "tableswap.demo": ("tableswap", "tableswap.core", "tableswap.devmetastore", "tableswap.errors",
                       "tableswap.metastore"),
    # the janitor's metrics for Prometheus (prometheus_client through tableswap.metrics.prometheus)
    "tableswap.metrics": ("tableswap.config", "tableswap.core", "tableswap.errors", "tableswap.journal",
                          "tableswap.logs", "tableswap.ops", "tableswap.metrics.prometheus", "tableswap.redact"),
    "tableswap.cli": ("tableswap.config", "tableswap.core", "tableswap.devmetastore", "tableswap.errors",
                      "tableswap.journal", "tableswap.jvm", "tableswap.logs", "tableswap.metastore",
                      "tableswap.metrics", "tableswap.ops", "tableswap.redact", "tableswap.runtime"),
    "tableswap.__main__": ("tableswap.cli",),
    # the Airflow provider (the only importer of airflow): the connection, the hook, the operators
    "tableswap.airflow": ("tableswap.config", "tableswap.core", "tableswap.errors", "tableswap.lineage",
                          "tableswap.metrics", "tableswap.ops", "tableswap.redact", "tableswap.runtime"),
    # the dbt adapter plugin (the only importer of dbt): the strategy's overwrite through the public tableswap.sql
    "tableswap.dbt": ("tableswap", "tableswap.errors"),
}
# Spark stays at the edge: only the Spark front ends import the spark package ...
SPARK_USERS = ("tableswap.ops.write.swap", "tableswap.ops.inspect.asof", "tableswap.ops.write.state",
               "tableswap.ops.write.merge", "tableswap.ops.write.compact", "tableswap.ops.write.sql",
               "tableswap.ops.write.group")
# ... and nothing imports the writing front end but the package's face, the backfill runner, the merge and
# compaction (swaps of their own kind), the SQL script runner (its overwrites are swaps) and the swap group; the Spark
# write itself only the swap (the read path, ops/inspect/asof.py and spark/reading.py, does not).
SWAP_USERS = ("tableswap", "tableswap.ops.write.backfill", "tableswap.ops.write.merge", "tableswap.ops.write.compact",
              "tableswap.ops.write.sql", "tableswap.ops.write.group")
WRITE_USERS = ("tableswap.ops.write.swap",)

GRAPH = module_graph()


def within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_the_walk_sees_the_package():
    assert "tableswap.ops.commit" in GRAPH and "tableswap.core.plan" in GRAPH["tableswap.ops.commit"]
    assert "tableswap.spark.staging" in GRAPH["tableswap.ops.write.swap"]
    assert "tableswap.devmetastore.launcher" in GRAPH


def test_every_module_has_a_row():
    assert not {unit(m) for m in GRAPH} - set(LAYERS), "a part of the package without a row in LAYERS"
    assert not set(LAYERS) - {unit(m) for m in GRAPH}, "a row of LAYERS names no part of the package"


def test_rows_name_only_rows_above_them():
    order = list(LAYERS)
    for row, allowed in LAYERS.items():
        assert all(order.index(a) < order.index(row) for a in allowed), row


@pytest.mark.parametrize("layer", list(LAYERS))
def test_layer_imports_only_what_it_may(layer):
    bad = sorted(f"{module} imports {target}" for module, targets in GRAPH.items() if unit(module) == layer
                 for target in targets if unit(target) != layer and unit(target) not in LAYERS[layer])
    assert not bad, "layer contract broken:\n" + "\n".join(bad)


def test_spark_stays_at_the_edge():
    users = {m for m, targets in GRAPH.items() if not within(m, "tableswap.spark")
             and any(within(t, "tableswap.spark") for t in targets)}
    assert users <= set(SPARK_USERS), f"only {SPARK_USERS} may import tableswap.spark; also: {users - set(SPARK_USERS)}"
    swap_users = {m for m, targets in GRAPH.items() if "tableswap.ops.write.swap" in targets}
    assert swap_users <= set(SWAP_USERS), f"only the package's face imports ops.swap; also: {swap_users}"
    writers = {m for m, targets in GRAPH.items() if "tableswap.spark.staging" in targets}
    assert writers <= set(WRITE_USERS), f"only the swap imports the Spark write; also: {writers - set(WRITE_USERS)}"


def test_airflow_stays_in_its_provider():
    """Only tableswap.airflow imports Airflow, and its entry-point module (read by Airflow's providers manager
    while it starts) and its connection module import none of it at their top level."""
    import re
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "tableswap"
    pattern = re.compile(r"^\s*(import|from)\s+airflow\b", flags=re.M)
    importers = sorted(str(p.relative_to(src)) for p in src.rglob("*.py") if pattern.search(p.read_text()))
    assert importers == ["airflow/hooks.py", "airflow/operators.py"], importers


def test_dbt_stays_in_its_plugin():
    """Only tableswap.dbt's adapter module imports dbt (``import tableswap`` never does), and the module dbt
    imports the plugin by (src/dbt/adapters/tableswap) only names it."""
    import re
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src"
    pattern = re.compile(r"^\s*(import|from)\s+(dbt|dbt_common)\b", flags=re.M)
    importers = sorted(str(p.relative_to(src / "tableswap")) for p in (src / "tableswap").rglob("*.py")
                       if pattern.search(p.read_text()))
    assert importers == ["dbt/adapter.py"], importers
    plugin = (src / "dbt" / "adapters" / "tableswap" / "__init__.py").read_text()
    assert "from tableswap.dbt import" in plugin and "from tableswap.dbt.adapter import" in plugin


#: ops/ grouped by what a reader looks for; the protocol (commit, operation, manifests, notify, background,
#: locations) sits at ops/ itself.
OPS_GROUPS = ("write", "restore", "janitor", "inspect")


def test_the_groups_of_ops_import_the_protocol_and_themselves_only():
    """A group of operations may use the commit protocol (ops/*.py) and its own modules, never another group's;
    the protocol never uses a group."""
    seen, wrong = set(), []
    for module, targets in GRAPH.items():
        if not module.startswith("tableswap.ops."):
            continue
        group = module.split(".")[2]
        for target in targets:
            if not target.startswith("tableswap.ops."):
                continue
            other = target.split(".")[2]
            if group in OPS_GROUPS:
                seen.add(group)
                if other in OPS_GROUPS and other != group:
                    wrong.append(f"{module} -> {target}")
            elif other in OPS_GROUPS:
                wrong.append(f"{module} (the protocol) -> {target}")
    assert seen == set(OPS_GROUPS), seen  # every group exists and was read
    assert not wrong, wrong


def contributing_table() -> dict[str, set[str]]:
    """CONTRIBUTING.md's layer table as {row: what it may import}, in LAYERS' names (``core/`` and ``core`` →
    ``tableswap.core``, ``metrics/prometheus`` → ``tableswap.metrics.prometheus``, ``tableswap`` itself)."""
    import re
    from pathlib import Path

    def name(cell: str) -> str:
        part = cell.strip().strip("`").rstrip("/").replace("/", ".")
        return "tableswap" if part == "tableswap" else f"tableswap.{part}"

    text = (Path(__file__).resolve().parents[2] / "CONTRIBUTING.md").read_text()
    section = text[text.index("## Layers"):]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines()[1:]:
        if line.startswith("## "):
            break
        cells = line.split("|")
        if len(cells) < 4 or not cells[1].strip().startswith("`"):
            continue
        allowed = {name(a) for a in re.findall(r"`([^`]+)`", re.sub(r"\(.*\)", "", cells[2]))}
        for part in re.findall(r"`([^`]+)`", cells[1]):
            rows[name(part)] = allowed
    return rows


def test_contributing_shows_the_same_table():
    table = contributing_table()
    assert len(table) >= 20, table  # the table was found and read
    assert table == {row: set(allowed) for row, allowed in LAYERS.items()}, (
        "CONTRIBUTING.md's layer table and LAYERS differ: "
        + "; ".join(f"{row}: {sorted(table.get(row, set()) ^ set(LAYERS.get(row, ())))}"
                    for row in sorted(set(table) | set(LAYERS)) if table.get(row) != set(LAYERS.get(row, ()))))


def test_every_noqa_and_type_ignore_says_why_on_its_line():
    """A silenced check carries its reason where it is silenced (``# noqa: BLE001 - why``, ``# type: ignore[code]
    # why``), so that the next maintainer can tell whether it still holds."""
    import re
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "tableswap"
    bare = re.compile(r"#\s*(noqa(:\s*[A-Z0-9]+(,\s*[A-Z0-9]+)*)?|type:\s*ignore(\[[\w, -]+\])?)\s*$")
    found = sum(len(re.findall(r"#\s*(noqa|type:\s*ignore)", p.read_text())) for p in src.rglob("*.py"))
    assert found >= 20, found  # the scan reads the source
    silent = [f"{p.relative_to(src)}:{i}" for p in sorted(src.rglob("*.py"))
              for i, line in enumerate(p.read_text().splitlines(), 1) if bare.search(line)]
    assert not silent, f"say why on the line: {silent}"
