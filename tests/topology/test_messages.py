"""The hand decoder of kubelet's PodResources answers against protobuf's own, on the
fixture node's answers and on what protobuf accepts besides: unpacked repeated numbers,
fields kubelet adds later, negative int64, a singular field given twice."""

from __future__ import annotations

import pytest
from fixture_node import allocatable, pods

from nfd.topology import messages
from nfd.topology.api.v1 import api_pb2 as pb


def topology(t: pb.TopologyInfo) -> tuple[int, ...]:
    return tuple(n.ID for n in t.nodes)


def memory(ms: list[pb.ContainerMemory]) -> tuple[messages.ContainerMemory, ...]:
    return tuple(messages.ContainerMemory(m.memory_type, m.size, topology(m.topology)) for m in ms)


def devices(ds: list[pb.ContainerDevices]) -> tuple[messages.ContainerDevices, ...]:
    return tuple(
        messages.ContainerDevices(d.resource_name, tuple(d.device_ids), topology(d.topology)) for d in ds
    )


def as_protobuf_decodes_list(data: bytes) -> messages.ListPodResourcesResponse:
    answer = pb.ListPodResourcesResponse.FromString(data)
    return messages.ListPodResourcesResponse(
        tuple(
            messages.PodResources(
                p.name,
                p.namespace,
                tuple(
                    messages.ContainerResources(
                        c.name, devices(c.devices), tuple(c.cpu_ids), memory(c.memory)
                    )
                    for c in p.containers
                ),
            )
            for p in answer.pod_resources
        )
    )


def as_protobuf_decodes_allocatable(data: bytes) -> messages.AllocatableResourcesResponse:
    a = pb.AllocatableResourcesResponse.FromString(data)
    return messages.AllocatableResourcesResponse(devices(a.devices), tuple(a.cpu_ids), memory(a.memory))


def test_the_fixture_nodes_answers_decode_as_protobuf_decodes_them() -> None:
    listed = pods().SerializeToString()
    decoded = messages.decode_list(listed)
    assert decoded == as_protobuf_decodes_list(listed)
    assert [p.name for p in decoded.pod_resources][:3] == ["db", "train", "sriov"]
    held = allocatable().SerializeToString()
    assert messages.decode_allocatable(held) == as_protobuf_decodes_allocatable(held)
    assert len(messages.decode_allocatable(held).cpu_ids) == len(allocatable().cpu_ids) > 100


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append(n & 0x7F | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def tagged(number: int, wire_type: int, payload: bytes) -> bytes:
    return varint(number << 3 | wire_type) + payload


def length(number: int, body: bytes) -> bytes:
    return tagged(number, 2, varint(len(body)) + body)


def test_what_protobuf_accepts_besides_decodes_the_same() -> None:
    node = length(1, tagged(1, 0, varint(-1)))  # NUMANode ID -1 (ten bytes)
    container = (
        length(1, b"first")
        + tagged(3, 0, varint(7))  # cpu_ids unpacked, then packed: they add up
        + length(3, varint(8) + varint(300))
        + length(4, length(1, b"memory") + tagged(2, 0, varint(1 << 40)) + length(3, node))
        + length(5, length(1, b"dynamic"))  # a field kubelet adds later
        + tagged(9, 1, bytes(8))  # unknown fixed64
        + tagged(10, 5, bytes(4))  # unknown fixed32
        + length(1, b"main")  # a singular field twice: the last wins
        + tagged(2, 0, varint(3))  # devices with the wrong wire type: skipped
    )
    data = length(1, length(1, b"p") + length(2, b"ns") + length(3, container))
    decoded = messages.decode_list(data)
    assert decoded == as_protobuf_decodes_list(data)
    (c,) = decoded.pod_resources[0].containers
    assert (c.name, c.cpu_ids, c.memory[0].size, c.memory[0].topology) == (
        "main",
        (7, 8, 300),
        1 << 40,
        (-1,),
    )


def test_identical_cpu_lists_share_one_decoded_tuple() -> None:
    decoded = messages.decode_list(pods().SerializeToString())
    shared = [c.cpu_ids for p in decoded.pod_resources for c in p.containers if len(c.cpu_ids) > 100]
    assert len(shared) >= 2 and all(ids is shared[0] for ids in shared)


@pytest.mark.parametrize(
    "data",
    [
        pods().SerializeToString()[:-1],  # cut short
        length(1, b"\xff"),  # a varint that never ends
        tagged(1, 2, varint(50)) + b"short",  # longer than the message
        length(1, length(1, b"\xff\xfe")),  # a name that is not UTF-8
        tagged(1, 3, b""),  # groups: not proto3
        tagged(0, 0, b"\x01"),  # field numbers run from 1
        tagged(1 << 29, 0, b"\x01"),  # to 2^29 - 1
    ],
)
def test_malformed_answers_raise_decode_error(data: bytes) -> None:
    with pytest.raises(messages.DecodeError):
        messages.decode_list(data)


def test_method_paths_are_the_services() -> None:
    (service,) = pb.DESCRIPTOR.services_by_name.values()
    paths = {f"/{service.full_name}/{m.name}" for m in service.methods}
    assert paths == {messages.LIST, messages.GET_ALLOCATABLE}


def test_a_varint_keeps_64_bits_as_protobuf_does() -> None:
    # Ten bytes whose last one carries bits past the 64th: -1 once they are dropped.
    ten = b"\xff" * 9 + b"\x7f"
    data = tagged(2, 0, ten) + length(3, tagged(2, 0, ten))  # a CPU ID, a memory size
    decoded = messages.decode_allocatable(data)
    assert decoded == as_protobuf_decodes_allocatable(data)
    assert (decoded.cpu_ids, decoded.memory[0].size) == ((-1,), (1 << 64) - 1)


def test_a_topology_given_twice_merges_as_protobuf_merges_it() -> None:
    def topology(*ids: int) -> bytes:
        return length(3, b"".join(length(1, tagged(1, 0, varint(i))) for i in ids))

    device = length(1, b"example.com/dev") + topology(0) + topology(1)
    data = length(1, device) + length(3, topology(2) + topology(3))  # a device, a memory block
    decoded = messages.decode_allocatable(data)
    assert decoded == as_protobuf_decodes_allocatable(data)
    assert (decoded.devices[0].topology, decoded.memory[0].topology) == ((0, 1), (2, 3))
