"""The node agent: discover this node's features and keep the master current.

- ``client``: the master's HTTP API, over the HTTP/1.1 and the token file reader the
  light Kubernetes transport uses (:mod:`nfd.kube.wire`, :mod:`nfd.kube.tokenfile`).
- ``loop``: one pass (discover, then full features or a heartbeat) and its outcome;
  retries on :class:`nfd.backoff.Backoff`, with jitter, honouring Retry-After.
- ``schedule``: when passes run (APScheduler interval, triggers, retries).
- ``watch``: features.d changes (inotify, else mtime polling).
- ``hotplug``: PCI/USB hot-plug events (pyudev, or an adapter tests feed).
- ``debounce``: many events in a burst become one trigger.
- ``metrics``: Prometheus metrics and the /healthz + /metrics server.

Nothing here imports kubernetes, fastapi, pydantic or grpc.
"""
