"""The planner's behaviour scenario, run against the real metastore (the fake runs in test_units)."""

from __future__ import annotations

import pytest

from tableswap.core.catalog import NewPartition

from ..support.helpers import create_events
from ..unit.test_units import planning_scenario

pytestmark = pytest.mark.integration


class RealCatalog:
    def __init__(self, client):
        self.client = client

    def add(self, table, values, location):
        self.client.add_partitions(table, [NewPartition(values, location)], {})

    def get_partitions(self, table, values_list):
        return self.client.get_partitions(table, values_list)


def test_plan_partitions_against_the_real_metastore(spark, db, tmp_path, hms):
    create_events(spark, db, tmp_path)
    table = hms.get_table(db, "events")
    planning_scenario(RealCatalog(hms), table, table.location)
