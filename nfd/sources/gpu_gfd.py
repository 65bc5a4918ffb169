"""NVIDIA's GPU feature discovery (GFD) naming: the ``nvidia.com/*`` labels as GFD computes
them from the gpu source's raw features (full GPUs, MIG devices under the ``single`` and
``mixed`` strategies, time-slicing replicas), and the names they are built from (product
names, architecture families). docs/accelerators.md is the reference."""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable

    from nfd.config import GpuConfig
    from nfd.features import Features, Instance, Labels

# Records go out under the gpu source's name: these are its labels.
log = logging.getLogger(__name__)

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
    return "-".join(re.sub(r"[^A-Za-z0-9_. -]", "", part).split())


def _label_value(text: str) -> str:
    """Make a free-form value a valid label value (63 characters, alphanumeric ends)."""
    v = re.sub(r"[^A-Za-z0-9_.-]", "", text.replace(" ", "-"))[:63]
    return v.strip("-_.")


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
