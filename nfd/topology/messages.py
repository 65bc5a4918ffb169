"""kubelet's two PodResources answers, decoded from protobuf's wire format by hand.

The updater is a per-node agent with a 40 MB budget; google.protobuf's runtime with the
generated descriptors costs 2.6 MiB of its RSS to decode two messages. The classes here
have the messages' names and fields as ``api/v1/api.proto`` declares them (the generated
``api_pb2`` stays the reference: the PodResources stand-in serves it, and a test holds
the two decoders equal). As protobuf decodes: fields not declared here (what kubelet adds
later) are skipped, repeated numbers come packed or not, the last value of a singular
scalar field wins, a singular message field given twice is merged (TopologyInfo's nodes
add up). Malformed input raises :class:`DecodeError`.
"""

from __future__ import annotations

from dataclasses import dataclass

# The gRPC method paths kubelet serves (package v1, service PodResourcesLister).
LIST = "/v1.PodResourcesLister/List"
GET_ALLOCATABLE = "/v1.PodResourcesLister/GetAllocatableResources"

_VARINT, _FIXED64, _LENGTH, _FIXED32 = 0, 1, 2, 5
# A varint's tenth byte may carry bits past the 64th; protobuf drops them.
_MASK64 = (1 << 64) - 1


_NONE: tuple[int, ...] = ()


class DecodeError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class ContainerMemory:
    memory_type: str = ""
    size: int = 0
    topology: tuple[int, ...] = ()  # TopologyInfo: the NUMA nodes' IDs


