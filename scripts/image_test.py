#!/usr/bin/env python3
"""Build the image and run it the way the manifests run it.

For a Debian 12 machine, as root, with no Docker engine and no registry: Debian's podman
and runc build the Dockerfile on a base made with mmdebstrap (Debian's python3 with a
virtual environment on PATH, so `python` and `pip` behave as in the official image), then
every role is run read-only, as uid 65532, with no capabilities and the host's
filesystems under /host-*, on the host network (loopback only) or on none:

- `nfd discover` inside gives the labels `nfd discover` gives outside (this venv);
- a master answers /healthz; a worker `--oneshot` in a container delivers to it, and
  the master's GET of the node shows the labels discover printed;
- SIGTERM ends a master and a long-running worker with exit status 0.

Podman's configuration, its storage and the base image live under .image/ (gitignored);
a warm run reuses them. Usage: scripts/image_test.py [--work DIR] [--keep]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
DAEMONSET = REPO / "deploy/base/worker/daemonset.yaml"
IMAGE = "localhost/nfd:image-test"
NODE = "image-test-node"
# What the stand-in base holds; its tag is a digest of this, so a change rebuilds it.
BASE_SUITE = "bookworm"
BASE_PACKAGES = ["python3", "python3-venv", "ca-certificates", "netbase", "tzdata"]
BASE_VENV = "/opt/venv"
BASE_PATH = f"{BASE_VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOST_CA = "/etc/ssl/certs/ca-certificates.crt"
# A master with no API server, serving plain HTTP on loopback to workers without tokens:
# the flags a local master takes (the port is added per run).
MASTER_ARGS = ["master", "--host=127.0.0.1", "--no-publish", "--no-auth"]
# How the manifests run every nfd container (securityContext, read-only root, emptyDir /tmp).
AS_THE_MANIFESTS_DO = [
    "--read-only", "--user", "65532:65532", "--cap-drop=ALL",
    "--security-opt", "no-new-privileges", "--tmpfs", "/tmp",
]  # fmt: skip


class Failed(Exception):
    """A check that did not pass; the message says which and why."""


def log(msg: str) -> None:
    print(f"image-test: {msg}", flush=True)


class Podman:
    """podman with a configuration and storage of its own (the host's /etc is left alone)."""

    def __init__(self, work: Path) -> None:
        self.work = work
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        nofile = "1048576" if hard == resource.RLIM_INFINITY else str(hard)
        (work / "tmp").mkdir(parents=True, exist_ok=True)
        conf = work / "containers.conf"
        # crun fails on hybrid cgroups; podman's default ulimits exceed what a VM may allow.
        conf.write_text(
            "[containers]\n"
            f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc=32768:32768"]\n'
            "[engine]\n"
            'runtime = "runc"\n'
            'cgroup_manager = "cgroupfs"\n'
            'events_logger = "file"\n'
        )
        storage = work / "storage.conf"
        storage.write_text(
            f'[storage]\ndriver = "overlay"\ngraphroot = "{work / "storage"}"\nrunroot = "{work / "run"}"\n'
        )
        self.env = {
            **os.environ,
            "CONTAINERS_CONF": str(conf),
            "CONTAINERS_STORAGE_CONF": str(storage),
            "TMPDIR": str(work / "tmp"),
        }

    def run(self, *args: str, check: bool = True, capture: bool = True, timeout: float = 600) -> str:
        proc = subprocess.run(
            ["podman", *args], env=self.env, text=True, timeout=timeout,
            stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE if capture else None,
        )  # fmt: skip
        if check and proc.returncode != 0:
            raise Failed(
                f"podman {' '.join(args[:3])} ... exited {proc.returncode}: {(proc.stderr or '').strip()}"
            )
        return proc.stdout or ""

    def build(self, *args: str) -> bool:
        """podman build, its output shown as it comes; False when it failed only for want
        of a cached stage's files (raises on any other failure)."""
        proc = subprocess.Popen(
            ["podman", *args], env=self.env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert proc.stdout is not None
        unmounted = False
        for line in proc.stdout:
            print(line, end="", flush=True)
            unmounted = unmounted or "to bind mount into container" in line
        if proc.wait(timeout=900) == 0:
            return True
        if unmounted and "--no-cache" not in args:
            return False
        raise Failed(f"podman build exited {proc.returncode} (its output is above)")

    def exists(self, image: str) -> bool:
        return subprocess.run(["podman", "image", "exists", image], env=self.env).returncode == 0


def ensure_tools() -> None:
    missing = [t for t in ("podman", "runc", "mmdebstrap") if not shutil.which(t)]
    if not missing:
        return
    if os.geteuid() != 0:
        raise Failed(f"{', '.join(missing)} not installed, and installing them needs root")
    log(f"installing {' '.join(missing)} (apt-get)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", "podman", "runc", "mmdebstrap"],
    ):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise Failed(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")


def ensure_base(podman: Podman) -> str:
    recipe = json.dumps([BASE_SUITE, BASE_PACKAGES, BASE_VENV, BASE_PATH])
    tag = f"localhost/debian-python-venv:{BASE_SUITE}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"
    if podman.exists(tag):
        log(f"base {tag} (cached)")
        return tag
    tarball = podman.work / "tmp/base.tar"
    log(f"building base {tag} with mmdebstrap ({BASE_SUITE}: {', '.join(BASE_PACKAGES)})")
    proc = subprocess.run(
        [
            "mmdebstrap", "--variant=minbase", "--quiet", "--include=" + ",".join(BASE_PACKAGES),
            f'--customize-hook=chroot "$1" python3 -m venv {BASE_VENV}',
            BASE_SUITE, str(tarball),
        ],
        capture_output=True, text=True,
    )  # fmt: skip
    if proc.returncode != 0:
        raise Failed(f"mmdebstrap exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    podman.run(
        "import",
        "--change", f"ENV PATH={BASE_PATH}",
        "--change", "ENV LANG=C.UTF-8",
        "--change", 'CMD ["python"]',
        str(tarball), tag,
    )  # fmt: skip
    tarball.unlink()
    return tag


def git_revision() -> str:
    proc = subprocess.run(["git", "-C", str(REPO), "describe", "--always", "--dirty", "--abbrev=40"],
                          capture_output=True, text=True)  # fmt: skip
    return proc.stdout.strip() or "unknown"


def build_image(podman: Podman, base: str) -> None:
    from nfd import __version__

    args = [
        "build", "--network=host", "--pull=never", "--layers",
        "--build-arg", f"BASE={base}",
        "--build-arg", f"VERSION={__version__}",
        "--build-arg", f"REVISION={git_revision()}",
        "--tag", IMAGE,
    ]  # fmt: skip
    if os.path.isfile(HOST_CA):
        # pip may sit behind a TLS-inspecting proxy whose CA only the host trusts.
        args += [
            "--volume",
            f"{HOST_CA}:/etc/ssl/host-ca.crt:ro",
            "--build-arg",
            "PIP_CERT=/etc/ssl/host-ca.crt",
        ]
    log("building the Dockerfile")
    if podman.build(*args, str(REPO)):
        return
    # podman 4.3's buildah cannot bind-mount a stage it took from its cache
    # (containers/buildah#4375): a RUN whose text changed while the stage it mounts did
    # not fails so. Without the cache every stage is built afresh.
    log("a cached stage could not be mounted: building again without the cache")
    if not podman.build("build", "--no-cache", *args[1:], str(REPO)):
        raise Failed("podman build failed without the cache too")


def worker_host_mounts() -> tuple[list[str], dict[str, str]]:
    """The DaemonSet's hostPath mounts (read-only, those present here) and its env values."""
    ds = yaml.safe_load(DAEMONSET.read_text())
    spec = ds["spec"]["template"]["spec"]
    worker = next(c for c in spec["containers"] if c["name"] == "nfd-worker")
    host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    volumes: list[str] = []
    for m in worker["volumeMounts"]:
        src = host_paths.get(m["name"])
        if src is None or not os.path.exists(src):
            continue  # not a host path, or absent here (as a feature absent on a node)
        if not m.get("readOnly"):
            raise Failed(f"{DAEMONSET.name}: host path {src} is mounted writable at {m['mountPath']}")
        volumes += ["--volume", f"{src}:{m['mountPath']}:ro"]
    env = {e["name"]: e["value"] for e in worker.get("env", []) if "value" in e}
    return volumes, env


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
        "run", "--rm", "--network=none", *AS_THE_MANIFESTS_DO, "--entrypoint=python", IMAGE, "-c", COMPILED
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


def check_discover(podman: Podman, volumes: list[str], env: dict[str, str]) -> dict[str, str]:
    inside = podman.run(
        "run", "--rm", "--network=none", *AS_THE_MANIFESTS_DO, *volumes, *env_args(env), IMAGE, "discover"
    )
    # Outside: this venv's nfd reading the same host paths where they are (HostRoot's default).
    local = Path(sys.executable).parent / "nfd"
    outside_env = {k: v for k, v in os.environ.items() if not k.startswith("NFD_HOST_")}
    proc = subprocess.run([str(local), "discover"], capture_output=True, text=True, env=outside_env)
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


def stop_with_sigterm(podman: Podman, name: str) -> None:
    podman.run("kill", "--signal", "TERM", name)
    status = podman.run("wait", name, timeout=30).strip()
    if status != "0":
        logs = podman.run("logs", "--tail", "20", name, check=False)
        raise Failed(f"{name}: SIGTERM ended it with exit status {status}; last log lines:\n{logs}")
    log(f"{name}: SIGTERM -> exit 0")


def check_master_and_worker(
    podman: Podman, volumes: list[str], env: dict[str, str], labels: dict[str, str]
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    master = "nfd-image-test-master"
    podman.run(
        "run", "--detach", "--name", master, "--network=host", *AS_THE_MANIFESTS_DO, IMAGE,
        *MASTER_ARGS, f"--port={port}",
    )  # fmt: skip
    wait_for("master /healthz answering 200", lambda: http_get(base + "/healthz")[0] == 200, 60)
    log("master: /healthz 200")

    worker = [*AS_THE_MANIFESTS_DO, *volumes, *env_args({**env, "NODE_NAME": NODE}), IMAGE, "worker"]
    podman.run("run", "--rm", "--network=host", *worker, f"--master={base}", "--oneshot", "--port=0")
    status, body = http_get(f"{base}/api/v1/nodes/{NODE}")
    if status != 200:
        raise Failed(
            f"master GET /api/v1/nodes/{NODE} answered {status} after the worker's --oneshot: {body[:300]!r}"
        )
    applied = json.loads(body).get("labels", {})
    if applied != labels:
        diff = sorted(set(applied.items()) ^ set(labels.items()))
        raise Failed(f"the master's labels for {NODE} differ from discover's ({len(diff)}): {diff[:20]}")
    log(f"worker --oneshot delivered: the master shows {len(applied)} labels for {NODE}")

    # A long-running worker, stopped as the kubelet stops it.
    name = "nfd-image-test-worker"
    podman.run("run", "--detach", "--name", name, "--network=host", *worker, f"--master={base}", "--port=0")
    wait_for(
        "long-running worker up",
        lambda: podman.run("inspect", "--format", "{{.State.Running}}", name).strip() == "true",
        30,
    )
    time.sleep(1)  # past start-up, into its loop
    stop_with_sigterm(podman, name)
    stop_with_sigterm(podman, master)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=REPO / ".image", help="podman config, storage and cache")
    parser.add_argument("--keep", action="store_true", help="keep the containers (for debugging)")
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
        volumes, env = worker_host_mounts()
        labels = check_discover(podman, volumes, env)
        check_master_and_worker(podman, volumes, env, labels)
    except (Failed, subprocess.TimeoutExpired) as e:
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
