"""Shared fixtures of the source tests: the fixture host trees and a writable copy."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from nfd.config import SourcesConfig, WorkerConfig
from nfd.hostroot import HostRoot

HOSTS = Path(__file__).resolve().parent.parent / "fixtures" / "hosts"
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(autouse=True)
def _no_node_name(monkeypatch: pytest.MonkeyPatch) -> None:
    # system.name prefers NODE_NAME, as upstream; fixture expectations use the hostname.
    monkeypatch.delenv("NODE_NAME", raising=False)


@pytest.fixture
def hosts() -> Path:
    return HOSTS


@pytest.fixture
def host() -> Callable[[str], HostRoot]:
    def make(name: str) -> HostRoot:
        assert (HOSTS / name).is_dir(), name
        return HostRoot.under(HOSTS / name)

    return make


@pytest.fixture
def host_copy(tmp_path: Path) -> Callable[[str], Path]:
    """A writable copy of a fixture tree (symlinks kept), for bad-input tests."""

    def make(name: str) -> Path:
        dest = tmp_path / name
        shutil.copytree(HOSTS / name, dest, symlinks=True)
        return dest

    return make


@pytest.fixture
def cfg() -> SourcesConfig:
    return SourcesConfig()


@pytest.fixture
def worker_cfg() -> WorkerConfig:
    return WorkerConfig()
