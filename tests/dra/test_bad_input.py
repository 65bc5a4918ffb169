"""Bad input costs only itself: a one-line reason, and everything else goes on."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from deviceplugin.fixtures import FixtureHost
from dra.claims import DRIVER, NODE, allocate, create_claim
from dra.kubelet_dra import DraKubelet, wait_for

from nfd.dra import checkpoint
from nfd.dra.driver import DraDriver


def nfd(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nfd", *args], capture_output=True, text=True, timeout=60)


def one_line_error(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("config", "expect"),
    [
        (
            {"dra": {"driverName": "Not_A.Domain"}, "resources": []},
            "config file {cfg}: dra.driverName: invalid driver name: 'Not_A.Domain' must be a lowercase RFC 1123 subdomain",
        ),
        (
            {"dra": {"driverName": "a" * 64 + ".com"}, "resources": []},
            "is longer than 63 characters",
        ),
        (
            {
                "resources": [
                    {"name": "example.com/x", "pci": {"vendor": "1172"}, "servedBy": ["devicePlugin", "dra"]}
                ]
            },
            "resources[0].servedBy: served by the device plugin or by DRA, never both",
        ),
        (
            {
                "resources": [
                    {"name": "example.com/x", "pci": {"vendor": "1172"}, "servedBy": "dra", "replicas": 2}
                ]
            },
            "resources[0].replicas: DRA hands out whole devices",
        ),
    ],
)
def test_bad_config_is_one_line(tmp_path: Path, config: dict[str, Any], expect: str) -> None:
    cfg = tmp_path / "dra.yaml"
    cfg.write_text(yaml.safe_dump(config))
    line = one_line_error(nfd("dra", "--config", str(cfg), "--check", "--node-name", NODE))
    assert line.startswith("nfd dra: error: ") and expect.format(cfg=cfg) in line


def test_bad_node_name_is_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "dra.yaml"
    cfg.write_text("resources: []\n")
    line = one_line_error(nfd("dra", "--config", str(cfg), "--check", "--node-name", "Node_A"))
    assert line == "nfd dra: error: --node-name: 'Node_A' must be a lowercase RFC 1123 subdomain"


def test_bad_pod_uid_is_one_line(tmp_path: Path) -> None:
    cfg = tmp_path / "dra.yaml"
    cfg.write_text("resources: []\n")
    line = one_line_error(
        nfd("dra", "--config", str(cfg), "--check", "--node-name", NODE, "--pod-uid", "../x")
    )
    assert (
        line
        == "nfd dra: error: --pod-uid: pod UID '../x': expected letters, digits and '-' (at most 64), as a UID has"
    )


def test_selector_matching_nothing_warns_and_serves_the_rest(fx: FixtureHost, tmp_path: Path) -> None:
    feats = tmp_path / "features.json"
    feats.write_text(fx.features().to_json())
    cfg = tmp_path / "dra.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "resources": [
                    {"name": "example.com/none", "pci": {"vendor": "dead"}, "servedBy": "dra"},
                    {"name": "example.com/fpga", "pci": {"vendor": "1172"}, "servedBy": "dra"},
                ]
            }
        )
    )
    p = nfd("dra", "--config", str(cfg), "--check", "--node-name", NODE, "--features", str(feats),
            "--host-root", str(fx.root))  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip().splitlines() == [
        "warning: resources[0]: example.com/none: no device matches pci vendor=dead; not served"
    ]
    [slice_] = json.loads(p.stdout)["items"]
    assert sorted(d["name"] for d in slice_["spec"]["devices"]) == [
        "fpga-0000-3b-00-0", "fpga-0000-3c-00-0", "fpga-0000-af-00-0", "fpga-0000-b0-00-0",
    ]  # fmt: skip


def test_claims_for_another_node_driver_or_gone_device_fail_alone(
    start_driver: Callable[..., DraDriver],
    kubelet: DraKubelet,
    fake_api_client: Any,
    fx: FixtureHost,
    dirs: dict[str, Path],
) -> None:
    start_driver()
    assert wait_for(lambda: DRIVER in kubelet.drivers)
    made = {}
    for name, results in {
        "good": [(DRIVER, NODE, "fpga-0000-3c-00-0")],
        "other-node": [(DRIVER, "node-b", "fpga-0000-3b-00-0")],
        "other-driver": [("gpu.example.com", NODE, "gpu-0")],
        "gone": [(DRIVER, NODE, "fpga-0000-af-00-0")],
        "unknown": [(DRIVER, NODE, "fpga-0000-99-00-0")],
    }.items():
        claim = create_claim(fake_api_client, "default", name, device_class="fpga.example.com")
        allocate(fake_api_client, claim, results)
        made[name] = claim["metadata"]["uid"]
    unallocated = create_claim(fake_api_client, "default", "pending", device_class="fpga.example.com")
    made["pending"] = unallocated["metadata"]["uid"]
    shutil.rmtree(fx.root / "sys/bus/pci/devices/0000:af:00.0")  # unplugged after allocation

    resp = kubelet.prepare(DRIVER, *[("default", uid, name) for name, uid in made.items()])
    errors = {name: resp.claims[uid].error for name, uid in made.items()}
    assert errors["good"] == "" and len(resp.claims[made["good"]].devices) == 1
    assert errors["other-node"] == (
        "claim default/other-node: device fpga-0000-3b-00-0 is allocated from pool node-b, not from this node's pool node-a"
    )
    assert errors["other-driver"] == (
        f"claim default/other-driver has no devices from driver {DRIVER} (allocated from: gpu.example.com)"
    )
    assert (
        errors["gone"]
        == "claim default/gone: device fpga-0000-af-00-0 is unhealthy: PCI device gone from sysfs"
    )
    assert errors["unknown"] == "claim default/unknown: device fpga-0000-99-00-0 is not on this node"
    assert errors["pending"] == "claim default/pending is not allocated"
    # A claim kubelet names that the API server does not have:
    missing = kubelet.prepare(DRIVER, ("default", "u-1", "missing")).claims["u-1"].error
    assert missing.startswith("claim default/missing: HTTP 404: ") and "\n" not in missing
    # A UID that would name a file outside the checkpoint's directory:
    odd = kubelet.prepare(DRIVER, ("default", "../x", "odd")).claims["../x"].error
    assert odd == "claim default/odd: claim UID '../x' cannot name a checkpoint file"
    assert [p.name for p in dirs["cdi"].glob("*.json")] == [f"nfd-dra-{made['good']}.json"]


def test_corrupt_checkpoint_one_line_and_prepared_claims_kept(
    start_driver: Callable[..., DraDriver],
    kubelet: DraKubelet,
    fake_api_client: Any,
    dirs: dict[str, Path],
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = start_driver()
    assert wait_for(lambda: DRIVER in kubelet.drivers)
    claim = create_claim(fake_api_client, "default", "c1", device_class="fpga.example.com")
    allocate(fake_api_client, claim, [(DRIVER, NODE, "fpga-0000-3b-00-0")])
    uid = claim["metadata"]["uid"]
    prepared = kubelet.prepare(DRIVER, ("default", uid, "c1")).claims[uid]
    assert prepared.error == ""
    first.stop()
    checkpoint = dirs["plugin"] / "claims" / f"{uid}.json"
    text = checkpoint.read_text()
    checkpoint.write_text(text[: len(text) // 2])  # cut short, as by a full disk

    kubelet.drivers.clear()
    with caplog.at_level(logging.ERROR, logger="nfd.dra"):
        second = start_driver()
    [msg] = [r.getMessage() for r in caplog.records if r.name == "nfd.dra"]
    assert msg.startswith(f"checkpoint {checkpoint}: not a checkpoint (") and "\n" not in msg
    assert msg.endswith(f"moved to {checkpoint}.corrupt, the claim recovered from its CDI spec")
    assert (dirs["plugin"] / "claims" / f"{uid}.json.corrupt").exists() and checkpoint.exists()
    assert uid in second.preparer.claims
    assert wait_for(lambda: DRIVER in kubelet.drivers)
    # The claim is still prepared (same answer, no API read), and unprepares cleanly.
    assert kubelet.prepare(DRIVER, ("default", uid, "c1")).claims[uid] == prepared
    assert kubelet.unprepare(DRIVER, ("default", uid, "c1")).claims[uid].error == ""
    assert list(dirs["cdi"].glob("*.json")) == []


def test_reregisters_when_the_registry_dir_is_recreated(
    start_driver: Callable[..., DraDriver], kubelet: DraKubelet, dirs: dict[str, Path]
) -> None:
    driver = start_driver()
    assert wait_for(lambda: len(kubelet.registrations) == 1)
    shutil.rmtree(dirs["registry"])
    os.mkdir(dirs["registry"])
    assert wait_for(lambda: len(kubelet.registrations) == 2)
    assert driver.plugin.registrations == 2 and driver.plugin.registered.is_set()


def test_concurrent_prepares_and_a_checkpoint_that_cannot_be_saved(
    start_driver: Callable[..., DraDriver],
    kubelet: DraKubelet,
    fake_api_client: Any,
    dirs: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    driver = start_driver()
    assert wait_for(lambda: DRIVER in kubelet.drivers)
    claims = []
    for i, dev in enumerate(
        ["fpga-0000-3b-00-0", "fpga-0000-3c-00-0", "tty-ttys0", "tty-ttys1", "tty-ttys2"]
    ):
        c = create_claim(fake_api_client, "default", f"c{i}", device_class="x.example.com")
        allocate(fake_api_client, c, [(DRIVER, NODE, dev)])
        claims.append(("default", c["metadata"]["uid"], f"c{i}"))
    with ThreadPoolExecutor(5) as pool:
        answers = list(pool.map(lambda c: kubelet.prepare(DRIVER, c).claims[c[1]], claims))
    assert [a.error for a in answers] == [""] * 5
    assert sorted(driver.preparer.claims) == sorted(uid for _ns, uid, _n in claims)
    assert len(list(dirs["cdi"].glob("*.json"))) == 5

    # The checkpoint cannot be written (here: the disk is full): the claim fails alone and
    # is not left half prepared.
    c = create_claim(fake_api_client, "default", "late", device_class="x.example.com")
    allocate(fake_api_client, c, [(DRIVER, NODE, "tty-ttys3")])
    uid = c["metadata"]["uid"]
    claims_dir = dirs["plugin"] / "claims"
    ckpt = claims_dir / f"{uid}.json"

    def full(path: Path, body: str, **_kw: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with monkeypatch.context() as m:
        m.setattr(checkpoint, "write_atomic", full)
        err = kubelet.prepare(DRIVER, ("default", uid, "late")).claims[uid].error
    assert err == f"claim default/late: cannot save checkpoint {ckpt}: No space left on device"
    assert uid not in driver.preparer.claims and not (dirs["cdi"] / f"nfd-dra-{uid}.json").exists()
    assert len(checkpoint.listing(claims_dir)) == 5 and len(os.listdir(claims_dir)) == 5

    # A checkpoint that cannot be read (here: a file where the directory goes) fails the
    # call, and is not taken for a corrupt one and moved away.
    shutil.rmtree(claims_dir)
    claims_dir.write_text("")
    err = kubelet.prepare(DRIVER, ("default", uid, "late")).claims[uid].error
    assert err.startswith(f"checkpoint {claims_dir}: cannot read: ") and "\n" not in err
    assert claims_dir.is_file() and uid not in driver.preparer.claims


def test_a_device_selected_for_both_ways_is_refused_by_both_commands(fx: FixtureHost, tmp_path: Path) -> None:
    feats = tmp_path / "features.json"
    feats.write_text(fx.features().to_json())
    cfg = tmp_path / "devices.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "resources": [
                    {"name": "example.com/fpga", "pci": {"vendor": "1172"}},
                    {"name": "example.com/fpga-dra", "pci": {"address": "0000:3b:*"}, "servedBy": "dra"},
                ]
            }
        )
    )
    common = ["--config", str(cfg), "--check", "--features", str(feats), "--host-root", str(fx.root)]
    expect = (
        "resources[1]: example.com/fpga-dra (dra) selects device 0000:3b:00.0, which resources[0]"
        " (example.com/fpga, devicePlugin) serves too; a device is served one way only"
    )
    assert (
        one_line_error(nfd("dra", *common, "--node-name", NODE))
        == f"nfd dra: error: config file {cfg}: {expect}"
    )
    assert (
        one_line_error(nfd("device-plugin", *common))
        == f"nfd device-plugin: error: config file {cfg}: {expect}"
    )
