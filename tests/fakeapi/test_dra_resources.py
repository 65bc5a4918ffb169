"""The fake serves resource.k8s.io/v1 with the API server's validation limits."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.fakeapi import FakeApiServer


def a_slice(name: str = "s", *, devices: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "driver": "dra.example.com",
        "nodeName": "n1",
        "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
        "devices": devices if devices is not None else [{"name": "d0"}],
    }
    body.update(spec)
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": body,
    }


def create(api_client: Any, body: dict[str, Any]) -> dict[str, Any]:
    from kubernetes import client

    api: Any = client.ResourceV1Api(api_client)
    out: dict[str, Any] = json.loads(api.create_resource_slice(body, _preload_content=False).data)
    return out


def refused(api_client: Any, body: dict[str, Any]) -> str:
    with pytest.raises(ApiException) as e:
        create(api_client, body)
    assert e.value.status == 422
    message: str = json.loads(e.value.body)["message"]
    return message


def test_a_valid_slice_is_stored_and_listed_by_node_and_driver(
    fake_api: FakeApiServer, fake_api_client: Any
) -> None:
    from kubernetes import client

    dev = {
        "name": "gpu-0",
        "attributes": {
            "resource.kubernetes.io/pciBusID": {"string": "0000:3b:00.0"},
            "numaNode": {"int": 0},
            "migEnabled": {"bool": False},
            "cudaComputeCapability": {"version": "9.0.0"},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }
    create(fake_api_client, a_slice("mine", devices=[dev]))
    create(fake_api_client, a_slice("other", nodeName="n2"))
    api: Any = client.ResourceV1Api(fake_api_client)
    got = json.loads(
        api.list_resource_slice(
            field_selector="spec.nodeName=n1,spec.driver=dra.example.com", _preload_content=False
        ).data
    )
    assert [s["metadata"]["name"] for s in got["items"]] == ["mine"]
    assert got["items"][0]["spec"]["devices"] == [dev]


@pytest.mark.parametrize(
    ("body", "expect"),
    [
        (
            a_slice(devices=[{"name": f"d{i}"} for i in range(129)]),
            "Too many: 129: must have at most 128 items",
        ),
        (
            a_slice(devices=[{"name": "d", "attributes": {f"a{i}": {"int": i} for i in range(33)}}]),
            "must have at most 32 attributes and capacities combined",
        ),
        (
            a_slice(
                devices=[
                    {
                        "name": "d",
                        "attributes": {f"a{i}": {"int": i} for i in range(31)},
                        "capacity": {"m": {"value": "1"}, "n": {"value": "2"}},
                    }
                ]
            ),
            "must have at most 32 attributes and capacities combined",
        ),
        (
            a_slice(devices=[{"name": "d", "attributes": {"p": {"string": "x" * 65}}}]),
            "may not be more than 64 bytes",
        ),
        (a_slice(devices=[{"name": "d", "attributes": {"v": {"version": "535.104.05"}}}]), "semver"),
        (
            a_slice(devices=[{"name": "d", "attributes": {"p": {"string": "a", "int": 1}}}]),
            "exactly one value",
        ),
        (
            a_slice(devices=[{"name": "d", "attributes": {"x" * 33: {"int": 1}}}]),
            "C identifier of at most 32",
        ),
        (a_slice(devices=[{"name": "D_0"}]), "spec.devices[0].name"),
        (a_slice(devices=[{"name": "d"}, {"name": "d"}]), "Duplicate value"),
        (a_slice(driver="Bad_Driver"), "spec.driver"),
        (a_slice(nodeName=None), "exactly one of `nodeName`"),
        (a_slice(allNodes=True), "exactly one of `nodeName`"),
        (
            a_slice(pool={"name": "n1", "generation": 1, "resourceSliceCount": 0}),
            "spec.pool.resourceSliceCount",
        ),
        (a_slice(devices=[{"name": "d", "capacity": {"memory": {"value": "lots"}}}]), "must be a quantity"),
    ],
)
def test_limits(fake_api_client: Any, body: dict[str, Any], expect: str) -> None:
    assert expect in refused(fake_api_client, body)


def test_slice_driver_and_node_are_immutable(fake_api: FakeApiServer) -> None:
    fake_api.objects.create("resourceslices", a_slice("s"))
    with pytest.raises(Exception, match="field is immutable"):
        fake_api.objects.modify("resourceslices", "s", lambda o: o["spec"].update(nodeName="n2"))


def test_claims_and_device_classes(fake_api: FakeApiServer) -> None:
    claim = {
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}
        },
    }
    fake_api.objects.create("resourceclaims", claim, "default")
    with pytest.raises(Exception, match="field is immutable"):
        fake_api.objects.modify(
            "resourceclaims",
            "c",
            lambda o: o["spec"]["devices"]["requests"][0].update(name="other"),
            "default",
        )
    with pytest.raises(Exception, match="must be the name of a request"):
        fake_api.objects.modify(
            "resourceclaims",
            "c",
            lambda o: o.update(
                status={
                    "allocation": {
                        "devices": {
                            "results": [
                                {"request": "nope", "driver": "d.example.com", "pool": "n1", "device": "x"}
                            ]
                        }
                    }
                }
            ),
            "default",
            subresource="status",
        )
    fake_api.objects.create(
        "deviceclasses",
        {
            "metadata": {"name": "gpu.example.com"},
            "spec": {
                "selectors": [{"cel": {"expression": "true"}}],
                "extendedResourceName": "example.com/gpu",
            },
        },
    )
    with pytest.raises(Exception, match="extendedResourceName"):
        fake_api.objects.create(
            "deviceclasses",
            {"metadata": {"name": "bad"}, "spec": {"extendedResourceName": "kubernetes.io/gpu"}},
        )
    with pytest.raises(Exception, match=r"cel\.expression"):
        fake_api.objects.create(
            "deviceclasses", {"metadata": {"name": "bad2"}, "spec": {"selectors": [{"cel": {}}]}}
        )


_ALLOCATED = {"request": "gpu", "driver": "d.example.com", "pool": "n1", "device": "gpu-0"}


def _ready(**over: Any) -> dict[str, Any]:
    return {
        "type": "Ready",
        "status": "True",
        "reason": "Prepared",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
        **over,
    }


@pytest.mark.parametrize(
    ("entry", "expect"),
    [
        ({"device": "gpu-9"}, "status.devices[0]: Invalid value: \"d.example.com/n1/gpu-9\": must be an allocated device in the claim"),
        ({"pool": "n2"}, "must be an allocated device in the claim"),
        ({"conditions": [_ready(status="Yes")]}, 'conditions[0].status: Invalid value: "Yes": Unsupported value'),
        ({"conditions": [_ready(reason="")]}, "conditions[0].reason: Invalid value: \"\": Required value"),
        ({"conditions": [_ready(lastTransitionTime=None)]}, "conditions[0].lastTransitionTime: Invalid value: \"\": Required value"),
        ({"conditions": [_ready(), _ready()]}, 'conditions[1].type: Invalid value: "Ready": Duplicate value'),
        ({"data": ["not", "an", "object"]}, "data: Invalid value: \"<value omitted>\": must be a valid JSON object"),
        ({"data": {"x": "y" * 10240}}, "data: Invalid value: \"\": Too long"),
        ({"networkData": {"ips": ["10.0.0.5"]}}, "networkData.ips[0]: Invalid value: \"10.0.0.5\": must be a valid address in CIDR form"),
        ({"networkData": {"ips": [f"10.0.0.{i}/24" for i in range(17)]}}, "networkData.ips: Invalid value: \"\": Too many"),
        ({"networkData": {"hardwareAddress": "a" * 129}}, "networkData.hardwareAddress: Invalid value: \"\": Too long"),
    ],
)  # fmt: skip
def test_claim_device_status_is_validated(
    fake_api: FakeApiServer, entry: dict[str, Any], expect: str
) -> None:
    claim = {
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}
        },
    }
    fake_api.objects.create("resourceclaims", claim, "default")

    def status(devices: list[dict[str, Any]]) -> Any:
        return lambda o: o.update(
            status={"allocation": {"devices": {"results": [_ALLOCATED]}}, "devices": devices}
        )

    good = {"driver": "d.example.com", "pool": "n1", "device": "gpu-0", "conditions": [_ready()],
            "data": {"k": "v"}, "networkData": {"interfaceName": "eth0", "ips": ["10.0.0.5/24", "2001:db8::5/64"]}}  # fmt: skip
    fake_api.objects.modify("resourceclaims", "c", status([good]), "default", subresource="status")
    with pytest.raises(Exception, match="Duplicate value"):
        fake_api.objects.modify("resourceclaims", "c", status([good, good]), "default", subresource="status")
    with pytest.raises(Exception) as e:
        fake_api.objects.modify(
            "resourceclaims", "c", status([{**good, **entry}]), "default", subresource="status"
        )
    assert expect in str(e.value)


def _consumes(counter_set: str = "gpu-0", **counters: str) -> dict[str, Any]:
    return {
        "counterSet": counter_set,
        "counters": {k: {"value": v} for k, v in (counters or {"memory": "10Gi"}).items()},
    }


COUNTERS = [{"name": "gpu-0", "counters": {"memory": {"value": "80Gi"}, "memory-slice-0": {"value": "1"}}}]


def counter_slice(name: str = "s", sets: list[dict[str, Any]] = COUNTERS) -> dict[str, Any]:
    """A slice of counter sets only (the API allows no devices next to them)."""
    body = a_slice(name, sharedCounters=sets)
    del body["spec"]["devices"]
    return body


@pytest.mark.parametrize(
    ("body", "expect"),
    [
        (a_slice(sharedCounters=COUNTERS), "only one of `sharedCounters` or `devices` is allowed"),
        (counter_slice(sets=[{"name": f"s{i}", "counters": {"c": {"value": "1"}}} for i in range(9)]), "spec.sharedCounters: Invalid value: \"\": Too many: 9"),
        (counter_slice(sets=[*COUNTERS, *COUNTERS]), "sharedCounters[1]: Invalid value: \"gpu-0\": Duplicate value"),
        (counter_slice(sets=[{"name": "Bad_Name", "counters": {"c": {"value": "1"}}}]), "sharedCounters[0].name"),
        (counter_slice(sets=[{"name": "a", "counters": {"memorySlice0": {"value": "1"}}}]), "counters[memorySlice0]"),
        (counter_slice(sets=[{"name": "a", "counters": {}}]), "sharedCounters[0].counters: Invalid value: \"\": Required value"),
        (counter_slice(sets=[{"name": "a", "counters": {f"c{i}": {"value": "1"} for i in range(33)}}]), "must have at most 32 items"),
        (a_slice(devices=[{"name": "d0", "consumesCounters": [_consumes("a"), _consumes("b"), _consumes("c")]}]), "consumesCounters: Invalid value: \"\": Too many: 3"),
        (a_slice(devices=[{"name": "d0", "consumesCounters": [_consumes("a"), _consumes("a")]}]), "consumesCounters[1]: Invalid value: \"a\": Duplicate value"),
        (a_slice(devices=[{"name": f"d{i}", "consumesCounters": [_consumes()]} for i in range(65)]), "must have at most 64 items"),
    ],
)  # fmt: skip
def test_partitionable_device_limits(fake_api_client: Any, body: dict[str, Any], expect: str) -> None:
    assert expect in refused(fake_api_client, body)


def test_counter_sets_and_consumers_are_stored_or_dropped_without_the_feature(
    fake_api: FakeApiServer, fake_api_client: Any
) -> None:
    from tests.fakeapi.resource_dra import pool_counter_problems

    counters = counter_slice("counters")
    devices = a_slice("devices", devices=[{"name": "mig-0", "consumesCounters": [_consumes(**{"memory": "10Gi", "memory-slice-0": "1"})]},
                                          {"name": "mig-1", "consumesCounters": [_consumes("gpu-9")]}])  # fmt: skip
    stored = [create(fake_api_client, counters), create(fake_api_client, devices)]
    assert stored[0]["spec"]["sharedCounters"] == COUNTERS
    assert pool_counter_problems(stored) == ["device mig-1: counter set gpu-9 is not in the pool"]
    fake_api.feature_gates["DRAPartitionableDevices"] = False
    for s in (counters, devices):
        s["metadata"]["name"] += "-off"
    off = [create(fake_api_client, counters), create(fake_api_client, devices)]
    assert "sharedCounters" not in off[0]["spec"]
    assert not any("consumesCounters" in d for d in off[1]["spec"]["devices"])


def tainted(**taint: Any) -> dict[str, Any]:
    return a_slice(devices=[{"name": "d0", "taints": [taint]}])


@pytest.mark.parametrize(
    ("taint", "expect"),
    [
        ({"key": "bad key", "effect": "NoSchedule"}, "spec.devices[0].taints[0].key"),
        ({"key": "x.example.com/" + "k" * 64, "effect": "NoSchedule"}, "no more than 63 characters"),
        ({"key": "x.example.com/k", "value": "no spaces", "effect": "NoSchedule"}, "taints[0].value"),
        ({"key": "x.example.com/k", "value": "v" * 64, "effect": "NoSchedule"}, "taints[0].value"),
        ({"key": "x.example.com/k", "effect": "PreferNoSchedule"}, 'supported values: "NoSchedule"'),
    ],
)
def test_device_taints_are_validated(fake_api_client: Any, taint: dict[str, Any], expect: str) -> None:
    assert expect in refused(fake_api_client, tainted(**taint))


def test_device_taints_are_kept_with_a_time_or_dropped_without_the_feature(
    fake_api: FakeApiServer, fake_api_client: Any
) -> None:
    for effect in ("NoSchedule", "NoExecute", "None"):
        body = tainted(key="x.example.com/unhealthy", value="driver-unbound", effect=effect)
        body["metadata"]["name"] = f"s-{effect.lower()}"
        [stored] = create(fake_api_client, body)["spec"]["devices"][0]["taints"]
        assert stored["effect"] == effect and stored["value"] == "driver-unbound"
        assert stored["timeAdded"].endswith("Z")  # the server's time when none was given
    given = tainted(key="x.example.com/k", effect="NoSchedule", timeAdded="2024-05-01T10:00:00Z")
    given["metadata"]["name"] = "s-given"
    assert create(fake_api_client, given)["spec"]["devices"][0]["taints"][0]["timeAdded"] == (
        "2024-05-01T10:00:00Z"
    )
    fake_api.feature_gates["DRADeviceTaints"] = False
    body = tainted(key="x.example.com/k", effect="NoSchedule")
    body["metadata"]["name"] = "s-gate-off"
    assert "taints" not in create(fake_api_client, body)["spec"]["devices"][0]
    assert "taints" not in fake_api.objects.get("resourceslices", "s-gate-off")["spec"]["devices"][0]


def test_node_events_in_default_namespace(fake_api: FakeApiServer, fake_api_client: Any) -> None:
    from kubernetes import client

    core: Any = client.CoreV1Api(fake_api_client)
    event = {
        "metadata": {"name": "n1.abc"},
        "involvedObject": {"kind": "Node", "name": "n1"},
        "reason": "DeviceUnhealthy",
        "type": "Warning",
        "message": "m",
    }
    core.create_namespaced_event("default", event, _preload_content=False)
    listed = json.loads(
        core.list_namespaced_event(
            "default", field_selector="involvedObject.name=n1", _preload_content=False
        ).data
    )
    assert [e["reason"] for e in listed["items"]] == ["DeviceUnhealthy"]
    with pytest.raises(ApiException) as e:
        core.create_namespaced_event(
            "kube-system", {**event, "metadata": {"name": "n1.x"}}, _preload_content=False
        )
    assert e.value.status == 422
    with pytest.raises(ApiException) as e:
        core.create_namespaced_event(
            "default", {**event, "metadata": {"name": "n1.y"}, "type": "Error"}, _preload_content=False
        )
    assert e.value.status == 422
