"""Regenerate the kubelet API stubs (device plugin, plugin registration, DRA, DRA health, PodResources) from their .proto files.

    python scripts/gen_proto.py            # rewrite the committed files in place
    python scripts/gen_proto.py --out DIR  # write the tree under DIR (freshness test)

Needs grpcio-tools and mypy-protobuf (the ``test`` extra). The proto is compiled with the
repository root as include path, so the generated modules import each other by their
absolute package name (``nfd.deviceplugin.api.v1beta1``, ``nfd.dra.api.dra.v1``) and need no fix-up, and the
descriptor's file name is unique in protobuf's global pool.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTOS = (
    "nfd/deviceplugin/api/v1beta1/api.proto",
    "nfd/dra/api/pluginregistration/v1/api.proto",
    "nfd/dra/api/dra/v1/api.proto",
    "nfd/dra/api/drahealth/v1alpha1/api.proto",
    "nfd/topology/api/v1/api.proto",
)
# What one run writes, next to the proto.
OUTPUTS = ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py", "api_pb2_grpc.pyi")


def _plugin(name: str) -> str:
    """protoc plugins ship as console scripts beside the interpreter."""
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if not found:
        raise SystemExit(f"{name} not found: install mypy-protobuf")
    return found


def generate(out: Path) -> list[Path]:
    from grpc_tools import protoc  # type: ignore[import-untyped]

    out.mkdir(parents=True, exist_ok=True)
    include = str(Path(protoc.__file__).parent / "_proto")
    args = [
        "protoc",
        f"-I{ROOT}",
        f"-I{include}",
        f"--plugin=protoc-gen-mypy={_plugin('protoc-gen-mypy')}",
        f"--plugin=protoc-gen-mypy_grpc={_plugin('protoc-gen-mypy_grpc')}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        f"--mypy_out={out}",
        f"--mypy_grpc_out={out}",
        *(str(ROOT / p) for p in PROTOS),
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    return [out / Path(p).parent / name for p in PROTOS for name in OUTPUTS]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="write under this directory instead of the repository")
    args = ap.parse_args()
    for path in generate(args.out or ROOT):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
