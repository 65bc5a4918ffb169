"""Test helpers: a real uvicorn server on an ephemeral loopback port, and a small
feature source whose labels are easy to read in assertions."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from nfd.config import SourcesConfig
from nfd.features import Features, Labels
from nfd.hostroot import HostRoot


class FixtureSource:
    """Labels straight from the ``fixture.labels`` attributes: tests choose the labels a
    node gets by choosing its features."""

    name = "fixture"

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        return Features()

    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        return dict(features.attributes.get("fixture.labels", {}))


def features_with(labels: dict[str, str], **extra_attrs: dict[str, str]) -> dict[str, object]:
    f = Features()
    f.set_attributes("fixture.labels", labels)
    for name, attrs in extra_attrs.items():
        f.set_attributes(name.replace("_", "."), attrs)
    return f.to_dict()


@contextmanager
def serve(app: FastAPI) -> Iterator[str]:
    """Run ``app`` on 127.0.0.1:<ephemeral> in a thread; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    from nfd.master.api.app import serving_app

    served = serving_app(app)  # as `nfd master` serves it
    server = uvicorn.Server(uvicorn.Config(served, log_config=None, access_log=False, lifespan="on"))
    t = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not t.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        t.join(10)
        sock.close()


def apply_json_patch(doc: dict[str, object], ops: list[dict[str, object]]) -> dict[str, object]:
    """Enough RFC 6902 (add, remove on objects and whole values) to check patches in
    unit tests; the end-to-end tests use the fake API server's implementation."""
    import copy

    out = copy.deepcopy(doc)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in str(op["path"]).split("/")[1:]]
        parent: object = out
        for p in parts[:-1]:
            assert isinstance(parent, dict), op
            parent = parent[p]
        assert isinstance(parent, dict), op
        if op["op"] == "add":
            parent[parts[-1]] = copy.deepcopy(op["value"])
        elif op["op"] == "remove":
            del parent[parts[-1]]
        else:
            raise AssertionError(f"unexpected op {op}")
    return out
