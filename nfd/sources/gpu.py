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
way it computes them, plus ``gpu-nvidia.*``, ``gpu-amd.*`` and ``gpu-intel.*`` in the
feature namespace. docs/accelerators.md is the reference.
"""

from __future__ import annotations

from nfd.chars import ALNUM, keep_only
from nfd.features import Features
from nfd.hostfiles import link_name, list_dir, read_line
from nfd.lazylog import get_logger
from nfd.sources.accel_sysfs import hex_id, numa_node, pci_functions

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (discover's path)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from nfd.config import GpuConfig, SourcesConfig
    from nfd.features import Instance, Labels
    from nfd.hostroot import HostPath, HostRoot
    from nfd.sources.accel_sysfs import PciFunction
    from nfd.sources.nvml import GpuInfo, Nvml, NvmlSnapshot

log = get_logger(__name__)

NVIDIA = "10de"
AMD = "1002"
INTEL = "8086"
# PCI classes that are GPUs: VGA, 3D controller, other display controller.
GPU_CLASSES = ("0300", "0302", "0380")
# AMD's Instinct MI300 parts are "processing accelerators" (class 1200).
AMD_GPU_CLASSES = (*GPU_CLASSES, "1200")
AMD_DRIVERS = frozenset({"amdgpu"})
INTEL_DRIVERS = frozenset({"i915", "xe"})

# nvmlDeviceArchitecture_t -> GFD's family names.
NVML_ARCHITECTURES: dict[int, str] = {
    2: "kepler",
    3: "maxwell",
    4: "pascal",
    5: "volta",
    6: "turing",
    7: "ampere",
    8: "ada-lovelace",
    9: "hopper",
    10: "blackwell",
}


def family(major: int, minor: int) -> str:
    """GFD's architecture family for a CUDA compute capability."""
    if major == 7:
        return "volta" if minor < 5 else "turing"
    if major == 8:
        return "ampere" if minor < 9 else "ada-lovelace"
    return {
        1: "tesla",
        2: "fermi",
        3: "kepler",
        5: "maxwell",
        6: "pascal",
        9: "hopper",
        10: "blackwell",
        12: "blackwell",
    }.get(major, "undefined")


def sanitise(part: str) -> str:
    """GFD's product-name cleaning: drop characters other than letters, digits, ``-_.``
    and space, then join the words with ``-`` ("NVIDIA H100 80GB HBM3" ->
    "NVIDIA-H100-80GB-HBM3")."""
    return "-".join(keep_only(part, ALNUM + "-_. ").split())


def _label_value(text: str) -> str:
    """Make a free-form value a valid label value (63 characters, alphanumeric ends)."""
    v = keep_only(text.replace(" ", "-"), ALNUM + "-_.")[:63]
    return v.strip("-_.")


# -- discovery ---------------------------------------------------------------------------


class GpuSource:
    """``nvml`` makes the NVML adapter; the default is the real one (pynvml)."""

    name = "gpu"

    def __init__(self, nvml: Callable[[], Nvml] | None = None) -> None:
        self.nvml = nvml
        # The last NVML failure reported, so that a worker re-discovering every minute
        # logs a missing driver once, not every pass.
        self._reported: str | None = None

    def _adapter(self) -> Nvml:
        if self.nvml is not None:
            return self.nvml()
        from nfd.sources.nvml import PynvmlAdapter

        return PynvmlAdapter()

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
        from nfd.sources.nvml import NvmlError, NvmlUnavailable

        adapter = self._adapter()
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
            out["nvidia.present"] = "true"
            out["nvidia.count"] = str(len(gpus))
            out["nvidia.com/gpu.present"] = "true"
            driver = features.attributes.get("gpu.nvidia_driver", {})
            if driver.get("nvml") == "true":
                out.update(gfd_labels(features, config.gpu))
        cards = features.instances.get("gpu.drm", [])
        out.update(
            _drm_vendor_labels(
                "amd", [c for c in cards if c.get("vendor") == AMD and c.get("driver") in AMD_DRIVERS]
            )
        )
        out.update(
            _drm_vendor_labels(
                "intel", [c for c in cards if c.get("vendor") == INTEL and c.get("driver") in INTEL_DRIVERS]
            )
        )
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


