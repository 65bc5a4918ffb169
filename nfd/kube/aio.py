"""HTTP/1.1 to the API server on the event loop, for the master's Node writes: kept-alive
connections, each one request at a time, answers parsed by httptools (the C parser the
master's own server already runs on).

Why not the ``kubernetes`` client's thread pool for these: a write there is a hand-off to
one of 64 threads, urllib3 and ``http.client`` on that thread, and a hand-off back, all
under one GIL that the event loop needs for the features the workers send. On a box
where the API server and etcd want every core, that CPU is taken from the server
(docs/perf.md, "The master at scale"). The request itself (URL, headers, credentials) is
still built by the ``kubernetes`` client; only its sending moves here."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import httptools

from nfd.kube.wire import NoAnswer, ProtocolError, authority, request_head, worth_resending


@dataclass(frozen=True, slots=True)
class Reply:
    """An answer: its status, its Retry-After when it sent one, its body."""

    status: int
    retry_after: str | None
    body: bytes


class _Connection(asyncio.Protocol):
    """One connection; ``exchange`` sends a request and waits for the whole answer."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[Reply] | None = None
        self.parts: list[bytes] = []
        self.retry_after: str | None = None
        self.got_bytes = False
        self.framed = False  # the answer says where its body ends (else: at the connection's end)
        self.closed = False

    # -- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(ProtocolError(f"not an HTTP/1.1 answer: {e}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if exc is None and self.got_bytes and not self.framed and self.parser.get_status_code() >= 200:
            self._answer()  # a body that ends with the connection
            return
        if exc is None and not self.got_bytes:
            exc = NoAnswer("the server closed the connection without an answer")
        elif exc is None:
            exc = ProtocolError("the server closed the connection within an answer")
        self._fail(exc)

    # -- httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"retry-after":
            self.retry_after = value.decode("latin-1")
        elif name in (b"content-length", b"transfer-encoding"):
            self.framed = True

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)

    def on_message_complete(self) -> None:
        if self.parser.get_status_code() < 200:  # an interim answer: the real one follows
            self.parts.clear()
            return
        if not self.parser.should_keep_alive():
            self.close()
        self._answer()

    def _answer(self) -> None:
        body, self.parts = b"".join(self.parts), []  # an idle connection holds no answer
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(Reply(self.parser.get_status_code(), self.retry_after, body))

    # --
    def _fail(self, exc: BaseException) -> None:
        self.close()
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)

    async def exchange(self, data: bytes) -> Reply:
        assert self.transport is not None
        if self.closed:  # by the server while idle: nothing sent, nothing would answer
            raise NoAnswer("the server closed the connection while it was idle")
        self.waiter = asyncio.get_running_loop().create_future()
        self.parts, self.retry_after, self.got_bytes, self.framed = [], None, False, False
        self.transport.write(data)
        try:
            return await self.waiter
        finally:
            self.waiter = None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            try:
                self.transport.close()
            except RuntimeError:  # its event loop is closed: so is the socket
                pass


class Connections:
    """Kept-alive connections to one server, opened as needed and kept while idle; as
    many as requests in flight (the caller bounds that)."""

    def __init__(self, url: str, context: ssl.SSLContext | None) -> None:
        u = urlsplit(url)
        if u.scheme == "https" and context is None:
            context = ssl.create_default_context()
        self.host = u.hostname or "localhost"
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.context = context if u.scheme == "https" else None
        self.authority = authority(self.host, self.port)
        self._idle: list[_Connection] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        hostname = self.host if self.context is not None else None
        _, conn = await loop.create_connection(
            _Connection, self.host, self.port, ssl=self.context, server_hostname=hostname
        )
        return conn

    async def request(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes | None, timeout: float | None
    ) -> Reply:
        """One request and its whole answer; sent once more on a fresh connection when a
        kept-alive one turns out closed by the server before any answer."""
        data = request_head(
            method, target, self.authority, dict(headers), len(body) if body else None
        ).encode("latin-1")
        if body:
            data += body
        if self._loop is not asyncio.get_running_loop():
            # A connection serves the loop that opened it (a command may run one loop
            # after another).
            self.close()
            self._loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout):
            while True:
                kept = bool(self._idle)
                conn = self._idle.pop() if kept else await self._open()
                try:
                    reply = await conn.exchange(data)
                except BaseException as e:
                    conn.close()
                    if worth_resending(e, kept):
                        continue
                    raise
                if not conn.closed:
                    self._idle.append(conn)
                return reply

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
