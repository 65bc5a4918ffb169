"""NodeResourceTopology objects as the API server checks them: against the openAPI
schema of the CRD the topology-updater overlay installs (types, required fields, the
quantity pattern), plus the metadata checks every object gets."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

CRD = Path(__file__).resolve().parents[2] / "deploy/components/topology-updater/noderesourcetopology-crd.yaml"


@functools.cache
def _validator() -> Any:
    import jsonschema
    import yaml

    crd = yaml.safe_load(CRD.read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2"]
    return jsonschema.Draft7Validator(version["schema"]["openAPIV3Schema"])


def _path(error: Any) -> str:
    out = ""
    for p in error.absolute_path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "<root>"


def nrt_causes(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(field, value, why) for each place ``obj`` breaks the CRD's schema."""
    return [
        (_path(e), str(e.instance)[:80], e.message)
        for e in sorted(_validator().iter_errors(obj), key=lambda e: list(map(str, e.absolute_path)))
    ]
