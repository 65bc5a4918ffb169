"""The running master's parts and their lifecycle: built from settings, started and
stopped by the app's lifespan."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from nfd.kube.config import NoClusterError, load
from nfd.kube.heavy import api_client as make_api_client
from nfd.master.core.jobs import Jobs
from nfd.master.core.kube import KubeApi
from nfd.master.core.metrics import Metrics
from nfd.master.core.settings import MasterSettings
from nfd.master.decisions.decide import Decider
from nfd.master.decisions.service import MasterService
from nfd.master.publishing.publisher import KubePublisher, MemoryPublisher
from nfd.master.replication.leader import LeaderElector
from nfd.master.replication.peers import Forwarder
from nfd.master.replication.replica import PeerAuth, Replica
from nfd.master.security.auth import Authenticator
from nfd.master.security.readauth import ReadAuthorizer
from nfd.master.watches.gc import GarbageCollector
from nfd.master.watches.groups import GroupManager
from nfd.master.watches.nodefeatures import NodeFeatureWatcher
from nfd.master.watches.podwatch import PodWatch
from nfd.master.watches.rulewatch import RuleWatcher
from nfd.policy import Policy
from nfd.settings import ConfigError
from nfd.sources import FeatureSource, default_registry

log = logging.getLogger(__name__)


class SetupError(Exception):
    """The settings cannot work (message says why): the command exits with ``code``,
    2 for a bad setting or input file, 1 when what is missing is the environment's."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


@dataclass
class Runtime:
    settings: MasterSettings
    metrics: Metrics
    service: MasterService
    api: KubeApi | None
    authenticator: Authenticator | None
    elector: LeaderElector | None
    rules: RuleWatcher
    publisher: KubePublisher | MemoryPublisher
    forwarder: Forwarder
    # Readers of the API (None with --no-auth: reads are open then, as writes are).
    readers: ReadAuthorizer | None = None
    pods: PodWatch | None = None
    nodefeatures: NodeFeatureWatcher | None = None
    gc: GarbageCollector | None = None
    groups: GroupManager | None = None
    jobs: Jobs = field(default_factory=Jobs)  # the periodic ones: gc, resync, replication, TLS
    replica: Replica | None = field(init=False, default=None)
    peer_auth: PeerAuth = field(init=False)

    def __post_init__(self) -> None:
        self.peer_auth = PeerAuth(self)
        if self.elector is not None:
            self.replica = Replica(self)

    @property
    def mode(self) -> str:
        return self.publisher.mode

    def leader_url(self) -> str | None:
        """Where to forward workers' requests: the leader's URL while this replica
        follows and knows it; None when this replica handles them alone."""
        e = self.elector
        if e is None or e.leader or e.holder == e.s.identity:
            return None  # never to ourselves (a lease we held, unreadable now)
        return e.holder_url.rstrip("/") or None

    def own_token(self) -> str | None:
        """The credential this replica uses with the API server (its ServiceAccount
        token in a cluster): it shows the leader that a replication request is ours."""
        if self.api is None:
            return None
        keys = self.api.api_client.configuration.api_key or {}
        value = str(keys.get("authorization") or keys.get("BearerToken") or "")
        scheme, _, token = value.partition(" ")
        return (token if scheme.lower() == "bearer" else value).strip() or None

    def outcome_here(self) -> bytes:
        """What taking a worker's request here means (forward.OUTCOME)."""
        if self.mode == "memory":
            return b"memory"
        return b"queued" if self.may_write() else b"held"

    def may_write(self) -> bool:
        return self.elector is None or self.elector.leader

    def ready(self) -> tuple[bool, str]:
        """Ready = can take workers' requests, leader or not: a follower forwards them to
        the leader and keeps a copy, so every replica serves (rolling updates and drains
        need that)."""
        if not self.rules.synced:
            return False, "NodeFeatureRules not listed yet"
        if self.nodefeatures is not None and not self.nodefeatures.synced:
            return False, "NodeFeature objects not listed yet"
        if self.replica is not None and not self.replica.ready():
            return False, "copying the nodes' features from the leader"
        if self.elector is not None:
            return True, self.elector.status()
        return True, "ok"

    async def start(self) -> None:
        self.jobs.start()
        self.rules.load_files()
        self.service.set_rules(self.rules.rulesets())
        await self.rules.start()
        if self.pods is not None:
            await self.pods.start()
        if self.nodefeatures is not None:
            await self.nodefeatures.start()
        await self.publisher.start()
        if self.groups is not None:
            await self.groups.start()
        if self.gc is not None:
            self.gc.start(self.jobs)
        if self.elector is not None:
            self.elector.start()
        if self.replica is not None:
            self.replica.start()

    async def stop(self) -> None:
        self.jobs.stop()  # no job starts while the parts stop; a running one is cancelled
        self.rules.stop()
        if self.pods is not None:
            self.pods.stop()
        if self.replica is not None:
            await self.replica.stop()
        if self.nodefeatures is not None:
            self.nodefeatures.stop()
        if self.groups is not None:
            self.groups.stop()
        if self.elector is not None:
            await self.elector.stop()
        await self.publisher.stop()
        self.forwarder.close()
        if self.api is not None:
            self.api.close()


