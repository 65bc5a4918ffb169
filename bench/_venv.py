"""A clean virtual environment with nfd installed from this checkout (not editable), so
benchmarks measure what users run. Reused between runs; rebuilt when asked."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH_DIR = REPO / ".bench"


def clean_venv(*, rebuild: bool = False) -> Path:
    """Return the venv's python, installing the current checkout into it."""
    root = BENCH_DIR / "venv"
    py = root / "bin" / "python"
    if rebuild or not py.exists():
        venv.EnvBuilder(clear=True, with_pip=True).create(root)
        # pip >= 25.2 writes console scripts that do not import re (3-9 ms of every start).
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--upgrade", "pip>=25.2"],
            check=True,
        )
    subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-cache-dir",
         "--force-reinstall", "--no-deps", str(REPO)],
        check=True,
    )  # fmt: skip
    # Dependencies once (the package itself is reinstalled above every time).
    marker = root / ".deps-installed"
    if not marker.exists():
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(REPO)],
            check=True,
        )
        marker.touch()
    return py


def python_for_bench() -> str:
    """NFD_BENCH_PYTHON overrides (e.g. to measure an existing install)."""
    return os.environ.get("NFD_BENCH_PYTHON") or str(clean_venv())


if __name__ == "__main__":
    print(clean_venv(rebuild="--rebuild" in sys.argv))
