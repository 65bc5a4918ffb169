"""The master's settings: nested groups, each overridable from the environment
(``NFD_MASTER_<GROUP>__<KEY>``), from the command line, or directly in tests."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from nfd.config import WorkerConfig

MiB = 1024 * 1024


class ServerSettings(BaseModel):
    host: str = "0.0.0.0"
    port: int = 8080
    max_body_bytes: int = Field(default=2 * MiB, gt=0)


class AuthSettings(BaseModel):
    enabled: bool = True
    audience: str = ""
    # "namespace:name" of the service account every worker runs as.
    worker_service_account: str = "node-feature-discovery:nfd-worker"
    # How long a worker's TokenReview answer is trusted (never past the token's own
    # ``exp``). A token whose pod is deleted is dropped at once (the master watches the
    # workers' pods), so this bounds only other revocations (its service account
    # deleted); the kubelet replaces an hour-long token after about 48 minutes, so the
    # steady state costs a review per worker about that often.
    cache_ttl_s: float = Field(default=3600.0, ge=0)
    # Longest a token whose pod is gone stays accepted: cached answers older than this
    # are re-checked while the pod watch cannot vouch for them (not synced, broken).
    revocation_window_s: float = Field(default=5.0, gt=0)
    # Readers (GET /api/v1/nodes*, /metrics): TokenReview and SubjectAccessReview answers
    # are trusted this long (the API server's own webhook caches default to 10 s).
    read_cache_ttl_s: float = Field(default=10.0, ge=0)
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


class TLSSettings(BaseModel):
    """Serving certificate. Files (``cert_file``/``key_file``, e.g. a mounted Secret)
    win; else, with a cluster, the master keeps a CA and serving certificate in the
    Secret ``secret_name`` and publishes the CA in the ConfigMap ``ca_configmap`` for
    workers to verify against; with neither (no cluster) or ``enabled`` false: plain HTTP."""

    enabled: bool = True
    cert_file: Path | None = None
    key_file: Path | None = None
    namespace: str = Field(default_factory=lambda: _default_namespace())
    secret_name: str = "nfd-master-tls"
    ca_configmap: str = "nfd-master-ca"
    # The Service the workers reach the master by: its DNS names go into the certificate.
    service_name: str = "nfd-master"
    cluster_domain: str = "cluster.local"
    extra_dns_names: list[str] = []
    cert_validity_days: int = Field(default=365, ge=1)
    ca_validity_days: int = Field(default=3650, ge=1)
    # A certificate with less than this left is re-issued from the stored CA at start.
    renew_before_days: int = Field(default=30, ge=0)


class PolicySettings(BaseModel):
    extra_label_ns: list[str] = []
    deny_label_ns: list[str] = []
    label_whitelist: str = ""
    enable_taints: bool = False


class KubeSettings(BaseModel):
    publish: bool = True
    kubeconfig: Path | None = None
    # Client-side write rate (see nfd/kube/ratelimit.py): starts at ``qps`` and adapts to the API
    # server, down to ``min_qps`` on 429s or answers slower than ``slow_request_s``.
    # Upstream's fixed 10/s would keep a 10,000-node cluster waiting 17 minutes.
    qps: float = Field(default=500.0, gt=0)
    burst: int = Field(default=100, ge=1)
    min_qps: float = Field(default=5.0, gt=0)
    slow_request_s: float = Field(default=2.0, gt=0)
    # Ceiling of the node writes in flight (and the number of node workers): the
    # limiter's window grows to it while the API server answers fast (nfd/kube/ratelimit.py).
    parallelism: int = Field(default=64, ge=1)
    request_timeout_s: float = Field(default=10.0, gt=0)
    # Per-node retry backoff (exponential with jitter).
    backoff_base_s: float = Field(default=0.05, gt=0)
    backoff_max_s: float = Field(default=30.0, gt=0)
    # Full resync: every known node is re-checked (one paginated LIST) and extended
    # resources are re-asserted, since kubelet zeroes them when a Node is re-created.
    resync_period_s: float = Field(default=3600.0, gt=0)
    list_page_size: int = Field(default=500, ge=1)


def _default_namespace() -> str:
    return os.environ.get("POD_NAMESPACE") or "node-feature-discovery"


def _default_identity() -> str:
    return os.environ.get("POD_NAME") or socket.gethostname()


class LeaderSettings(BaseModel):
    enabled: bool = False
    namespace: str = Field(default_factory=_default_namespace)
    identity: str = Field(default_factory=_default_identity)
    lease_name: str = "nfd-master.nfd.kubernetes.io"
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0
    # Where this replica serves, written on the Lease while it leads so that followers
    # forward workers' requests to it. Default: the pod IP ($POD_IP) and --port.
    advertise_url: str = Field(default_factory=lambda: os.environ.get("NFD_MASTER_ADVERTISE_URL", ""))
    # CA to verify the leader's certificate with when forwarding over https (default:
    # the serving certificate file, which replicas share).
    peer_ca_file: Path | None = None
    # The name the leader's certificate is verified against (and sent as SNI): followers
    # dial its pod IP, which the certificate need not carry. Default: the first DNS name
    # of this replica's own serving certificate, which every replica serves.
    peer_server_name: str = ""
    forward_timeout_s: float = Field(default=5.0, gt=0)
    # How often a follower asks the leader for the nodes it lacks (replica.py).
    replicate_interval_s: float = Field(default=2.0, gt=0)


class RulesSettings(BaseModel):
    rules_dir: Path | None = None
    watch: bool = True
    # A burst of rule changes re-evaluates every node once, at most this often.
    min_interval_s: float = Field(default=1.0, ge=0)
    rules_group: str = "nfd.k8s-sigs.io"
    rules_version: str = "v1alpha1"
    rules_plural: str = "nodefeaturerules"


class NodeFeatureSettings(BaseModel):
    # Read NodeFeature objects (upstream's workers, GPU feature discovery, ...).
    watch: bool = True
    # The namespace whose objects upstream merges first (nfd's own).
    namespace: str = Field(default_factory=_default_namespace)
    # Garbage collection of what is kept per node, for nodes gone (upstream's nfd-gc).
    gc_interval_s: float = Field(default=3600.0, gt=0)
    gc: bool = True
    # Keep NodeFeatureGroup statuses current.
    groups: bool = True


class MasterSettings(BaseSettings):
    # WorkerConfig is a frozen dataclass with a loader of its own: an instance is taken as it is.
    model_config = SettingsConfigDict(
        env_prefix="NFD_MASTER_", env_nested_delimiter="__", extra="ignore", arbitrary_types_allowed=True
    )

    server: ServerSettings = ServerSettings()
    auth: AuthSettings = AuthSettings()
    tls: TLSSettings = Field(default_factory=TLSSettings)
    policy: PolicySettings = PolicySettings()
    kube: KubeSettings = KubeSettings()
    leader: LeaderSettings = Field(default_factory=LeaderSettings)
    rules: RulesSettings = RulesSettings()
    nodefeatures: NodeFeatureSettings = Field(default_factory=NodeFeatureSettings)
    # Central label configuration (``core.labelWhiteList``, ``sources.*``); not from env.
    labeling: WorkerConfig = Field(default_factory=WorkerConfig, exclude=True)
