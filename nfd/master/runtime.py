"""The running master's parts and their lifecycle: built from settings, started and
stopped by the app's lifespan."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from nfd.master.auth import Authenticator
from nfd.master.decide import Decider
from nfd.master.gc import GarbageCollector
from nfd.master.groups import GroupManager
from nfd.master.kube import KubeApi, NoClusterError, load_api_client
from nfd.master.leader import LeaderElector
from nfd.master.metrics import Metrics
from nfd.master.nodefeatures import NodeFeatureWatcher
from nfd.master.publisher import KubePublisher, MemoryPublisher
from nfd.master.rulewatch import RuleWatcher
from nfd.master.service import MasterService
from nfd.master.settings import MasterSettings
from nfd.policy import Policy
from nfd.sources import FeatureSource, default_registry

log = logging.getLogger(__name__)


class SetupError(Exception):
    """The settings cannot work (message says why): the command exits with it."""


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
    nodefeatures: NodeFeatureWatcher | None = None
    gc: GarbageCollector | None = None
    groups: GroupManager | None = None

    @property
    def mode(self) -> str:
        return self.publisher.mode

    def may_write(self) -> bool:
        return self.elector is None or self.elector.leader

    def ready(self) -> tuple[bool, str]:
        if not self.rules.synced:
            return False, "NodeFeatureRules not listed yet"
        if self.nodefeatures is not None and not self.nodefeatures.synced:
            return False, "NodeFeature objects not listed yet"
        if self.elector is not None and not self.elector.leader:
            return False, f"not the leader (the leader is {self.elector.holder or 'unknown'})"
        return True, "ok"

    async def start(self) -> None:
        self.rules.load_files()
        self.service.set_rules(self.rules.rulesets())
        await self.rules.start()
        if self.nodefeatures is not None:
            await self.nodefeatures.start()
        await self.publisher.start()
        if self.groups is not None:
            await self.groups.start()
        if self.gc is not None:
            self.gc.start()
        if self.elector is not None:
            self.elector.start()

    async def stop(self) -> None:
        self.rules.stop()
        if self.nodefeatures is not None:
            self.nodefeatures.stop()
        if self.gc is not None:
            self.gc.stop()
        if self.groups is not None:
            self.groups.stop()
        if self.elector is not None:
            await self.elector.stop()
        await self.publisher.stop()
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
        try:
            client = load_api_client(settings.kube.kubeconfig, settings.kube.parallelism + 6)
        except NoClusterError:
            client = None
        except ValueError as e:
            raise SetupError(str(e)) from None
    if client is not None:
        api = KubeApi(client, settings.kube)

    if settings.auth.enabled and api is None:
        raise SetupError("worker authentication needs the API server (no kubeconfig found); use --no-auth")

    service = MasterService(decider=decider, metrics=metrics)
    service.min_reeval_interval = settings.rules.min_interval_s
    elector: LeaderElector | None = None
    rules: RuleWatcher | None = None
    nodefeatures: NodeFeatureWatcher | None = None
    service.own_namespace = settings.nodefeatures.namespace
    publisher: KubePublisher | MemoryPublisher
    if settings.kube.publish and api is not None:
        kp = KubePublisher(
            api=api,
            store=service.store,
            settings=settings.kube,
            metrics=metrics,
            # Nothing is written before the cluster's rules are known: labels would be
            # removed and re-added (upstream #1802).
            # Nor before the NodeFeature objects are: their labels would be removed.
            may_write=lambda: (elector is None or elector.leader)
            and (rules is None or rules.synced)
            and (nodefeatures is None or nodefeatures.synced),
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
        on_synced=publisher.resume if isinstance(publisher, KubePublisher) else None,
    )
    if api is not None and settings.nodefeatures.watch:

        def nodefeatures_synced() -> None:
            if isinstance(publisher, KubePublisher):
                publisher.resume()

        nodefeatures = NodeFeatureWatcher(
            api=api,
            page_size=settings.kube.list_page_size,
            on_node=service.set_node_objects,
            on_synced=nodefeatures_synced,
        )
    if settings.rules.rules_dir is not None:
        try:
            rules.load_files()
        except ValueError as e:
            raise SetupError(str(e)) from None
    return Runtime(
        settings=settings,
        metrics=metrics,
        service=service,
        api=api,
        authenticator=Authenticator(api=api, settings=settings.auth, metrics=metrics)
        if settings.auth.enabled and api is not None
        else None,
        elector=elector,
        rules=rules,
        publisher=publisher,
        nodefeatures=nodefeatures,
        gc=GarbageCollector(
            api=api,
            service=service,
            index=nodefeatures.index if nodefeatures is not None else None,
            interval_s=settings.nodefeatures.gc_interval_s,
            page_size=settings.kube.list_page_size,
            # Only the leader, and only once it knows the cluster's objects.
            is_leader=lambda: (elector is None or elector.leader)
            and (nodefeatures is None or nodefeatures.synced),
        )
        if api is not None and settings.kube.publish and settings.nodefeatures.gc
        else None,
        groups=GroupManager(
            service=service,
            api=api,
            page_size=settings.kube.list_page_size,
            # Statuses are the leader's to write, from the whole cluster's objects.
            may_write=lambda: (elector is None or elector.leader)
            and (nodefeatures is None or nodefeatures.synced),
        )
        if api is not None and settings.kube.publish and settings.nodefeatures.groups
        else None,
    )
