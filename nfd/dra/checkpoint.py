"""Prepared claims on disk, so that a restarted plugin still knows what it prepared.

One small JSON file per prepared claim, ``<claims dir>/<claim UID>.json``, with a
checksum over its claim: a prepare creates one new file (a temporary file renamed to a
new name, never over a big one) and an unprepare removes it, so neither costs more with
more claims prepared. A file that cannot be trusted (not JSON, wrong shape, checksum off)
raises :class:`CheckpointError` with a one-line reason; the driver then rebuilds the
claim from the CDI spec it wrote for it.

The previous version kept every claim in one file of the same format (``checkpoint.json``);
the driver reads such a file once, writes its claims to the directory and removes it.

During a rolling update two plugin instances share the directory: each change is made
under :func:`locked` (an flock on a file beside the old single file, which the previous
version takes too), and an instance sees the other's changes in the directory's listing.
The listing costs more with more claims prepared, so it is read again only when the
lock file's stamp or the directory's own status changed: each change to the directory
writes a new stamp there (an instance token and a counter) before the lock is let go, so
a stamp equal to the last one this instance saw or wrote means no instance changed the
directory since; the directory's inode and times catch a hand's change (a directory
removed or replaced).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from nfd.devices.cdi import with_suppressed_unlink, write_atomic

log = logging.getLogger("nfd.dra")

VERSION = 1
SUFFIX = ".json"
STAMP_BYTES = 34  # 16 hex digits of instance token, "-", 16 of counter, newline


class CheckpointError(Exception):
    pass


@dataclass(frozen=True)
class PreparedDevice:
    request_names: tuple[str, ...]
    pool_name: str
    device_name: str
    cdi_device_ids: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "requestNames": list(self.request_names),
            "poolName": self.pool_name,
            "deviceName": self.device_name,
            "cdiDeviceIds": list(self.cdi_device_ids),
        }

    @staticmethod
    def from_json(raw: Any) -> PreparedDevice:
        if not isinstance(raw, dict):
            raise TypeError("a device is not an object")
        names, ids = raw["requestNames"], raw["cdiDeviceIds"]
        if not all(isinstance(x, str) for x in [*names, *ids, raw["poolName"], raw["deviceName"]]):
            raise TypeError("a device field is not a string")
        return PreparedDevice(tuple(names), raw["poolName"], raw["deviceName"], tuple(ids))


@dataclass(frozen=True)
class PreparedClaim:
    namespace: str
    name: str
    devices: tuple[PreparedDevice, ...]

    @cached_property
    def canonical(self) -> str:
        """This claim's part of the checkpoint, serialized once (a save is then a join,
        not a dump of every claim): ``_canonical(self.to_json())``, which parse() checks,
        its objects built with their keys in order (a dump that sorts them costs a
        prepare twice as much)."""
        devices = [
            {
                "cdiDeviceIds": list(d.cdi_device_ids),
                "deviceName": d.device_name,
                "poolName": d.pool_name,
                "requestNames": list(d.request_names),
            }
            for d in self.devices
        ]
        return json.dumps(
            {"devices": devices, "name": self.name, "namespace": self.namespace}, separators=(",", ":")
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "devices": [d.to_json() for d in self.devices],
        }

    @staticmethod
    def from_json(raw: Any) -> PreparedClaim:
        if not isinstance(raw, dict) or not isinstance(raw.get("devices"), list):
            raise TypeError("a claim is not an object with devices")
        return PreparedClaim(
            str(raw["namespace"]),
            str(raw["name"]),
            tuple(PreparedDevice.from_json(d) for d in raw["devices"]),
        )


def _canonical(claims: dict[str, Any]) -> str:
    return json.dumps(claims, sort_keys=True, separators=(",", ":"))


def _checksum(canonical: str) -> str:
    return hashlib.sha256(canonical.encode()).hexdigest()


def load(path: str | Path) -> dict[str, PreparedClaim]:
    """Claims by UID; empty when there is no checkpoint yet."""
    return parse(path, read(path))


def read(path: str | Path) -> bytes | None:
    """The checkpoint's bytes; None when there is none yet."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CheckpointError(f"checkpoint {path}: cannot read: {e.strerror or e}") from None


def parse(path: str | Path, text: bytes | None) -> dict[str, PreparedClaim]:
    """Claims by UID from the bytes :func:`read` returned for ``path``."""
    if text is None:
        return {}
    try:
        data = json.loads(text)
        claims = data["claims"]
        if data.get("version") != VERSION:
            raise CheckpointError(f"checkpoint {path}: unknown version {data.get('version')!r}")
        if data.get("checksum") != _checksum(_canonical(claims)):
            raise CheckpointError(f"checkpoint {path}: checksum mismatch (the file was changed or cut short)")
        return {str(uid): PreparedClaim.from_json(c) for uid, c in claims.items()}
    except CheckpointError:
        raise
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CheckpointError(f"checkpoint {path}: not a checkpoint ({type(e).__name__}: {e})") from None


