"""A rolling update of the DRA plugin, as a DaemonSet with ``maxSurge: 1`` does it on a
node: the new pod's instance starts beside the old one, each on sockets named with its
pod's UID; kubelet (the stand-in, over real unix sockets and gRPC) calls the newest, and
after the old one stops, the claims it prepared stay prepared and unprepare on the new
one. The two share the checkpoint, which holds every claim whichever instance wrote it."""

from __future__ import annotations

import logging
import shutil
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dra.claims import DRIVER, NODE, allocate, create_claim
from dra.kubelet_dra import DraKubelet, wait_for

from nfd.dra import checkpoint
from nfd.dra.driver import DraDriver

OLD, NEW = "0c1a6f4e-0000-4000-8000-00000000000a", "0c1a6f4e-0000-4000-8000-00000000000b"


def claim(client: Any, name: str, device: str) -> tuple[str, str, str]:
    c = create_claim(client, "default", name, device_class="fpga.example.com")
    allocate(client, c, [(DRIVER, NODE, device)])
    return ("default", c["metadata"]["uid"], name)


def test_old_and_new_instance_side_by_side_then_the_old_one_stops(
    start_driver: Callable[..., DraDriver],
    kubelet: DraKubelet,
    fake_api_client: Any,
    dirs: dict[str, Path],
) -> None:
    old = start_driver(instance=OLD)
    assert old.plugin.registered.wait(5)
    assert old.plugin.registration() == (True, "registered with kubelet")  # its /healthz
    assert wait_for(lambda: kubelet.drivers.get(DRIVER) == str(dirs["plugin"] / f"dra-{OLD}.sock"))
    first = claim(fake_api_client, "first", "fpga-0000-3b-00-0")
    assert kubelet.prepare(DRIVER, first).claims[first[1]].error == ""

    new = start_driver(instance=NEW)
    assert new.plugin.registered.wait(5)
    assert wait_for(lambda: kubelet.drivers.get(DRIVER) == str(dirs["plugin"] / f"dra-{NEW}.sock"))
    assert sorted(p.name for p in dirs["registry"].iterdir()) == [
        f"{DRIVER}-{OLD}-reg.sock",
        f"{DRIVER}-{NEW}-reg.sock",
    ]
    second = claim(fake_api_client, "second", "fpga-0000-3c-00-0")
    assert kubelet.prepare(DRIVER, second).claims[second[1]].error == ""
    # The first claim, prepared by the old instance, is prepared for the new one too.
    again = kubelet.prepare(DRIVER, first).claims[first[1]]
    assert (again.error, [d.device_name for d in again.devices]) == ("", ["fpga-0000-3b-00-0"])

    old.stop()
    assert wait_for(lambda: len(kubelet.instances) == 1)
    assert [p.name for p in dirs["registry"].iterdir()] == [f"{DRIVER}-{NEW}-reg.sock"]
    assert checkpoint.listing(dirs["plugin"] / "claims") == {first[1], second[1]}
    assert kubelet.unprepare(DRIVER, first).claims[first[1]].error == ""
    assert checkpoint.listing(dirs["plugin"] / "claims") == {second[1]}
    assert sorted(p.name for p in dirs["cdi"].glob("*.json")) == [f"nfd-dra-{second[1]}.json"]


def test_two_instances_preparing_at_once_keep_every_claim(
    start_driver: Callable[..., DraDriver], fake_api_client: Any, dirs: dict[str, Path]
) -> None:
    """Each instance's read-modify-write of the shared checkpoint is whole: none loses
    the other's claims."""
    instances = [start_driver(instance=OLD), start_driver(instance=NEW)]
    devices = sorted(n for n in instances[0].inventory.by_name if n.startswith("fpga-"))
    claims = [claim(fake_api_client, f"c{i}", devices[i % len(devices)]) for i in range(16)]
    failed: list[Exception] = []

    def prepare(which: int) -> None:
        for ns, uid, name in claims[which::2]:
            try:
                instances[which].preparer.prepare(ns, uid, name)
            except Exception as e:
                failed.append(e)

    threads = [threading.Thread(target=prepare, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert failed == []
    assert checkpoint.listing(dirs["plugin"] / "claims") == {uid for _ns, uid, _n in claims}
    ns, uid, name = claims[0]  # prepared by the first; unprepared by the second
    instances[1].preparer.unprepare(ns, uid, name)
    assert uid not in checkpoint.listing(dirs["plugin"] / "claims")
    # Its next look at the checkpoint (a change; a claim it holds prepared is answered
    # from memory) takes in the other's change.
    instances[0].preparer.unprepare(*claims[2])
    assert instances[0].preparer.prepared_devices() == 14


def test_a_killed_instances_sockets_are_removed_by_the_next(
    start_driver: Callable[..., DraDriver], kubelet: DraKubelet, dirs: dict[str, Path]
) -> None:
    """A pod killed without its clean-up leaves sockets nobody listens on; the next
    instance removes them (kubelet would keep trying the registration socket), never a
    live one."""
    dirs["plugin"].mkdir(parents=True)
    for path in (dirs["plugin"] / f"dra-{OLD}.sock", dirs["registry"] / f"{DRIVER}-{OLD}-reg.sock"):
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(str(path))  # bound, never listening: what a dead process leaves
    new = start_driver(instance=NEW)
    assert new.plugin.registered.wait(5)
    assert [p.name for p in dirs["registry"].iterdir()] == [f"{DRIVER}-{NEW}-reg.sock"]
    assert sorted(p.name for p in dirs["plugin"].glob("*.sock")) == [f"dra-{NEW}.sock"]
    assert kubelet.refusals == []


def test_an_upgrade_from_the_single_file_checkpoint_keeps_every_prepared_claim(
    start_driver: Callable[..., DraDriver],
    fake_api_client: Any,
    dirs: dict[str, Path],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The previous version kept every claim in one file, ``checkpoint.json``: the new
    one moves them to their own files at its first look, and answers them as prepared."""
    from kubernetes import client

    first = start_driver(instance=OLD)
    claims = [
        claim(fake_api_client, f"c{i}", d) for i, d in enumerate(["fpga-0000-3b-00-0", "fpga-0000-3c-00-0"])
    ]
    answers = {uid: first.preparer.prepare(ns, uid, name) for ns, uid, name in claims}
    old = dict(first.preparer.claims)
    first.stop()
    claims_dir, single = dirs["plugin"] / "claims", dirs["plugin"] / "checkpoint.json"
    shutil.rmtree(claims_dir)
    checkpoint.save(single, old)  # what the previous version left

    with caplog.at_level(logging.INFO, logger="nfd.dra"):
        second = start_driver(instance=NEW)
    assert f"checkpoint {single}: 2 prepared claim(s) moved to {claims_dir}" in caplog.messages
    assert second.preparer.claims == old and checkpoint.listing(claims_dir) == set(old)
    assert not single.exists()
    # Answered from the checkpoint, not the API server (which no longer has the claims).
    for ns, _uid, name in claims:
        client.ResourceV1Api(fake_api_client).delete_namespaced_resource_claim(
            name, ns, _preload_content=False
        )
    assert {uid: second.preparer.prepare(ns, uid, name) for ns, uid, name in claims} == answers

    # A previous version's instance beside this one writes its file again: taken in at
    # the next call that looks at the checkpoint.
    uid = claims[0][1]
    checkpoint.save(single, {uid: old[uid]})
    second.preparer.unprepare(*claims[1])
    assert not single.exists() and checkpoint.listing(claims_dir) == {uid}
