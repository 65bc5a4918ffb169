"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
