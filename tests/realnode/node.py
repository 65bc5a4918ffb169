"""The real node: a single-node Kubernetes cluster (``../shared/realcluster``) that the
suite installs nfd on from its own image, with ``kubectl apply -k`` as an operator would.

Everything goes through ``kubectl`` with the cluster's admin kubeconfig, and through
commands run in the cluster's network namespace (``nsenter``), so the suite needs what an
operator has and nothing of nfd's own client code.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = "node-feature-discovery"
FEATURE_NS = "feature.node.kubernetes.io"
NFD_NS = "nfd.node.kubernetes.io"
NETNS = "/run/netns/realcluster"
T = TypeVar("T")


class NodeError(AssertionError):
    """A step on the real node did not do what it should."""


@dataclass
class RealNode:
    """The cluster, the image nfd is installed from, and the figures the suite measures."""

    cluster_dir: Path  # ../shared/realcluster: up, down, load-image, restart
    kubeconfig: Path
    image: str  # name:tag, loaded into the node's containerd
    work: Path  # overlays the suite writes (inside the repository: kustomize loads ../deploy)
    figures: dict[str, Any] = field(default_factory=dict)

    # -- kubectl -----------------------------------------------------------------------

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 120) -> str:
        proc = subprocess.run(
            ["kubectl", f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise NodeError(
                f"kubectl {' '.join(args)}: exit {proc.returncode}: {proc.stderr.strip()[-2000:]}"
            )
        return proc.stdout

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def exists(self, *args: str) -> bool:
        out = self.kubectl("get", *args, "--ignore-not-found", "-o", "name", check=False)
        return bool(out.strip())

    def apply(self, manifest: str) -> None:
        self.kubectl("apply", "-f", "-", stdin=manifest)

    def apply_obj(self, obj: dict[str, Any]) -> None:
        self.apply(json.dumps(obj))

    def delete(self, manifest: str) -> None:
        self.kubectl("delete", "--ignore-not-found", "--wait=true", "-f", "-", stdin=manifest)

    # -- the node --------------------------------------------------------------------

    @property
    def node_name(self) -> str:
        """The node with a kubelet: the one whose Ready condition is True (other Node
        objects, such as the e2e suite's, have none)."""
        for n in self.get("nodes")["items"]:
            if any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in n.get("status", {}).get("conditions", [])
            ):
                return str(n["metadata"]["name"])
        raise NodeError("no Ready node")

    def node(self) -> dict[str, Any]:
        obj: dict[str, Any] = self.get("node", self.node_name)
        return obj

    def nfd_labels(self) -> dict[str, str]:
        """The Node's labels in nfd's namespaces (feature.node.kubernetes.io and below)."""
        labels = self.node()["metadata"].get("labels", {})
        return {k: v for k, v in labels.items() if _in_nfd_ns(k)}

    def netns(self, *cmd: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """A command in the cluster's network namespace (Service IPs, pod IPs)."""
        return subprocess.run(
            ["nsenter", f"--net={NETNS}", "--", *cmd], capture_output=True, text=True, timeout=timeout
        )

    # -- install ---------------------------------------------------------------------

    def overlay(self, name: str, *, base: str, extra: str = "", components: tuple[str, ...] = ()) -> Path:
        """An operator's own overlay: ``base`` (a deploy/ overlay) with the image renamed,
        ``components`` (deploy/components) added, plus ``extra`` kustomization lines
        (patches, more resources)."""
        d = self.work / name
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        rel = os.path.relpath(REPO / "deploy" / "overlays" / base, d)
        parts = [os.path.relpath(REPO / "deploy" / "components" / c, d) for c in components]
        image, tag = self.image.rsplit(":", 1)
        (d / "kustomization.yaml").write_text(
            f"resources: [{rel}]\nimages: [{{name: nfd, newName: {image}, newTag: {tag!r}}}]\n"
            + (f"components: [{', '.join(parts)}]\n" if parts else "")
            + extra
        )
        return d

    def install(self, overlay: Path) -> float:
        """``kubectl apply -k`` with the admin kubeconfig's current namespace, ``default``
        (an overlay that leaves a namespaced object without one puts it there); returns
        seconds until every nfd pod is Ready."""
        started = time.monotonic()
        try:
            self.kubectl("apply", "-k", str(overlay), timeout=180)
            self.wait_ready(timeout=180)
        except BaseException:
            # An install that failed leaves nothing behind for the next module.
            self.kubectl(
                "delete", "-k", str(overlay), "--ignore-not-found", "--wait=true", check=False, timeout=300
            )
            raise
        return time.monotonic() - started

    def wait_ready(self, timeout: float = 180) -> None:
        """Every Deployment in nfd's namespace rolled out, every DaemonSet's current pod on
        the node Ready, and no other pod there that is not Ready."""
        self.wait_for(
            self._ready, timeout=timeout, what=f"every pod in {NAMESPACE} Ready", on_timeout=self.pod_report
        )

    def _ready(self) -> bool:
        node = self.node_name
        pods = [
            p
            for p in self.get("pods", "-n", NAMESPACE)["items"]
            if not p["metadata"].get("deletionTimestamp") and _on(p, node)
        ]
        if not pods or not all(_pod_ready(p) for p in pods):
            return False
        for d in self.get("deployments", "-n", NAMESPACE)["items"]:
            st, want = d.get("status", {}), d["spec"].get("replicas", 1)
            if st.get("observedGeneration", 0) < d["metadata"]["generation"]:
                return False
            if (
                not st.get("updatedReplicas", 0)
                == st.get("readyReplicas", 0)
                == st.get("replicas", 0)
                == want
            ):
                return False
        for ds in self.get("daemonsets", "-n", NAMESPACE)["items"]:
            gen = str(ds["metadata"]["generation"])
            mine = [p for p in pods if p["metadata"].get("labels", {}).get("pod-template-generation") == gen]
            owned = [
                p
                for p in mine
                if any(o["uid"] == ds["metadata"]["uid"] for o in p["metadata"].get("ownerReferences", []))
            ]
            if not owned:
                return False
        return True

    def pod_report(self) -> str:
        out = self.kubectl("get", "pods", "-A", "-o", "wide", check=False)
        events = self.kubectl(
            "get", "events", "-n", NAMESPACE, "--sort-by=.lastTimestamp", check=False
        ).splitlines()[-15:]
        return out + "\n" + "\n".join(events)

    def uninstall(self, overlay: Path) -> None:
        self.kubectl("delete", "-k", str(overlay), "--ignore-not-found", "--wait=true", timeout=180)
        self.wait_for(
            lambda: not self.exists("namespace", NAMESPACE), timeout=120, what=f"namespace {NAMESPACE} gone"
        )

    def clean_default(self, moved: Path) -> None:
        """After a module: a device node it moved away put back, its pods deleted."""
        if moved.with_suffix(".away").exists():
            moved.with_suffix(".away").rename(moved)
        self.kubectl("delete", "pod", "-n", "default", "--all", "--wait=true", check=False)

    def prune(self) -> None:
        """The documented uninstall's second step: the prune Job (deploy/prune) run to
        completion, then deleted."""
        prune = self.overlay("prune", base="../prune")
        self.kubectl("apply", "-k", str(prune))
        try:
            self.kubectl(
                "wait",
                "-n",
                "nfd-prune",
                "job/nfd-prune",
                "--for=condition=Complete",
                "--timeout=120s",
                timeout=130,
            )
        except NodeError as e:
            raise NodeError(
                f"{e}\n{self.kubectl('logs', '-n', 'nfd-prune', 'job/nfd-prune', check=False)}"
            ) from None
        finally:
            self.kubectl("delete", "-k", str(prune), "--ignore-not-found", "--wait=true", timeout=180)

    def logs(self, selector: str, container: str | None = None) -> str:
        args = ["logs", "-n", NAMESPACE, "-l", selector, "--tail=-1", "--prefix"]
        if container:
            args.append(f"--container={container}")
        return self.kubectl(*args, check=False)

    # -- waiting and measuring -------------------------------------------------------

    def wait_for(
        self,
        predicate: Callable[[], T],
        *,
        timeout: float,
        what: str,
        every: float = 0.2,
        on_timeout: Callable[[], str] | None = None,
    ) -> T:
        deadline = time.monotonic() + timeout
        last_error = ""
        while True:
            try:
                value = predicate()
                if value:
                    return value
            except (NodeError, subprocess.TimeoutExpired, json.JSONDecodeError) as e:
                last_error = f" (last error: {e})"
            if time.monotonic() >= deadline:
                detail = f"\n{on_timeout()}" if on_timeout else ""
                raise NodeError(f"{what}: not within {timeout:.0f} s{last_error}{detail}")
            time.sleep(every)

    def figure(self, key: str, value: Any) -> None:
        """A figure for the run's report (printed at the end, kept in report.json)."""
        self.figures[key] = round(value, 2) if isinstance(value, float) else value
        (self.work / "report.json").write_text(json.dumps(self.figures, indent=1, sort_keys=True))

    @contextmanager
    def watch_labels(self, every: float = 0.2) -> Iterator[list[dict[str, str]]]:
        """Samples nfd's labels on the Node while the block runs: every distinct set seen,
        in order (one entry means they never changed)."""
        import threading

        seen: list[dict[str, str]] = [self.nfd_labels()]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(every):
                try:
                    now = self.nfd_labels()
                except (NodeError, subprocess.TimeoutExpired, json.JSONDecodeError):
                    continue
                if now != seen[-1]:
                    seen.append(now)

        t = threading.Thread(target=sample, daemon=True)
        t.start()
        try:
            yield seen
        finally:
            stop.set()
            t.join()
            final = self.nfd_labels()
            if final != seen[-1]:
                seen.append(final)


def _in_nfd_ns(key: str) -> bool:
    prefix = key.split("/", 1)[0] if "/" in key else ""
    return prefix in (FEATURE_NS, NFD_NS) or prefix.endswith("." + FEATURE_NS)


def _on(pod: dict[str, Any], node: str) -> bool:
    """The pod runs, or is to run, on ``node``: a DaemonSet's pod for another Node object
    (pending for want of a kubelet) is not."""
    if "nodeName" in pod["spec"]:
        return bool(pod["spec"]["nodeName"] == node)
    daemon = any(o["kind"] == "DaemonSet" for o in pod["metadata"].get("ownerReferences", []))
    return not daemon or node in json.dumps(pod["spec"].get("affinity", {}))


def _pod_ready(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", [])
    )


def discover_labels(config_text: str, scratch: Path) -> dict[str, str]:
    """``nfd discover`` on the host (this environment's nfd) with the worker's config."""
    conf = scratch / "nfd-worker.conf"
    conf.write_text(config_text)
    nfd = Path(sys.executable).parent / "nfd"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NFD_HOST_")}
    out = subprocess.run(
        [str(nfd), "discover", f"--config={conf}", "-o", "json"], capture_output=True, text=True, env=env
    )
    if out.returncode != 0:
        raise NodeError(f"nfd discover on the host: exit {out.returncode}: {out.stderr.strip()}")
    labels: dict[str, str] = json.loads(out.stdout)["labels"]
    return labels


def container_memory(node: RealNode) -> dict[str, dict[str, float]]:
    """Each nfd container's memory on the node, MiB: VmRSS of its main process (from
    containerd's task list and /proc), the cgroup working set kubelet reports (what a
    limit acts on), and the manifest's request and limit."""
    rc_dir = Path(os.environ.get("RC_DIR", "/var/lib/realcluster"))
    ctr = [str(rc_dir / "bin" / "ctr"), "-n", "k8s.io"]
    pids: dict[str, int] = {}
    for line in subprocess.run([*ctr, "tasks", "ls"], capture_output=True, text=True).stdout.splitlines()[1:]:
        cid, pid, status = line.split()[:3]
        if status == "RUNNING":
            pids[cid] = int(pid)
    out: dict[str, dict[str, float]] = {}
    for pod in node.get("pods", "-n", NAMESPACE)["items"]:
        specs = {c["name"]: c.get("resources", {}) for c in pod["spec"]["containers"]}
        for st in pod.get("status", {}).get("containerStatuses", []):
            cid = st.get("containerID", "").removeprefix("containerd://")
            if cid not in pids:
                continue
            status = Path(f"/proc/{pids[cid]}/status").read_text()
            rss_kib = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("VmRSS:")))
            res = specs.get(st["name"], {})
            key = f"{pod['metadata']['name']}/{st['name']}"
            out[key] = {
                "rss_mib": round(rss_kib / 1024, 1),
                "request_mib": _mib(res.get("requests", {}).get("memory")),
                "limit_mib": _mib(res.get("limits", {}).get("memory")),
            }
    metrics = node.kubectl(
        "get", "--raw", f"/api/v1/nodes/{node.node_name}/proxy/metrics/resource", check=False
    )
    for line in metrics.splitlines():
        if line.startswith("container_memory_working_set_bytes{") and f'namespace="{NAMESPACE}"' in line:
            labels = dict(kv.split("=", 1) for kv in line[line.index("{") + 1 : line.index("}")].split(","))
            name, pod_name = labels["container"].strip('"'), labels["pod"].strip('"')
            if f"{pod_name}/{name}" in out:
                out[f"{pod_name}/{name}"]["working_set_mib"] = round(float(line.split()[1]) / 2**20, 1)
    return out


