"""Partitionable GPUs: an A100 40GB in MIG mode published whole and as every MIG
placement, sharing one counter set, on a fake NVML; its MIG devices made at prepare and
destroyed at unprepare."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from dra.claims import DRIVER, NODE

from nfd.devices.config import DRA, parse_config
from nfd.devices.inventory import build_states
from nfd.devices.kinds import KindRegistry
from nfd.devices.kinds.gpu import GpuKind
from nfd.dra.prepare import ClaimError, Preparer
from nfd.dra.publisher import SlicePublisher
from nfd.dra.slices import DraInventory, pool_slices
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.hw.nvml_fake import DGX_A100_BUSES, FakeNvml, a100_40gb
from nfd.settings import ConfigError
from tests.fakeapi import FakeApiServer
from tests.fakeapi.resource_dra import pool_counter_problems

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
PARTITIONED = {
    "name": "nvidia.com/gpu",
    "gpu": {"vendor": "nvidia", "migPartitions": True},
    "servedBy": "dra",
}
_QUANTITY = re.compile(r"^(\d+)(Mi|Gi)?$")


def inventory(nvml: FakeNvml, root: Path, resource: dict[str, Any] = PARTITIONED) -> DraInventory:
    kind = GpuKind(nvml=lambda: nvml, event_wait=0.02)
    cfg = parse_config({"resources": [resource]}, KindRegistry((kind,)))
    host = HostRoot.under(root)
    states, _warnings = build_states(cfg.served_by(DRA), features=Features(), host=host)
    return DraInventory(states, features=Features(), host=host)


def amount(q: str) -> int:
    m = _QUANTITY.match(q)
    assert m, q
    return int(m[1]) * {None: 1, "Mi": 1 << 20, "Gi": 1 << 30}[m[2]]


def fits(devices: list[dict[str, Any]], sets: list[dict[str, Any]]) -> bool:
    """Whether the scheduler may allocate these devices together: no counter of any set
    consumed beyond its total."""
    used: dict[tuple[str, str], int] = {}
    for d in devices:
        for c in d["consumesCounters"]:
            for name, v in c["counters"].items():
                used[(c["counterSet"], name)] = used.get((c["counterSet"], name), 0) + amount(v["value"])
    totals = {(s["name"], n): amount(v["value"]) for s in sets for n, v in s["counters"].items()}
    return all(v <= totals[k] for k, v in used.items())


def slices_of(d: dict[str, Any]) -> set[int]:
    return {
        int(c.rpartition("-")[2])
        for c in d["consumesCounters"][0]["counters"]
        if c.startswith("memory-slice-")
    }


def test_an_a100_in_mig_mode_is_one_counter_set_shared_by_the_gpu_and_its_placements() -> None:
    inv = inventory(FakeNvml(a100_40gb()), HOSTS / "gpu-a100-mig")
    devices, sets = inv.published(None), inv.counter_sets()
    by_name = {d["name"]: d for d in devices}
    assert sorted(by_name) == sorted(
        ["gpu-0", "gpu-0-mig-4g20gb-0", "gpu-0-mig-7g40gb-0"]
        + [f"gpu-0-mig-1g5gb-{i}" for i in range(7)]
        + [f"gpu-0-mig-2g10gb-{i}" for i in (0, 2, 4)]
        + [f"gpu-0-mig-3g20gb-{i}" for i in (0, 4)]
    )
    [gpu_set] = sets
    assert gpu_set["name"] == "gpu-0"
    assert gpu_set["counters"] == {
        **{f"memory-slice-{i}": {"value": "1"} for i in range(8)},
        "memory": {"value": "40192Mi"},
        "multiprocessors": {"value": "98"},
        "copy-engines": {"value": "7"},
        "decoders": {"value": "5"},
        "jpeg-engines": {"value": "1"},
        "ofa-engines": {"value": "1"},
    }
    # The whole GPU consumes everything; a 3g.20gb at 4 spans memory slices 4 to 7.
    assert by_name["gpu-0"]["consumesCounters"] == [{"counterSet": "gpu-0", "counters": gpu_set["counters"]}]
    three = by_name["gpu-0-mig-3g20gb-4"]
    assert slices_of(three) == {4, 5, 6, 7}
    assert three["attributes"]["profile"] == {"string": "3g.20gb"}
    assert three["attributes"]["type"] == {"string": "mig"}
    assert three["attributes"]["parentUUID"]["string"].startswith("GPU-")
    assert "uuid" not in three["attributes"]  # made at prepare: no UUID before
    assert three["capacity"] == {"memory": {"value": "19968Mi"}}
    assert by_name["gpu-0"]["attributes"]["type"] == {"string": "gpu"}
    assert by_name["gpu-0"]["attributes"]["productName"] == {"string": "NVIDIA A100-SXM4-40GB"}

    # Two devices fit together exactly when their memory slices do not overlap.
    for a, b in itertools.combinations(devices, 2):
        assert fits([a, b], sets) == (not slices_of(a) & slices_of(b)), (a["name"], b["name"])
    # The layouts NVIDIA's MIG guide lists for the A100 40GB fit whole.
    for layout in (
        [f"gpu-0-mig-1g5gb-{i}" for i in range(7)],
        ["gpu-0-mig-4g20gb-0", "gpu-0-mig-3g20gb-4"],
        ["gpu-0-mig-3g20gb-0", "gpu-0-mig-3g20gb-4"],
        ["gpu-0-mig-2g10gb-0", "gpu-0-mig-2g10gb-2", "gpu-0-mig-2g10gb-4", "gpu-0-mig-1g5gb-6"],
        ["gpu-0-mig-3g20gb-0", "gpu-0-mig-2g10gb-4", "gpu-0-mig-1g5gb-6"],
    ):
        assert fits([by_name[n] for n in layout], sets), layout


def test_the_fake_api_server_takes_the_pool(fake_api: FakeApiServer, host: Path) -> None:
    inv = inventory(FakeNvml(a100_40gb(2)), host)
    client = fake_api.transport()
    try:
        publisher = SlicePublisher(client, driver=DRIVER, node=NODE)
        assert publisher.sync(inv.published(None), counter_sets=inv.counter_sets()) == 2
        # Nothing changed: nothing written, even forced (the stored pool is the same).
        assert publisher.sync(inv.published(None), counter_sets=inv.counter_sets(), force=True) == 0
    finally:
        client.close()
    stored = fake_api.objects.list("resourceslices")
    assert sorted(len(s["spec"].get("devices") or s["spec"]["sharedCounters"]) for s in stored) == [2, 30]
    assert pool_counter_problems(stored) == []


def test_counter_sets_have_slices_of_their_own_and_devices_64_a_slice(host: Path) -> None:
    inv = inventory(FakeNvml(a100_40gb(8)), host)
    got = pool_slices(
        inv.published(None), driver=DRIVER, node=NODE, generation=1, counter_sets=inv.counter_sets()
    )
    shapes = [(len(s["spec"].get("devices", [])), len(s["spec"].get("sharedCounters", []))) for s in got]
    assert shapes == [(64, 0), (56, 0), (0, 8)]
    assert all(s["spec"]["pool"]["resourceSliceCount"] == 3 for s in got)


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """The A100 host (with the driver's capability files of GPU instance 1, compute
    instance 0: the first instance the fake makes) and a DGX A100's eight GPUs on PCI."""
    root = tmp_path / "host"
    shutil.copytree(HOSTS / "gpu-a100-mig", root, symlinks=True)
    for minor, bus in enumerate(DGX_A100_BUSES):
        (root / f"sys/bus/pci/devices/0000:{bus.lower()}:00.0").mkdir(exist_ok=True)
        (root / f"dev/nvidia{minor}").touch()
    return root


