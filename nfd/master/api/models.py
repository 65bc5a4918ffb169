"""Wire models of the worker <-> master API v1 (docs/worker-master-api.md)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class FlagSet(BaseModel):
    elements: dict[str, dict[str, object]] = Field(default_factory=dict)


class AttributeSet(BaseModel):
    elements: dict[str, str] = Field(default_factory=dict)


class Instance(BaseModel):
    attributes: dict[str, str] = Field(default_factory=dict)


class InstanceSet(BaseModel):
    elements: list[Instance] = Field(default_factory=list)


class RawFeatures(BaseModel):
    """Upstream's raw feature shape."""

    model_config = ConfigDict(extra="forbid")
    flags: dict[str, FlagSet] = Field(default_factory=dict)
    attributes: dict[str, AttributeSet] = Field(default_factory=dict)
    instances: dict[str, InstanceSet] = Field(default_factory=dict)


class FeaturesRequest(BaseModel):
    nfdVersion: str = ""
    digest: str = Field(default="", description="sha256 hex of the canonical features JSON")
    features: RawFeatures
    devicePluginResources: list[str] = Field(
        default=[], description="extended resources device plugins serve on the node: never patched"
    )


class HeartbeatRequest(BaseModel):
    digest: str


class HeartbeatResponse(BaseModel):
    known: bool
    detail: str | None = None


class Rejected(BaseModel):
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    extendedResources: dict[str, str] = {}
    taints: dict[str, str] = {}


class TaintModel(BaseModel):
    key: str
    value: str = ""
    effect: str


class NodeResponse(BaseModel):
    """What the master applies (or will apply) to the node."""

    node: str
    digest: str
    labels: dict[str, str]
    annotations: dict[str, str]
    extendedResources: dict[str, str]
    taints: list[TaintModel]
    rejected: Rejected
    updated: datetime


class NodeStatus(NodeResponse):
    """NodeResponse plus the publishing state."""

    nfdVersion: str = ""
    devicePluginResources: list[str] = []
    published: datetime | None = Field(default=None, description="when the Node was last seen to match")
    inSync: bool = False
    lastError: str = ""
    ruleErrors: list[str] = []
    labelOrigins: dict[str, str] = Field(
        default={},
        description="label -> where it came from: worker, NodeFeature <namespace>/<name>, NodeFeatureRule <name>",
    )


class NodeList(BaseModel):
    items: list[NodeStatus]
