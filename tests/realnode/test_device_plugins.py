"""The device-plugins overlay on the real node: the node's loop devices and virtio PCI
devices served through kubelet's device-plugin API, a pod given exactly what it asked
for, a device node moved away and back, and a kubelet restart."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from realnode.node import RealNode, config_map_patch, memory_fits, pod_manifest, pod_output

LOOP = "example.com/loop"
VIRTIO = "example.com/virtio"
CONFIG = f"""
resources:
  - name: {LOOP}
    devnode: ["/dev/loop[0-7]"]
  - name: {VIRTIO}
    pci: {{vendor: "1af4"}}
"""
AWAY = Path("/dev/loop7")


@pytest.fixture(scope="module")
def installed(real_node: RealNode) -> Iterator[Path]:
    overlay = real_node.overlay(
        "device-plugins",
        base="device-plugins",
        extra=config_map_patch("nfd-device-plugin-conf", "device-plugin.yaml", CONFIG),
    )
    real_node.figure("device-plugins.apply_to_ready_s", real_node.install(overlay))
    try:
        yield overlay
    finally:
        real_node.clean_default(AWAY)
        real_node.uninstall(overlay)


def allocatable(node: RealNode, resource: str) -> int:
    return int(node.node()["status"].get("allocatable", {}).get(resource, "0"))


def kubelet_devices(resource: str) -> int:
    """The healthy devices of ``resource`` the kubelet would hand out now (its
    PodResources API); the Node's allocatable follows at its next status update."""
    from nfd.topology.podresources import PodResources

    snap = PodResources().read()
    assert snap is not None, "kubelet's PodResources API does not answer"
    return sum(len(d.device_ids) for d in snap.allocatable.devices if d.resource_name == resource)


def test_the_nodes_devices_are_advertised(real_node: RealNode, installed: Path) -> None:
    loops = len(list(Path("/dev").glob("loop[0-7]")))
    real_node.wait_for(lambda: allocatable(real_node, LOOP) == loops, timeout=30, what=f"{loops} {LOOP}")
    virtio = sum(
        1 for p in Path("/sys/bus/pci/devices").iterdir() if (p / "vendor").read_text().strip() == "0x1af4"
    )
    real_node.wait_for(
        lambda: allocatable(real_node, VIRTIO) == virtio, timeout=30, what=f"{virtio} {VIRTIO}"
    )


def test_a_pod_gets_exactly_the_devices_it_asked_for(real_node: RealNode, installed: Path) -> None:
    started = time.monotonic()
    real_node.apply_obj(pod_manifest("dp-two-loops", limits={LOOP: "2", VIRTIO: "1"}, image=real_node.image))
    out = pod_output(real_node, "dp-two-loops")
    real_node.figure("device-plugins.pod_to_running_s", time.monotonic() - started)
    loops = [d for d in out["dev"] if d.startswith("loop") and d[4:].isdigit()]
    assert len(loops) == 2, f"the pod's /dev has {loops}"
    pci = [v for k, v in out["env"].items() if k.startswith("PCIDEVICE_EXAMPLE_COM_VIRTIO")]
    assert len(pci) == 1 and len(pci[0].split(",")) == 1, f"virtio env: {pci}"
    memory_fits(real_node, "device-plugins.memory")


class Stream:
    """A second ListAndWatch stream on the plugin's socket, beside the kubelet's: what
    the plugin sends the kubelet, as it sends it."""

    def __init__(self, resource: str) -> None:
        import queue
        import threading

        import grpc

        from nfd.deviceplugin.api.v1beta1 import api_pb2 as pb
        from nfd.deviceplugin.api.v1beta1 import api_pb2_grpc as rpc
        from nfd.deviceplugin.server import socket_name

        self.channel = grpc.insecure_channel(f"unix:/var/lib/kubelet/device-plugins/{socket_name(resource)}")
        self.calls = rpc.DevicePluginStub(self.channel).ListAndWatch(pb.Empty())
        self.snapshots: queue.Queue[dict[str, str]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for msg in self.calls:
                self.snapshots.put({d.ID: d.health for d in msg.devices})
        except Exception:  # cancelled at the end
            pass

    def healthy_when(self, predicate: Callable[[int], bool], timeout: float = 30) -> float:
        """Seconds until a snapshot whose count of healthy devices satisfies ``predicate``."""
        started = time.monotonic()
        while True:
            left = started + timeout - time.monotonic()
            snap = self.snapshots.get(timeout=max(left, 0.01))
            if predicate(sum(1 for h in snap.values() if h == "Healthy")):
                return time.monotonic() - started

    def close(self) -> None:
        self.calls.cancel()
        self.channel.close()


def test_a_device_node_moved_away_and_back_reaches_the_kubelet(real_node: RealNode, installed: Path) -> None:
    """The plugin's ListAndWatch answer (what the kubelet is sent), and the Node's
    allocatable (which the kubelet writes at its next node status update, every 10 s)."""
    before = allocatable(real_node, LOOP)
    stream = Stream(LOOP)
    try:
        stream.healthy_when(lambda n: n == before)  # the first snapshot
        AWAY.rename(AWAY.with_suffix(".away"))
        started = time.monotonic()
        try:
            gone = stream.healthy_when(lambda n: n == before - 1)
            real_node.figure("device-plugins.device_gone_to_listandwatch_s", gone)
            real_node.wait_for(
                lambda: allocatable(real_node, LOOP) == before - 1, timeout=30, what="allocatable"
            )
            real_node.figure("device-plugins.device_gone_to_node_allocatable_s", time.monotonic() - started)
        finally:
            AWAY.with_suffix(".away").rename(AWAY)
        started = time.monotonic()
        real_node.figure(
            "device-plugins.device_back_to_listandwatch_s", stream.healthy_when(lambda n: n == before)
        )
        real_node.wait_for(
            lambda: allocatable(real_node, LOOP) == before, timeout=30, what="allocatable back"
        )
        real_node.figure("device-plugins.device_back_to_node_allocatable_s", time.monotonic() - started)
    finally:
        stream.close()
    assert gone <= 1.0, f"the plugin told the kubelet {gone:.2f} s after the device node went"


def test_the_plugin_registers_again_after_a_kubelet_restart(real_node: RealNode, installed: Path) -> None:
    before = allocatable(real_node, LOOP)
    assert before > 0
    subprocess_restart(real_node, "kubelet")
    real_node.wait_for(
        lambda: allocatable(real_node, LOOP) == before, timeout=60, what=f"{LOOP} after restart"
    )
    real_node.apply_obj(pod_manifest("dp-after-restart", limits={LOOP: "1"}, image=real_node.image))
    out = pod_output(real_node, "dp-after-restart")
    assert len([d for d in out["dev"] if d.startswith("loop") and d[4:].isdigit()]) == 1


def subprocess_restart(node: RealNode, component: str) -> None:
    import subprocess

    proc = subprocess.run(
        [str(node.cluster_dir / "restart"), component], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"restart {component}: {proc.stderr[-1000:]}"
