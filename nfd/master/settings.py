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
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    max_body_bytes: int = Field(default=2 * MiB, gt=0)


class AuthSettings(BaseModel):
    enabled: bool = True
    audience: str = ""
    # "namespace:name" of the service account every worker runs as.
    worker_service_account: str = "node-feature-discovery:nfd-worker"
    # How long a TokenReview answer is trusted; workers re-send the same token often.
    cache_ttl_s: float = Field(default=60.0, ge=0)

    @property
    def worker_username(self) -> str:
        ns, _, name = self.worker_service_account.partition(":")
        return f"system:serviceaccount:{ns}:{name}"


class PolicySettings(BaseModel):
    extra_label_ns: list[str] = []
    deny_label_ns: list[str] = []
    label_whitelist: str = ""
    enable_taints: bool = False


class KubeSettings(BaseModel):
    publish: bool = True
    kubeconfig: Path | None = None
    # Client-side rate limit and parallelism: upstream's defaults.
    qps: float = Field(default=10.0, gt=0)
    burst: int = Field(default=100, ge=1)
    parallelism: int = Field(default=10, ge=1)
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
    model_config = SettingsConfigDict(env_prefix="NFD_MASTER_", env_nested_delimiter="__", extra="ignore")

    server: ServerSettings = ServerSettings()
    auth: AuthSettings = AuthSettings()
    policy: PolicySettings = PolicySettings()
    kube: KubeSettings = KubeSettings()
    leader: LeaderSettings = Field(default_factory=LeaderSettings)
    rules: RulesSettings = RulesSettings()
    nodefeatures: NodeFeatureSettings = Field(default_factory=NodeFeatureSettings)
    # Central label configuration (``core.labelWhiteList``, ``sources.*``); not from env.
    labeling: WorkerConfig = Field(default_factory=WorkerConfig, exclude=True)
