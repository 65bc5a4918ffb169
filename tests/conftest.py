"""Shared fixtures."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"

# Test helpers (tests/<area>/*.py that are not tests) import as "<area>.<module>". Only
# tests/ goes on the path, never the repository root: the tests exercise the installed
# nfd package, not the source tree.
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
