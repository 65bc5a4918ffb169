from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
OVERLAYS = sorted(p.parent.name for p in (DEPLOY / "overlays").glob("*/kustomization.yaml"))
COMPONENTS = sorted(p.parent.name for p in (DEPLOY / "components").glob("*/kustomization.yaml"))
# The base with every component at once, as an operator's own overlay combines them.
COMBINED = "combined"
# Every kustomization shipped: the install's overlays, and deploy/prune (the uninstall Job).
PRUNE = "prune"
KUSTOMIZATIONS = [*OVERLAYS, COMBINED, PRUNE]


def kubectl() -> str:
    # The test extra installs kubectl (with kustomize) into the environment's bin dir.
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.exists() else shutil.which("kubectl")
    if not found:
        raise RuntimeError("kubectl not found: install the test extra (pip install '.[test]')")
    return found


def build(name: str) -> list[dict[str, Any]]:
    """An overlay, ``COMBINED`` or ``PRUNE``, rendered."""
    if name == COMBINED:
        with tempfile.TemporaryDirectory() as tmp:
            parts = [os.path.relpath(DEPLOY / "components" / c, tmp) for c in COMPONENTS]
            base = os.path.relpath(DEPLOY / "base", tmp)
            Path(tmp, "kustomization.yaml").write_text(
                f"resources: [{base}]\ncomponents: [{', '.join(parts)}]\n"
            )
            return _render(Path(tmp))
    return _render(DEPLOY / PRUNE if name == PRUNE else DEPLOY / "overlays" / name)


def _render(path: Path) -> list[dict[str, Any]]:
    out = subprocess.run(
        [kubectl(), "kustomize", str(path)],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.fixture(scope="session")
def built() -> dict[str, list[dict[str, Any]]]:
    return {k: build(k) for k in KUSTOMIZATIONS}
