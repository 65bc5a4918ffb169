"""How a replica dials another (a follower the leader: the workers' requests it forwards,
forward.py, and its replication calls, replica.py): one client, so that every such call
verifies the other replica the same way and an unreachable leader is logged once."""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from typing import Any
from urllib.parse import urlsplit

from nfd.daemonpool import DaemonPool

log = logging.getLogger(__name__)


class LeaderUnreachable(Exception):
    """No answer from the other replica (refused, timed out, TLS refused): logged by the
    Forwarder as the condition starts and ends, not by each caller."""


class Outage:
    """A condition that repeats every few seconds while it lasts (the leader cannot be
    reached, a sync keeps failing): one line when it starts, one when it ends, with how
    long it lasted and how many tries failed; the tries in between at DEBUG."""

    def __init__(self, what: str) -> None:
        self.what = what  # "cannot reach the leader", ...
        self.target = ""  # whom it is about; a new one is a new condition
        self.since: float | None = None  # time.monotonic()
        self.tries = 0

    def failed(self, target: str, why: object) -> None:
        if self.since is not None and target == self.target:
            self.tries += 1
            log.debug("%s at %s (try %d): %s", self.what, target, self.tries, why)
            return
        self.target, self.since, self.tries = target, time.monotonic(), 1
        log.warning("%s at %s: %s (retrying; logged again when it is over)", self.what, target, why)

    def ended(self) -> None:
        if self.since is None:
            return
        log.info(
            "%s at %s: over after %.1f s and %d failed tr%s",
            self.what, self.target, time.monotonic() - self.since, self.tries, "y" if self.tries == 1 else "ies",
        )  # fmt: skip
        self.since, self.tries = None, 0


class Forwarder:
    """A replica's client to the others (the follower's to the leader: forwarded
    requests and the replication calls): a small urllib3 pool in threads.

    Replicas are dialled by pod IP, which their certificate need not name. Over https
    the leader's chain is verified against the replicas' CA, and its name against
    ``server_name`` (sent as SNI too): a DNS name the certificate every replica serves
    carries (the Service's). None: the name in the URL, as any client would."""

    def __init__(self, *, ca_file: str | None, timeout_s: float, server_name: str | None = None) -> None:
        self.ca_file = ca_file
        self.server_name = server_name
        self.timeout_s = timeout_s
        self.outage = Outage("cannot reach the leader")
        self._pool: Any = None
        self._threads = DaemonPool(8, "forward")  # a stopped follower does not wait for the leader

    def _manager(self) -> Any:
        if self._pool is None:
            import urllib3

            ctx = ssl.create_default_context(cafile=self.ca_file)
            self._pool = urllib3.PoolManager(
                maxsize=8,
                retries=False,
                ssl_context=ctx,
                server_hostname=self.server_name,
                timeout=urllib3.Timeout(total=self.timeout_s),
            )
        return self._pool

    async def send(
        self, url: str, method: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """The other replica's answer, whatever its status; LeaderUnreachable when none came."""

        def call() -> tuple[int, list[tuple[bytes, bytes]], bytes]:
            r = self._manager().request(method, url, body=body, headers=headers, preload_content=True)
            hdrs = [
                (k.lower().encode("latin-1"), v.encode("latin-1"))
                for k, v in r.headers.items()
                if k.lower() in ("content-type", "retry-after", "www-authenticate")
            ]
            return int(r.status), hdrs, bytes(r.data)

        try:
            answer = await asyncio.get_running_loop().run_in_executor(self._threads, call)
        except Exception as e:
            u = urlsplit(url)
            self.outage.failed(f"{u.scheme}://{u.netloc}", e)
            raise LeaderUnreachable(str(e)) from e
        self.outage.ended()
        return answer

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
        if self._pool is not None:
            self._pool.clear()
