"""The install steps in README.md and docs/deploy.md work with kubectl alone, as written."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy.conftest import DEPLOY, PRUNE, REPO, build, kubectl
from deploy.manifests import containers, workloads

DOCS = [REPO / "README.md", REPO / "docs/deploy.md"]
HEREDOC = re.compile(r"^mkdir -p (\S+) && cat > \1/kustomization\.yaml <<'EOF'\n(.*?)^EOF\n", re.M | re.S)


def overlay_step(doc: Path, of: str) -> tuple[str, str]:
    """The overlay directory the steps create on ``of`` (``deploy/overlays``: the
    install; ``deploy/prune``: the uninstall's Job) and the kustomization they write."""
    found = [(name, text) for name, text in HEREDOC.findall(doc.read_text()) if f"../{of}" in text]
    assert len(found) == 1, f"{doc.name}: expected one `cat > DIR/kustomization.yaml <<'EOF'` step on {of}"
    name, text = found[0]
    return name, text


def install_overlay(doc: Path) -> tuple[str, str]:
    return overlay_step(doc, "deploy/overlays/")


def render(tmp: Path, name: str, text: str) -> list[dict[str, Any]]:
    # The steps run at the repository's root: the overlay sits next to deploy/.
    (tmp / "deploy").symlink_to(DEPLOY)
    (tmp / name).mkdir()
    (tmp / name / "kustomization.yaml").write_text(text)
    out = subprocess.run(
        [kubectl(), "kustomize", str(tmp / name)], capture_output=True, text=True, timeout=120, check=True
    )
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_install_overlay_renders_with_kubectl_and_names_the_pushed_image(doc: Path, tmp_path: Path) -> None:
    name, text = install_overlay(doc)
    steps = doc.read_text()
    pushed = re.search(r"docker push (\S+)", steps)
    assert pushed, f"{doc.name}: no `docker push IMAGE` step"
    assert f"kubectl apply -k {name}" in steps
    assert "kustomize edit" not in steps
    docs = render(tmp_path, name, text)
    images = {c["image"] for w in workloads(docs) for c in containers(w)}
    assert images == {pushed.group(1)}
    # Everything else is the default overlay, unchanged.
    default = build("default")
    for d in default:
        for w in workloads([d]):
            for c in containers(w):
                c["image"] = pushed.group(1)
    assert docs == default


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_the_other_overlays_named_in_the_step_render_too(doc: Path, tmp_path: Path) -> None:
    name, text = install_overlay(doc)
    line = re.search(r"^resources: \[(\S+)\]\s+# or (.*)$", text, re.M)
    assert line, text
    resource, comment = line.groups()
    others = [o.strip() for o in comment.split(",")]
    assert {Path(o).name for o in others} <= {p.name for p in (DEPLOY / "overlays").iterdir()} - {"default"}
    for i, other in enumerate(others):
        sub = tmp_path / str(i)
        sub.mkdir()
        assert list(workloads(render(sub, name, text.replace(resource, other))))


def test_the_combined_step_installs_every_component_with_the_pushed_image(tmp_path: Path) -> None:
    doc = REPO / "docs/deploy.md"
    name, text = overlay_step(doc, "deploy/components/")
    steps = doc.read_text()
    assert f"kubectl apply -k {name}" in steps
    docs = render(tmp_path, name, text)
    pushed = re.search(r"docker push (\S+)", steps)
    assert pushed
    assert {c["image"] for w in workloads(docs) for c in containers(w)} == {pushed.group(1)}
    assert {w["metadata"]["name"] for w in workloads(docs)} == {
        "nfd-master", "nfd-worker", "nfd-dra", "nfd-topology-updater"
    }  # fmt: skip
    (worker,) = [w for w in workloads(docs) if w["metadata"]["name"] == "nfd-worker"]
    assert [c["name"] for c in containers(worker)] == ["nfd-worker", "nfd-device-plugin"]
    monitors = {d["metadata"]["name"] for d in docs if d["kind"] in ("ServiceMonitor", "PodMonitor")}
    assert len(monitors) == 5


def test_uninstall_steps_delete_the_install_then_run_the_prune_job_with_the_pushed_image(
    tmp_path: Path,
) -> None:
    doc = REPO / "docs/deploy.md"
    steps = doc.read_text()
    install, _ = install_overlay(doc)
    name, text = overlay_step(doc, "deploy/prune")
    pushed = re.search(r"docker push (\S+)", steps)
    assert pushed
    docs = render(tmp_path, name, text)
    (job,) = workloads(docs)
    assert [c["image"] for c in containers(job)] == [pushed.group(1)]
    shipped = build(PRUNE)
    for c in containers(job):
        c["image"] = containers(next(workloads(shipped)))[0]["image"]
    assert docs == shipped  # the rest as shipped
    # In order: the install goes (a master still running would write the labels back),
    # the Job runs to completion, then it goes too.
    order = [
        f"kubectl delete -k {install}",
        f"kubectl apply -k {name}",
        f"wait --for=condition=complete job/{job['metadata']['name']}",
        f"kubectl delete -k {name}",
    ]
    at = [steps.find(s) for s in order]
    assert -1 not in at and at == sorted(at), dict(zip(order, at, strict=True))
    assert f"-n {job['metadata']['namespace']} wait" in steps
