"""The node agent: discover this node's features and keep the master current.

- ``client``: the master's HTTP API (stdlib http.client, keep-alive, token per request).
- ``loop``: one pass (discover, then full features or a heartbeat) and its outcome;
  retries on :class:`nfd.backoff.Backoff`, with jitter, honouring Retry-After.
- ``schedule``: when passes run (APScheduler interval, triggers, retries).
- ``watch``: features.d changes (inotify, else mtime polling).
- ``hotplug``: PCI/USB hot-plug events (pyudev, or an adapter tests feed).
- ``debounce``: many events in a burst become one trigger.
- ``metrics``: Prometheus metrics and the /healthz + /metrics server.

Nothing here imports kubernetes, fastapi, pydantic or grpc.
"""
