"""The Dockerfile, its pinned dependencies and its build context hold to what the image
promises (scripts/image_test.py builds and runs it; this checks the text offline)."""

from __future__ import annotations

import re
import tomllib

from deploy.conftest import REPO
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

LOCK = REPO / "requirements-image.txt"


def instructions() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", (REPO / "Dockerfile").read_text())
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def stages() -> list[list[str]]:
    out: list[list[str]] = [[]]
    for ln in instructions():
        if ln.startswith("FROM "):
            out.append([])
        out[-1].append(ln)
    return out


def pins() -> dict[str, str]:
    found: dict[str, str] = {}
    for ln in LOCK.read_text().splitlines():
        if not ln.strip() or ln.startswith("#"):
            continue
        name, sep, version = ln.partition("==")
        assert sep and version and ";" not in ln, f"not an exact pin: {ln!r}"
        key = canonicalize_name(name)
        assert key not in found, f"pinned twice: {name}"
        found[key] = version
    return found


def test_lock_pins_every_dependency_of_pyproject() -> None:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    # The image: Linux, CPython 3.11 (pins are for it; markers evaluated as there).
    env = {
        **default_environment(),
        "sys_platform": "linux",
        "platform_system": "Linux",
        "python_version": "3.11",
    }
    locked = pins()
    for dep in map(Requirement, deps):
        if dep.marker and not dep.marker.evaluate(env):
            continue
        version = locked.get(canonicalize_name(dep.name))
        assert version, f"{dep.name} is a dependency in pyproject.toml but not pinned in {LOCK.name}"
        assert dep.specifier.contains(version, prereleases=True), f"{dep.name}=={version} breaks {dep}"
    assert "nfd" not in locked and "pip" not in locked and "setuptools" not in locked


def test_base_is_an_argument_defaulting_to_the_official_slim_python() -> None:
    head = stages()[0]
    assert head == ["ARG BASE=python:3.11.11-slim-bookworm"]
    for stage in stages()[1:]:
        image = stage[0].split()[1]
        assert image in ("${BASE}", "deps"), image


def test_dependencies_are_fetched_before_the_code_is_copied() -> None:
    deps, build, run = stages()[1:]
    assert deps[0] == "FROM ${BASE} AS deps"
    assert [ln for ln in deps if ln.startswith("COPY")] == ["COPY requirements-image.txt /src/"]
    assert any("--requirement /src/requirements-image.txt" in ln and "--no-deps" in ln for ln in deps)
    assert build[0] == "FROM deps AS build"
    assert "COPY nfd /src/nfd" in build
    # In the run stage the dependency layer comes before anything built from the code.
    first_from_build = next(i for i, ln in enumerate(run) if "from=build" in ln)
    dep_install = next(i for i, ln in enumerate(run) if "--requirement /src/requirements-image.txt" in ln)
    assert dep_install < first_from_build


def test_run_stage_downloads_nothing_and_keeps_no_wheel() -> None:
    run = stages()[-1]
    pip_runs = [ln for ln in run if ln.startswith("RUN") and "pip install" in ln]
    assert len(pip_runs) == 2
    for ln in pip_runs:
        assert "--no-index" in ln and "--compile" in ln and "--mount=type=bind" in ln, ln
        assert "download" not in ln and "--upgrade" not in ln, ln
    copies = [ln for ln in run if ln.startswith("COPY")]
    assert not [c for c in copies if ".whl" in c or "/wheels" in c or "/tools" in c], copies
    assert "COPY LICENSE /usr/share/doc/nfd/" in copies


def test_runs_as_a_numeric_non_root_user_with_oci_labels() -> None:
    run = stages()[-1]
    users = [ln.split()[1] for ln in run if ln.startswith("USER ")]
    assert users == ["65532:65532"]
    assert 'ENTRYPOINT ["nfd"]' in run
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["nfd"] == "nfd.cli:main"
    labels = " ".join(ln for ln in run if ln.startswith("LABEL "))
    for key in ("title", "description", "licenses", "version", "revision", "base.name"):
        assert f"org.opencontainers.image.{key}=" in labels, key
    assert 'org.opencontainers.image.licenses="Apache-2.0"' in labels


def test_license_is_the_apache_2_0_text_of_pyproject() -> None:
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_build_context_is_only_what_the_dockerfile_copies() -> None:
    ignored = [
        ln for ln in (REPO / ".dockerignore").read_text().splitlines() if ln and not ln.startswith("#")
    ]
    assert ignored[0] == "*"
    allowed = {ln[1:].rstrip("/") for ln in ignored if ln.startswith("!")}
    copied = {
        src.rstrip("/")
        for ln in instructions()
        if ln.startswith("COPY ") and "--from=" not in ln
        for src in ln.split()[1:-1]
    }
    assert copied == allowed