def save(path: str | Path, claims: dict[str, PreparedClaim]) -> bytes:
    """Write a checkpoint file of ``claims`` (one, for a claim's file); returns the bytes
    written."""
    # Equal to _canonical() of the whole mapping, which parse() checks against.
    body = "{" + ",".join(f"{json.dumps(uid)}:{c.canonical}" for uid, c in sorted(claims.items())) + "}"
    text = f'{{"version":{VERSION},"checksum":"{_checksum(body)}","claims":{body}}}\n'
    # Not flushed: an fsync is most of a prepare's time on a disk, and the file matters
    # to a restarted plugin, which reads the page cache. After a crash of the node, a
    # claim the file has but whose CDI spec is gone is prepared again.
    write_atomic(path, text, flush=False, locked=True)  # under locked()
    return text.encode()


def claim_file(directory: str | Path, uid: str) -> str:
    """The file of the claim ``uid``; a UID that cannot name a file is refused. A plain
    string: a prepare names it twice, and pathlib's parts cost more than the join."""
    if not uid or uid.startswith(".") or "/" in uid or "\0" in uid:
        raise CheckpointError(f"claim UID {uid!r} cannot name a checkpoint file")
    return os.path.join(directory, uid + SUFFIX)


def listing(directory: Path) -> frozenset[str]:
    """The UIDs of the claims with a file in ``directory`` (none when it is not there
    yet); temporary and set-aside files are not claims."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return frozenset()
    except OSError as e:
        raise CheckpointError(f"checkpoint {directory}: cannot read: {e.strerror or e}") from None
    return frozenset(n[: -len(SUFFIX)] for n in names if n.endswith(SUFFIX) and not n.startswith("."))


def parse_claim(path: str | Path, uid: str, text: bytes | None) -> PreparedClaim | None:
    """The claim ``uid`` from the bytes :func:`read` returned for its file ``path``; None
    when the file is gone. Raises :class:`CheckpointError` when the file cannot be
    trusted or names another claim."""
    claims = parse(path, text)
    if not claims:
        return None
    if set(claims) != {uid}:
        raise CheckpointError(f"checkpoint {path}: holds claim(s) {', '.join(sorted(claims))}, not {uid}")
    return claims[uid]


def lock_file(path: Path) -> str:
    """The file the lock of the checkpoint at ``path`` is taken on."""
    return os.fspath(path.with_name(path.name + ".lock"))


@contextmanager
def locked(lock: str) -> Iterator[int]:
    """Hold the exclusive lock of a checkpoint on its :func:`lock_file`: the plugin
    instances sharing it take turns at their read-modify-writes. Gives the lock file's
    descriptor (its content is the stamp, see :class:`ClaimFiles`)."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except FileNotFoundError:  # the plugin directory is made at the first look
        os.makedirs(os.path.dirname(lock), exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # releases the lock


def from_cdi_specs(specs: Iterable[Path], driver: str) -> dict[str, PreparedClaim]:
    """The claims these CDI specs were written for: each of ``driver``'s specs names its
    claim and devices in annotations."""
    out: dict[str, PreparedClaim] = {}
    for path in sorted(specs):
        try:
            notes = json.loads(path.read_bytes()).get("annotations") or {}
            ns, name, uid = notes[f"{driver}/claim"].split("/")
            devices = [PreparedDevice.from_json(d) for d in json.loads(notes[f"{driver}/devices"])]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue  # not one of ours, or not readable: nothing to recover from it
        out[uid] = PreparedClaim(ns, name, tuple(devices))
    return out


def move_aside(path: str | Path) -> Path:
    """Keep a corrupt checkpoint for a human to look at, out of the way."""
    path = Path(path)
    aside = path.with_name(path.name + ".corrupt")
    try:
        path.replace(aside)
    except OSError:
        with_suppressed_unlink(os.fspath(path))
    return aside


class ClaimFiles:
    """The prepared claims in ``directory`` as this instance last looked, kept up with
    another instance's changes by the directory's listing (names are claim UIDs; cheap
    to read again). ``single`` is the previous version's file, moved here when found;
    ``from_specs`` gives the claims as their CDI specs name them, for files that cannot
    be trusted. Every method but :meth:`locked` is called inside it."""

    def __init__(
        self, directory: Path, single: Path, from_specs: Callable[[], dict[str, PreparedClaim]]
    ) -> None:
        self.directory = directory
        self.single = single
        self._from_specs = from_specs
        self.claims: dict[str, PreparedClaim] = {}
        self.devices = 0  # the claims' devices, counted as they change
        self._seen: set[str] = set()  # the listing as last read or changed here
        self._token = os.urandom(8).hex()  # this instance's stamps
        self._changes = 0
        self._stamp: bytes | None = None  # the lock file's content as last seen or written
        self._dir: tuple[int, int, int] | None = None  # the directory's, likewise
        self._fd = -1  # the lock file while held
        self._lock_file = lock_file(single)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """:func:`locked` on the checkpoint, for the instances' read-modify-writes."""
        with locked(self._lock_file) as fd:
            self._fd = fd
            try:
                yield
            finally:
                self._fd = -1

    def _changed(self) -> None:
        """Tell the other instances the directory changed (see the module's doc). Every
        stamp has the same length, written over the last: no truncation, which costs a
        journal entry on a disk."""
        self._changes += 1
        stamp = f"{self._token}-{self._changes:016x}\n".encode()
        os.pwrite(self._fd, stamp, 0)
        self._stamp = stamp

    def sync(self) -> bool:
        """Take in another instance's changes (True when the directory was listed: at the
        first look, or after a change not ours); raises CheckpointError when the directory
        or a file cannot be read or written (nobody's fault: the call fails and is retried)."""
        try:
            # Read before the migration, which stamps the file with our own changes.
            stamp = os.pread(self._fd, 256, 0)
            self._migrate()
            if stamp and stamp == self._stamp and self._dir == self._dir_status():
                return False
            self._take_in(listing(self.directory))
            stamp = os.pread(self._fd, 256, 0)
            if len(stamp) == STAMP_BYTES:
                self._stamp = stamp
            else:  # nobody stamped it yet (a new lock file): from now on ours says it
                os.ftruncate(self._fd, 0)
                self._changed()
            self._dir = self._dir_status()
            return True
        except OSError as e:
            raise CheckpointError(f"checkpoint {self.directory}: {e.strerror or e}") from None

    def _put(self, uid: str, claim: PreparedClaim | None) -> None:
        """The claim ``uid`` is this (None: none) from now on."""
        old = self.claims.pop(uid, None) if claim is None else self.claims.get(uid)
        if claim is not None:
            self.claims[uid] = claim
        self.devices += (len(claim.devices) if claim else 0) - (len(old.devices) if old else 0)

    def _dir_status(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.directory)
        except FileNotFoundError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_ctime_ns

    def _take_in(self, names: frozenset[str]) -> None:
        """The claims of the files ``names``, as read now; raises OSError."""
        if names != self._seen:
            for uid in self._seen - names:
                self._put(uid, None)
            for uid in names - self._seen:
                path = claim_file(self.directory, uid)
                text = read(path)
                try:
                    claim = parse_claim(path, uid, text)
                except CheckpointError as e:
                    claim = self._recover(uid, path, e)
                self._put(uid, claim)
            self._seen = {uid for uid in names if uid in self.claims}

    def save(self, uid: str, claim: PreparedClaim) -> None:
        """Write the claim's file (raises OSError); it is in memory from now on."""
        self._changed()  # first: a stamp too many costs the other instance one listing
        save(claim_file(self.directory, uid), {uid: claim})
        self._put(uid, claim)
        self._seen.add(uid)  # in place: a copy would cost more with more claims prepared
        self._dir = self._dir_status()

    def remove(self, uid: str) -> None:
        """Remove the claim's file (raises OSError), and forget it."""
        self._changed()
        Path(claim_file(self.directory, uid)).unlink(missing_ok=True)
        self._put(uid, None)
        self._seen.discard(uid)
        self._dir = self._dir_status()

    def _recover(self, uid: str, path: str, e: CheckpointError) -> PreparedClaim | None:
        """A claim's file that cannot be trusted: set aside, the claim taken from its CDI
        spec when that is there."""
        aside = move_aside(path)
        claim = self._from_specs().get(uid)
        if claim is None:
            log.error("%s; moved to %s, and the claim has no CDI spec: not prepared", e, aside)
            self._changed()
            return None
        log.error("%s; moved to %s, the claim recovered from its CDI spec", e, aside)
        self.save(uid, claim)
        return claim

    def _migrate(self) -> None:
        """Move the claims of the previous version's single file to their own files and
        remove it. A previous version's instance beside this one during an upgrade may
        write it again: looked for at every look (one access(2) when it is gone, cheaper
        than a failed open's exception)."""
        if not os.access(self.single, os.F_OK):
            return
        text = read(self.single)
        if text is None:
            return
        try:
            old = parse(self.single, text)
        except CheckpointError as e:
            aside = move_aside(self.single)
            old = self._from_specs()
            log.error(
                "%s; moved to %s, %d prepared claim(s) recovered from their CDI specs", e, aside, len(old)
            )
        for uid, claim in old.items():
            self.save(uid, claim)
        self.single.unlink(missing_ok=True)
        log.info("checkpoint %s: %d prepared claim(s) moved to %s", self.single, len(old), self.directory)