def build_runtime(
    settings: MasterSettings,
    *,
    api_client: object | None = None,
    sources: Iterable[FeatureSource] | None = None,
) -> Runtime:
    """Wire the parts. ``api_client``: a ready kubernetes ApiClient (tests), else one from
    the kubeconfig / in-cluster config; without either the master keeps nodes in memory.
    Raises SetupError when the settings cannot work."""
    try:
        policy = Policy.build(
            extra_label_ns=settings.policy.extra_label_ns,
            deny_label_ns=settings.policy.deny_label_ns,
            label_whitelist=settings.policy.label_whitelist,
            enable_taints=settings.policy.enable_taints,
        )
    except ValueError as e:
        raise SetupError(str(e)) from None
    if sources is None:
        try:
            sources = default_registry().select(list(settings.labeling.core.label_sources))
        except ValueError as e:
            raise SetupError(f"core.labelSources: {e}") from None
    metrics = Metrics()
    decider = Decider(sources=sources, config=settings.labeling, policy=policy)

    api: KubeApi | None = None
    client = api_client
    if client is None:
        kubeconfig = settings.kube.kubeconfig
        try:
            creds = load(str(kubeconfig) if kubeconfig else None)
            client = make_api_client(creds, settings.kube.parallelism + 6)
        except NoClusterError:
            client = None
        except ConfigError as e:
            raise SetupError(str(e)) from None
    if client is not None:
        api = KubeApi(client, settings.kube, metrics)

    if settings.auth.enabled and api is None:
        raise SetupError(
            "worker authentication needs the API server (no kubeconfig found); use --no-auth", code=1
        )

    service = MasterService(decider=decider, metrics=metrics)
    service.min_reeval_interval = settings.rules.min_interval_s
    elector: LeaderElector | None = None
    rules: RuleWatcher | None = None
    nodefeatures: NodeFeatureWatcher | None = None
    service.own_namespace = settings.nodefeatures.namespace
    publisher: KubePublisher | MemoryPublisher
    jobs = Jobs()
    if settings.kube.publish and api is not None:
        kp = KubePublisher(
            jobs=jobs,
            api=api,
            store=service.store,
            settings=settings.kube,
            metrics=metrics,
            # Nothing is written before the cluster's rules are known: labels would be
            # removed and re-added (upstream #1802).
            # Nor before the NodeFeature objects are: their labels would be removed.
            may_write=lambda: (
                (elector is None or elector.leader)
                and (rules is None or rules.synced)
                and (nodefeatures is None or nodefeatures.synced)
            ),
            on_gone=service.forget,
        )
        publisher = kp
        if settings.leader.enabled:

            def started() -> None:
                metrics.is_leader.set(1)
                kp.resume()

            elector = LeaderElector(
                api=api,
                settings=settings.leader,
                on_started=started,
                on_stopped=lambda: metrics.is_leader.set(0),
            )
            elector.advertise_url = settings.leader.advertise_url or _pod_url(
                settings, tls=_serves_tls(settings, api)
            )
        else:
            metrics.is_leader.set(1)
    else:
        publisher = MemoryPublisher(service.store)
        if settings.leader.enabled:
            log.warning("leader election ignored: nothing is published")
    service.publisher = publisher
    rules = RuleWatcher(
        settings=settings.rules,
        api=api if settings.rules.watch else None,
        metrics=metrics,
        on_change=service.set_rules,
        on_synced=publisher.conditions_met if isinstance(publisher, KubePublisher) else None,
        page_size=settings.kube.list_page_size,
    )
    if api is not None and settings.nodefeatures.watch:

        def nodefeatures_synced() -> None:
            if isinstance(publisher, KubePublisher):
                publisher.conditions_met()

        nodefeatures = NodeFeatureWatcher(
            api=api,
            page_size=settings.kube.list_page_size,
            on_node=service.set_node_objects,
            on_synced=nodefeatures_synced,
            features=service.store.features,
        )
    if settings.rules.rules_dir is not None:
        try:
            rules.load_files()
        except ValueError as e:
            raise SetupError(str(e)) from None
    authenticator, readers, pods = None, None, None
    if settings.auth.enabled and api is not None:
        authenticator = Authenticator(api=api, settings=settings.auth, metrics=metrics)
        readers = ReadAuthorizer(api=api, settings=settings.auth, metrics=metrics)
        if settings.auth.watch_pods:
            ns, _, sa = settings.auth.worker_service_account.partition(":")
            pods = PodWatch(api=api, namespace=ns, service_account=sa, on_gone=authenticator.forget_pod)
            authenticator.pods = pods
    return Runtime(
        settings=settings,
        metrics=metrics,
        service=service,
        api=api,
        authenticator=authenticator,
        elector=elector,
        rules=rules,
        publisher=publisher,
        jobs=jobs,
        forwarder=Forwarder(
            ca_file=str(settings.leader.peer_ca_file) if settings.leader.peer_ca_file else None,
            timeout_s=settings.leader.forward_timeout_s,
            server_name=settings.leader.peer_server_name or None,
        ),
        readers=readers,
        pods=pods,
        nodefeatures=nodefeatures,
        gc=GarbageCollector(
            api=api,
            service=service,
            index=nodefeatures.index if nodefeatures is not None else None,
            interval_s=settings.nodefeatures.gc_interval_s,
            page_size=settings.kube.list_page_size,
            metrics=metrics,
            # Only the leader, and only once it knows the cluster's objects.
            is_leader=lambda: (
                (elector is None or elector.leader) and (nodefeatures is None or nodefeatures.synced)
            ),
        )
        if api is not None and settings.kube.publish and settings.nodefeatures.gc
        else None,
        groups=GroupManager(
            service=service,
            api=api,
            page_size=settings.kube.list_page_size,
            # Statuses are the leader's to write, from the whole cluster's objects.
            may_write=lambda: (
                (elector is None or elector.leader) and (nodefeatures is None or nodefeatures.synced)
            ),
        )
        if api is not None and settings.kube.publish and settings.nodefeatures.groups
        else None,
    )


def _serves_tls(settings: MasterSettings, api: KubeApi | None) -> bool:
    """As ``nfd master`` decides: given files, else the cluster's certificate unless
    TLS is off or there is no cluster."""
    t = settings.tls
    return t.cert_file is not None or (t.enabled and api is not None)


def _pod_url(settings: MasterSettings, *, tls: bool) -> str:
    """This replica's URL from its pod IP (the Deployment passes it as $POD_IP)."""
    import os

    ip = os.environ.get("POD_IP", "")
    if not ip:
        return ""
    host = f"[{ip}]" if ":" in ip else ip
    scheme = "https" if tls else "http"
    return f"{scheme}://{host}:{settings.server.port}"
