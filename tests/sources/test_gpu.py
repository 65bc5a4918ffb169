"""The gpu source: NVIDIA through a fake NVML over fixture sysfs trees, AMD/Intel from DRM,
and the no-NVML path."""

from __future__ import annotations

import logging
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from nfd.config import GpuConfig, SourcesConfig, WorkerConfig
from nfd.features import Features
from nfd.hostroot import HostRoot
from nfd.hw.nvml import NvmlError, NvmlSnapshot, NvmlUnavailable
from nfd.hw.nvml_fake import FakeNvml, a100_mig, h100x8, t4
from nfd.hw.nvml_pynvml import PynvmlAdapter
from nfd.labels import node_labels
from nfd.settings import ConfigError, from_mapping
from nfd.sources import default_registry
from nfd.sources.gpu import GpuSource
from nfd.sources.gpu_gfd import family, sanitise

HOSTS = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
REPO = Path(__file__).resolve().parents[2]


def host(name: str) -> HostRoot:
    return HostRoot.under(HOSTS / name)


def run(name: str, nvml: FakeNvml, gpu: GpuConfig | None = None) -> tuple[Features, dict[str, str]]:
    src = GpuSource(nvml=lambda: nvml)
    cfg = SourcesConfig(gpu=gpu or GpuConfig())
    feats = src.discover(host(name), cfg)
    return feats, src.labels(feats, cfg)


def test_h100_node_gets_gfd_labels() -> None:
    feats, labels = run("gpu-h100x8", FakeNvml(h100x8()))
    assert labels == {
        "nvidia.present": "true",
        "nvidia.count": "8",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.machine": "DGX-H100",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.compute.major": "9",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/cuda.driver-version.major": "550",
        "nvidia.com/cuda.driver-version.minor": "54",
        "nvidia.com/cuda.driver-version.revision": "15",
        "nvidia.com/cuda.driver-version.full": "550.54.15",
        "nvidia.com/cuda.runtime-version.major": "12",
        "nvidia.com/cuda.runtime-version.minor": "4",
        "nvidia.com/cuda.runtime-version.full": "12.4",
        "nvidia.com/cuda.driver.major": "550",
        "nvidia.com/cuda.driver.minor": "54",
        "nvidia.com/cuda.driver.rev": "15",
        "nvidia.com/cuda.runtime.major": "12",
        "nvidia.com/cuda.runtime.minor": "4",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mps.capable": "false",
    }
    # The BMC's VGA is a DRM card but neither AMD nor Intel: no labels of its own.
    assert [c["driver"] for c in feats.instances["gpu.drm"]] == ["ast"]


def test_h100_raw_features_join_nvml_and_sysfs() -> None:
    feats, _ = run("gpu-h100x8", FakeNvml(h100x8()))
    gpus = feats.instances["gpu.nvidia"]
    # NVSwitches (class 0680) are not GPUs.
    assert len(gpus) == 8
    assert [g["index"] for g in gpus] == [str(i) for i in range(8)]
    first, last = gpus[0], gpus[7]
    assert first["pci_address"] == "0000:18:00.0"
    assert first["numa_node"] == "0" and last["numa_node"] == "1"
    assert last["pci_address"] == "0000:db:00.0"
    assert first["uuid"].startswith("GPU-")
    assert first["name"] == "NVIDIA H100 80GB HBM3"
    assert (first["memory"], first["compute_major"], first["compute_minor"]) == ("81559", "9", "0")
    assert (first["family"], first["architecture"]) == ("hopper", "hopper")
    assert (first["device"], first["class"], first["driver"]) == ("2330", "0302", "nvidia")
    assert first["mig_capable"] == "true" and first["mig_enabled"] == "false"
    assert "gpu.nvidia_mig" not in feats.instances
    assert feats.attributes["gpu.nvidia_driver"] == {
        "nvml": "true",
        "driver_version": "550.54.15",
        "driver_major": "550",
        "driver_minor": "54",
        "driver_revision": "15",
        "cuda_driver_version": "12.4",
        "cuda_major": "12",
        "cuda_minor": "4",
    }
    assert feats.attributes["gpu.machine"] == {"product_name": "DGX H100"}


