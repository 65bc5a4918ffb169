"""What several commands share: the options they declare alike (host root, node name,
kubeconfig, the cluster as the caller reads it, port, the publishing policy, the device
options), reading the host root and the worker config file from them, and stopping on
SIGTERM/SIGINT. Errors become CliError (one line, exit 2)."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import argparse
    import logging
    from collections.abc import Callable, Iterator
    from contextlib import AbstractContextManager
    from typing import Any

    from nfd.config import WorkerConfig
    from nfd.hostroot import HostRoot
    from nfd.kube.config import Credentials
    from nfd.kube.light import LightTransport
    from nfd.kubectl.access import Cluster
    from nfd.worker.metrics import Exposition, StatusServer

T = TypeVar("T")


def host_root(path: str | None) -> HostRoot:
    """``--host-root DIR`` (every part below DIR), else the NFD_HOST_* environment."""
    import os

    from nfd.cli import CliError
    from nfd.hostroot import HostRoot

    if path is None:
        return HostRoot.from_env()
    if not os.path.isdir(path):
        reason = "not a directory" if os.path.exists(path) else "no such directory"
        raise CliError(f"--host-root {path}: {reason}")
    return HostRoot.under(path)


def config_file(path: str | None, model: type[T], *, warn: Callable[[str], None]) -> T:
    """A binary's config file read into ``model`` (``model()``'s defaults without one);
    unknown keys are passed to ``warn``; a bad one is a one-line CliError naming the file
    and key."""
    from nfd.cli import CliError
    from nfd.settings import ConfigError, load_model

    if not path:
        return model()
    try:
        config, warnings = load_model(path, model)
    except ConfigError as e:
        raise CliError(str(e)) from None
    for w in warnings:
        warn(w)
    return config


def worker_config(path: str | None, *, warn: Callable[[str], None]) -> WorkerConfig:
    """The worker config file's settings (see :func:`config_file`)."""
    from nfd.config import WorkerConfig

    return config_file(path, WorkerConfig, warn=warn)


def add_policy_arguments(p: argparse.ArgumentParser, *, master: bool) -> None:
    """The publishing policy's flags, as the master takes them (``master``: with the
    label whitelist and taints, which ``nfd discover`` has no use for)."""
    p.add_argument(
        "--extra-label-ns", action="append", default=[], metavar="NS",
        help="also allow labels in namespace NS, even a denied one (repeatable, or comma-separated)",
    )  # fmt: skip
    p.add_argument(
        "--deny-label-ns", action="append", default=[], metavar="NS",
        help="refuse labels in namespace NS; '*.example.com' refuses its subdomains, '*' all (repeatable)",
    )  # fmt: skip
    if master:
        p.add_argument(
            "--label-whitelist", metavar="REGEX",
            help="publish only labels whose name (after the namespace) matches REGEX",
        )  # fmt: skip
        p.add_argument(
            "--enable-taints", action="store_true",
            help="let rules taint the node (without it, taints are reported as rejected)",
        )  # fmt: skip


def add_device_arguments(p: argparse.ArgumentParser, *, discovers: str) -> None:
    """The flags ``nfd device-plugin`` and ``nfd dra`` share: where CDI specs go, the
    host, the features to select devices from (``discovers``: the sources read without
    ``--features``), the health poll and the metrics port."""
    p.add_argument(
        "--cdi-dir", metavar="DIR", default="/var/run/cdi", help="where CDI spec files are written"
    )
    add_host_root_argument(p)
    p.add_argument(
        "--features", metavar="FILE",
        help=f"use these raw features (upstream JSON shape, or `nfd discover -o json` output) "
        f"instead of discovering {discovers}",
    )  # fmt: skip
    p.add_argument(
        "--poll-interval", metavar="SECONDS", type=float, default=0.2,
        help="device health poll interval (default 0.2)",
    )  # fmt: skip
    add_port_argument(p, serves="/healthz and /metrics", default="0 = off")


def add_host_root_argument(p: argparse.ArgumentParser, *, reads: str | None = None) -> None:
    """``--host-root DIR``, as host_root() takes it (``reads``: the host directories the
    command reads, named in its help)."""
    if reads is None:
        help_text = "host filesystem root (default from NFD_HOST_* variables)"
    else:
        help_text = f"read the host's {reads} below DIR (default: from NFD_HOST_* variables, else /)"
    p.add_argument("--host-root", metavar="DIR", help=help_text)


def add_node_name_argument(p: argparse.ArgumentParser, *, env_default: bool = True) -> None:
    """``--node-name`` (``env_default``: $NODE_NAME as the parser's default; without it
    the command reads $NODE_NAME itself, to say which of the two a bad name came from)."""
    import os

    default = os.environ.get("NODE_NAME") if env_default else None
    p.add_argument(
        "--node-name", metavar="NAME", default=default, help="this node's name (default $NODE_NAME)"
    )


def add_kubeconfig_argument(
    p: argparse.ArgumentParser, help_text: str = "kubeconfig (default: in-cluster, then $KUBECONFIG)"
) -> None:
    p.add_argument("--kubeconfig", metavar="FILE", help=help_text)


