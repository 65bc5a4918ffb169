"""Build the image with Debian's podman on a base made with mmdebstrap (no Docker engine,
no registry): podman's configuration and storage of its own, under one work folder."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IMAGE = "localhost/nfd:image-test"
# What the stand-in base holds; its tag is a digest of this, so a change rebuilds it.
BASE_SUITE = "bookworm"
BASE_PACKAGES = ["python3", "python3-venv", "ca-certificates", "netbase", "tzdata"]
BASE_VENV = "/opt/venv"
BASE_PATH = f"{BASE_VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOST_CA = "/etc/ssl/certs/ca-certificates.crt"


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
