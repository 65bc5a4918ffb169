"""``nfd dra`` as a process, stopped by SIGTERM (how a Pod is stopped) in the middle of
its work: it ends, exits 0, and what it keeps on disk stays whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import yaml
from deviceplugin.fixtures import FixtureHost
from dra.claims import DRIVER, NODE, allocate, create_claim
from dra.kubelet_dra import DraKubelet, wait_for

from nfd.dra import checkpoint
from tests.fakeapi import FakeApiServer

ROOT = Path(__file__).resolve().parents[2]
FPGA = {
    "resources": [
        {
            "name": "example.com/fpga",
            "pci": {"vendor": "1172"},
            "servedBy": "dra",
            "deviceNodes": ["/dev/vfio/{iommu_group}"],
        }
    ]
}


def test_sigterm_while_a_claim_is_read_ends_at_once_and_keeps_the_checkpoint_whole(
    fx: FixtureHost,
    dirs: dict[str, Path],
    kubelet: DraKubelet,
    fake_api: FakeApiServer,
    fake_api_client: Any,
    tmp_path: Path,
) -> None:
    (tmp_path / "features.json").write_text(fx.features().to_json())
    (tmp_path / "dra.yaml").write_text(yaml.safe_dump(FPGA))
    kubeconfig = fake_api.write_kubeconfig(tmp_path / "kubeconfig")
    cmd = [sys.executable, "-m", "nfd", "dra", "--config", str(tmp_path / "dra.yaml"), "--node-name", NODE,
           "--kubeconfig", str(kubeconfig), "--host-root", str(fx.root), "--features", str(tmp_path / "features.json"),
           "--plugin-dir", str(dirs["plugin"]), "--registry-dir", str(dirs["registry"]), "--cdi-dir", str(dirs["cdi"]),
           "--rediscover-interval", "0"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True
    )
    try:
        assert wait_for(lambda: DRIVER in kubelet.drivers, timeout=30)
        first = create_claim(fake_api_client, "default", "first", device_class="fpga.example.com")
        allocate(fake_api_client, first, [(DRIVER, NODE, "fpga-0000-3b-00-0")])
        first_uid = first["metadata"]["uid"]
        assert kubelet.prepare(DRIVER, ("default", first_uid, "first")).claims[first_uid].error == ""

        second = create_claim(fake_api_client, "default", "second", device_class="fpga.example.com")
        allocate(fake_api_client, second, [(DRIVER, NODE, "fpga-0000-3c-00-0")])
        # The API server takes its time over the second claim: kubelet's call is in the
        # plugin, reading it, when the Pod is stopped.
        slow = fake_api.faults.delay(120, times=1, method="GET", path=r"/resourceclaims/second$")
        call = threading.Thread(
            target=_ignore_errors,
            args=(kubelet.prepare, DRIVER, ("default", second["metadata"]["uid"], "second")),
            daemon=True,
        )
        call.start()
        assert wait_for(lambda: slow.remaining == 0, timeout=10)

        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            raise AssertionError("nfd dra did not end: it waits for the claim read") from None
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()

    assert checkpoint.listing(dirs["plugin"] / "claims") == {first_uid}
    # no socket, no temp file; the lock file that instances sharing the checkpoint take
    assert sorted(p.name for p in dirs["plugin"].iterdir()) == ["checkpoint.json.lock", "claims"]
    assert [p.name for p in (dirs["plugin"] / "claims").iterdir()] == [f"{first_uid}.json"]
    assert [p.name for p in dirs["registry"].iterdir()] == []
    assert [p.name for p in dirs["cdi"].iterdir() if p.name.startswith(".")] == []


def _ignore_errors(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except Exception:  # the plugin goes away under the call: kubelet retries it
        pass
