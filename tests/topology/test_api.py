"""The PodResources stubs: fresh, and speaking kubelet's exact wire names and numbers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from nfd.topology.api.v1 import api_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]
GEN = "nfd/topology/api/v1"


def test_regenerating_gives_identical_files(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts/gen_proto.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    for name in ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py", "api_pb2_grpc.pyi"):
        fresh = (tmp_path / GEN / name).read_bytes()
        assert fresh == (ROOT / GEN / name).read_bytes(), f"{name} is stale: run scripts/gen_proto.py"


def fields(message: str) -> dict[str, int]:
    return {f.name: f.number for f in pb.DESCRIPTOR.message_types_by_name[message].fields}


def test_wire_names_and_numbers() -> None:
    assert pb.DESCRIPTOR.package == "v1"
    (service,) = pb.DESCRIPTOR.services_by_name.values()
    assert service.full_name == "v1.PodResourcesLister"
    assert [(m.name, m.input_type.name, m.output_type.name, m.server_streaming) for m in service.methods] == [
        ("List", "ListPodResourcesRequest", "ListPodResourcesResponse", False),
        ("GetAllocatableResources", "AllocatableResourcesRequest", "AllocatableResourcesResponse", False),
    ]
    assert fields("AllocatableResourcesRequest") == {} and fields("ListPodResourcesRequest") == {}
    assert fields("AllocatableResourcesResponse") == {"devices": 1, "cpu_ids": 2, "memory": 3}
    assert fields("ListPodResourcesResponse") == {"pod_resources": 1}
    assert fields("PodResources") == {"name": 1, "namespace": 2, "containers": 3}
    assert fields("ContainerResources") == {"name": 1, "devices": 2, "cpu_ids": 3, "memory": 4}
    assert fields("ContainerMemory") == {"memory_type": 1, "size": 2, "topology": 3}
    assert fields("ContainerDevices") == {"resource_name": 1, "device_ids": 2, "topology": 3}
    assert fields("TopologyInfo") == {"nodes": 1}
    assert fields("NUMANode") == {"ID": 1}


def test_fields_kubelet_adds_later_are_skipped() -> None:
    # ContainerResources.dynamic_resources (5) is not declared here: a message carrying
    # it still decodes, with the declared fields intact.
    extra = bytes([5 << 3 | 2, 2, 0x0A, 0x00])  # field 5, length-delimited, a tiny message
    msg = pb.ContainerResources(name="c", cpu_ids=[3, 4]).SerializeToString() + extra
    back = pb.ContainerResources.FromString(msg)
    assert back.name == "c" and list(back.cpu_ids) == [3, 4]
