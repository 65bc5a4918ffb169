"""The running updater: a pod ending on the node brings a pass at once, not at the next
poll; and a second change right after a write waits for the interval to be up."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from fixture_node import pods
from podresources_standin import PodResourcesStandIn
from test_fixture_node import NODE, kube, resources, start

from nfd.hostroot import HostRoot
from tests.fakeapi import FakeApiServer

NRT = "noderesourcetopologies"


def zone_cpu(fake_api: FakeApiServer, zone: int) -> tuple[str, str, str]:
    return resources(fake_api.objects.get(NRT, NODE)["zones"][zone])["cpu"]


def test_pod_end_is_published_at_once_and_writes_keep_the_interval(
    fake_api: FakeApiServer, host: HostRoot, kubelet: PodResourcesStandIn, kubelet_config: Path
) -> None:
    first, _, first_watch, _ = start(fake_api, host, kubelet, kubelet_config)
    assert first.run_once()  # the object exists and is current
    first_watch.stop()

    # A restarted updater with a 60 s poll: its first pass finds nothing to write.
    from nfd.topology.podwatch import PodWatch
    from nfd.topology.updater import Settings, Updater
    from nfd.topology.writer import NrtWriter

    client = kube(fake_api, kubelet_config.parent)
    writer = NrtWriter(client)
    settings = Settings(NODE, host, str(kubelet.socket), str(kubelet_config), interval=60.0)
    u = Updater(settings, publish=writer.write, node_uid=lambda: writer.node_uid(NODE))
    watch = PodWatch(client, NODE, on_change=u.nudge)
    u.is_exclusive = watch.is_exclusive
    watch.start()
    assert watch.wait_synced(10)
    loop = threading.Thread(target=u.run, daemon=True)
    loop.start()
    try:
        fake_api.wait_for(lambda: u.passes >= 1, what="first pass")
        assert writer.writes == 0
        assert zone_cpu(fake_api, 1) == ("24", "24", "8")

        # prod/db ends: kubelet stops listing it and the API server deletes it.
        left = pods()
        del left.pod_resources[0]
        kubelet.pods = left
        fake_api.objects.delete("pods", "db", namespace="prod")
        fake_api.wait_for(lambda: writer.writes == 1, timeout=20, what="pass on pod end")
        assert zone_cpu(fake_api, 1) == ("24", "24", "24")
        passes = u.passes

        # net/sriov ends right after that write: held until the 60 s are up.
        del left.pod_resources[1]  # [ml/train, net/sriov, ...] after the first removal
        kubelet.pods = left
        fake_api.objects.delete("pods", "sriov", namespace="net")
        fake_api.wait_for(lambda: watch.is_exclusive("net", "sriov", "app") is None, what="watch saw the end")
        time.sleep(2.0)
        assert u.passes == passes and writer.writes == 1
        assert zone_cpu(fake_api, 5) == ("24", "24", "8")
    finally:
        u.stop()
        watch.stop()
        loop.join(10)
    assert not loop.is_alive()