def drm_cards(host: HostRoot) -> list[Instance]:
    """Every ``/sys/class/drm/cardN`` (not its connectors) with its PCI identity."""
    drm = host.sys / "class" / "drm"
    out: list[Instance] = []
    names = [n for n in list_dir(drm) if n.startswith("card") and n[4:].isdecimal()]
    for name in sorted(names, key=lambda n: int(n[4:])):
        card = drm / name
        dev = card / "device"
        inst: Instance = {"card": name, "card_node": f"/dev/dri/{name}"}
        address = link_name(dev)
        if address:
            inst["pci_address"] = address
        for key, width in (("vendor", 4), ("device", 4), ("subsystem_vendor", 4), ("subsystem_device", 4)):
            v = hex_id(read_line(dev / key), width)
            if v:
                inst[key] = v
        cls = hex_id(read_line(dev / "class"), 6)
        if cls:
            inst["class"] = cls[:4]
        driver = link_name(dev / "driver")
        if driver:
            inst["driver"] = driver
        renders = [n for n in list_dir(dev / "drm") if n.startswith("renderD")]
        if renders:
            inst["render_node"] = f"/dev/dri/{renders[0]}"
        raw_node = read_line(dev / "numa_node")
        if raw_node is not None and raw_node.lstrip("-").isdigit() and int(raw_node) >= 0:
            inst["numa_node"] = raw_node
        memory = _drm_memory_bytes(card, dev)
        if memory is not None:
            inst["memory"] = str(memory // (1024 * 1024))
        out.append(inst)
    return out


def _drm_memory_bytes(card: HostPath, dev: HostPath) -> int | None:
    """Device-local memory as sysfs shows it: amdgpu's ``mem_info_vram_total``; for Intel
    ``lmem_total_bytes`` (i915 builds that have it) or the sum of xe's per-tile
    ``physical_vram_size_bytes``. None when the driver does not say."""
    card_p, dev_p = card, dev
    for path in (dev_p / "mem_info_vram_total", card_p / "lmem_total_bytes", dev_p / "lmem_total_bytes"):
        v = _int(read_line(path))
        if v is not None:
            return v
    tiles = [
        _int(read_line(dev_p / t / "physical_vram_size_bytes"))
        for t in list_dir(dev_p)
        if t.startswith("tile")
    ]
    sizes = [t for t in tiles if t is not None]
    return sum(sizes) if sizes else None


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None


def _drm_vendor_labels(vendor: str, cards: list[Instance]) -> Labels:
    if not cards:
        return {}
    out = {f"{vendor}.present": "true", f"{vendor}.count": str(len(cards))}
    memories = {c.get("memory") for c in cards}
    if len(memories) == 1 and None not in memories:
        out[f"{vendor}.memory"] = str(memories.pop())
    return out


# -- GFD's labels ------------------------------------------------------------------------

_NS = "nvidia.com/"


def gfd_labels(features: Features, config: GpuConfig) -> Labels:
    """The labels NVIDIA's GPU feature discovery would write, from the raw features."""
    gpus = [g for g in features.instances.get("gpu.nvidia", []) if "uuid" in g]
    if not gpus:
        return {}
    driver = features.attributes.get("gpu.nvidia_driver", {})
    migs = features.instances.get("gpu.nvidia_mig", [])
    out: Labels = {}

    machine = features.attributes.get("gpu.machine", {}).get("product_name", "")
    out[_NS + "gpu.machine"] = _label_value(machine) or "unknown"

    # Versions: "cuda.driver-version" is the kernel driver's, "cuda.runtime-version" the
    # CUDA version that driver supports (GFD's naming).
    full = driver.get("driver_version", "")
    rev = driver.get("driver_revision", "")
    versions = {
        "cuda.driver-version.major": driver.get("driver_major", ""),
        "cuda.driver-version.minor": driver.get("driver_minor", ""),
        "cuda.driver-version.revision": rev,
        "cuda.driver-version.full": full,
        "cuda.runtime-version.major": driver.get("cuda_major", ""),
        "cuda.runtime-version.minor": driver.get("cuda_minor", ""),
        "cuda.runtime-version.full": driver.get("cuda_driver_version", ""),
        # GFD still writes its older names too.
        "cuda.driver.major": driver.get("driver_major", ""),
        "cuda.driver.minor": driver.get("driver_minor", ""),
        "cuda.driver.rev": rev,
        "cuda.runtime.major": driver.get("cuda_major", ""),
        "cuda.runtime.minor": driver.get("cuda_minor", ""),
    }
    out.update({_NS + k: v for k, v in versions.items() if v})

    out[_NS + "mig.capable"] = str(any(g.get("mig_capable") == "true" for g in gpus)).lower()
    out[_NS + "mps.capable"] = "false"
    classes = {g.get("class") for g in gpus}
    out[_NS + "gpu.mode"] = (
        "graphics" if classes == {"0300"} else "compute" if classes == {"0302"} else "unknown"
    )

    # Full-GPU labels: GFD labels each model; with several models on one node the one
    # with most GPUs wins here (GFD's pick is arbitrary). GPUs without MIG override
    # MIG-enabled ones, as in GFD.
    mig_on = [g for g in gpus if g.get("mig_enabled") == "true"]
    full_gpus = [g for g in gpus if g.get("mig_enabled") != "true"]
    if mig_on:
        out.update(_full_gpu_labels(mig_on, gpus, replicas=0))
    if full_gpus:
        out.update(_full_gpu_labels(full_gpus, gpus, replicas=config.replicas))

    if config.mig_strategy != "none":
        out[_NS + "mig.strategy"] = config.mig_strategy
        if config.mig_strategy == "single":
            out.update(_mig_single(mig_on, full_gpus, migs, config.replicas))
        else:
            out.update(_mig_mixed(migs, config.replicas))
    return out


def _most_common_model(gpus: list[Instance]) -> tuple[str, list[Instance]]:
    names = [g.get("name", "") for g in gpus]
    top = max(names.count(n) for n in names)
    # Ties go to the model of the lowest-indexed GPU: gpus are in NVML index order.
    name = next(n for n in names if names.count(n) == top)
    return name, [g for g in gpus if g.get("name", "") == name]


def _resource_labels(resource: str, *, count: int, replicas: int, parts: Iterable[str]) -> Labels:
    shared = replicas > 1
    product_parts = [sanitise(p) for p in parts if p]
    if shared:
        product_parts.append("SHARED")
    out = {
        f"{resource}.count": str(count),
        f"{resource}.replicas": str(replicas),
        f"{resource}.sharing-strategy": "time-slicing" if shared else "none",
    }
    if product_parts:
        out[f"{resource}.product"] = "-".join(product_parts)
    return out


def _full_gpu_labels(group: list[Instance], every: list[Instance], *, replicas: int) -> Labels:
    name, same = _most_common_model(group)
    if len({g.get("name") for g in every}) > 1:
        log.debug("several GPU models on this node; labels describe %s", name)
    first = same[0]
    res = _NS + "gpu"
    # GFD counts every GPU of the model, with MIG on or off.
    count = sum(1 for g in every if g.get("name", "") == name)
    out = _resource_labels(res, count=count, replicas=replicas, parts=[name])
    if first.get("memory", "0") != "0":
        out[f"{res}.memory"] = first["memory"]
    if "compute_major" in first and first["compute_major"] != "0":
        out[f"{res}.family"] = first.get("family", "undefined")
        out[f"{res}.compute.major"] = first["compute_major"]
        out[f"{res}.compute.minor"] = first["compute_minor"]
    return out


_MIG_ATTRIBUTES = (
    ("memory", "memory"),
    ("multiprocessors", "multiprocessors"),
    ("slices.gi", "gi_slices"),
    ("slices.ci", "ci_slices"),
    ("engines.copy", "copy_engines"),
    ("engines.decoder", "decoders"),
    ("engines.encoder", "encoders"),
    ("engines.jpeg", "jpegs"),
    ("engines.ofa", "ofas"),
)


def _mig_resource(resource: str, migs: list[Instance], replicas: int) -> Labels:
    first = migs[0]
    out = _resource_labels(
        resource,
        count=len(migs),
        replicas=replicas,
        parts=[first.get("parent_name", ""), "MIG", first.get("profile", "")],
    )
    for label, key in _MIG_ATTRIBUTES:
        if key in first:
            out[f"{resource}.{label}"] = first[key]
    return out


def _mig_single(
    mig_on: list[Instance], full_gpus: list[Instance], migs: list[Instance], replicas: int
) -> Labels:
    if not mig_on:
        return {}  # no MIG-enabled GPU: the same as strategy none
    on_uuids = {g["uuid"] for g in mig_on}
    with_migs = {m.get("parent_uuid") for m in migs}
    profiles = {m.get("profile") for m in migs if m.get("parent_uuid") in on_uuids}
    reason = ""
    if on_uuids - with_migs:
        reason = "at least one MIG-enabled GPU has no MIG devices"
    elif full_gpus:
        reason = "GPUs with MIG enabled and disabled on one node"
    elif len(profiles) != 1:
        reason = "more than one MIG profile on the node"
    if reason:
        log.warning("mig-strategy single does not fit this node: %s", reason)
        res = _NS + "gpu"
        return {
            f"{res}.product": "-".join([sanitise(mig_on[0].get("name", "")), "MIG", "INVALID"]),
            f"{res}.count": "0",
            f"{res}.replicas": "0",
            f"{res}.memory": "0",
        }
    return _mig_resource(_NS + "gpu", migs, replicas)


def _mig_mixed(migs: list[Instance], replicas: int) -> Labels:
    by_profile: dict[str, list[Instance]] = {}
    for m in migs:
        by_profile.setdefault(m.get("profile", ""), []).append(m)
    out: Labels = {}
    for profile, group in sorted(by_profile.items()):
        if profile:
            # "+" (in "1g.10gb+me") cannot be part of a label name: it becomes ".".
            out.update(_mig_resource(f"{_NS}mig-{profile.replace('+', '.')}", group, replicas))
    return out