def claim(uid: str, *devices: str) -> dict[str, Any]:
    results = [{"driver": DRIVER, "pool": NODE, "device": d, "request": "gpu"} for d in devices]
    return {"metadata": {"uid": uid}, "status": {"allocation": {"devices": {"results": results}}}}


def test_prepare_makes_the_mig_device_and_unprepare_destroys_it(host: Path, tmp_path: Path) -> None:
    nvml = FakeNvml(a100_40gb())
    inv = inventory(nvml, host)
    claims = {"c1": claim("u1", "gpu-0-mig-3g20gb-4"), "c2": claim("u2", "gpu-0-mig-1g5gb-5")}
    prep = preparer(inv, tmp_path, claims)
    prep.prepare("ns", "u1", "c1")
    gpu = nvml.snapshot().gpus[0]
    [made] = gpu.mig_devices
    assert (made.profile, made.gpu_instance_id, made.compute_instance_id) == ("3g.20gb", 1, 0)
    [spec] = [json.loads(p.read_text()) for p in (tmp_path / "cdi").glob("*.json")]
    [edits] = [d["containerEdits"] for d in spec["devices"]]
    assert f"NVIDIA_VISIBLE_DEVICES={made.uuid}" in edits["env"]
    paths = [n["path"] for n in edits["deviceNodes"]]
    assert "/dev/nvidia-caps/nvidia-cap12" in paths and "/dev/nvidia-caps/nvidia-cap13" in paths
    assert "/dev/nvidia0" in paths

    # A placement overlapping a made instance fails alone, with NVML's reason.
    with pytest.raises(
        ClaimError, match=r"claim ns/c2: device gpu-0-mig-1g5gb-5: creating MIG 1g.5gb at 5: "
    ):
        prep.prepare("ns", "u2", "c2")
    assert len(nvml.snapshot().gpus[0].mig_devices) == 1

    prep.unprepare("ns", "u1", "c1")
    assert nvml.snapshot().gpus[0].mig_devices == () and nvml.created[gpu.uuid] == {}
    prep.prepare("ns", "u2", "c2")  # the slices are free again
    assert [m.profile for m in nvml.snapshot().gpus[0].mig_devices] == ["1g.5gb"]
    prep.unprepare("ns", "u2", "c2")
    prep.unprepare("ns", "u2", "c2")  # kubelet retries: nothing left to destroy
    assert nvml.snapshot().gpus[0].mig_devices == ()
    prep.close()


