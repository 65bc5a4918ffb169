"""A work queue of node names, drained by a fixed number of workers.

A name queued twice is queued once, and a name queued again while a worker holds it
runs once more after that worker is done: the newest decision is read when the node's
turn comes, so older ones are never written. A failed run is retried with exponential
backoff and jitter, honouring the API server's Retry-After; new work for the node cuts
the wait short. While ``ready()`` is false names are parked, and run on ``release()``.
The write rate itself is the client's (``nfd.kube.ratelimit``), shared by every call.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable

from nfd.backoff import Backoff
from nfd.kube.errors import ApiError

log = logging.getLogger(__name__)


RECHECK_S = 1.0  # how often parked nodes are looked at again while any wait


class WorkQueue:
    def __init__(
        self,
        *,
        handle: Callable[[str], Awaitable[None]],
        ready: Callable[[], bool],
        on_failure: Callable[[str, ApiError], bool],
        on_depth: Callable[[int], None],
        workers: int,
        backoff_base_s: float,
        backoff_max_s: float,
    ) -> None:
        self._handle = handle
        self._ready = ready
        self._on_failure = on_failure
        self._on_depth = on_depth
        self._workers = workers
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self.busy: set[str] = set()
        self._dirty: set[str] = set()  # queued again while a worker held it
        self._parked: set[str] = set()  # waiting for ready()
        self._recheck: asyncio.TimerHandle | None = None
        self._backoffs: dict[str, Backoff] = {}  # nodes whose last write failed
        self._rng = random.Random()  # one for all: a generator's state is 2.5 kB
        self._retries: dict[str, asyncio.TimerHandle] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def add(self, name: str) -> None:
        handle = self._retries.pop(name, None)
        if handle is not None:  # new data: try now rather than after the backoff
            handle.cancel()
        if name in self.busy:
            self._dirty.add(name)
        elif name not in self._queued:
            self._queued.add(name)
            self._queue.put_nowait(name)
        self._on_depth(len(self._queued))

    def add_all(self, names: Iterable[str]) -> None:
        for name in names:
            self.add(name)

    def release(self) -> None:
        """``ready()`` became true: run what was parked."""
        parked, self._parked = self._parked, set()
        self.add_all(parked)

    def _arm_recheck(self) -> None:
        # ready() turns true through several events (leadership, rules listed, NodeFeature
        # objects listed, Nodes primed), each of which calls release(); a second look
        # while anything is parked makes sure no ordering of them can strand a node.
        if self._recheck is None:
            self._recheck = asyncio.get_running_loop().call_later(RECHECK_S, self._check_parked)

    def _check_parked(self) -> None:
        self._recheck = None
        if not self._parked:
            return
        if self._ready():
            self.release()
        else:
            self._arm_recheck()

    def forget(self, name: str) -> None:
        """The node is gone: no retry for it."""
        handle = self._retries.pop(name, None)
        if handle is not None:
            handle.cancel()
        self._backoffs.pop(name, None)
        self._parked.discard(name)

    def idle(self) -> bool:
        return not self._queued and not self.busy and not self._retries

    def start(self) -> None:
        for i in range(self._workers):
            self._tasks.append(asyncio.create_task(self._worker(), name=f"publisher-{i}"))

    async def stop(self) -> None:
        if self._recheck is not None:
            self._recheck.cancel()
            self._recheck = None
        for h in self._retries.values():
            h.cancel()
        self._retries.clear()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def _worker(self) -> None:
        while True:
            name = await self._queue.get()
            self._queued.discard(name)
            if not self._queued:
                # A set never shrinks: one that held a whole fleet (the first listing,
                # a resync) would keep its table, ~50 B a node, while it waits empty.
                self._queued = set()
            self._on_depth(len(self._queued))
            if not self._ready():
                self._parked.add(name)
                self._arm_recheck()
                continue
            self.busy.add(name)
            try:
                await self._run(name)
            finally:
                self.busy.discard(name)
                if name in self._dirty:
                    self._dirty.discard(name)
                    self.add(name)

    async def _run(self, name: str) -> None:
        try:
            await self._handle(name)
        except ApiError as e:
            self._failed(name, e)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug must not kill the worker; retry like a fault
            log.exception("node %s: unexpected error while publishing", name)
            self._failed(name, ApiError(None, f"{type(e).__name__}: {e}"))
        else:
            self._backoffs.pop(name, None)

    def _failed(self, name: str, e: ApiError) -> None:
        if not self._on_failure(name, e):  # retrying cannot help (no such Node)
            self._backoffs.pop(name, None)
            return
        backoff = self._backoffs.get(name)
        if backoff is None:
            # Jitter: the nodes of a fleet that failed together must not retry in step.
            backoff = self._backoffs[name] = Backoff(
                initial=self.backoff_base_s,
                cap=self.backoff_max_s,
                jitter=0.5,
                max_retry_after=self.backoff_max_s,
                rng=self._rng,
            )
        delay = backoff.next_delay(e.retry_after or None)
        log.info("node %s: write failed (%s); retry in %.2fs", name, e, delay)
        self._retries[name] = asyncio.get_running_loop().call_later(delay, self._retry, name)

    def _retry(self, name: str) -> None:
        self._retries.pop(name, None)
        self.add(name)