@dataclass(frozen=True, slots=True)
class ContainerDevices:
    resource_name: str = ""
    device_ids: tuple[str, ...] = ()
    topology: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ContainerResources:
    name: str = ""
    devices: tuple[ContainerDevices, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[ContainerMemory, ...] = ()


@dataclass(frozen=True, slots=True)
class PodResources:
    name: str = ""
    namespace: str = ""
    containers: tuple[ContainerResources, ...] = ()


@dataclass(frozen=True, slots=True)
class AllocatableResourcesResponse:
    devices: tuple[ContainerDevices, ...] = ()
    cpu_ids: tuple[int, ...] = ()
    memory: tuple[ContainerMemory, ...] = ()


@dataclass(frozen=True, slots=True)
class ListPodResourcesResponse:
    pod_resources: tuple[PodResources, ...] = ()


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while shift < 70:
        if pos >= len(buf):
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & _MASK64, pos
        shift += 7
    raise DecodeError("varint longer than 10 bytes")


def _fields(buf: memoryview) -> list[tuple[int, int, int | memoryview]]:
    """One message's fields in wire order: (number, wire type, a varint's or fixed
    field's value, or a length-delimited field's bytes)."""
    out: list[tuple[int, int, int | memoryview]] = []
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire_type = key >> 3, key & 7
        value: int | memoryview
        if wire_type == _VARINT:
            value, pos = _varint(buf, pos)
        elif wire_type == _LENGTH:
            size, pos = _varint(buf, pos)
            if pos + size > end:
                raise DecodeError(f"field {number}: {size} bytes past the end of the message")
            value, pos = buf[pos : pos + size], pos + size
        elif wire_type in (_FIXED64, _FIXED32):
            width = 8 if wire_type == _FIXED64 else 4
            if pos + width > end:
                raise DecodeError(f"field {number}: truncated fixed-width value")
            value, pos = int.from_bytes(buf[pos : pos + width], "little"), pos + width
        else:
            raise DecodeError(f"field {number}: unsupported wire type {wire_type}")
        if not 0 < number < 1 << 29:
            raise DecodeError(f"field number {number} out of range")
        out.append((number, wire_type, value))
    return out


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


class _Decoder:
    """One answer's decoding. Older kubelets list the same shared pool of CPUs for every
    shared container: identical packed lists are decoded once and their tuple shared.
    A field whose wire type does not fit its declaration is skipped, as protobuf skips it."""

    def __init__(self) -> None:
        self._packed: dict[bytes, tuple[int, ...]] = {}

    def ints(self, value: int | memoryview) -> tuple[int, ...]:
        if isinstance(value, int):
            return (_int64(value),)
        key = value.tobytes()
        known = self._packed.get(key)
        if known is None:
            ids, pos = [], 0
            while pos < len(value):
                n, pos = _varint(value, pos)
                ids.append(_int64(n))
            known = self._packed[key] = tuple(ids)
        return known

    def string(self, value: memoryview) -> str:
        try:
            return str(value, "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"a string field is not UTF-8: {e}") from None

    def topology(self, buf: memoryview) -> tuple[int, ...]:
        nodes = []
        for number, _, value in _fields(buf):
            if number == 1 and isinstance(value, memoryview):
                node_id = 0
                for n, wire_type, v in _fields(value):
                    if n == 1 and wire_type == _VARINT:
                        node_id = _int64(int(v))
                nodes.append(node_id)
        return tuple(nodes)

    def memory(self, buf: memoryview) -> ContainerMemory:
        kind, size, topology = "", 0, _NONE
        for number, wire_type, value in _fields(buf):
            if isinstance(value, memoryview):
                if number == 1:
                    kind = self.string(value)
                elif number == 3:
                    topology += self.topology(value)  # a message given twice merges
            elif number == 2 and wire_type == _VARINT:
                size = value
        return ContainerMemory(kind, size, topology)

    def devices(self, buf: memoryview) -> ContainerDevices:
        name, ids, topology = "", [], _NONE
        for number, _, value in _fields(buf):
            if isinstance(value, memoryview):
                if number == 1:
                    name = self.string(value)
                elif number == 2:
                    ids.append(self.string(value))
                elif number == 3:
                    topology += self.topology(value)  # a message given twice merges
        return ContainerDevices(name, tuple(ids), topology)

    def held(self, buf: memoryview, devices: int, cpus: int, memory: int) -> _Held:
        """Devices, CPUs and memory at the field numbers given, and the message's other
        length-delimited fields by number."""
        held = _Held()
        for number, wire_type, value in _fields(buf):
            if number == cpus and wire_type in (_VARINT, _LENGTH):
                held.cpu_ids += self.ints(value)  # () + t is t itself: one packed list stays shared
            elif isinstance(value, memoryview):
                if number == devices:
                    held.devices.append(self.devices(value))
                elif number == memory:
                    held.memory.append(self.memory(value))
                else:
                    held.other[number] = value
        return held

    def container(self, buf: memoryview) -> ContainerResources:
        held = self.held(buf, devices=2, cpus=3, memory=4)
        name = self.string(held.other[1]) if 1 in held.other else ""
        return ContainerResources(name, tuple(held.devices), held.cpu_ids, tuple(held.memory))

    def pod(self, buf: memoryview) -> PodResources:
        name, namespace, containers = "", "", []
        for number, _, value in _fields(buf):
            if isinstance(value, memoryview):
                if number == 1:
                    name = self.string(value)
                elif number == 2:
                    namespace = self.string(value)
                elif number == 3:
                    containers.append(self.container(value))
        return PodResources(name, namespace, tuple(containers))


class _Held:
    def __init__(self) -> None:
        self.devices: list[ContainerDevices] = []
        self.cpu_ids: tuple[int, ...] = ()
        self.memory: list[ContainerMemory] = []
        self.other: dict[int, memoryview] = {}


def decode_list(data: bytes) -> ListPodResourcesResponse:
    """``List``'s answer."""
    d = _Decoder()
    pods = [d.pod(v) for n, _, v in _fields(memoryview(data)) if n == 1 and isinstance(v, memoryview)]
    return ListPodResourcesResponse(tuple(pods))


def decode_allocatable(data: bytes) -> AllocatableResourcesResponse:
    """``GetAllocatableResources``'s answer."""
    held = _Decoder().held(memoryview(data), devices=1, cpus=2, memory=3)
    return AllocatableResourcesResponse(tuple(held.devices), held.cpu_ids, tuple(held.memory))
