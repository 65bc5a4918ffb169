"""The Topology Manager policy and scope from a kubelet config file or configz answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from nfd.topology.kubeletconfig import PolicyError, TopologyPolicy, load, parse


@pytest.mark.parametrize(
    ("text", "policy", "scope", "legacy"),
    [
        ("kind: KubeletConfiguration\n", "none", "container", "None"),
        ("topologyManagerPolicy: best-effort\n", "best-effort", "container", "BestEffortContainerLevel"),
        ("topologyManagerPolicy: restricted\ntopologyManagerScope: pod\n", "restricted", "pod", "RestrictedPodLevel"),
        ('{"kubeletconfig": {"topologyManagerPolicy": "single-numa-node"}}', "single-numa-node", "container",
         "SingleNUMANodeContainerLevel"),
        ("", "none", "container", "None"),
    ],
)  # fmt: skip
def test_policy_and_scope(text: str, policy: str, scope: str, legacy: str) -> None:
    got = parse(text, "cfg")
    assert got == TopologyPolicy(policy, scope)
    assert got.legacy_name() == legacy


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "topologyManagerPolicy: Single-NUMA-Node\n",
            'cfg: topologyManagerPolicy "Single-NUMA-Node" is not a Topology',
        ),
        ("topologyManagerScope: 3\n", "cfg: topologyManagerScope 3 is not a Topology Manager scope"),
        ("- a\n- b\n", "cfg: expected a KubeletConfiguration mapping"),
        ("a: [\n", "cfg: not valid YAML"),
    ],
)
def test_bad_config_names_the_file_and_key(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as e:
        parse(text, "cfg")
    assert str(e.value).startswith(message)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match=r"config\.yaml: no such file"):
        load(str(tmp_path / "config.yaml"))


def test_a_binary_or_fifo_config_is_one_line_naming_the_file(tmp_path: Path) -> None:
    import os

    binary = tmp_path / "config.bin"
    binary.write_bytes(b"\xff\xfe\x00kubelet")
    with pytest.raises(PolicyError, match=r"config\.bin: not UTF-8 text"):
        load(str(binary))
    fifo = tmp_path / "config.fifo"
    os.mkfifo(fifo)  # read as a plain file it would wait for a writer
    with pytest.raises(PolicyError, match=r"config\.fifo: not a regular file"):
        load(str(fifo))


@pytest.mark.parametrize(
    "text",
    [
        "topologyManagerPolicy: 2001-01-01\n",
        "topologyManagerScope: !!binary aGk=\n",
        "topologyManagerPolicy: !!set {a}\n",
        "topologyManagerPolicy: 0x" + "f" * 5000 + "\n",
    ],
)
def test_a_value_json_cannot_write_names_the_key(text: str) -> None:
    """A date, bytes, a set, a number too large to print: the key is named, no
    TypeError from writing the value in the message."""
    with pytest.raises(PolicyError) as e:
        parse(text, "cfg")
    assert str(e.value).startswith("cfg: topologyManager") and "\n" not in str(e.value)
