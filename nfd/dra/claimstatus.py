"""A prepared claim's ``status.devices`` (KEP-4817): what this driver set up for each
allocated device, for users and other controllers to read.

Each entry names the device as the allocation does (driver, pool, device) and carries a
``Ready`` condition, ``data`` (the device nodes, PCI address and NUMA node) and, for a
network device, ``networkData`` (interface name and MAC address from sysfs; addresses
are not in sysfs, so ``ips`` is left out).

The entries are written with a JSON Patch that first tests the claim's
``resourceVersion``: other drivers' entries in the same list are kept as read, and a
claim changed in between fails the test and is read again (once). After a prepare the
claim is the one the prepare read, not read a second time. Writing needs
``patch`` on ``resourceclaims/status``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from nfd.devices.kinds.model import FoundDevice
from nfd.dra.checkpoint import PreparedClaim
from nfd.dra.resourceapi import api_failure, claim_path
from nfd.hostfiles import attr
from nfd.hostroot import HostRoot
from nfd.kube.errors import ApiError, Conflict, Invalid, NotFound
from nfd.kube.transport import JSON_PATCH, Transport

log = logging.getLogger("nfd.dra")

READY = "Ready"
PREPARED_REASON = "Prepared"
NETWORK_CLASS = "02"  # PCI base class of network controllers
# A status write waits until no call has been under way for QUIET_S, and at most
# MAX_DELAY_S: it shares the interpreter with kubelet's calls, which come in bursts (a
# node's pods starting), and it prepares nothing.
QUIET_S = 0.02
MAX_DELAY_S = 2.0


class ClaimStatusError(Exception):
    """status.devices could not be written; the message says why, in one line."""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def device_status(
    *,
    driver: str,
    pool: str,
    name: str,
    device: FoundDevice,
    attributes: dict[str, Any],
    host: HostRoot,
) -> dict[str, Any]:
    """One ``status.devices`` entry for a device this driver prepared."""
    data: dict[str, Any] = {"deviceNodes": [n.container_path for n in device.device_nodes]}
    address = (attributes.get("resource.kubernetes.io/pciBusID") or {}).get("string")
    if address:
        data["pciAddress"] = address
    if device.numa_node is not None:
        data["numaNode"] = device.numa_node
    entry: dict[str, Any] = {
        "driver": driver,
        "pool": pool,
        "device": name,
        "conditions": [
            {
                "type": READY,
                "status": "True",
                "reason": PREPARED_REASON,
                "message": f"prepared by {driver} on node {pool}",
                "lastTransitionTime": _now(),
            }
        ],
        "data": data,
    }
    network = _network_data(address, attributes, host)
    if network:
        entry["networkData"] = network
    return entry


def _network_data(address: str | None, attributes: dict[str, Any], host: HostRoot) -> dict[str, Any]:
    ifname = (attributes.get("interface") or {}).get("string")
    pci_class = (attributes.get("class") or {}).get("string", "")
    if not ifname and not pci_class.startswith(NETWORK_CLASS):
        return {}
    out: dict[str, Any] = {}
    if ifname:
        out["interfaceName"] = ifname
        mac = attr(host.sys / "bus/pci/devices" / address / "net" / ifname / "address") if address else None
        if mac:
            out["hardwareAddress"] = mac
    return out


class ClaimStatusApi:
    """Writes this driver's entries of a claim's ``status.devices`` (an empty list
    removes them), keeping every other driver's."""

    def __init__(self, api: Transport, *, driver: str, timeout: float) -> None:
        self.api = api
        self.driver = driver
        self.timeout = timeout

    def __call__(
        self,
        namespace: str,
        name: str,
        uid: str,
        entries: Sequence[dict[str, Any]],
        read: dict[str, Any] | None = None,
    ) -> None:
        """``read``: the claim as the caller just read it, patched without a GET first; a
        change since fails the patch's test, and the claim is read again."""
        where = f"claim {namespace}/{name}"
        try:
            for attempt in (1, 2):
                claim = (
                    read
                    if attempt == 1 and read is not None
                    else self.api.request("GET", claim_path(namespace, name), timeout=self.timeout)
                )
                if (claim.get("metadata") or {}).get("uid") != uid:
                    return  # deleted (and maybe created again): not the claim we prepared
                have = (claim.get("status") or {}).get("devices") or []
                others = [d for d in have if isinstance(d, dict) and d.get("driver") != self.driver]
                mine = [d for d in have if isinstance(d, dict) and d.get("driver") == self.driver]
                if _same(mine, list(entries)):
                    return
                patch = [
                    {
                        "op": "test",
                        "path": "/metadata/resourceVersion",
                        "value": claim["metadata"]["resourceVersion"],
                    },
                    {"op": "add", "path": "/status/devices", "value": [*others, *entries]},
                ]
                try:
                    self.api.request(
                        "PATCH",
                        claim_path(namespace, name, "status"),
                        body=patch,
                        content_type=JSON_PATCH,
                        timeout=self.timeout,
                    )
                    return
                except (Conflict, Invalid) as e:
                    if attempt == 2 or _has_causes(e):
                        raise
        except NotFound:
            return
        except ApiError as e:
            raise ClaimStatusError(f"{where}: status.devices: {api_failure(e)}") from None


