"""The one access layer to the API server: credentials (``config``), the error
vocabulary (``errors``), two transports behind one interface (``transport``: ``light``
over the stdlib for the per-node agents, ``heavy`` over the ``kubernetes`` package for
the master; the request counter in ``transport`` and ``heavy``), the list-then-watch loop
(``listwatch``) and the AIMD limiter of requests in flight (``ratelimit``).

Two of its modules serve the worker's client to the master too, so that the node speaks
HTTP one way: ``wire`` (HTTP/1.1 framing, the kept-alive connection and when to resend
on it) and ``tokenfile`` (a rotated token file, read again when it changed)."""