def test_replicas_mark_the_product_shared() -> None:
    _, labels = run("gpu-h100x8", FakeNvml(h100x8()), GpuConfig(replicas=4))
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-SHARED"
    assert labels["nvidia.com/gpu.replicas"] == "4"
    assert labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    assert labels["nvidia.com/gpu.count"] == "8"


def test_t4_is_turing_without_numa_or_mig() -> None:
    feats, labels = run("gpu-t4", FakeNvml(t4()))
    (gpu,) = feats.instances["gpu.nvidia"]
    assert gpu["pci_address"] == "0000:00:1e.0"
    assert "numa_node" not in gpu  # sysfs says -1
    assert labels["nvidia.com/gpu.product"] == "Tesla-T4"
    assert labels["nvidia.com/gpu.family"] == "turing"
    assert (labels["nvidia.com/gpu.compute.major"], labels["nvidia.com/gpu.compute.minor"]) == ("7", "5")
    assert labels["nvidia.com/gpu.memory"] == "15360"
    assert labels["nvidia.com/gpu.machine"] == "g4dn.xlarge"
    assert labels["nvidia.com/mig.capable"] == "false"
    assert labels["nvidia.com/cuda.driver-version.full"] == "535.183.01"
    assert labels["nvidia.com/cuda.runtime-version.full"] == "12.2"
    assert "nvidia.com/mig.strategy" not in labels


def test_a100_mig_raw_features() -> None:
    feats, _ = run("gpu-a100-mig", FakeNvml(a100_mig()))
    migs = feats.instances["gpu.nvidia_mig"]
    assert len(migs) == 12
    profiles = sorted(m["profile"] for m in migs)
    assert profiles == ["1g.10gb"] * 11 + ["3g.40gb"]
    big = next(m for m in migs if m["profile"] == "3g.40gb")
    assert big["memory"] == "40192" and big["multiprocessors"] == "42" and big["gi_slices"] == "3"
    assert big["parent_index"] == "0" and big["uuid"].startswith("MIG-")
    gpus = feats.instances["gpu.nvidia"]
    assert [g["mig_devices"] for g in gpus] == ["5", "7"]
    assert [g["numa_node"] for g in gpus] == ["0", "1"]


def test_a100_mig_mixed_strategy() -> None:
    _, labels = run("gpu-a100-mig", FakeNvml(a100_mig()), GpuConfig(mig_strategy="mixed"))
    assert labels["nvidia.com/mig.strategy"] == "mixed"
    assert labels["nvidia.com/mig.capable"] == "true"
    # Full-GPU labels of MIG-enabled GPUs carry no sharing.
    assert labels["nvidia.com/gpu.count"] == "2"
    assert labels["nvidia.com/gpu.replicas"] == "0"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert labels["nvidia.com/gpu.family"] == "ampere"
    assert labels["nvidia.com/gpu.machine"] == "ProLiant-XL675d-Gen10-Plus"
    small = {k: v for k, v in labels.items() if k.startswith("nvidia.com/mig-1g.10gb.")}
    assert small == {
        "nvidia.com/mig-1g.10gb.count": "11",
        "nvidia.com/mig-1g.10gb.replicas": "1",
        "nvidia.com/mig-1g.10gb.sharing-strategy": "none",
        "nvidia.com/mig-1g.10gb.product": "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb",
        "nvidia.com/mig-1g.10gb.memory": "9728",
        "nvidia.com/mig-1g.10gb.multiprocessors": "14",
        "nvidia.com/mig-1g.10gb.slices.gi": "1",
        "nvidia.com/mig-1g.10gb.slices.ci": "1",
        "nvidia.com/mig-1g.10gb.engines.copy": "1",
        "nvidia.com/mig-1g.10gb.engines.decoder": "0",
        "nvidia.com/mig-1g.10gb.engines.encoder": "0",
        "nvidia.com/mig-1g.10gb.engines.jpeg": "0",
        "nvidia.com/mig-1g.10gb.engines.ofa": "0",
    }
    assert labels["nvidia.com/mig-3g.40gb.count"] == "1"
    assert labels["nvidia.com/mig-3g.40gb.engines.decoder"] == "2"


