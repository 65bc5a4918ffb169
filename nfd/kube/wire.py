"""HTTP/1.1 as the node's agents speak it: the light transport to the API server and
the worker's client to the master. One request at a time on a kept-alive connection,
answers framed by Content-Length, chunked or by the connection's end, and the one rule
for a kept-alive connection the server closed meanwhile (:func:`worth_resending`).

Why not ``http.client``: its answer read parses the headers through the ``email``
package, most of the client's CPU time for a small answer (a DRA prepare reads one
claim on kubelet's path). The API server's answers need none of that: a status line,
a few headers, a body. ``ssl`` is loaded by whoever makes the context (only for
https): it is a few MiB of resident memory that a plain-http worker does not pay."""

from __future__ import annotations

import io
import socket
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    import ssl

MAX_LINE = 65536  # a status line, header line or chunk-size line longer than this is refused
MAX_HEADERS = 100
NO_BODY = (204, 304)


class ProtocolError(Exception):
    """The server's bytes are not an HTTP/1.1 answer."""


class NoAnswer(ProtocolError):
    """The connection ended before any byte of an answer: a kept-alive connection the
    server closed meanwhile (worth sending again on a fresh one)."""


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Retry-After as seconds: either a number of seconds or an HTTP date."""
    value = (value or "").strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    # Loaded here, not at the top: the API server and the master send seconds, and
    # ``email.utils`` costs milliseconds of start-up and its share of memory on every node.
    from datetime import UTC
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # asctime's form names no zone: HTTP dates are all in GMT
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def worth_resending(e: BaseException, kept: bool) -> bool:
    """Whether a request that failed with ``e`` goes once more on a fresh connection: a
    kept-alive (``kept``) connection the server closed while idle (an API server's or
    uvicorn's idle timeout, a restart) fails before any answer, by EOF, reset or broken
    pipe. Any other failure, or any failure on a fresh connection, is the answer."""
    return kept and isinstance(e, NoAnswer | ConnectionResetError | BrokenPipeError)


class Answer:
    """An answer's status and headers (names in lower case), its body still unread."""

    def __init__(self, status: int, headers: dict[str, str], will_close: bool) -> None:
        self.status = status
        self.headers = headers
        self.will_close = will_close  # the server ends the connection after this answer


def authority(host: str, port: int) -> str:
    """The Host header's value: an IPv6 address goes in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class Connection:
    """One connection, opened at the first request (outside the transport's lock)."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext | None) -> None:
        self.host, self.port, self.context = host, port, context
        self.sock: socket.socket | None = None
        self.timeout: float | None = None
        self._rfile: io.BufferedReader | None = None

    def settimeout(self, timeout: float) -> None:
        self.timeout = timeout
        if self.sock is not None:
            self.sock.settimeout(timeout)

    def send(self, head: str, body: bytes | None) -> None:
        if self.sock is None:
            sock = socket.create_connection((self.host, self.port), self.timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.context is not None:
                sock = self.context.wrap_socket(sock, server_hostname=self.host)
            self.sock, self._rfile = sock, sock.makefile("rb")
        data = head.encode("latin-1")
        self.sock.sendall(data + body if body else data)

    def answer(self) -> Answer:
        """The status and headers of the answer to the request just sent (1xx skipped)."""
        assert self._rfile is not None
        while True:
            answer = _head(_head_lines(self._rfile))
            if answer.status >= 200:
                return answer

    def exchange(self, head: str, body: bytes | None) -> tuple[Answer, bytes]:
        """Sends one request and reads its whole answer."""
        self.send(head, body)
        answer = self.answer()
        return answer, self.body(answer)

    def body(self, answer: Answer) -> bytes:
        assert self._rfile is not None
        return b"".join(_body(answer, self._rfile))

    def lines(self, answer: Answer) -> Iterator[bytes]:
        """The body's lines as they come (a watch's events), the last one unfinished
        if the stream ends midway."""
        assert self._rfile is not None
        rest = b""
        for part in _body(answer, self._rfile, stream=True):
            rest += part
            *done, rest = rest.split(b"\n")
            yield from done
        if rest:
            yield rest

    def close(self) -> None:
        sock, self.sock = self.sock, None
        if sock is not None:
            sock.close()
        if self._rfile is not None:
            self._rfile.close()
            self._rfile = None


def request_head(
    method: str, target: str, authority: str, headers: dict[str, str], length: int | None
) -> str:
    """The request line and headers; ``length``: the body's (None: no body)."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {authority}", "Accept-Encoding: identity"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    if length is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {length or 0}")
    head = "\r\n".join(lines)
    breaks = len(lines) - 1  # those the join made: any other would split a header in two
    if head.count("\n") != breaks or head.count("\r") != breaks:
        raise ValueError("a request line or header holds a line break")
    return head + "\r\n\r\n"


def _head_lines(rfile: io.BufferedReader) -> list[str]:
    """The status line and header lines of the next answer, without their line ends.
    An API server's answer comes in one segment, its head all there at the first look:
    split at once, instead of a read per line (most of a small answer's parsing)."""
    got = rfile.peek(MAX_LINE)  # what has come, without taking it
    if not got:
        raise NoAnswer("the server closed the connection without an answer")
    end = got.find(b"\r\n\r\n")
    # Only with CRLF line ends throughout: a head ended by bare LFs is read by lines (the
    # CRLFs found would be in its body).
    if end >= 0 and got.count(b"\n", 0, end) == got.count(b"\r\n", 0, end):
        lines = rfile.read(end + 4)[:end].decode("latin-1").split("\r\n")
        if len(lines) > MAX_HEADERS + 1:
            raise ProtocolError(f"more than {MAX_HEADERS} headers")
        return lines
    out: list[str] = []
    for _ in range(MAX_HEADERS + 1):
        line = rfile.readline(MAX_LINE + 1)
        if len(line) > MAX_LINE:
            raise ProtocolError("an answer's line is too long")
        if line in (b"\r\n", b"\n"):
            return out
        if not line:
            raise ProtocolError("the answer's headers are cut short")
        out.append(line.decode("latin-1").rstrip("\r\n"))
    raise ProtocolError(f"more than {MAX_HEADERS} headers")


def _head(lines: list[str]) -> Answer:
    """The answer of a status line and header lines (see :func:`_head_lines`)."""
    parts = lines[0].split(None, 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/1."):
        raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    try:
        status = int(parts[1])
    except ValueError:
        raise ProtocolError(f"bad status: {parts[1][:20]!r}") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon:
            raise ProtocolError("the answer's headers are malformed")
        key = name.strip().lower()
        value = value.strip()
        # Repeated fields join as one (RFC 9110 5.3); Connection and Transfer-Encoding
        # are lists anyway.
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    connection = headers.get("connection", "").lower()
    # HTTP/1.0 closes unless told otherwise; 1.1 keeps the connection unless told.
    will_close = "keep-alive" not in connection if parts[0] == "HTTP/1.0" else "close" in connection
    if (
        status not in NO_BODY
        and status >= 200
        and "content-length" not in headers
        and "chunked" not in headers.get("transfer-encoding", "").lower()
    ):
        will_close = True  # the body ends with the connection
    return Answer(status, headers, will_close)


def _body(answer: Answer, rfile: BinaryIO, *, stream: bool = False) -> Iterator[bytes]:
    """The body's bytes, in parts; ``stream``: each part as soon as it comes."""
    h = answer.headers
    if answer.status in NO_BODY:
        return
    if "chunked" in h.get("transfer-encoding", "").lower():
        while True:
            line = rfile.readline(MAX_LINE + 1)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size: {line[:20]!r}") from None
            if size == 0:
                while rfile.readline(MAX_LINE + 1) not in (b"\r\n", b"\n", b""):
                    pass  # trailer fields: none that matter here
                return
            yield _exactly(rfile, size)
            if rfile.readline(MAX_LINE + 1) not in (b"\r\n", b"\n"):
                raise ProtocolError("a chunk does not end with CRLF")
    elif "content-length" in h:
        try:
            length = int(h["content-length"])
        except ValueError:
            raise ProtocolError(f"bad Content-Length: {h['content-length'][:20]!r}") from None
        if length < 0:
            raise ProtocolError("negative Content-Length")
        yield _exactly(rfile, length)
    else:  # until the server closes the connection
        while part := (rfile.readline(MAX_LINE) if stream else rfile.read()):
            yield part


def _exactly(rfile: BinaryIO, n: int) -> bytes:
    data = rfile.read(n)
    if len(data) < n:
        raise ProtocolError(f"the answer is cut short ({len(data)} of {n} bytes)")
    return data
