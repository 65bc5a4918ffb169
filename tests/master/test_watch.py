"""The list-then-watch loop (``nfd.master.core.watch``) on a scripted API: what it lists,
the resourceVersion each watch starts from, and when it lists again. The watchers on
top of it run against the fake API server (test_nodefeatures.py, test_cluster.py,
test_revocation.py, test_nodewatch.py)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from nfd.kube.errors import make
from nfd.master.core.kube import Resource
from nfd.master.core.watch import ListWatch, Pages

from .kubehelpers import until

RES = Resource("things", "example.com", "v1")


def obj(name: str, rv: int) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}}


def event(kind: str, o: dict[str, Any]) -> bytes:
    return json.dumps({"type": kind, "object": o}).encode() + b"\n"


class Stream:
    """A watch response: its lines, then the end; or, without lines, a stream that
    stays open until shut down."""

    def __init__(self, lines: list[bytes] | None) -> None:
        self.lines = lines
        self.closed = threading.Event()

    def stream(self, amt: Any = None, decode_content: Any = None) -> Iterator[bytes]:
        if self.lines is None:
            self.closed.wait(10)
            return
        yield from self.lines

    def shutdown(self) -> None:
        self.closed.set()

    def close(self) -> None:
        self.closed.set()

    def release_conn(self) -> None:
        pass


class ScriptedApi:
    """Each LIST answers the next of ``lists`` (pages of items, or an ApiError to raise);
    each watch the next of ``watches`` (lines, or an exception to raise); past the end,
    a watch stays open."""

    def __init__(self, lists: list[Any], watches: list[Any]) -> None:
        self.lists, self.watches = lists, watches
        self.watched_from: list[str] = []
        self.listed = 0

    async def pages(self, res: Resource, *, limit: int) -> AsyncIterator[dict[str, Any]]:
        self.listed += 1
        answer = self.lists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        for items, rv in answer:
            yield {"items": items, "metadata": {"resourceVersion": rv}}

    def open_watch(self, res: Resource, rv: str) -> Stream:
        self.watched_from.append(rv)
        script = self.watches.pop(0) if self.watches else None
        if isinstance(script, Exception):
            raise script
        return Stream(script)


class Seen:
    def __init__(self) -> None:
        self.log: list[tuple[str, list[str]]] = []

    async def listed(self, pages: Pages) -> None:
        self.log.append(("list", [o["metadata"]["name"] async for page in pages for o in page]))

    def event(self, kind: str, o: dict[str, Any]) -> None:
        self.log.append((kind, [o["metadata"]["name"]]))


def loop_on(api: ScriptedApi, seen: Seen, **kw: Any) -> ListWatch:
    return ListWatch(
        api=api,  # type: ignore[arg-type]
        resource=RES,
        page_size=2,
        on_list=seen.listed,
        on_event=seen.event,
        **kw,
    )


async def test_bookmarks_move_the_watch_on_and_410_lists_again() -> None:
    api = ScriptedApi(
        lists=[[([obj("a", 5), obj("b", 6)], "10"), ([obj("c", 7)], "10")], [([obj("d", 20)], "20")]],
        watches=[
            [event("ADDED", obj("e", 11)), event("BOOKMARK", {"metadata": {"resourceVersion": "15"}})],
            [event("ERROR", {"kind": "Status", "code": 410, "message": "too old resource version"})],
        ],
    )
    seen = Seen()
    w = loop_on(api, seen)
    await w.start()
    try:
        await until(lambda: len(api.watched_from) == 3, "the watch after the second LIST")
        assert api.watched_from == ["10", "15", "20"]
        assert seen.log == [("list", ["a", "b", "c"]), ("ADDED", ["e"]), ("list", ["d"])]
        assert w.synced and w.live
    finally:
        w.stop()


async def test_a_broken_watch_resumes_without_listing() -> None:
    api = ScriptedApi(
        lists=[[([obj("a", 5)], "10")]],
        watches=[[event("MODIFIED", obj("a", 12))], make(None, "connection reset"), make(500, "oops")],
    )
    seen = Seen()
    w = loop_on(api, seen)
    await w.start()
    try:
        await until(lambda: len(api.watched_from) == 4, "the watch resumed")
        assert api.watched_from == ["10", "12", "12", "12"] and api.listed == 1
        assert seen.log == [("list", ["a"]), ("MODIFIED", ["a"])]
    finally:
        w.stop()


async def test_relist_after_break_is_not_live_until_listed_again() -> None:
    api = ScriptedApi(
        lists=[[([obj("a", 5)], "10")], make(503, "unavailable"), [([], "30")]],
        watches=[make(None, "connection reset")],
    )
    seen = Seen()
    w = loop_on(api, seen, relist_after_break=True)
    await w.start()
    try:
        await until(lambda: api.listed == 2, "a LIST after the break (it fails)")
        assert not w.live
        await until(lambda: api.watched_from == ["10", "30"], "listed again, then watching")
        assert w.live and api.listed == 3
        assert seen.log == [("list", ["a"]), ("list", [])]
    finally:
        w.stop()


async def test_absent_means_none_and_a_failed_first_list_is_tried_again() -> None:
    seen = Seen()
    gone = loop_on(ScriptedApi(lists=[make(404, "no such CRD")], watches=[]), seen, absent=(404,))
    await gone.start()
    gone.stop()
    assert gone.synced and seen.log == [("list", [])]

    api = ScriptedApi(lists=[make(403, "forbidden"), [([obj("a", 5)], "10")]], watches=[])
    seen = Seen()
    synced: list[bool] = []
    w = loop_on(api, seen, absent=(404,), on_synced=lambda: synced.append(True))
    await w.start()
    try:
        assert not w.synced and api.watched_from == []
        await until(lambda: api.watched_from == ["10"], "listed in the background, then watching")
        assert w.synced and synced == [True] and seen.log == [("list", ["a"])]
    finally:
        w.stop()


async def test_a_list_in_flight_is_waited_for_and_stop_cancels_it() -> None:
    api = ScriptedApi(
        lists=[[([obj("a", 5)], "10")], [([obj("b", 20)], "20")]],
        watches=[[event("ERROR", {"kind": "Status", "code": 410, "message": "too old resource version"})]],
    )
    listing: list[str] = []
    release = asyncio.Event()

    async def listed(pages: Pages) -> None:
        # The LIST after the 410 hangs: the thread waits for it (never a second one
        # beside it), until stop() cancels it.
        listing.append("start")
        try:
            async for _page in pages:
                if len(listing) > 1:
                    await release.wait()
        except asyncio.CancelledError:
            listing.append("cancelled")
            raise

    w = ListWatch(api=api, resource=RES, page_size=2, on_list=listed, on_event=lambda *_: None)  # type: ignore[arg-type]
    await w.start()
    await until(lambda: api.listed == 2, "the LIST after the 410")
    w.stop()
    await until(lambda: listing == ["start", "start", "cancelled"], "the LIST cancelled")
    assert api.listed == 2 and not w.live


async def test_a_watch_stopped_while_it_opens_is_not_read() -> None:
    read: list[bool] = []

    class Recorded(Stream):
        def stream(self, amt: Any = None, decode_content: Any = None) -> Iterator[bytes]:
            read.append(True)
            yield from super().stream(amt, decode_content)

    class StoppedWhileOpening(ScriptedApi):
        def open_watch(self, res: Resource, rv: str) -> Stream:
            w.stop()  # from another thread, before stop() can know the response
            self.opened = Recorded(None)  # stays open until shut down
            return self.opened

    api = StoppedWhileOpening(lists=[[([obj("a", 5)], "10")]], watches=[])
    w = loop_on(api, Seen())
    await w.start()
    await until(lambda: hasattr(api, "opened") and api.opened.closed.is_set(), "the watch closed")
    assert read == []


async def test_stop_does_not_need_a_response_that_can_shut_down() -> None:
    class Urllib3BeforeShutdown(Stream):  # urllib3 before 2.3
        reading = threading.Event()

        def stream(self, amt: Any = None, decode_content: Any = None) -> Iterator[bytes]:
            self.reading.set()
            yield from super().stream(amt, decode_content)

        def __getattribute__(self, name: str) -> Any:
            if name == "shutdown":
                raise AttributeError(name)
            return super().__getattribute__(name)

    opened = Urllib3BeforeShutdown(None)

    class Old(ScriptedApi):
        def open_watch(self, res: Resource, rv: str) -> Stream:
            return opened

    w = loop_on(Old(lists=[[([obj("a", 5)], "10")]], watches=[]), Seen())
    await w.start()
    await until(opened.reading.is_set, "the watch read")
    try:
        w.stop()
        assert not w.live
    finally:
        opened.closed.set()  # what its next line would do


async def test_a_403_on_a_later_list_keeps_what_was_listed() -> None:
    # A transient rights problem (an RBAC rollout) must not take every object away: the
    # re-LIST after a 410 that gets 403 keeps the first LIST's objects and is tried again.
    api = ScriptedApi(
        lists=[[([obj("a", 5)], "10")], make(403, "forbidden"), [([obj("a", 5), obj("b", 21)], "30")]],
        watches=[[event("ERROR", {"kind": "Status", "code": 410, "message": "too old resource version"})]],
    )
    seen = Seen()
    w = loop_on(api, seen, absent=(403, 404))
    await w.start()
    try:
        await until(lambda: api.listed == 3 and len(api.watched_from) == 2, "the LIST after the refused one")
        assert seen.log == [("list", ["a"]), ("list", ["a", "b"])]  # never an empty list
        assert api.watched_from == ["10", "30"]
    finally:
        w.stop()
