"""Property tests of the kubelet config the topology updater reads: a KubeletConfiguration
(YAML or JSON) or a configz answer with any values, or any bytes, gives a policy or a
PolicyError of one line naming the file, and the key where a value is at fault."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from nfd.topology.kubeletconfig import POLICIES, SCOPES, PolicyError, load
from tests.fuzzing import dump, mutated, one_line_naming, raw_bytes

VALID: dict[str, Any] = {
    "apiVersion": "kubelet.config.k8s.io/v1beta1",
    "kind": "KubeletConfiguration",
    "topologyManagerPolicy": "single-numa-node",
    "topologyManagerScope": "pod",
    "cpuManagerPolicy": "static",
    "reservedSystemCPUs": "0,1",
}


def check(path: Path, doc: Any = None) -> None:
    try:
        got = load(str(path))
    except PolicyError as e:
        one_line_naming(str(e), str(path))
        why = str(e).removeprefix(f"{path}: ")
        if isinstance(doc, dict) and why.startswith("topologyManager"):
            assert why.split(" ", 1)[0] in ("topologyManagerPolicy", "topologyManagerScope"), why
        return
    assert got.policy in POLICIES and got.scope in SCOPES
    got.legacy_name()


@given(doc=mutated(VALID), configz=st.booleans(), as_json=st.booleans())
def test_a_kubelet_config_with_any_values(tmp_path: Path, doc: Any, configz: bool, as_json: bool) -> None:
    data = {"kubeletconfig": doc} if configz else doc
    path = tmp_path / "config.yaml"
    try:
        text = json.dumps(data) if as_json else dump(data)
    except ValueError:  # a number JSON will not write: YAML then
        text = dump(data)
    path.write_text(text)
    check(path, doc)


@given(data=raw_bytes)
def test_any_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(data)
    check(path)
