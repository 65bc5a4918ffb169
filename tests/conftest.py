"""Shared test setup and fixtures.

Test helpers live in the ``tests`` tree (``tests.fakeapi``, ...). pytest runs with
``--import-mode=importlib``, which does not put anything on ``sys.path``, so the repository
root goes there here: ``import tests.fakeapi`` then works whether nfd runs from the
source tree (PYTHONPATH) or is installed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tests.fakeapi.fixtures import core_v1, fake_api, fake_api_client  # noqa: E402

__all__ = ["core_v1", "fake_api", "fake_api_client"]

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
