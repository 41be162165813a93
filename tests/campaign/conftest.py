"""Campaign report rows: each campaign test appends to ``report``; tests/conftest.py prints the table."""

from __future__ import annotations

import pytest

from ..support.report import REPORT


@pytest.fixture
def campaign_report():
    return REPORT
