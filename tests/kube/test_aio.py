"""The master's Node writes on the event loop (``nfd.kube.aio``), against a small server
that answers as told: framing, kept-alive connections, a connection the server closed
meanwhile, answers cut short, timeouts. The fake API server covers the rest (every
master test writes Nodes through it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from nfd.kube.aio import Connections
from nfd.kube.wire import ProtocolError

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"


class Server:
    """Answers each request on a connection with the next of ``answers`` (bytes, or a
    callable that gets the writer), counting connections and keeping the requests."""

    def __init__(self, answers: list[bytes | Callable[[asyncio.StreamWriter], None]]) -> None:
        self.answers = answers
        self.connections = 0
        self.requests: list[bytes] = []
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(h.split(b":")[1])
                        for h in head.split(b"\r\n")
                        if h.lower().startswith(b"content-length")
                    ),
                    0,
                )
                self.requests.append(head + await reader.readexactly(length))
                answer = self.answers.pop(0)
                if callable(answer):
                    answer(writer)
                    await reader.read()  # until the client lets go (or the answer closed)
                    return
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def server() -> AsyncIterator[Callable[..., Server]]:
    servers: list[asyncio.Server] = []

    async def start(*answers: bytes | Callable[[asyncio.StreamWriter], None]) -> Server:
        s = Server(list(answers))
        srv = await asyncio.start_server(s.handle, "127.0.0.1", 0)
        servers.append(srv)
        s.url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
        return s

    yield start  # type: ignore[misc]
    for srv in servers:
        srv.close()


async def test_a_request_carries_its_headers_and_body_and_reuses_the_connection(server) -> None:
    s = await server(OK, b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello")
    conns = Connections(s.url, None)
    first = await conns.request("PATCH", "/api/v1/nodes/a", {"Authorization": "Bearer t"}, b"[]", 5)
    second = await conns.request("GET", "/x?y=1", {}, None, 5)
    conns.close()
    assert (first.status, first.body, second.status, second.body) == (200, b"{}", 201, b"hello")
    assert s.connections == 1
    head = s.requests[0].decode()
    assert head.startswith("PATCH /api/v1/nodes/a HTTP/1.1\r\n")
    assert "Authorization: Bearer t\r\n" in head and "Content-Length: 2\r\n" in head
    assert head.endswith("\r\n\r\n[]") and s.requests[1].startswith(b"GET /x?y=1 HTTP/1.1\r\n")


async def test_a_chunked_answer_and_its_retry_after(server) -> None:
    s = await server(
        b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
    )
    reply = await Connections(s.url, None).request("GET", "/", {}, None, 5)
    assert (reply.status, reply.retry_after, reply.body) == (429, "2", b"abcde")


async def test_a_kept_connection_the_server_closed_is_replaced_once(server) -> None:
    # The first connection answers once and is closed by the server while idle; the
    # request after it goes again on a fresh connection, which the server answers.
    s = await server(OK, lambda w: w.close(), OK)
    conns = Connections(s.url, None)
    assert (await conns.request("GET", "/", {}, None, 5)).status == 200
    assert (await conns.request("GET", "/", {}, None, 5)).status == 200
    assert s.connections == 2


async def test_a_connection_the_server_closed_while_idle_is_not_waited_on(server) -> None:
    def answer_and_close(w: asyncio.StreamWriter) -> None:
        w.write(OK)
        w.close()

    s = await server(answer_and_close, OK)
    conns = Connections(s.url, None)
    assert (await conns.request("GET", "/", {}, None, 5)).status == 200
    await asyncio.sleep(0.1)  # the close reaches the client while the connection is idle
    assert (await conns.request("GET", "/", {}, None, 1)).status == 200
    assert s.connections == 2


async def test_a_connection_the_server_closes_is_not_kept(server) -> None:
    s = await server(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}", OK)
    conns = Connections(s.url, None)
    await conns.request("GET", "/", {}, None, 5)
    await conns.request("GET", "/", {}, None, 5)
    assert s.connections == 2


async def test_a_body_without_length_ends_with_the_connection(server) -> None:
    def answer(w: asyncio.StreamWriter) -> None:
        w.write(b'HTTP/1.1 200 OK\r\n\r\n{"a": 1}')
        w.close()

    s = await server(answer)
    reply = await Connections(s.url, None).request("GET", "/", {}, None, 5)
    assert (reply.status, reply.body) == (200, b'{"a": 1}')


async def test_an_answer_cut_short_or_malformed_is_a_protocol_error(server) -> None:
    def cut(w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
        w.close()

    s = await server(cut)
    with pytest.raises(ProtocolError):
        await Connections(s.url, None).request("GET", "/", {}, None, 5)
    s = await server(b"SMTP ready\r\n\r\n")
    with pytest.raises(ProtocolError):
        await Connections(s.url, None).request("GET", "/", {}, None, 5)


async def test_a_fresh_connection_closed_without_an_answer_is_not_sent_again(server) -> None:
    s = await server(lambda w: w.close(), OK)
    with pytest.raises(ProtocolError):
        await Connections(s.url, None).request("PATCH", "/", {}, b"[]", 5)
    assert s.connections == 1


async def test_a_server_that_does_not_answer_times_out(server) -> None:
    s = await server(lambda w: None)
    with pytest.raises(TimeoutError):
        await Connections(s.url, None).request("GET", "/", {}, None, 0.2)


async def test_nothing_listening_is_an_os_error() -> None:
    with pytest.raises(OSError):
        await Connections("http://127.0.0.1:1", None).request("GET", "/", {}, None, 5)