def memory_fits(node: RealNode, key: str) -> None:
    """Records every nfd container's memory, and asserts each uses no more than its
    request: a request below what a container uses overcommits the node."""
    mem = container_memory(node)
    node.figure(key, mem)
    over = {
        k: v
        for k, v in mem.items()
        if v["request_mib"] and max(v["rss_mib"], v.get("working_set_mib", 0)) > v["request_mib"]
    }
    assert not over, f"containers using more than their memory request: {over}"


def _mib(quantity: str | None) -> float:
    if not quantity:
        return 0.0
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 1e3, "M": 1e6, "G": 1e9}
    for unit, factor in units.items():
        if quantity.endswith(unit):
            return round(float(quantity[: -len(unit)]) * factor / 2**20, 1)
    return round(float(quantity) / 2**20, 1)


def config_map_patch(name: str, key: str, text: str) -> str:
    """Kustomization lines that replace one key of one of nfd's ConfigMaps."""
    body = "\n".join("          " + line for line in text.strip().splitlines())
    return f"""
patches:
  - patch: |
      apiVersion: v1
      kind: ConfigMap
      metadata: {{name: {name}, namespace: {NAMESPACE}}}
      data:
        {key}: |
{body}
"""


def pod_manifest(
    name: str, *, limits: dict[str, str] | None = None, claim_template: str | None = None, image: str
) -> dict[str, Any]:
    """A pod of nfd's own image (python is there) that prints its /dev and environment,
    then sleeps: what it was given shows in its log."""
    script = (
        "import os, json, time; "
        "print(json.dumps({'dev': sorted(os.listdir('/dev')), 'env': dict(os.environ)}), flush=True); "
        "time.sleep(3600)"
    )
    container: dict[str, Any] = {
        "name": "main",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "-c", script],
        "resources": {"limits": limits or {}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }
    spec: dict[str, Any] = {"containers": [container], "terminationGracePeriodSeconds": 1}
    if claim_template:
        spec["resourceClaims"] = [{"name": "dev", "resourceClaimTemplateName": claim_template}]
        container["resources"]["claims"] = [{"name": "dev"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def pod_output(node: RealNode, name: str) -> dict[str, Any]:
    """What a ``pod_manifest`` pod printed, once it is Running."""
    node.wait_for(
        lambda: node.get("pod", "-n", "default", name).get("status", {}).get("phase") == "Running",
        timeout=90,
        what=f"pod {name} Running",
        on_timeout=lambda: node.kubectl("describe", "pod", "-n", "default", name, check=False)[-3000:],
    )
    text = node.wait_for(
        lambda: node.kubectl("logs", "-n", "default", name, check=False).strip(),
        timeout=30,
        what=f"{name}'s log",
    )
    out: dict[str, Any] = json.loads(text.splitlines()[0])
    return out
