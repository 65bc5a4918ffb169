"""NodePrepareResources and NodeUnprepareResources without gRPC: read the claim, take
this driver's results on this node, write a CDI spec, remember it on disk.

Both are idempotent (kubelet retries, and unprepares claims it never saw prepared). A
claim that cannot be prepared fails alone, with a one-line reason; the other claims of
the same call are prepared.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from nfd.devices import cdi
from nfd.devices.kinds.model import FoundDevice, PrepareError, cdi_name
from nfd.dra import checkpoint
from nfd.dra.checkpoint import CheckpointError, PreparedClaim, PreparedDevice
from nfd.dra.claimstatus import ClaimReports, ClaimStatusWriter
from nfd.dra.slices import DraInventory

log = logging.getLogger("nfd.dra")

CDI_CLASS = "claim"
SPEC_PREFIX = "nfd-dra-"


class ClaimError(Exception):
    """This claim cannot be prepared (or unprepared); the message says why."""


# (namespace, name) -> the ResourceClaim as the API server has it; raises ClaimError.
ClaimReader = Callable[[str, str], dict[str, Any]]


class Preparer:
    def __init__(
        self,
        inventory: DraInventory,
        *,
        driver: str,
        node: str,
        cdi_dir: str | Path,
        checkpoint_path: str | Path,
        read_claim: ClaimReader,
        write_status: ClaimStatusWriter | None = None,
    ) -> None:
        self.inventory = inventory
        self.driver = driver
        self.node = node
        self.cdi_dir = Path(cdi_dir)
        self.checkpoint_path = Path(checkpoint_path)
        self.read_claim = read_claim
        # The status writes, off kubelet's path: a write is an API round trip that
        # prepares nothing.
        self.reports = ClaimReports(write_status, driver=driver, describe=inventory.describe)
        self.cdi_kind = f"{driver}/{CDI_CLASS}"
        self._lock = threading.Lock()
        self._making: dict[str, threading.Event] = {}  # claims whose devices are being made
        self._closed = False  # stopping: no more writes (see close)
        # One file per prepared claim in claims_dir; checkpoint_path is the previous
        # version's single file, migrated when found, and names the lock both take.
        self.claims_dir = self.checkpoint_path.with_name("claims")
        self.files = checkpoint.ClaimFiles(
            self.claims_dir,
            self.checkpoint_path,
            lambda: checkpoint.from_cdi_specs(self.cdi_dir.glob(f"{SPEC_PREFIX}*.json"), driver),
        )
        with self._lock, self.files.locked():
            try:
                self._sync()
            except ClaimError as e:  # the first call tries again
                log.error("%s", e)
            for n in self.inventory.unclaimed():
                log.warning("device %s: made, by no claim (by hand?): its capacity is not published", n)

    @property
    def claims(self) -> dict[str, PreparedClaim]:
        """The prepared claims by UID, as the checkpoint had them at the last look."""
        return self.files.claims

    def _sync(self) -> None:
        """Take in what another instance changed; the caller holds both locks."""
        try:
            listed = self.files.sync()
        except CheckpointError as e:  # not a file's fault: this call fails, kubelet retries
            raise ClaimError(str(e)) from None
        if listed:  # the claims' devices, the other instance's too, are theirs (a MIG instance)
            for n in self.inventory.adopt(d.device_name for c in self.claims.values() for d in c.devices):
                log.info("device %s: made for a prepared claim before this instance started; the claim's", n)

    def _prepared(self, uid: str) -> PreparedClaim | None:
        """The claim as prepared, if its CDI spec is still there: the checkpoint is not
        flushed to the disk (a node that crashed may bring back a stale one), and the CDI
        directory is often a tmpfs that a reboot empties."""
        done = self.claims.get(uid)
        if done is None or os.path.exists(self._spec_path(uid)):
            return done
        if uid in self._making:
            return None  # recorded, not made yet: not prepared
        log.warning(
            "claim %s/%s: in the checkpoint, but its CDI spec %s is gone; preparing it again",
            done.namespace, done.name, self._spec_path(uid),
        )  # fmt: skip
        return None

    def _spec_path(self, uid: str) -> str:
        # A string: built at every prepare and every answer from memory.
        return os.path.join(self.cdi_dir, f"{SPEC_PREFIX}{cdi_name(uid)}.json")

    def close(self) -> None:
        """Wait for a write under way (a CDI spec and the checkpoint) to end, and refuse
        writes from now on: a call still reading its claim when the process exits is
        dropped whole, never half-written. kubelet retries the refused ones."""
        with self._lock:
            self._closed = True
        self.reports.queue.close()  # the status thread ends after the writes queued

    def prepared_devices(self) -> int:
        """How many devices the prepared claims hold."""
        with self._lock:
            return self.files.devices

    def _check_open(self, where: str) -> None:
        if self._closed:
            raise ClaimError(f"{where}: the plugin is stopping; kubelet retries")

    # -- the calls ----------------------------------------------------------------------
    def prepare(self, namespace: str, uid: str, name: str) -> tuple[PreparedDevice, ...]:
        with self.reports.queue.call():
            return self._prepare(namespace, uid, name)

    def unprepare(self, namespace: str, uid: str, name: str) -> None:
        with self.reports.queue.call():
            self._unprepare(namespace, uid, name)

    def _prepare(self, namespace: str, uid: str, name: str) -> tuple[PreparedDevice, ...]:
        file = self._claim_file(namespace, name, uid)
        # Answered from memory, without the flock: a claim the other instance of a rolling
        # update prepared is found in the locked section below (after one claim read), and
        # one it unprepared has lost its CDI spec.
        with self._lock:
            done = self._prepared(uid)
        if done is not None:
            self.reports.answered_again(done, uid)
            return done.devices
        # Reading the claim and checking its devices take no lock: kubelet prepares the
        # claims of different pods at once.
        where = f"claim {namespace}/{name}"
        claim = self.read_claim(namespace, name)
        have_uid = (claim.get("metadata") or {}).get("uid")
        if have_uid != uid:
            raise ClaimError(f"{where} has UID {have_uid}, not {uid} (deleted and created again?)")
        by_device: dict[str, list[str]] = {}
        for r in self._my_results(claim, where):
            by_device.setdefault(str(r["device"]), []).append(str(r["request"]))
        found: list[tuple[str, FoundDevice]] = []
        for dev_name in by_device:
            dev, why = self.inventory.usable(dev_name)
            if dev is None:
                raise ClaimError(f"{where}: {why}")
            found.append((dev_name, dev))
        # The claim's checkpoint file is written before anything is made, so that a MIG
        # instance is on record before it exists: after a crash it is found and adopted
        # (a claim recorded without its CDI spec is prepared again, or unprepared).
        while True:
            self._wait_made(uid)
            with self._lock, self.files.locked():
                if uid in self._making:
                    continue  # another call for the claim began making it meanwhile
                self._sync()
                done = self._prepared(uid)
                if done is not None:  # a concurrent call for the same claim got there first
                    return done.devices
                self._check_open(where)
                prepared = self._record(namespace, name, uid, by_device)
                try:
                    self.files.save(uid, prepared)
                except OSError as e:  # not remembered, so not prepared: kubelet retries
                    raise ClaimError(f"{where}: cannot save checkpoint {file}: {e.strerror or e}") from None
                if not any(self.inventory.makes(n) for n, _d in found):
                    try:  # nothing to make: one locked section
                        self._write_spec(uid, prepared, found)
                    except ClaimError:
                        self._forget_record(uid)
                        raise
                    break
                making = self._making[uid] = threading.Event()
            self._make_then_write(uid, prepared, found, where, making)
            break
        log.info("%s: prepared %s", where, ", ".join(by_device))
        # The claim as read above: the status write patches it without reading it again
        # (its resourceVersion test catches a change in between).
        self.reports.prepared(prepared, uid, claim)
        return prepared.devices

    def _wait_made(self, uid: str) -> None:
        while (making := self._making.get(uid)) is not None:
            making.wait()

    def _make_then_write(
        self,
        uid: str,
        prepared: PreparedClaim,
        found: list[tuple[str, FoundDevice]],
        where: str,
        making: threading.Event,
    ) -> None:
        """Make the devices without either lock (creating a MIG instance takes NVML a
        while: other claims' prepares go on), then write the CDI spec."""
        made: list[tuple[str, FoundDevice]] = []
        try:
            made = self._make(found, where)
            with self._lock, self.files.locked():
                self._check_open(where)
                self._write_spec(uid, prepared, made)
        except ClaimError:
            with self._lock, self.files.locked():
                self._forget_record(uid)
                self._unmake([n for n, _d in made])
            raise
        finally:
            with self._lock:
                self._making.pop(uid, None)
            making.set()

    def _forget_record(self, uid: str) -> None:
        """The claim failed after its checkpoint file was written: the file goes."""
        try:
            self.files.remove(uid)
        except OSError as e:  # it names no CDI spec: answered as not prepared
            log.error("claim %s: cannot remove its checkpoint file: %s", uid, e.strerror or e)

    def _make(self, found: list[tuple[str, FoundDevice]], where: str) -> list[tuple[str, FoundDevice]]:
        """What the devices' kinds make at prepare (a MIG instance); on a failure, what
        was made so far is undone and the claim fails."""
        out: list[tuple[str, FoundDevice]] = []
        for n, d in found:
            try:
                out.append((n, self.inventory.prepare_device(n, d)))
            except PrepareError as e:
                self._unmake([m for m, _d in out])
                raise ClaimError(f"{where}: device {n}: {e}") from None
        return out

    def _unmake(self, names: Sequence[str]) -> None:
        for n in names:
            try:
                self.inventory.unprepare_device(n)
            except PrepareError as e:
                log.error("device %s: cannot undo its prepare: %s", n, e)

    def flush_status(self, timeout: float | None = None) -> bool:
        """Wait until the status writes queued so far are done; False on timeout."""
        return self.reports.flush(timeout)

    def _my_results(self, claim: dict[str, Any], where: str) -> list[dict[str, Any]]:
        allocation = (claim.get("status") or {}).get("allocation")
        if not allocation:
            raise ClaimError(f"{where} is not allocated")
        results = (allocation.get("devices") or {}).get("results") or []
        mine = [r for r in results if isinstance(r, dict) and r.get("driver") == self.driver]
        if not mine:
            drivers = sorted({str(r.get("driver")) for r in results if isinstance(r, dict)})
            raise ClaimError(
                f"{where} has no devices from driver {self.driver} (allocated from: {', '.join(drivers) or 'none'})"
            )
        for r in mine:
            if r.get("pool") != self.node:
                raise ClaimError(
                    f"{where}: device {r.get('device')} is allocated from pool {r.get('pool')}, not from this"
                    f" node's pool {self.node}"
                )
        return mine

    def _record(self, namespace: str, name: str, uid: str, requests: dict[str, list[str]]) -> PreparedClaim:
        """The claim as its checkpoint file and kubelet's answer have it."""
        ids = {n: (f"{self.cdi_kind}={cdi_name(f'{uid}-{n}')}",) for n in requests}
        return PreparedClaim(
            namespace,
            name,
            tuple(PreparedDevice(tuple(r), self.node, n, ids[n]) for n, r in requests.items()),
        )

    def _write_spec(self, uid: str, prepared: PreparedClaim, found: list[tuple[str, FoundDevice]]) -> None:
        # One container gets all of a claim's devices: values of one variable are joined
        # (PCIDEVICE_<RESOURCE>=a,b), as the device plugin does for one container.
        joined: dict[str, list[str]] = {}
        for _n, d in found:
            for k, v in d.env:
                if v not in joined.setdefault(k, []):
                    joined[k].append(v)
        env = [f"{k}={','.join(v)}" for k, v in joined.items()]
        namespace, name = prepared.namespace, prepared.name
        listed = json.dumps([d.to_json() for d in prepared.devices], separators=(",", ":"))
        notes = {f"{self.driver}/claim": f"{namespace}/{name}/{uid}", f"{self.driver}/devices": listed}
        devices = [(f"{uid}-{n}", d) for n, d in found]
        spec = cdi.build_spec(self.cdi_kind, devices, annotations=notes, env=env)
        try:
            cdi.write_json(self._spec_path(uid), spec, locked=True)  # under the flock
        except OSError as e:
            raise ClaimError(
                f"claim {namespace}/{name}: cannot write CDI spec in {self.cdi_dir}: {e.strerror or e}"
            ) from None

    def _claim_file(self, namespace: str, name: str, uid: str) -> str:
        try:
            return checkpoint.claim_file(self.claims_dir, uid)
        except CheckpointError as e:
            raise ClaimError(f"claim {namespace}/{name}: {e}") from None

    def _unprepare(self, namespace: str, uid: str, name: str) -> None:
        file, where = self._claim_file(namespace, name, uid), f"claim {namespace}/{name}"
        while True:
            self._wait_made(uid)  # a prepare or unprepare of it under way
            with self._lock, self.files.locked():
                if uid in self._making:
                    continue
                self._check_open(where)
                self._sync()
                held = self.claims.get(uid) or PreparedClaim(namespace, name, ())
                slow = [d.device_name for d in held.devices if self.inventory.makes(d.device_name)]
                if not slow:
                    gone = self._undo(uid, held, file, where)
                    break
                making = self._making[uid] = threading.Event()
            # Undone without either lock (destroying a MIG instance takes NVML a while):
            # other claims' calls go on. The claim stays recorded until it is all undone.
            try:
                self._undo_devices(slow, where)
                with self._lock, self.files.locked():
                    self._check_open(where)
                    gone = self._undo(uid, held, file, where, done=slow)
            finally:
                with self._lock:
                    self._making.pop(uid, None)
                making.set()
            break
        if gone:
            self.reports.unprepared(namespace, name, uid)

    def _undo_devices(self, names: Sequence[str], where: str) -> None:
        for n in names:
            try:
                self.inventory.unprepare_device(n)
            except PrepareError as e:  # kubelet retries the claim
                raise ClaimError(f"{where}: device {n}: {e}") from None

    def _undo(self, uid: str, held: PreparedClaim, file: str, where: str, done: Sequence[str] = ()) -> bool:
        """Undo the claim's devices (but those ``done``), its CDI spec and its record
        (True when there was one); the caller holds both locks."""
        self._undo_devices([d.device_name for d in held.devices if d.device_name not in done], where)
        try:
            Path(self._spec_path(uid)).unlink(missing_ok=True)
        except OSError as e:
            raise ClaimError(f"{where}: cannot remove its CDI spec: {e.strerror or e}") from None
        if uid in self.claims:
            try:
                self.files.remove(uid)
            except OSError as e:
                raise ClaimError(f"{where}: cannot remove checkpoint {file}: {e.strerror or e}") from None
            log.info("%s: unprepared", where)
            return True
        return False
