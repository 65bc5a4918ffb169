"""``nfd-topology-updater.conf``: upstream's excludeList, read by the one settings
mechanism, and the resources it names left out of the object."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixture_node import allocatable, pods

from nfd.hostroot import HostRoot
from nfd.settings import ConfigError, load_model
from nfd.topology import nrt
from nfd.topology.accounting import account
from nfd.topology.config import TopologyConfig
from nfd.topology.layout import read_layout
from nfd.topology.messages import decode_allocatable, decode_list


def load(tmp_path: Path, text: str) -> TopologyConfig:
    conf = tmp_path / "nfd-topology-updater.conf"
    conf.write_text(text)
    config, warnings = load_model(conf, TopologyConfig)
    assert warnings == []
    return config


def test_a_nodes_list_and_every_nodes_list_are_excluded(tmp_path: Path) -> None:
    config = load(tmp_path, "excludeList:\n  '*': [hugepages-2Mi]\n  node-a: [memory]\n  node-b:\n")
    assert config.excluded("node-a") == {"hugepages-2Mi", "memory"}
    assert config.excluded("node-b") == config.excluded("node-c") == {"hugepages-2Mi"}
    assert TopologyConfig().excluded("node-a") == frozenset()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("excludeList: [memory]\n", "excludeList: expected a mapping of node name to a list of resources"),
        ("excludeList:\n  node-a: memory\n", "excludeList.node-a: expected a list of resource names"),
        ("excludeList:\n  1: [memory]\n", "excludeList: the key 1 is not a node name"),
    ],
)
def test_a_bad_list_names_the_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    conf = tmp_path / "nfd-topology-updater.conf"
    conf.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_model(conf, TopologyConfig)
    assert str(e.value) == f"config file {conf}: {message}"


def test_excluded_resources_are_left_out_of_every_zone(host: HostRoot) -> None:
    layout = read_layout(host)
    answers = decode_allocatable(allocatable().SerializeToString()), decode_list(pods().SerializeToString())
    zones = account(layout, *answers).zones
    every = nrt.build("n", zones=zones, layout=layout, policy=None, node_uid=None)
    some = nrt.build(
        "n", zones=zones, layout=layout, policy=None, node_uid=None, exclude=frozenset({"memory"})
    )
    names = [{r["name"] for r in z["resources"]} for z in every["zones"]]
    assert any("memory" in n for n in names)
    assert [{r["name"] for r in z["resources"]} for z in some["zones"]] == [n - {"memory"} for n in names]
