"""Shared fixtures.

Test helpers are imported by their place in the tests tree: shared ones under the
``tests`` package name (``from tests.fakeapi import FakeApiServer``), an area's own as
"<area>.<module>" (tests/ is on the path). The repository root never goes on the path:
the tests exercise the installed nfd package, not the source tree. pytest's importlib
mode already maps the ``tests`` namespace package to this directory; the lines below make
sure of it whatever imported first.
"""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"

if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

_pkg = sys.modules.get("tests")
if _pkg is None or str(TESTS) not in list(getattr(_pkg, "__path__", [])):
    _pkg = types.ModuleType("tests")
    _pkg.__path__ = [str(TESTS)]
    sys.modules["tests"] = _pkg

from tests.fakeapi.fixtures import core_v1, fake_api, fake_api_client, fake_transport  # noqa: E402

# Property tests try the same examples on every run, quickly: no example database, no
# randomness between runs, no deadline on one example (the machine may be busy).
settings.register_profile(
    "nfd",
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("nfd")

__all__ = ["core_v1", "fake_api", "fake_api_client", "fake_transport", "fixtures"]


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(autouse=True)
def _root_logger_restored() -> Iterator[None]:
    """A command run in-process (``main(argv)``) puts its own handler on the root logger,
    writing to the stderr of that moment (a test's capture). Put back what was there,
    so that a later test's threads never write to a capture that is closed."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
