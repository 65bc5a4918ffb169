"""``kubectl nfd``: the operator's view of nfd on a cluster, with the caller's own
kubeconfig credentials.

- ``access``: the API server, and the master's read API through the API server's
  service proxy (or a URL the caller gives).
- ``story``: what the master (or, without it, the Node objects) says of nodes.
- ``clustertest``: rules evaluated against every node's current features.
"""
