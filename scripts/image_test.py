#!/usr/bin/env python3
"""Build the image and run it the way the manifests run it.

For a Debian 12 machine, as root, with no Docker engine and no registry: Debian's podman
and runc build the Dockerfile on a base made with mmdebstrap (image_build.py), then every
role runs read-only, as uid 65532, with no capabilities, on the host network (loopback
only) or on none. The worker runs as each overlay's DaemonSet declares it: every volume
mounted where and how the pod mounts it (image_pods.py), its arguments and environment.

- the worker container of every overlay starts under runc and delivers (`--oneshot`) to
  a containerised master, whose GET of the node then shows the labels discover printed;
- `nfd discover` inside gives the labels `nfd discover` gives outside (this venv, the
  same host paths and worker config);
- the master answers /healthz; SIGTERM ends it and a running worker with exit status 0.

Podman's configuration, its storage and the base image live under .image/ (gitignored);
a warm run reuses them. Usage: scripts/image_test.py [--work DIR] [--keep] [--save TAR]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from image_build import IMAGE, REPO, Failed, Podman, build_image, ensure_base, ensure_tools, log
from image_pods import Container, PodError, container, render

OVERLAYS = sorted(p.parent.name for p in (REPO / "deploy/overlays").glob("*/kustomization.yaml"))
NODE = "image-test-node"
# A master with no API server, serving plain HTTP on loopback to workers without tokens:
# the flags a local master takes (the port is added per run).
MASTER_ARGS = ["master", "--host=127.0.0.1", "--no-publish", "--no-auth"]
# Worker flags that need the cluster (its master over HTTPS, the API server for NodeFeature
# objects); replaced by the local master, which serves plain HTTP (hence --plain-http: the
# stand-in token then travels in cleartext, on loopback).
IN_CLUSTER_FLAGS = ("--master=", "--port=", "--ca-file=", "--publish=")
LOCAL_WORKER_FLAGS = ["--port=0", "--plain-http"]
# The pods' securityContext: read-only root, uid 65532, nothing gained.
SECURE = [
    "--read-only", "--user", "65532:65532", "--cap-drop=ALL", "--security-opt", "no-new-privileges",
]  # fmt: skip


def env_args(env: dict[str, str]) -> list[str]:
    return [a for k, v in env.items() for a in ("--env", f"{k}={v}")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def http_get(url: str, timeout: float = 2) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def wait_for(what: str, probe: Any, seconds: float) -> Any:
    deadline = time.monotonic() + seconds
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
            if last:
                return last
        except OSError as e:
            last = e
        time.sleep(0.2)
    raise Failed(f"{what}: not within {seconds:.0f}s (last: {last!r})")


def labels_of(output: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in output.splitlines() if "=" in line)


# Run inside the image: every module of nfd and its dependencies has its bytecode, and
# the LICENSE and the OCI labels' version are there.
COMPILED = """
import importlib.util, os, sys, sysconfig
site = sysconfig.get_paths()["purelib"]
missing = [
    os.path.join(d, f) for d, _, files in os.walk(site) for f in files
    if f.endswith(".py") and not os.path.exists(importlib.util.cache_from_source(os.path.join(d, f)))
]
print(len(missing), *missing[:5])
"""


def check_image_contents(podman: Podman) -> None:
    out = podman.run(
        "run",
        "--rm",
        "--network=none",
        *SECURE,
        "--tmpfs",
        "/tmp",
        "--entrypoint=python",
        IMAGE,
        "-c",
        COMPILED,
    )
    count, *examples = out.split()
    if count != "0":
        raise Failed(f"{count} modules in the image have no compiled bytecode, e.g. {examples}")
    podman.run(
        "run", "--rm", "--network=none", "--entrypoint=test", IMAGE, "-s", "/usr/share/doc/nfd/LICENSE"
    )
    from nfd import __version__

    labels = json.loads(podman.run("image", "inspect", "--format", "{{json .Labels}}", IMAGE))
    if labels.get("org.opencontainers.image.version") != __version__:
        raise Failed(f"image label org.opencontainers.image.version is not {__version__}: {labels}")
    log("image: bytecode for every module, LICENSE, OCI labels")


def stop_with_sigterm(podman: Podman, name: str) -> None:
    podman.run("kill", "--signal", "TERM", name)
    status = podman.run("wait", name, timeout=30).strip()
    if status != "0":
        logs = podman.run("logs", "--tail", "20", name, check=False)
        raise Failed(f"{name}: SIGTERM ended it with exit status {status}; last log lines:\n{logs}")
    log(f"{name}: SIGTERM -> exit 0")


def worker_of(overlay: str, node: str, scratch: Path) -> Container:
    docs = render(REPO / "deploy/overlays" / overlay)
    return container(
        docs,
        kind="DaemonSet",
        name="nfd-worker",
        container_name="nfd-worker",
        node=node,
        scratch=scratch / overlay,
    )


def run_args(c: Container) -> list[str]:
    return [*SECURE, *c.podman, *env_args(c.env), IMAGE]


def check_discover(podman: Podman, worker: Container) -> dict[str, str]:
    config = [a for a in worker.args if a.startswith("--config=")]
    inside = podman.run("run", "--rm", "--network=none", *run_args(worker), "discover", *config)
    # Outside: this venv's nfd, the same host paths where they are (HostRoot's default)
    # and the same worker config, read through the volume it is mounted from.
    local = Path(sys.executable).parent / "nfd"
    outside_config = [f"--config={worker.outside(a.split('=', 1)[1])}" for a in config]
    outside_env = {k: v for k, v in os.environ.items() if not k.startswith("NFD_HOST_")}
    proc = subprocess.run(
        [str(local), "discover", *outside_config], capture_output=True, text=True, env=outside_env
    )
    if proc.returncode != 0:
        raise Failed(f"nfd discover outside the image exited {proc.returncode}: {proc.stderr.strip()}")
    got, want = labels_of(inside), labels_of(proc.stdout)
    if got != want:
        diff = sorted(set(got.items()) ^ set(want.items()))
        raise Failed(f"nfd discover inside differs from outside ({len(diff)} labels): {diff[:20]}")
    if not got:
        raise Failed("nfd discover printed no labels inside the image")
    log(f"discover: {len(got)} labels, the same inside and outside")
    return got


def check_master_and_workers(podman: Podman, scratch: Path, labels: dict[str, str]) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    master = "nfd-image-test-master"
    podman.run(
        "run", "--detach", "--name", master, "--network=host", *SECURE, "--tmpfs", "/tmp", IMAGE,
        *MASTER_ARGS, f"--port={port}",
    )  # fmt: skip
    wait_for("master /healthz answering 200", lambda: http_get(base + "/healthz")[0] == 200, 60)
    log("master: /healthz 200")

    for overlay in OVERLAYS:
        node = f"{NODE}-{overlay}"
        worker = worker_of(overlay, node, scratch)
        args = [a for a in worker.args if not a.startswith(IN_CLUSTER_FLAGS)]
        oneshot = [*run_args(worker), *args, f"--master={base}", *LOCAL_WORKER_FLAGS, "--oneshot"]
        try:
            podman.run("run", "--rm", "--network=host", *oneshot)
        except Failed as e:
            raise Failed(
                f"the {overlay} overlay's worker container, mounted as its pod declares: {e}"
            ) from None
        status, body = http_get(f"{base}/api/v1/nodes/{node}")
        if status != 200:
            raise Failed(
                f"master GET /api/v1/nodes/{node} answered {status} after the {overlay} worker: {body[:300]!r}"
            )
        applied = json.loads(body).get("labels", {})
        if applied != labels:
            diff = sorted(set(applied.items()) ^ set(labels.items()))
            raise Failed(f"the master's labels for {node} differ from discover's ({len(diff)}): {diff[:20]}")
        log(f"{overlay}: its worker pod's container ran --oneshot; the master shows {len(applied)} labels")

    # A long-running worker, stopped as the kubelet stops it.
    name = "nfd-image-test-worker"
    worker = worker_of("default", NODE, scratch)
    args = [a for a in worker.args if not a.startswith(IN_CLUSTER_FLAGS)]
    podman.run(
        "run",
        "--detach",
        "--name",
        name,
        "--network=host",
        *run_args(worker),
        *args,
        f"--master={base}",
        *LOCAL_WORKER_FLAGS,
    )
    running = ["inspect", "--format", "{{.State.Running}}", name]
    wait_for("long-running worker up", lambda: podman.run(*running).strip() == "true", 30)
    time.sleep(1)  # past start-up, into its loop
    stop_with_sigterm(podman, name)
    stop_with_sigterm(podman, master)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--work", type=Path, default=REPO / ".image", help="podman config, storage and cache")
    parser.add_argument("--keep", action="store_true", help="keep the containers (for debugging)")
    parser.add_argument(
        "--save",
        type=Path,
        metavar="TAR",
        help="once it passed, save the image as a docker archive (for a node)",
    )
    args = parser.parse_args()
    started = time.monotonic()
    podman: Podman | None = None
    try:
        ensure_tools()
        log(f"tools ready at {time.monotonic() - started:.0f}s")
        podman = Podman(args.work.resolve())
        base = ensure_base(podman)
        log(f"base ready at {time.monotonic() - started:.0f}s")
        build_image(podman, base)
        log(f"image built at {time.monotonic() - started:.0f}s")
        size = int(podman.run("image", "inspect", "--format", "{{.Size}}", IMAGE).strip())
        log(f"image {IMAGE}: {size / 1e6:.0f} MB")
        check_image_contents(podman)
        with tempfile.TemporaryDirectory(dir=podman.work / "tmp") as tmp:
            scratch = Path(tmp)
            os.chmod(scratch, 0o755)  # the containers' uid reads the volumes written here
            labels = check_discover(podman, worker_of("default", NODE, scratch / "discover"))
            check_master_and_workers(podman, scratch, labels)
        if args.save is not None:
            args.save.unlink(missing_ok=True)
            podman.run("save", "--format", "docker-archive", "--output", str(args.save), IMAGE)
            log(f"saved {IMAGE} to {args.save}")
    except (Failed, PodError, subprocess.TimeoutExpired) as e:
        log(f"FAILED: {e}")
        return 1
    finally:
        if podman is not None and not args.keep:
            for name in ("nfd-image-test-worker", "nfd-image-test-master"):
                podman.run("rm", "--force", "--ignore", name, check=False)
        log(f"wall time {time.monotonic() - started:.0f}s")
    log("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