def test_mig_mode_off_publishes_whole_gpus_without_counters() -> None:
    inv = inventory(FakeNvml(a100_40gb(mig_enabled=False)), HOSTS / "gpu-a100-mig")
    [gpu] = inv.published(None)
    assert "consumesCounters" not in gpu and inv.counter_sets() == []
    assert gpu["attributes"]["uuid"]["string"].startswith("GPU-")


def test_partitions_off_publish_no_placements() -> None:
    off = {**PARTITIONED, "gpu": {"vendor": "nvidia"}}
    inv = inventory(FakeNvml(a100_40gb()), HOSTS / "gpu-a100-mig", off)
    # As the device plugin does: a GPU in MIG mode is handed out as its MIG devices, of
    # which this one has none yet.
    assert inv.published(None) == [] and inv.counter_sets() == []


@pytest.mark.parametrize(
    ("resource", "message"),
    [
        (
            {**PARTITIONED, "servedBy": "devicePlugin"},
            r"resources\[0\]\.gpu: MIG partitions are served through DRA",
        ),
        (
            {**PARTITIONED, "gpu": {"vendor": "nvidia", "migPartitions": True, "migProfile": "1g.5gb"}},
            r"migPartitions: for vendor nvidia without migProfile",
        ),
        (
            {**PARTITIONED, "gpu": {"vendor": "amd", "migPartitions": True}},
            r"migPartitions: for vendor nvidia",
        ),
        (
            {**PARTITIONED, "gpu": {"vendor": "nvidia", "migPartitions": "yes"}},
            r"migPartitions: expected true or false",
        ),
    ],
)
def test_bad_partition_config_is_one_line(resource: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({"resources": [resource]}, KindRegistry((GpuKind(),)))


def preparer(inv: DraInventory, tmp_path: Path, claims: dict[str, dict[str, Any]]) -> Preparer:
    return Preparer(
        inv,
        driver=DRIVER,
        node=NODE,
        cdi_dir=tmp_path / "cdi",
        checkpoint_path=tmp_path / "checkpoint.json",
        read_claim=lambda _ns, name: claims[name],
    )


def counters(inv: DraInventory) -> dict[str, str]:
    [gpu_set] = inv.counter_sets()
    return {k: v["value"] for k, v in gpu_set["counters"].items()}


def test_an_instance_made_by_hand_is_taken_off_the_counters(
    host: Path, tmp_path: Path, fake_api: FakeApiServer
) -> None:
    nvml = FakeNvml(a100_40gb())
    gpu = nvml.snapshot().gpus[0].uuid
    nvml.create_mig(gpu, 9, 4)  # an admin's 3g.20gb on memory slices 4 to 7
    inv = inventory(nvml, host)
    prep = preparer(inv, tmp_path, {})
    assert inv.unclaimed() == ["gpu-0-mig-3g20gb-4"]
    got = counters(inv)
    assert [got[f"memory-slice-{i}"] for i in range(8)] == ["1"] * 4 + ["0"] * 4
    assert got["memory"] == f"{40192 - 19968}Mi" and got["multiprocessors"] == str(98 - 42)
    assert got["copy-engines"] == "4" and got["decoders"] == "3"
    # As the scheduler counts: what fits beside the admin's instance, and what does not.
    by_name = {d["name"]: d for d in inv.published(None)}
    sets = inv.counter_sets()
    assert fits([by_name["gpu-0-mig-3g20gb-0"]], sets)
    assert not fits([by_name["gpu-0-mig-1g5gb-4"]], sets) and not fits([by_name["gpu-0"]], sets)
    client = fake_api.transport()  # the API server takes counters at 0
    try:
        assert (
            SlicePublisher(client, driver=DRIVER, node=NODE).sync(inv.published(None), counter_sets=sets) == 2
        )
    finally:
        client.close()
    assert pool_counter_problems(fake_api.objects.list("resourceslices")) == []
    prep.close()


def test_a_restart_takes_back_what_a_prepared_claim_made(host: Path, tmp_path: Path) -> None:
    nvml = FakeNvml(a100_40gb())
    claims = {"c1": claim("u1", "gpu-0-mig-3g20gb-4"), "c2": claim("u2", "gpu-0-mig-1g5gb-0")}
    prep = preparer(inventory(nvml, host), tmp_path, claims)
    prep.prepare("ns", "u1", "c1")

    # Died between making the second claim's instance and writing its CDI spec: its
    # checkpoint file, written first, has it on record.
    def died(*_a: object) -> None:
        raise KeyboardInterrupt  # as a kill: no undo runs

    prep._write_spec = died  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        prep.prepare("ns", "u2", "c2")
    assert sorted(m.profile for m in nvml.snapshot().gpus[0].mig_devices) == ["1g.5gb", "3g.20gb"]

    # The new process: a fresh discovery sees both instances, the checkpoint names both.
    inv = inventory(nvml, host)
    again = preparer(inv, tmp_path, claims)
    assert inv.unclaimed() == [] and counters(inv)["memory-slice-0"] == "1"
    creates = nvml.calls.count("create_mig")
    assert again.prepare("ns", "u1", "c1") == prep.claims["u1"].devices  # answered from the checkpoint
    # The second claim has no CDI spec: prepared again, on its own instance.
    devices = again.prepare("ns", "u2", "c2")
    assert nvml.calls.count("create_mig") == creates
    made = {m.profile: m.uuid for m in nvml.snapshot().gpus[0].mig_devices}
    spec = json.loads((tmp_path / "cdi" / "nfd-dra-u2.json").read_text())
    assert f"NVIDIA_VISIBLE_DEVICES={made['1g.5gb']}" in spec["devices"][0]["containerEdits"]["env"]
    assert [d.device_name for d in devices] == ["gpu-0-mig-1g5gb-0"]
    again.unprepare("ns", "u1", "c1")
    again.unprepare("ns", "u2", "c2")
    assert nvml.snapshot().gpus[0].mig_devices == ()
    again.close()


class SlowNvml(FakeNvml):
    """Creating or destroying the instance at memory slice 4 waits until ``go`` is set."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.go = threading.Event()
        self.waiting = threading.Event()

    def create_mig(self, gpu_uuid: str, profile_id: int, start: int) -> Any:
        if start == 4:
            self.waiting.set()
            assert self.go.wait(10)
        return super().create_mig(gpu_uuid, profile_id, start)

    def destroy_mig(self, gpu_uuid: str, profile_id: int, start: int) -> bool:
        if start == 4:
            self.waiting.set()
            assert self.go.wait(10)
        return super().destroy_mig(gpu_uuid, profile_id, start)


def test_making_an_instance_holds_up_no_other_claim(host: Path, tmp_path: Path) -> None:
    nvml = SlowNvml(a100_40gb())
    claims = {"slow": claim("u1", "gpu-0-mig-3g20gb-4"), "quick": claim("u2", "gpu-0-mig-1g5gb-0")}
    prep = preparer(inventory(nvml, host), tmp_path, claims)
    with ThreadPoolExecutor(3) as pool:
        slow = pool.submit(prep.prepare, "ns", "u1", "slow")
        assert nvml.waiting.wait(10)
        again = pool.submit(prep.prepare, "ns", "u1", "slow")  # kubelet's retry: waits for the first
        assert [d.device_name for d in prep.prepare("ns", "u2", "quick")] == ["gpu-0-mig-1g5gb-0"]
        assert not slow.done() and not again.done()
        nvml.go.set()
        assert slow.result(10) == again.result(10)
        assert nvml.calls.count("create_mig") == 2

        # Destroying it holds up no other claim either; the claim stays recorded until done.
        nvml.go.clear()
        nvml.waiting.clear()
        gone = pool.submit(prep.unprepare, "ns", "u1", "slow")
        assert nvml.waiting.wait(10)
        prep.unprepare("ns", "u2", "quick")
        assert "u1" in prep.claims and not gone.done()
        nvml.go.set()
        gone.result(10)
    assert prep.claims == {} and nvml.snapshot().gpus[0].mig_devices == ()
    prep.close()
