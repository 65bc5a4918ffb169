"""kubernetes' ApiClient for every process that talks to the API server through the
client library (the master, ``nfd dra``, ``nfd prune``, ``kubectl nfd``): from a kubeconfig,
else the in-cluster configuration; retries are left to the caller.

Nothing of nfd's is imported here, so that a node's process (``nfd dra``) loads no part
of the master to get a client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class NoClusterError(Exception):
    """No kubeconfig and no in-cluster configuration."""


def load_api_client(kubeconfig: Path | None, pool_size: int) -> Any:
    """An ApiClient from ``kubeconfig``, else the in-cluster config, else $KUBECONFIG or
    ~/.kube/config. Raises NoClusterError when none exists, ValueError when the chosen
    one is unusable."""
    import os

    from kubernetes import client, config

    conf = client.Configuration()
    try:
        if kubeconfig is not None:
            config.load_kube_config(config_file=str(kubeconfig), client_configuration=conf)  # type: ignore[no-untyped-call]
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=conf)  # type: ignore[no-untyped-call]
        else:
            default = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
            first = default.split(os.pathsep)[0]
            if not first or not os.path.exists(first):
                raise NoClusterError("no kubeconfig and no in-cluster configuration")
            config.load_kube_config(config_file=first, client_configuration=conf)  # type: ignore[no-untyped-call]
    except config.ConfigException as e:
        raise ValueError(f"kubeconfig: {e}") from None
    return make_api_client(conf, pool_size)


def make_api_client(conf: Any, pool_size: int) -> Any:
    """An ApiClient on ``conf`` (a kubernetes Configuration) with ``pool_size`` connections
    and without urllib3's own retries."""
    from kubernetes import client

    conf.connection_pool_maxsize = pool_size
    conf.retries = 0  # retries are ours: with backoff, jitter and a fresh read on 409
    return client.ApiClient(conf)
