"""The master's settings: nested groups (models of :mod:`nfd.settings`), each
overridable from the environment (``NFD_MASTER_<GROUP>__<KEY>``), from the config file
(``nfd-master.conf``, :class:`MasterConfigFile`), from the command line, or directly in
tests."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nfd.config import CoreConfig, SourcesConfig, WorkerConfig
from nfd.settings import from_environment, from_mapping, load_file

MiB = 1024 * 1024


@dataclass
class ServerSettings:
    host: str = "0.0.0.0"
    port: int = 8080
    max_body_bytes: int = field(default=2 * MiB, metadata={"gt": 0})


@dataclass
class AuthSettings:
    enabled: bool = True
    audience: str = ""
    # "namespace:name" of the service account every worker runs as.
    worker_service_account: str = "node-feature-discovery:nfd-worker"
    # How long a worker's TokenReview answer is trusted (never past the token's own
    # ``exp``). A token whose pod is deleted is dropped at once (the master watches the
    # workers' pods), so this bounds only other revocations (its service account
    # deleted); the kubelet replaces an hour-long token after about 48 minutes, so the
    # steady state costs a review per worker about that often.
    cache_ttl_s: float = field(default=3600.0, metadata={"ge": 0})
    # Longest a token whose pod is gone stays accepted: cached answers older than this
    # are re-checked while the pod watch cannot vouch for them (not synced, broken).
    revocation_window_s: float = field(default=5.0, metadata={"gt": 0})
    # Readers (GET /api/v1/nodes*, /metrics): TokenReview and SubjectAccessReview answers
    # are trusted this long (the API server's own webhook caches default to 10 s).
    read_cache_ttl_s: float = field(default=10.0, metadata={"ge": 0})
    # Watch the workers' pods (in the service account's namespace) to drop their tokens
    # once they are deleted.
    watch_pods: bool = True
    # ... and the masters (followers copy nodes from the leader with their own token).
    master_service_account: str = "node-feature-discovery:nfd-master"

    @property
    def worker_username(self) -> str:
        ns, _, name = self.worker_service_account.partition(":")
        return f"system:serviceaccount:{ns}:{name}"

    @property
    def master_username(self) -> str:
        ns, _, name = self.master_service_account.partition(":")
        return f"system:serviceaccount:{ns}:{name}"


@dataclass
class TLSSettings:
    """Serving certificate. Files (``cert_file``/``key_file``, e.g. a mounted Secret)
    win; else, with a cluster, the master keeps a CA and serving certificate in the
    Secret ``secret_name`` and publishes the CA in the ConfigMap ``ca_configmap`` for
    workers to verify against; with neither (no cluster) or ``enabled`` false: plain HTTP."""

    enabled: bool = True
    cert_file: Path | None = field(default=None, metadata={"type": Path})
    key_file: Path | None = field(default=None, metadata={"type": Path})
    namespace: str = field(default_factory=lambda: _default_namespace())
    secret_name: str = "nfd-master-tls"
    ca_configmap: str = "nfd-master-ca"
    # The Service the workers reach the master by: its DNS names go into the certificate.
    service_name: str = "nfd-master"
    cluster_domain: str = "cluster.local"
    extra_dns_names: list[str] = field(default_factory=list)
    cert_validity_days: int = field(default=365, metadata={"ge": 1})
    ca_validity_days: int = field(default=3650, metadata={"ge": 1})
    # A certificate with less than this left is re-issued from the stored CA at start.
    renew_before_days: int = field(default=30, metadata={"ge": 0})


@dataclass
class PolicySettings:
    extra_label_ns: list[str] = field(default_factory=list)
    deny_label_ns: list[str] = field(default_factory=list)
    label_whitelist: str = ""
    enable_taints: bool = False


@dataclass
class KubeSettings:
    publish: bool = True
    kubeconfig: Path | None = field(default=None, metadata={"type": Path})
    # Client-side write rate (see nfd/kube/ratelimit.py): starts at ``qps`` and adapts to the API
    # server, down to ``min_qps`` on 429s or answers slower than ``slow_request_s``.
    # Upstream's fixed 10/s would keep a 10,000-node cluster waiting 17 minutes.
    qps: float = field(default=500.0, metadata={"gt": 0})
    burst: int = field(default=100, metadata={"ge": 1})
    min_qps: float = field(default=5.0, metadata={"gt": 0})
    slow_request_s: float = field(default=2.0, metadata={"gt": 0})
    # Ceiling of the node writes in flight (and the number of node workers): the
    # limiter's window grows to it while the API server answers fast (nfd/kube/ratelimit.py).
    parallelism: int = field(default=64, metadata={"ge": 1})
    request_timeout_s: float = field(default=10.0, metadata={"gt": 0})
    # Per-node retry backoff (exponential with jitter).
    backoff_base_s: float = field(default=0.05, metadata={"gt": 0})
    backoff_max_s: float = field(default=30.0, metadata={"gt": 0})
    # Full resync: every known node is re-checked (one paginated LIST) and extended
    # resources are re-asserted, since kubelet zeroes them when a Node is re-created.
    resync_period_s: float = field(default=3600.0, metadata={"gt": 0})
    list_page_size: int = field(default=500, metadata={"ge": 1})


def _default_namespace() -> str:
    return os.environ.get("POD_NAMESPACE") or "node-feature-discovery"


def _default_identity() -> str:
    return os.environ.get("POD_NAME") or socket.gethostname()


@dataclass
class LeaderSettings:
    enabled: bool = False
    namespace: str = field(default_factory=_default_namespace)
    identity: str = field(default_factory=_default_identity)
    lease_name: str = "nfd-master.nfd.kubernetes.io"
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0
    # Where this replica serves, written on the Lease while it leads so that followers
    # forward workers' requests to it. Default: the pod IP ($POD_IP) and --port.
    advertise_url: str = field(default_factory=lambda: os.environ.get("NFD_MASTER_ADVERTISE_URL", ""))
    # CA to verify the leader's certificate with when forwarding over https (default:
    # the serving certificate file, which replicas share).
    peer_ca_file: Path | None = field(default=None, metadata={"type": Path})
    # The name the leader's certificate is verified against (and sent as SNI): followers
    # dial its pod IP, which the certificate need not carry. Default: the first DNS name
    # of this replica's own serving certificate, which every replica serves.
    peer_server_name: str = ""
    forward_timeout_s: float = field(default=5.0, metadata={"gt": 0})
    # How often a follower asks the leader for the nodes it lacks (replica.py).
    replicate_interval_s: float = field(default=2.0, metadata={"gt": 0})


@dataclass
class RulesSettings:
    rules_dir: Path | None = field(default=None, metadata={"type": Path})
    watch: bool = True
    # A burst of rule changes re-evaluates every node once, at most this often.
    min_interval_s: float = field(default=1.0, metadata={"ge": 0})
    rules_group: str = "nfd.k8s-sigs.io"
    rules_version: str = "v1alpha1"
    rules_plural: str = "nodefeaturerules"


@dataclass
class NodeFeatureSettings:
    # Read NodeFeature objects (upstream's workers, GPU feature discovery, ...).
    watch: bool = True
    # The namespace whose objects upstream merges first (nfd's own).
    namespace: str = field(default_factory=_default_namespace)
    # Garbage collection of what is kept per node, for nodes gone (upstream's nfd-gc).
    gc_interval_s: float = field(default=3600.0, metadata={"gt": 0})
    gc: bool = True
    # Keep NodeFeatureGroup statuses current.
    groups: bool = True


@dataclass
class MasterSettings:
    server: ServerSettings = field(default_factory=ServerSettings)
    auth: AuthSettings = field(default_factory=AuthSettings)
    tls: TLSSettings = field(default_factory=TLSSettings)
    policy: PolicySettings = field(default_factory=PolicySettings)
    kube: KubeSettings = field(default_factory=KubeSettings)
    leader: LeaderSettings = field(default_factory=LeaderSettings)
    rules: RulesSettings = field(default_factory=RulesSettings)
    nodefeatures: NodeFeatureSettings = field(default_factory=NodeFeatureSettings)
    # Central label configuration (``core.labelWhiteList``, ``sources.*``): from the
    # config file only.
    labeling: WorkerConfig = field(default_factory=WorkerConfig, metadata={"env": False})

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> MasterSettings:
        """Defaults, then ``NFD_MASTER_<GROUP>__<KEY>`` variables (``NFD_MASTER_KUBE__QPS``).
        Raises ConfigError naming every variable at fault."""
        return from_environment(cls, "NFD_MASTER_", os.environ if environ is None else environ)

    def apply_config_file(self, path: str | Path) -> list[str]:
        """Read ``nfd-master.conf`` into these settings (the keys it has); returns
        warnings about keys it does not know. Raises ConfigError naming the file and the
        key."""
        data_of: dict[str, Any] = {}

        def build(data: Any, warnings: list[str]) -> MasterConfigFile:
            conf = from_mapping(MasterConfigFile, data, warnings=warnings)
            data_of.update({str(k): v for k, v in (data or {}).items()})  # a mapping: from_mapping said so
            return conf

        conf, warnings = load_file(path, build)
        given = set(data_of)
        self.labeling = WorkerConfig(core=conf.core, sources=conf.sources)
        if "extraLabelNs" in given:
            self.policy.extra_label_ns += conf.extra_label_ns
        if "denyLabelNs" in given:
            self.policy.deny_label_ns += conf.deny_label_ns
        if "labelWhiteList" in given:
            self.policy.label_whitelist = conf.label_whitelist
        if "enableTaints" in given:
            self.policy.enable_taints = conf.enable_taints
        if "noPublish" in given:
            self.kube.publish = not conf.no_publish
        if "resyncPeriod" in given:
            self.kube.resync_period_s = conf.resync_period or KubeSettings.resync_period_s
        if "nfdApiParallelism" in given:
            self.kube.parallelism = conf.nfd_api_parallelism
        if "informerPageSize" in given:
            self.kube.list_page_size = conf.informer_page_size
        election = data_of.get("leaderElection") or {}  # a mapping: from_mapping said so
        if "leaseDuration" in election:
            self.leader.lease_duration_s = conf.leader_election.lease_duration
        if "renewDeadline" in election:
            self.leader.renew_deadline_s = conf.leader_election.renew_deadline
        if "retryPeriod" in election:
            self.leader.retry_period_s = conf.leader_election.retry_period
        return warnings


@dataclass(frozen=True)
class MasterConfigFile:
    """``nfd-master.conf``: upstream nfd-master's top-level keys where they mean the same
    here, and ``core`` and ``sources`` as in ``nfd-worker.conf`` (the master computes the
    built-in labels centrally with them)."""

    no_publish: bool = False
    extra_label_ns: list[str] = field(default_factory=list)
    deny_label_ns: list[str] = field(default_factory=list)
    label_whitelist: str = field(default="", metadata={"key": "labelWhiteList"})
    enable_taints: bool = False
    resync_period: float = 3600.0  # 0: the default, as upstream
    nfd_api_parallelism: int = field(default=64, metadata={"ge": 1})
    informer_page_size: int = field(default=500, metadata={"ge": 1})
    leader_election: LeaderElectionConfig = field(default_factory=lambda: LeaderElectionConfig())
    klog: Any = field(default=None, metadata={"raw": True})  # upstream's logging options: unused
    core: CoreConfig = field(default_factory=CoreConfig)
    sources: SourcesConfig = field(default_factory=SourcesConfig)


@dataclass(frozen=True)
class LeaderElectionConfig:
    """``leaderElection`` in ``nfd-master.conf``: upstream's durations."""

    lease_duration: float = field(default=15.0, metadata={"gt": 0})
    renew_deadline: float = field(default=10.0, metadata={"gt": 0})
    retry_period: float = field(default=2.0, metadata={"gt": 0})
