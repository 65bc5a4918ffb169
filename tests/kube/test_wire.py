"""The light transport's HTTP/1.1 framing (``nfd.kube.wire``) on answers the fake API
server does not give: chunked bodies, HTTP/1.0, bodies ended by the connection's end,
answers cut short or malformed."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from nfd.kube.wire import Connection, NoAnswer, ProtocolError, authority, request_head, worth_resending

Serve = Callable[[bytes | list[bytes]], tuple[Connection, list[bytes]]]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve(answer)``: a connection to a one-shot server that reads one request and
    sends ``answer`` (a list: its parts, a moment apart), then closes; the request it
    read is in ``got``."""
    servers: list[socket.socket] = []

    def start(answer: bytes | list[bytes]) -> tuple[Connection, list[bytes]]:
        srv = socket.create_server(("127.0.0.1", 0))
        servers.append(srv)
        got: list[bytes] = []

        def run() -> None:
            c, _ = srv.accept()
            with c:
                got.append(c.recv(65536))
                for i, part in enumerate([answer] if isinstance(answer, bytes) else answer):
                    if i:
                        time.sleep(0.05)
                    c.sendall(part)

        threading.Thread(target=run, daemon=True).start()
        conn = Connection("127.0.0.1", srv.getsockname()[1], None)
        conn.settimeout(5)
        return conn, got

    yield start
    for s in servers:
        s.close()


def exchange(serve: Serve, answer: bytes | list[bytes]) -> tuple[int, bytes, bool]:
    conn, _ = serve(answer)
    conn.send(request_head("GET", "/x", "h:1", {}, None), None)
    a = conn.answer()
    body = conn.body(a)
    conn.close()
    return a.status, body, a.will_close


def test_a_chunked_body_is_joined(serve: Serve) -> None:
    answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"
    assert exchange(serve, answer) == (200, b"abcde", False)


def test_a_body_without_length_ends_with_the_connection(serve: Serve) -> None:
    assert exchange(serve, b"HTTP/1.1 200 OK\r\n\r\n{}") == (200, b"{}", True)


def test_http_1_0_closes_unless_kept_alive(serve: Serve) -> None:
    assert exchange(serve, b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}") == (200, b"{}", True)
    kept = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}"
    assert exchange(serve, kept) == (200, b"{}", False)


def test_no_content_has_no_body_and_1xx_is_skipped(serve: Serve) -> None:
    answer = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n"
    assert exchange(serve, answer) == (204, b"", True)


def test_a_head_that_comes_in_parts_is_read_whole(serve: Serve) -> None:
    parts = [b"HTTP/1.1 200 OK\r\nContent-", b"Length: 2\r\nConnection: close\r", b"\n\r\n{}"]
    assert exchange(serve, parts) == (200, b"{}", True)


def test_a_head_in_bare_line_feeds_is_read_by_lines_though_its_body_holds_crlfs(serve: Serve) -> None:
    answer = b"HTTP/1.1 200 OK\nContent-Length: 6\nX-A: 1\n\nab\r\n\r\n"
    assert exchange(serve, answer) == (200, b"ab\r\n\r\n", False)


def test_repeated_headers_are_joined_and_names_lower_cased(serve: Serve) -> None:
    conn, _ = serve(b"HTTP/1.1 429 Too Many\r\nRetry-After: 3\r\nWarning: a\r\nWARNING: b\r\n\r\n")
    conn.send(request_head("GET", "/x", "h:1", {}, None), None)
    a = conn.answer()
    assert a.headers["retry-after"] == "3" and a.headers["warning"] == "a, b"
    conn.close()


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX",
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n",  # headers cut short
        b"HTTP/1.1 200 OK\r\n" + b"A: b\r\n" * 101 + b"\r\n",  # too many headers
        b"HTTP/1.1 200 OK\n" + b"A: b\n" * 101 + b"\n",  # the same, read by lines
    ],
)
def test_malformed_or_cut_answers_are_protocol_errors(serve: Serve, answer: bytes) -> None:
    with pytest.raises(ProtocolError):
        exchange(serve, answer)


def test_a_connection_closed_before_any_answer_says_so(serve: Serve) -> None:
    with pytest.raises(NoAnswer):
        exchange(serve, b"")


def test_lines_span_chunks_and_a_cut_stream_keeps_its_last_part(serve: Serve) -> None:
    stream = b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n5\r\n:1}\n{\r\n2\r\n}\n\r\n'
    conn, _ = serve(stream + b'3\r\n{"b\r\n0\r\n\r\n')
    conn.send(request_head("GET", "/w", "h:1", {}, None), None)
    assert list(conn.lines(conn.answer())) == [b'{"a":1}', b"{}", b'{"b']
    conn.close()


def test_the_request_head() -> None:
    head = request_head("PATCH", "/api/v1/nodes/n", authority("fd00::1", 443), {"Accept": "a/b"}, 7)
    assert head == (
        "PATCH /api/v1/nodes/n HTTP/1.1\r\nHost: [fd00::1]:443\r\nAccept-Encoding: identity\r\n"
        "Accept: a/b\r\nContent-Length: 7\r\n\r\n"
    )
    assert "Content-Length: 0" in request_head("POST", "/x", "h:1", {}, None)
    assert "Content-Length" not in request_head("GET", "/x", "h:1", {}, None)
    with pytest.raises(ValueError, match="line break"):
        request_head("GET", "/x", "h:1", {"Authorization": "Bearer a\r\nX-Evil: 1"}, None)


def test_the_request_reaches_the_server_as_sent(serve: Serve) -> None:
    conn, got = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    conn.send(request_head("PUT", "/x", "h:1", {}, 2), b"{}")
    assert conn.body(conn.answer()) == b""
    conn.close()
    assert got[0].endswith(b"Content-Length: 2\r\n\r\n{}")


def test_only_a_kept_alive_connection_the_server_closed_is_worth_sending_again(serve: Serve) -> None:
    conn, _ = serve(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    head = request_head("POST", "/x", "h:1", {}, 2)
    assert conn.exchange(head, b"{}")[1] == b"{}"
    time.sleep(0.05)  # the one-shot server has closed the connection, kept alive here
    with pytest.raises((NoAnswer, ConnectionResetError, BrokenPipeError)) as failed:
        conn.exchange(head, b"{}")
    assert worth_resending(failed.value, kept=True)
    assert not worth_resending(failed.value, kept=False)  # a fresh one's failure is the answer
    assert not worth_resending(TimeoutError(), kept=True)  # the server is slow, not gone
    assert not worth_resending(ProtocolError("bad"), kept=True)
    conn.close()