def test_a100_mig_single_strategy() -> None:
    uniform = a100_mig((["1g.10gb"] * 7, ["1g.10gb"] * 7))
    _, labels = run("gpu-a100-mig", FakeNvml(uniform), GpuConfig(mig_strategy="single"))
    assert labels["nvidia.com/mig.strategy"] == "single"
    assert labels["nvidia.com/gpu.count"] == "14"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"
    assert labels["nvidia.com/gpu.memory"] == "9728"
    assert labels["nvidia.com/gpu.replicas"] == "1"
    assert labels["nvidia.com/gpu.slices.gi"] == "1"
    assert not any(k.startswith("nvidia.com/mig-") for k in labels)


def test_a100_mig_single_strategy_with_two_profiles_is_invalid(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        _, labels = run("gpu-a100-mig", FakeNvml(a100_mig()), GpuConfig(mig_strategy="single"))
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-INVALID"
    assert (
        labels["nvidia.com/gpu.count"],
        labels["nvidia.com/gpu.replicas"],
        labels["nvidia.com/gpu.memory"],
    ) == (
        "0",
        "0",
        "0",
    )
    assert "more than one MIG profile" in caplog.text


def test_single_strategy_with_mig_and_full_gpus_is_invalid() -> None:
    mixed = a100_mig((["1g.10gb"] * 7, []))
    _, labels = run("gpu-a100-mig", FakeNvml(mixed), GpuConfig(mig_strategy="single"))
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-INVALID"


def test_one_gpu_with_mig_one_without() -> None:
    half = a100_mig((["1g.10gb"] * 7, []))
    _, labels = run("gpu-a100-mig", FakeNvml(half), GpuConfig(mig_strategy="mixed", replicas=2))
    # As GFD: the GPU without MIG gives the full-GPU labels (shared), counted with the other.
    assert labels["nvidia.com/gpu.count"] == "2"
    assert labels["nvidia.com/gpu.replicas"] == "2"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-SHARED"
    assert labels["nvidia.com/mig-1g.10gb.count"] == "7"
    assert labels["nvidia.com/mig-1g.10gb.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-SHARED"


def test_without_nvml_labels_come_from_pci_and_one_line_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNvml(unavailable="NVML cannot start: NVML Shared Library Not Found")
    src = GpuSource(nvml=lambda: fake)
    cfg = SourcesConfig()
    with caplog.at_level(logging.DEBUG, logger="nfd"):
        feats = src.discover(host("gpu-t4"), cfg)
        again = src.discover(host("gpu-t4"), cfg)  # a worker's next pass
    assert feats == again
    assert src.labels(feats, cfg) == {
        "nvidia.present": "true",
        "nvidia.count": "1",
        "nvidia.com/gpu.present": "true",
    }
    (gpu,) = feats.instances["gpu.nvidia"]
    assert gpu == {
        "pci_address": "0000:00:1e.0",
        "class": "0302",
        "vendor": "10de",
        "device": "1eb8",
        "subsystem_vendor": "10de",
        "subsystem_device": "12a2",
        "driver": "nvidia",
    }
    assert feats.attributes["gpu.nvidia_driver"]["nvml"] == "false"
    lines = [r for r in caplog.records if r.name.startswith("nfd")]
    assert len(lines) == 1
    assert "Shared Library Not Found" in lines[0].getMessage()


def test_nvml_failing_midway_is_reported_and_pci_facts_stay(caplog: pytest.LogCaptureFixture) -> None:
    class Lost(FakeNvml):
        def snapshot(self) -> NvmlSnapshot:
            raise NvmlError("GPU is lost")

    with caplog.at_level(logging.WARNING):
        feats, labels = run("gpu-h100x8", Lost())
    assert labels["nvidia.count"] == "8"
    assert not any(k.startswith("nvidia.com/gpu.product") for k in labels)
    assert feats.attributes["gpu.nvidia_driver"] == {"nvml": "false", "nvml_error": "GPU is lost"}
    assert caplog.text.count("GPU is lost") == 1


def test_a_misbehaving_binding_costs_only_the_nvml_facts(caplog: pytest.LogCaptureFixture) -> None:
    class Odd(FakeNvml):
        def snapshot(self) -> NvmlSnapshot:
            raise AttributeError("module 'pynvml' has no attribute 'nvmlDeviceGetMigMode'")

    with caplog.at_level(logging.WARNING):
        feats, labels = run("gpu-h100x8", Odd())
    assert labels["nvidia.count"] == "8"
    assert feats.attributes["gpu.nvidia_driver"]["nvml_error"].startswith("AttributeError: ")
    assert caplog.text.count("nvmlDeviceGetMigMode") == 1


def test_nvml_recovering_is_noticed(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNvml(h100x8(), unavailable="Driver Not Loaded")
    src = GpuSource(nvml=lambda: fake)
    with caplog.at_level(logging.INFO, logger="nfd"):
        assert (
            src.discover(host("gpu-h100x8"), SourcesConfig()).attributes["gpu.nvidia_driver"]["nvml"]
            == "false"
        )
        fake.unavailable = None
        feats = src.discover(host("gpu-h100x8"), SourcesConfig())
    assert feats.attributes["gpu.nvidia_driver"]["nvml"] == "true"
    assert "answers again" in caplog.text


def test_a_node_without_gpus_has_no_gpu_features(tmp_path: Path) -> None:
    fake = FakeNvml(h100x8())
    src = GpuSource(nvml=lambda: fake)
    feats = src.discover(HostRoot.under(tmp_path), SourcesConfig())
    assert feats.names() == set()
    assert src.labels(feats, SourcesConfig()) == {}
    assert fake.calls == []


def test_no_nvidia_gpu_means_nvml_is_not_asked() -> None:
    fake = FakeNvml(h100x8())
    feats, labels = run("gpu-amd-mi300", fake)
    assert fake.calls == []
    assert "gpu.nvidia" not in feats.instances
    assert not any(k.startswith("nvidia") for k in labels)


def test_nvml_off_in_config_keeps_pci_facts() -> None:
    fake = FakeNvml(h100x8())
    _, labels = run("gpu-h100x8", fake, GpuConfig(nvml=False))
    assert fake.calls == []
    assert labels == {"nvidia.present": "true", "nvidia.count": "8", "nvidia.com/gpu.present": "true"}


# -- AMD and Intel from DRM ----------------------------------------------------------------


def test_amd_mi300() -> None:
    feats, labels = run("gpu-amd-mi300", FakeNvml())
    cards = feats.instances["gpu.drm"]
    assert [c["card"] for c in cards] == ["card0", "card1", "card2"]
    mi = cards[1]
    assert mi == {
        "card": "card1",
        "card_node": "/dev/dri/card1",
        "render_node": "/dev/dri/renderD128",
        "pci_address": "0000:1b:00.0",
        "vendor": "1002",
        "device": "74a1",
        "subsystem_vendor": "1002",
        "subsystem_device": "74a1",
        "class": "1200",
        "driver": "amdgpu",
        "numa_node": "0",
        "memory": "196288",
    }
    assert cards[2]["numa_node"] == "1"
    assert labels == {"amd.present": "true", "amd.count": "2", "amd.memory": "196288"}


def test_amd_mi250_gcds_are_cards() -> None:
    _, labels = run("gpu-amd-mi250", FakeNvml())
    assert labels == {"amd.present": "true", "amd.count": "2", "amd.memory": "65520"}


def test_intel_flex_on_i915() -> None:
    feats, labels = run("gpu-intel-flex", FakeNvml())
    flex = [c for c in feats.instances["gpu.drm"] if c.get("vendor") == "8086"]
    assert [c["device"] for c in flex] == ["56c0", "56c0"]
    assert [c["render_node"] for c in flex] == ["/dev/dri/renderD128", "/dev/dri/renderD129"]
    assert labels == {"intel.present": "true", "intel.count": "2", "intel.memory": "16384"}


def test_intel_arc_on_xe_and_an_igpu() -> None:
    feats, labels = run("gpu-intel-arc", FakeNvml())
    igpu, arc = feats.instances["gpu.drm"]
    assert (igpu["driver"], arc["driver"]) == ("i915", "xe")
    assert "memory" not in igpu  # shared system memory: sysfs shows no total
    assert arc["memory"] == "16368"
    # Cards differ in memory: no memory label rather than a wrong one.
    assert labels == {"intel.present": "true", "intel.count": "2"}


# -- whole pipeline, names qualified --------------------------------------------------------


def test_labels_through_the_label_pipeline() -> None:
    registry = default_registry()
    assert registry.names().index("gpu") == registry.names().index("pci") + 1
    gpu = GpuSource(nvml=lambda: FakeNvml(h100x8()))
    cfg = WorkerConfig()
    feats = gpu.discover(host("gpu-h100x8"), cfg.sources)
    result = node_labels([gpu], feats, cfg)
    assert result.rejected == {}
    assert result.labels["feature.node.kubernetes.io/gpu-nvidia.present"] == "true"
    assert result.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    amd = GpuSource(nvml=lambda: FakeNvml())
    feats = amd.discover(host("gpu-amd-mi300"), cfg.sources)
    assert node_labels([amd], feats, cfg).labels == {
        "feature.node.kubernetes.io/gpu-amd.present": "true",
        "feature.node.kubernetes.io/gpu-amd.count": "2",
        "feature.node.kubernetes.io/gpu-amd.memory": "196288",
    }


def test_cli_on_a_node_without_nvml_logs_one_line() -> None:
    # The real adapter on this machine: no libnvidia-ml, so NVML cannot start.
    proc = subprocess.run(
        [sys.executable, "-m", "nfd", "discover", "--host-root", str(HOSTS / "gpu-t4"), "--sources", "gpu"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "feature.node.kubernetes.io/gpu-nvidia.count=1",
        "feature.node.kubernetes.io/gpu-nvidia.present=true",
        "nvidia.com/gpu.present=true",
    ]
    nvml_lines = [line for line in proc.stderr.splitlines() if "NVML" in line]
    assert len(nvml_lines) == 1, proc.stderr


# -- pure parts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cc", "name"),
    [
        ((3, 7), "kepler"),
        ((5, 2), "maxwell"),
        ((6, 0), "pascal"),
        ((7, 0), "volta"),
        ((7, 2), "volta"),
        ((7, 5), "turing"),
        ((8, 0), "ampere"),
        ((8, 6), "ampere"),
        ((8, 9), "ada-lovelace"),
        ((9, 0), "hopper"),
        ((10, 0), "blackwell"),
        ((12, 0), "blackwell"),
        ((11, 0), "undefined"),
    ],
)
def test_family_from_compute_capability(cc: tuple[int, int], name: str) -> None:
    assert family(*cc) == name


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("NVIDIA H100 80GB HBM3", "NVIDIA-H100-80GB-HBM3"),
        ("Tesla V100-SXM2-16GB", "Tesla-V100-SXM2-16GB"),
        ("NVIDIA GeForce RTX 4090", "NVIDIA-GeForce-RTX-4090"),
        ("NVIDIA A100 (80GB)  PCIe", "NVIDIA-A100-80GB-PCIe"),
        ("NVIDIA RTX A6000 / Quadro", "NVIDIA-RTX-A6000-Quadro"),
    ],
)
def test_product_name_is_cleaned_as_gfd_does(raw: str, clean: str) -> None:
    assert sanitise(raw) == clean


def test_gpu_config_from_file_keys() -> None:
    warnings: list[str] = []
    cfg = from_mapping(
        WorkerConfig,
        {"sources": {"gpu": {"migStrategy": "mixed", "replicas": 2, "nvml": False}}},
        warnings=warnings,
    )
    assert cfg.sources.gpu == GpuConfig(nvml=False, mig_strategy="mixed", replicas=2)
    assert warnings == []
    with pytest.raises(ConfigError, match="migStrategy"):
        from_mapping(WorkerConfig, {"sources": {"gpu": {"migStrategy": "half"}}}, warnings=[])
    with pytest.raises(ConfigError, match="replicas"):
        from_mapping(WorkerConfig, {"sources": {"gpu": {"replicas": "two"}}}, warnings=[])
    with pytest.raises(ConfigError, match="replicas"):
        from_mapping(WorkerConfig, {"sources": {"gpu": {"replicas": 0}}}, warnings=[])


def test_real_adapter_without_libnvidia_ml_is_unavailable() -> None:
    adapter = PynvmlAdapter()
    with pytest.raises(NvmlUnavailable, match="NVML cannot start"):
        adapter.snapshot()
    adapter.close()


def test_fake_unavailable_matches_the_protocol() -> None:
    fake = FakeNvml(unavailable="no driver")
    with pytest.raises(NvmlUnavailable):
        fake.snapshot()
    assert replace(h100x8()).gpus[3].sysfs_address == "0000:5d:00.0"


@pytest.mark.parametrize(
    ("product", "label"),
    [
        ("DGX H100", "DGX-H100"),
        ("ProLiant DL380 Gen10 (P20174-B21)", "ProLiant-DL380-Gen10-P20174-B21"),
        ("Standard PC (Q35 + ICH9, 2009)", "Standard-PC-Q35--ICH9-2009"),
        ("x" * 80, "x" * 63),
    ],
)
def test_machine_label_is_a_valid_label_value(product: str, label: str) -> None:
    feats, _ = run("gpu-t4", FakeNvml(t4()))
    feats.set_attributes("gpu.machine", {"product_name": product})
    assert GpuSource().labels(feats, SourcesConfig())["nvidia.com/gpu.machine"] == label


def test_machine_is_unknown_without_dmi(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "host"
    shutil.copytree(HOSTS / "gpu-t4", root, symlinks=True)
    shutil.rmtree(root / "sys/class/dmi")
    src = GpuSource(nvml=lambda: FakeNvml(t4()))
    feats = src.discover(HostRoot.under(root), SourcesConfig())
    assert "gpu.machine" not in feats.attributes
    assert src.labels(feats, SourcesConfig())["nvidia.com/gpu.machine"] == "unknown"


def test_every_mig_label_passes_the_label_policy() -> None:
    gpu = GpuSource(nvml=lambda: FakeNvml(a100_mig()))
    cfg = WorkerConfig(sources=SourcesConfig(gpu=GpuConfig(mig_strategy="mixed")))
    feats = gpu.discover(host("gpu-a100-mig"), cfg.sources)
    result = node_labels([gpu], feats, cfg)
    assert result.rejected == {}
    assert result.labels["nvidia.com/mig-3g.40gb.product"] == "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb"


def test_media_extension_profiles_get_valid_label_names() -> None:
    snap = a100_mig((["1g.10gb"] * 7, ["1g.10gb"] * 7))
    gpu0 = snap.gpus[0]
    migs = tuple(replace(m, profile="1g.10gb+me") if m.index == 0 else m for m in gpu0.mig_devices)
    snap = replace(snap, gpus=(replace(gpu0, mig_devices=migs), snap.gpus[1]))
    gpu = GpuSource(nvml=lambda: FakeNvml(snap))
    cfg = WorkerConfig(sources=SourcesConfig(gpu=GpuConfig(mig_strategy="mixed")))
    result = node_labels([gpu], gpu.discover(host("gpu-a100-mig"), cfg.sources), cfg)
    assert result.rejected == {}
    assert result.labels["nvidia.com/mig-1g.10gb.me.count"] == "1"
    assert result.labels["nvidia.com/mig-1g.10gb.count"] == "13"


def test_sysfs_without_modalias_reads_the_separate_files(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "host"
    shutil.copytree(HOSTS / "gpu-h100x8", root, symlinks=True)
    for f in root.glob("sys/bus/pci/devices/*/modalias"):
        f.unlink()
    fake = FakeNvml(h100x8())
    src = GpuSource(nvml=lambda: fake)
    assert src.discover(HostRoot.under(root), SourcesConfig()) == run("gpu-h100x8", FakeNvml(h100x8()))[0]
