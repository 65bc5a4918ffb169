"""The generated API: fresh, and speaking kubelet's exact wire names and numbers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from nfd.deviceplugin.api.v1beta1 import api_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]
GENERATED = (
    "nfd/deviceplugin/api/v1beta1",
    "nfd/dra/api/pluginregistration/v1",
    "nfd/dra/api/dra/v1",
    "nfd/dra/api/drahealth/v1alpha1",
)


def test_regenerating_gives_identical_files(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts/gen_proto.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    for gen in GENERATED:
        for name in ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py", "api_pb2_grpc.pyi"):
            fresh = (tmp_path / gen / name).read_bytes()
            assert fresh == (ROOT / gen / name).read_bytes(), (
                f"{gen}/{name} is stale: run scripts/gen_proto.py"
            )


def fields(message: str) -> dict[str, int]:
    return {f.name: f.number for f in pb.DESCRIPTOR.message_types_by_name[message].fields}


def test_wire_names_and_numbers() -> None:
    assert pb.DESCRIPTOR.package == "v1beta1"
    services = {
        s.name: [(m.name, m.input_type.name, m.output_type.name, m.server_streaming) for m in s.methods]
        for s in pb.DESCRIPTOR.services_by_name.values()
    }
    assert services["Registration"] == [("Register", "RegisterRequest", "Empty", False)]
    assert services["DevicePlugin"] == [
        ("GetDevicePluginOptions", "Empty", "DevicePluginOptions", False),
        ("ListAndWatch", "Empty", "ListAndWatchResponse", True),
        ("GetPreferredAllocation", "PreferredAllocationRequest", "PreferredAllocationResponse", False),
        ("Allocate", "AllocateRequest", "AllocateResponse", False),
        ("PreStartContainer", "PreStartContainerRequest", "PreStartContainerResponse", False),
    ]
    assert fields("DevicePluginOptions") == {"pre_start_required": 1, "get_preferred_allocation_available": 2}
    assert fields("RegisterRequest") == {"version": 1, "endpoint": 2, "resource_name": 3, "options": 4}
    assert fields("ListAndWatchResponse") == {"devices": 1}
    assert fields("TopologyInfo") == {"nodes": 1}
    assert fields("NUMANode") == {"ID": 1}
    assert fields("Device") == {"ID": 1, "health": 2, "topology": 3}
    assert fields("PreStartContainerRequest") == {"devices_ids": 1}
    assert fields("PreferredAllocationRequest") == {"container_requests": 1}
    assert fields("ContainerPreferredAllocationRequest") == {
        "available_deviceIDs": 1,
        "must_include_deviceIDs": 2,
        "allocation_size": 3,
    }
    assert fields("PreferredAllocationResponse") == {"container_responses": 1}
    assert fields("ContainerPreferredAllocationResponse") == {"deviceIDs": 1}
    assert fields("AllocateRequest") == {"container_requests": 1}
    assert fields("ContainerAllocateRequest") == {"devices_ids": 1}
    assert fields("AllocateResponse") == {"container_responses": 1}
    assert fields("ContainerAllocateResponse") == {
        "envs": 1,
        "mounts": 2,
        "devices": 3,
        "annotations": 4,
        "cdi_devices": 5,
    }
    assert fields("Mount") == {"container_path": 1, "host_path": 2, "read_only": 3}
    assert fields("DeviceSpec") == {"container_path": 1, "host_path": 2, "permissions": 3}
    assert fields("CDIDevice") == {"name": 1}
    assert fields("Empty") == {} and fields("PreStartContainerResponse") == {}


def test_worker_view_does_not_load_grpc() -> None:
    code = "import sys, nfd.deviceplugin; from nfd.deviceplugin import served_resources, declared_resources; print('grpc' in sys.modules)"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.stdout.strip() == "False", p.stderr
