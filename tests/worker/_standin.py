"""TEMPORARY stand-in for `nfd master --no-publish --no-auth` (until the master lands)."""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

nodes: dict = {}
port = int(sys.argv[sys.argv.index("--port") + 1])
limit = int(sys.argv[sys.argv.index("--max-body-bytes") + 1]) if "--max-body-bytes" in sys.argv else 1 << 21


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, st, obj):
        b = json.dumps(obj).encode()
        self.send_response(st)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_PUT(self):
        n = int(self.headers["Content-Length"])
        raw = self.rfile.read(n)
        if n > limit:
            return self._send(413, {"detail": "body too large"})
        body = json.loads(raw)
        node = self.path.split("/")[4]
        nodes[node] = body
        self._send(200, {"node": node, "digest": body["digest"], "labels": {}, "rejected": {}})

    def do_POST(self):
        n = int(self.headers["Content-Length"])
        body = json.loads(self.rfile.read(n))
        node = self.path.split("/")[4]
        if node in nodes and nodes[node]["digest"] == body["digest"]:
            self._send(200, {"known": True})
        else:
            self._send(409, {"known": False, "detail": "unknown"})

    def do_GET(self):
        if self.path == "/healthz":
            return self._send(200, {})
        node = self.path.split("/")[4]
        if node in nodes:
            self._send(200, nodes[node])
        else:
            self._send(404, {"detail": "no"})

    def log_message(self, *a):
        pass


ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
