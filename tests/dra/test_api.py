"""Our DRA and plugin-registration protos speak kubelet's exact wire names and numbers."""

from __future__ import annotations

from nfd.dra.api.dra.v1 import api_pb2 as dra
from nfd.dra.api.pluginregistration.v1 import api_pb2 as reg


def fields(module: object, message: str) -> dict[str, int]:
    desc = module.DESCRIPTOR.message_types_by_name[message]  # type: ignore[attr-defined]
    return {f.name: f.number for f in desc.fields}


def test_registration() -> None:
    assert reg.DESCRIPTOR.package == "pluginregistration"
    [svc] = reg.DESCRIPTOR.services_by_name.values()
    assert svc.full_name == "pluginregistration.Registration"
    assert [(m.name, m.input_type.name, m.output_type.name) for m in svc.methods] == [
        ("GetInfo", "InfoRequest", "PluginInfo"),
        ("NotifyRegistrationStatus", "RegistrationStatus", "RegistrationStatusResponse"),
    ]
    assert fields(reg, "PluginInfo") == {"type": 1, "name": 2, "endpoint": 3, "supported_versions": 4}
    assert fields(reg, "RegistrationStatus") == {"plugin_registered": 1, "error": 2}


def test_dra_v1() -> None:
    [svc] = dra.DESCRIPTOR.services_by_name.values()
    assert svc.full_name == "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
    assert [(m.name, m.input_type.name, m.output_type.name) for m in svc.methods] == [
        ("NodePrepareResources", "NodePrepareResourcesRequest", "NodePrepareResourcesResponse"),
        ("NodeUnprepareResources", "NodeUnprepareResourcesRequest", "NodeUnprepareResourcesResponse"),
    ]
    assert fields(dra, "Claim") == {"namespace": 1, "uid": 2, "name": 3}
    assert fields(dra, "NodePrepareResourceResponse") == {"devices": 1, "error": 2}
    assert fields(dra, "Device") == {
        "request_names": 1, "pool_name": 2, "device_name": 3, "cdi_device_ids": 4, "share_id": 5,
    }  # fmt: skip
    assert fields(dra, "NodeUnprepareResourceResponse") == {"error": 1}
    assert fields(dra, "NodePrepareResourcesRequest") == {"claims": 1}
    assert fields(dra, "NodePrepareResourcesResponse") == {"claims": 1}


def test_dra_health_v1alpha1() -> None:
    from nfd.dra.api.drahealth.v1alpha1 import api_pb2 as health

    [svc] = health.DESCRIPTOR.services_by_name.values()
    assert svc.full_name == "v1alpha1.DRAResourceHealth"
    assert [(m.name, m.input_type.name, m.output_type.name, m.server_streaming) for m in svc.methods] == [
        ("NodeWatchResources", "NodeWatchResourcesRequest", "NodeWatchResourcesResponse", True),
    ]
    status = health.DESCRIPTOR.enum_types_by_name["HealthStatus"]
    assert {v.name: v.number for v in status.values} == {"UNKNOWN": 0, "HEALTHY": 1, "UNHEALTHY": 2}
    assert fields(health, "DeviceIdentifier") == {"pool_name": 1, "device_name": 2}
    assert fields(health, "DeviceHealth") == {
        "device": 1, "health": 2, "last_updated_time": 3, "health_check_timeout_seconds": 4, "message": 5,
    }  # fmt: skip
    assert fields(health, "NodeWatchResourcesResponse") == {"devices": 1}
