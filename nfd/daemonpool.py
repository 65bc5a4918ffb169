"""A thread pool whose threads never hold up the end of the process.

``concurrent.futures.ThreadPoolExecutor`` joins its threads when the interpreter exits,
whatever ``shutdown(wait=False)`` said: a call still blocked in I/O (an API server that
does not answer, a LIST allowed a minute, a gRPC handler reading a claim) keeps a
stopped command alive until that call times out, or for good, and kubelet kills it at
the end of the Pod's grace period. Commands that use this pool finish, or refuse, what
must end whole (a checkpoint, a spec file) before they return; a call still running
after that is dropped with the process.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

_Work = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class DaemonPool(Executor):
    """Up to ``max_workers`` daemon threads named ``name``-N, started as work arrives
    and kept while idle."""

    def __init__(self, max_workers: int, name: str) -> None:
        if max_workers <= 0:
            raise ValueError("max_workers must be positive")
        self._max = max_workers
        self._name = name
        self._work: queue.SimpleQueue[_Work | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)  # a permit per thread waiting for work
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._shut = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot schedule new futures after shutdown")
            f: Future[Any] = Future()
            self._work.put((f, fn, args, kwargs))
            if not self._idle.acquire(timeout=0) and len(self._threads) < self._max:
                t = threading.Thread(target=self._run, name=f"{self._name}-{len(self._threads)}", daemon=True)
                t.start()
                self._threads.append(t)
            return f

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shut = True
            if cancel_futures:
                while True:
                    try:
                        work = self._work.get_nowait()
                    except queue.Empty:
                        break
                    if work is not None:
                        work[0].cancel()
            threads = list(self._threads)
            for _ in threads:
                self._work.put(None)
        if wait:
            for t in threads:
                t.join()

    def _run(self) -> None:
        while True:
            work = self._work.get()
            if work is None:
                return
            _call(*work)
            del work  # the finished call's arguments are not kept while idle
            self._idle.release()


def _call(f: Future[Any], fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    if not f.set_running_or_notify_cancel():
        return
    try:
        result = fn(*args, **kwargs)
    except BaseException as e:
        f.set_exception(e)
    else:
        f.set_result(result)