def _has_causes(e: ApiError) -> bool:
    """A 422 with field causes is the claim refusing our entries; one without is our
    ``resourceVersion`` test failing (the claim changed meanwhile): read it again."""
    return bool(e.details.get("causes"))


def _same(have: list[dict[str, Any]], want: list[dict[str, Any]]) -> bool:
    """Equal but for the conditions' times: a retry does not rewrite what is there."""

    def key(entries: list[dict[str, Any]]) -> list[Any]:
        return [
            {
                **e,
                "conditions": [
                    {k: v for k, v in c.items() if k != "lastTransitionTime"}
                    for c in e.get("conditions") or []
                ],
            }
            for e in entries
        ]

    return key(have) == key(want)


class StatusQueue:
    """The status writes, in the order queued, on a thread of their own (started with
    the first), each once kubelet's calls leave a quiet moment (see QUIET_S). Calls
    are marked with :meth:`call`."""

    def __init__(self, *, quiet: float = QUIET_S, max_delay: float = MAX_DELAY_S) -> None:
        self.quiet = quiet
        self.max_delay = max_delay
        self._queue: queue.SimpleQueue[tuple[float, Callable[[], None]] | None] = queue.SimpleQueue()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._calls = 0  # under way
        self._last = 0.0  # when the last one ended (monotonic)
        self._closing = False

    @contextmanager
    def call(self) -> Iterator[None]:
        """Around a kubelet call: the writes wait while it runs."""
        with self._cond:
            self._calls += 1
        try:
            yield
        finally:
            with self._cond:
                self._calls -= 1
                self._last = time.monotonic()

    def put(self, write: Callable[[], None]) -> None:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="nfd-dra-status", daemon=True)
                self._thread.start()
        self._queue.put((time.monotonic(), write))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until the writes queued so far are done; False on timeout."""
        done = threading.Event()
        self.put(done.set)
        return done.wait(timeout)

    def close(self) -> None:
        """The writes queued so far are made at once, then the thread ends."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._queue.put(None)

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            queued, write = item
            self._wait_quiet(queued + self.max_delay)
            try:
                write()
            except Exception:  # a bug: the writes after it go on
                log.exception("claim status write")

    def _wait_quiet(self, deadline: float) -> None:
        with self._cond:
            while not self._closing:
                now = time.monotonic()
                if now >= deadline:
                    return
                left = self.quiet if self._calls else self._last + self.quiet - now
                if left <= 0:
                    return
                self._cond.wait(min(left, deadline - now))


# (namespace, name, uid, this driver's status.devices entries (empty: remove ours), the
# claim as just read or None); raises ClaimStatusError.
ClaimStatusWriter = Callable[[str, str, str, Sequence[dict[str, Any]], dict[str, Any] | None], None]
# A device's name -> (the device, its slice attributes, its host), or None when gone.
Describe = Callable[[str], tuple[FoundDevice, dict[str, Any], HostRoot] | None]


class ClaimReports:
    """The prepared claims' status.devices, written on a :class:`StatusQueue` (nothing
    written when ``write`` is None). A failed write fails nothing (the devices are
    prepared): it is logged once and tried again at the claim's next prepare (kubelet
    calls again for every pod using it)."""

    def __init__(self, write: ClaimStatusWriter | None, *, driver: str, describe: Describe) -> None:
        self.write = write
        self.driver = driver
        self.describe = describe
        self.pending: set[str] = set()  # claims whose entries are not written yet
        self.queue = StatusQueue()

    def prepared(self, claim: PreparedClaim, uid: str, read: dict[str, Any] | None) -> None:
        """``read``: the claim as the prepare read it, patched without reading it again."""
        if self.write is not None:
            self.queue.put(lambda: self._report(claim, uid, read))

    def answered_again(self, claim: PreparedClaim, uid: str) -> None:
        if uid in self.pending:
            self.prepared(claim, uid, None)

    def unprepared(self, namespace: str, name: str, uid: str) -> None:
        if self.write is not None:
            self.queue.put(lambda: self._clear(namespace, name, uid))

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until the writes queued so far are done; False on timeout."""
        return self.write is None or self.queue.flush(timeout)

    def _report(self, claim: PreparedClaim, uid: str, read: dict[str, Any] | None) -> None:
        assert self.write is not None
        entries = []
        for d in claim.devices:
            found = self.describe(d.device_name)
            if found is not None:
                dev, attrs, host = found
                entries.append(
                    device_status(
                        driver=self.driver, pool=d.pool_name, name=d.device_name,
                        device=dev, attributes=attrs, host=host,
                    )
                )  # fmt: skip
        try:
            self.write(claim.namespace, claim.name, uid, entries, read)
        except ClaimStatusError as e:
            if uid not in self.pending:
                log.warning("%s; tried again at the claim's next prepare", e)
            self.pending.add(uid)
            return
        self.pending.discard(uid)

    def _clear(self, namespace: str, name: str, uid: str) -> None:
        """Our entries say the devices are set up on this node; after unprepare they
        are not. Best effort: a claim being deleted or deallocated loses them anyway."""
        assert self.write is not None
        self.pending.discard(uid)
        try:
            self.write(namespace, name, uid, [], None)
        except ClaimStatusError as e:
            log.info("%s (after unprepare; left as is)", e)