def kube_credentials(kubeconfig: str | None) -> Credentials:
    """The API server and our credentials from ``--kubeconfig`` (else in-cluster, then
    $KUBECONFIG); CliError when the file is missing, no cluster is configured or the
    config is unusable."""
    from nfd.cli import CliError
    from nfd.kube.config import load
    from nfd.settings import ConfigError

    try:
        creds = load(kubeconfig)
        creds.ssl_context()  # a bad CA or client certificate: said now, in one line
    except ConfigError as e:
        # the flag's name, as every other flag's error starts
        raise CliError(f"--{e}" if kubeconfig and str(e).startswith("kubeconfig ") else str(e)) from None
    return creds


def light_transport(
    kubeconfig: str | None, *, timeout: float = 30.0, user_agent: str = "nfd"
) -> LightTransport:
    """The per-node agents' transport (``nfd.kube.light``): no ``kubernetes`` package."""
    from nfd.kube.light import LightTransport

    return LightTransport(kube_credentials(kubeconfig), timeout=timeout, user_agent=user_agent)


def api_client(kubeconfig: str | None, pool_size: int) -> Any:
    """kubernetes' ApiClient (``nfd.kube.heavy``) from ``--kubeconfig``, as
    :func:`kube_credentials` finds it."""
    from nfd.kube.heavy import api_client as make

    return make(kube_credentials(kubeconfig), pool_size)


def add_cluster_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of the commands that read the cluster as the caller (``kubectl nfd``,
    ``nfd rules test --cluster``): kubeconfig, nfd's namespace, the master's address,
    its CA and a token for its reads."""
    from nfd.kubectl.access import CA_CONFIGMAP, DEFAULT_NAMESPACE

    add_kubeconfig_argument(p)
    p.add_argument(
        "-n", "--namespace", default=DEFAULT_NAMESPACE, metavar="NS",
        help=f"where nfd's master runs (default {DEFAULT_NAMESPACE})",
    )  # fmt: skip
    p.add_argument(
        "--master-url", metavar="URL",
        help="the master's address, e.g. https://localhost:8080 after kubectl port-forward "
        "(default: through the API server's service proxy)",
    )  # fmt: skip
    p.add_argument(
        "--master-ca", metavar="FILE",
        help=f"with --master-url: the CA to verify it against (default: the {CA_CONFIGMAP} ConfigMap)",
    )  # fmt: skip
    p.add_argument(
        "--token", metavar="TOKEN",
        help="bearer token for the master's reads (default: the kubeconfig's, if it has one; "
        "e.g. $(kubectl create token SA -n NS) when it holds a client certificate)",
    )  # fmt: skip


def cluster_session(args: argparse.Namespace) -> AbstractContextManager[Cluster]:
    """The caller's cluster (from :func:`add_cluster_arguments`' flags) for one command,
    closed after it. An ``nfd.kube`` ApiError leaving the block becomes a one-line
    CliError: a usage error when the API server could not parse ``--selector``, exit 1
    otherwise."""
    from contextlib import contextmanager

    from nfd.cli import CliError
    from nfd.kube.errors import ApiError
    from nfd.kubectl.access import Cluster

    if args.master_ca and not args.master_url:
        raise CliError("--master-ca goes with --master-url")
    from nfd.kube.light import LightTransport

    cluster = Cluster(
        LightTransport(kube_credentials(args.kubeconfig)),
        args.namespace,
        args.master_url,
        args.master_ca,
        args.token,
    )

    @contextmanager
    def session() -> Iterator[Cluster]:
        try:
            yield cluster
        except ApiError as e:
            selector = getattr(args, "selector", "")
            if e.status == 400 and selector:
                raise CliError(f"--selector {selector!r}: {e}") from None
            raise CliError(str(e), code=1) from None
        finally:
            cluster.close()

    return session()


def add_port_argument(p: argparse.ArgumentParser, *, serves: str, default: str) -> None:
    """``--port N`` for the command's HTTP endpoints (None when not given)."""
    p.add_argument("--port", type=int, default=None, help=f"port for {serves} (default {default})")


def serve_status(
    metrics: Exposition,
    port: int | None,
    log: logging.Logger,
    healthy: Callable[[], tuple[bool, str]] | None = None,
) -> StatusServer | None:
    """/healthz (``healthy``'s answer; default always ok) and /metrics on ``port`` (None or
    0: not served). Raises CliError when the port cannot be bound."""
    from nfd.cli import CliError
    from nfd.worker.metrics import StatusServer

    if not port:
        return None
    if not 0 < port < 65536:
        raise CliError(f"--port {port}: expected 1-65535, or 0 for none")
    try:
        server = StatusServer(metrics, healthy or (lambda: (True, "ok")), port=port)
    except OSError as e:
        raise CliError(f"--port {port}: {e.strerror or e}") from None
    server.start()
    log.info("serving /healthz and /metrics on port %d", server.port)
    return server


def stop_on_signals(stop: Callable[[], object], log: logging.Logger) -> None:
    """SIGTERM (how a Pod is stopped) and SIGINT call ``stop``, which ends the command's
    run loop; the command then exits 0.

    ``stop`` runs on a thread of its own, once: a handler runs on the main thread
    wherever it was interrupted, perhaps holding a lock that ``stop`` takes (an Event's,
    as a wait begins or ends), and ``stop`` would wait there for good."""
    import signal
    import threading

    started: list[threading.Thread] = []

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: stopping", signum)
        if not started:
            started.append(threading.Thread(target=stop, name="nfd-stop", daemon=True))
            started[0].start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
