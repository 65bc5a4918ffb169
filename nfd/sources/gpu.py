"""The gpu feature source: NVIDIA GPUs through NVML (with PCI/sysfs facts when NVML is
not there), and every DRM card (AMD, Intel, others) from /sys/class/drm.

Raw features (all in the ``gpu`` domain):

- ``gpu.nvidia`` (instances): one per NVIDIA display-class PCI function, enriched with
  NVML's view when NVML answers (index, uuid, name, memory, compute capability ...).
- ``gpu.nvidia_mig`` (instances): one per MIG device of a MIG-enabled GPU.
- ``gpu.nvidia_driver`` (attributes): whether NVML answered, driver and CUDA versions.
- ``gpu.drm`` (instances): one per ``/sys/class/drm/cardN`` with its PCI identity, driver,
  device nodes and memory where sysfs shows it.
- ``gpu.machine`` (attributes): the DMI product name (GFD's ``gpu.machine``).

Labels: NVIDIA's GPU feature discovery names (``nvidia.com/gpu.product`` ...) computed the
way it computes them (:mod:`nfd.sources.gpu_gfd`), plus ``gpu-nvidia.*``, ``gpu-amd.*``
and ``gpu-intel.*`` in the feature namespace (the DRM cards: :mod:`nfd.hw.drm`).
docs/accelerators.md is the reference.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from nfd.features import Features
from nfd.hostfiles import read_line
from nfd.hw.accel_ids import GPU_CLASSES
from nfd.hw.accel_pci import numa_node, pci_functions, presence_labels
from nfd.hw.drm import drm_cards, drm_labels

if TYPE_CHECKING:
    from collections.abc import Callable

    from nfd.config import GpuConfig, SourcesConfig
    from nfd.features import Instance, Labels
    from nfd.hostroot import HostRoot
    from nfd.hw.accel_pci import PciFunction
    from nfd.hw.nvml import GpuInfo, Nvml, NvmlSnapshot

log = logging.getLogger(__name__)

NVIDIA = "10de"


# -- discovery ---------------------------------------------------------------------------


class GpuSource:
    """``nvml`` makes the NVML adapter; the default is the real one (pynvml)."""

    name = "gpu"

    def __init__(self, nvml: Callable[[], Nvml] | None = None) -> None:
        self.nvml = nvml
        # The last NVML failure reported, so that a worker re-discovering every minute
        # logs a missing driver once, not every pass.
        self._reported: str | None = None

    def discover(self, host: HostRoot, config: SourcesConfig) -> Features:
        pci = pci_functions(host, classes=GPU_CLASSES)
        nvidia_pci = [f for f in pci if f.vendor == NVIDIA]
        snapshot, problem = self._snapshot(config.gpu, bool(nvidia_pci))

        feats = Features()
        driver: dict[str, str] = {"nvml": "true" if snapshot is not None else "false"}
        if problem:
            driver["nvml_error"] = problem
        if snapshot is not None:
            driver.update(_driver_attributes(snapshot))
        if nvidia_pci or snapshot is not None:
            gpus, migs = _nvidia_instances(host, nvidia_pci, snapshot)
            feats.set_instances("gpu.nvidia", gpus)
            if migs:
                feats.set_instances("gpu.nvidia_mig", migs)
            feats.set_attributes("gpu.nvidia_driver", driver)
        # Nothing found, nothing said: a node without GPUs has no gpu features at all,
        # as upstream's feature set has none.
        cards = drm_cards(host)
        if cards:
            feats.set_instances("gpu.drm", cards)
        product = read_line(host.sys / "class" / "dmi" / "id" / "product_name") if nvidia_pci else None
        if product:
            feats.set_attributes("gpu.machine", {"product_name": product})
        return feats

    def _snapshot(self, config: GpuConfig, expected: bool) -> tuple[NvmlSnapshot | None, str]:
        # No NVIDIA GPU on PCI: NVML has nothing to say, and not loading it keeps
        # discovery fast on the many nodes without one.
        if not config.nvml or not expected:
            return None, ""
        from nfd.hw.nvml import NvmlError, NvmlUnavailable
        from nfd.hw.nvml_pynvml import open_adapter

        adapter = open_adapter(self.nvml)
        try:
            snap = adapter.snapshot()
        except (NvmlUnavailable, NvmlError) as e:
            return None, self._report(str(e))
        except Exception as e:  # a binding that behaves unexpectedly must not cost the PCI facts
            return None, self._report(f"{type(e).__name__}: {e}")
        finally:
            adapter.close()
        if self._reported is not None:
            log.info("NVML answers again (driver %s)", snap.driver_version)
            self._reported = None
        return snap, ""

    def _report(self, problem: str) -> str:
        # One line per distinct problem: a worker that re-discovers every minute on a
        # node whose driver is missing says so once.
        if problem != self._reported:
            log.warning("NVML not available, NVIDIA GPUs described from PCI facts only: %s", problem)
            self._reported = problem
        return problem

    # -- labels -------------------------------------------------------------------------
    def labels(self, features: Features, config: SourcesConfig) -> Labels:
        out: Labels = {}
        gpus = features.instances.get("gpu.nvidia", [])
        if gpus:
            out.update(presence_labels("nvidia", len(gpus)))
            out["nvidia.com/gpu.present"] = "true"
            driver = features.attributes.get("gpu.nvidia_driver", {})
            if driver.get("nvml") == "true":
                # Imported here: a node whose NVML does not answer (most nodes) never needs it.
                from nfd.sources.gpu_gfd import gfd_labels

                out.update(gfd_labels(features, config.gpu))
        out.update(drm_labels(features.instances.get("gpu.drm", [])))
        return out


def _driver_attributes(snap: NvmlSnapshot) -> dict[str, str]:
    parts = snap.driver_version.split(".")
    cuda_major, cuda_minor = snap.cuda_version
    out = {
        "driver_version": snap.driver_version,
        "driver_major": parts[0],
        "cuda_driver_version": f"{cuda_major}.{cuda_minor}",
        "cuda_major": str(cuda_major),
        "cuda_minor": str(cuda_minor),
    }
    if len(parts) > 1:
        out["driver_minor"] = parts[1]
    if len(parts) > 2:
        out["driver_revision"] = parts[2]
    return out


def _nvidia_instances(
    host: HostRoot, pci: list[PciFunction], snap: NvmlSnapshot | None
) -> tuple[list[Instance], list[Instance]]:
    by_address: dict[str, Instance] = {f.address: f.attributes() for f in pci}
    migs: list[Instance] = []
    for g in snap.gpus if snap is not None else ():
        if g.sysfs_address not in by_address:
            by_address[g.sysfs_address] = _nvml_only_pci(host, g)
        by_address[g.sysfs_address].update(_gpu_attributes(g))
        for m in g.mig_devices:
            migs.append(
                {
                    "parent_uuid": g.uuid,
                    "parent_index": str(g.index),
                    "parent_name": g.name,
                    "uuid": m.uuid,
                    "index": str(m.index),
                    "profile": m.profile,
                    "gpu_instance_id": str(m.gpu_instance_id),
                    "compute_instance_id": str(m.compute_instance_id),
                    "memory": str(m.memory_mib),
                    "multiprocessors": str(m.multiprocessors),
                    "gi_slices": str(m.gi_slices),
                    "ci_slices": str(m.ci_slices),
                    "copy_engines": str(m.copy_engines),
                    "decoders": str(m.decoders),
                    "encoders": str(m.encoders),
                    "jpegs": str(m.jpegs),
                    "ofas": str(m.ofas),
                }
            )
    # NVML's order (index) first, then GPUs NVML did not report, by address.
    gpus = sorted(
        by_address.values(), key=lambda i: (int(i.get("index", "1000000")), i.get("pci_address", ""))
    )
    return gpus, migs


def _nvml_only_pci(host: HostRoot, g: GpuInfo) -> Instance:
    """A GPU NVML reports but sysfs does not list (an odd container mount): what NVML
    says about its PCI identity."""
    inst: Instance = {"pci_address": g.sysfs_address, "vendor": NVIDIA}
    if g.pci_device_id:
        inst["device"] = f"{g.pci_device_id >> 16:04x}"
    node = numa_node(host, g.sysfs_address)
    if node is not None:
        inst["numa_node"] = str(node)
    return inst


def _gpu_attributes(g: GpuInfo) -> dict[str, str]:
    from nfd.sources.gpu_gfd import NVML_ARCHITECTURES, family, sanitise

    out = {
        "index": str(g.index),
        "uuid": g.uuid,
        "name": g.name,
        "product": sanitise(g.name),
        "memory": str(g.memory_mib),
        "minor": str(g.minor),
        "mig_capable": str(g.mig_capable).lower(),
        "mig_enabled": str(g.mig_enabled).lower(),
        "mig_devices": str(len(g.mig_devices)),
    }
    if g.compute is not None:
        out["compute_major"], out["compute_minor"] = str(g.compute[0]), str(g.compute[1])
        out["family"] = family(*g.compute)
    if g.architecture is not None:
        out["architecture"] = NVML_ARCHITECTURES.get(g.architecture, "unknown")
        out.setdefault("family", NVML_ARCHITECTURES.get(g.architecture, "undefined"))
    return out
