"""Fixtures for the worker tests (helpers live in worker_helpers.py, imported as
``worker.worker_helpers`` with tests/ on the path, as tests/conftest.py sets up)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from worker.worker_helpers import (
    HostTree,
    Master,
    WorkerProc,
    _alive_and_serving,
    env,
    free_port,
    wait_until,
)


@pytest.fixture(scope="session")
def master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Master]:
    """One master for the tests that leave it running; each test uses its own node."""
    m = Master(tmp_path_factory.mktemp("master"))
    m.start()
    yield m
    m.stop()


@pytest.fixture(scope="session")
def small_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Master]:
    """A master that takes bodies of 64 bytes at most: every full delivery gets 413."""
    m = Master(tmp_path_factory.mktemp("small-master"), ["--max-body-bytes", "64"])
    m.start()
    yield m
    m.stop()


@pytest.fixture
def own_master(tmp_path: Path) -> Iterator[Master]:
    """A master this test may stop and restart."""
    m = Master(tmp_path)
    m.start()
    yield m
    m.stop()


@pytest.fixture
def node(request: pytest.FixtureRequest) -> str:
    """A node name of this test's own."""
    return re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[-60:].strip("-")


@pytest.fixture
def host(tmp_path: Path) -> HostTree:
    return HostTree(tmp_path / "host")


@pytest.fixture
def start_worker(tmp_path: Path, node: str) -> Iterator[Callable[..., WorkerProc]]:
    started: list[WorkerProc] = []

    def start(master_url: str, host: HostTree, *args: str) -> WorkerProc:
        port = free_port()
        log = tmp_path / f"worker-{port}.log"
        cmd = [sys.executable, "-m", "nfd", "--log-level", "info", "worker", "--master", master_url]
        cmd += ["--node-name", node, "--sources", "local", "--host-root", str(host.root)]
        cmd += ["--status-host", "127.0.0.1", "--port", str(port), *args]
        with open(log, "wb") as logf:
            proc = subprocess.Popen(cmd, env=env(), stdout=logf, stderr=subprocess.STDOUT)
        w = WorkerProc(proc, log, port)
        started.append(w)
        wait_until(lambda: _alive_and_serving(w), timeout=30, what="the worker's status server")
        return w

    yield start
    for w in started:
        w.stop()
