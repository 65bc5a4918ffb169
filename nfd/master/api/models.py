"""Wire models of the worker <-> master API v1 (docs/worker-master-api.md)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, NotRequired

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator, with_config
from typing_extensions import TypedDict

NODE_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
"""A Node's name: a DNS subdomain (RFC 1123), at most 253 characters."""
_NODE_NAME = re.compile(NODE_NAME_PATTERN)


def node_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a Node's name, or None when it can."""
    if len(name) > 253:
        return f"a node name has at most 253 characters, not {len(name)}"
    if _NODE_NAME.fullmatch(name) is None:
        return (
            f"{name!r} is not a node name: lower-case letters, digits, '-' and '.', "
            "each dot-separated part starting and ending with a letter or digit"
        )
    return None


class Problem(BaseModel):
    """Every error answer but 422 (whose ``detail`` lists the fields, as FastAPI's)."""

    detail: str


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


GROUP_REF_PATTERN = r"^[0-9a-f]{32}$"

# A group has its elements and no ref, or null elements and a ref (the validator's rule,
# for the OpenAPI document).
_REF_OR_ELEMENTS: dict[str, Any] = {
    "anyOf": [
        {"properties": {"ref": {"type": "null"}, "elements": {"not": {"type": "null"}}}},
        {
            "required": ["elements", "ref"],
            "properties": {"elements": {"type": "null"}, "ref": {"type": "string"}},
        },
    ]
}


class _MayRef(BaseModel):
    """A group as a worker sends it: its elements, or null elements and the hash of a
    group the master may hold (docs/worker-master-api.md, "Groups by hash")."""

    model_config = ConfigDict(json_schema_extra=_REF_OR_ELEMENTS)
    ref: str | None = Field(
        default=None,
        pattern=GROUP_REF_PATTERN,
        description="with null elements: the first 32 hex digits of the sha256 of the group's "
        "canonical JSON (nfd/canonical.py)",
    )

    @model_validator(mode="after")
    def _ref_or_elements(self) -> _MayRef:
        elements = getattr(self, "elements", None)
        if self.ref is None and elements is None:
            raise ValueError("elements is null without a ref")
        if self.ref is not None and elements is not None:
            # Null, so that a master that takes no refs refuses the body (422) rather
            # than take the group as empty.
            raise ValueError('a group with a ref has "elements": null')
        return self


class SentFlagSet(_MayRef):
    elements: dict[str, dict[str, object]] | None = Field(default_factory=dict)


class SentAttributeSet(_MayRef):
    elements: dict[str, str] | None = Field(default_factory=dict)


class SentInstanceSet(_MayRef):
    elements: list[Instance] | None = Field(default_factory=list)


class SentFeatures(BaseModel):
    """RawFeatures as a worker sends them: a big group may go by its hash."""

    model_config = ConfigDict(extra="forbid")
    flags: dict[str, SentFlagSet] = Field(default_factory=dict)
    attributes: dict[str, SentAttributeSet] = Field(default_factory=dict)
    instances: dict[str, SentInstanceSet] = Field(default_factory=dict)


class FeaturesRequest(BaseModel):
    nfdVersion: str = ""
    digest: str = Field(default="", description="sha256 hex of the canonical features JSON")
    features: SentFeatures
    devicePluginResources: list[str] = Field(
        default=[], description="extended resources device plugins serve on the node: never patched"
    )


# FeaturesRequest again as TypedDicts: pydantic-core validates a body against these as it
# parses it, in one pass, and answers the plain dicts the master works on; parsing into
# dicts and then validating the model built every value twice (1.5 times the CPU). The
# models above stay the contract (the OpenAPI document, the error messages);
# tests/master/test_features_body.py holds the two to taking the same bodies.
@with_config(ConfigDict(extra="ignore"))
class _FlagSetBody(TypedDict, total=False):
    elements: dict[str, dict[str, object]] | None
    ref: str | None


@with_config(ConfigDict(extra="ignore"))
class _AttributeSetBody(TypedDict, total=False):
    elements: dict[str, str] | None
    ref: str | None


@with_config(ConfigDict(extra="ignore"))
class _InstanceBody(TypedDict, total=False):
    attributes: dict[str, str]


@with_config(ConfigDict(extra="ignore"))
class _InstanceSetBody(TypedDict, total=False):
    elements: list[_InstanceBody] | None
    ref: str | None


@with_config(ConfigDict(extra="forbid"))
class _RawFeaturesBody(TypedDict, total=False):
    flags: dict[str, _FlagSetBody]
    attributes: dict[str, _AttributeSetBody]
    instances: dict[str, _InstanceSetBody]


@with_config(ConfigDict(extra="ignore"))
class _FeaturesBody(TypedDict):
    nfdVersion: NotRequired[str]
    digest: NotRequired[str]
    features: _RawFeaturesBody
    devicePluginResources: NotRequired[list[str]]


FEATURES_BODY: TypeAdapter[_FeaturesBody] = TypeAdapter(_FeaturesBody)
"""A FeaturesRequest body's shape, for ``jsonbody.parse_features``."""


class HeartbeatRequest(BaseModel):
    digest: str


class HeartbeatResponse(BaseModel):
    known: bool
    detail: str | None = None


class MissingGroups(BaseModel):
    """A features PUT named groups by ``ref`` that the master does not hold."""

    known: bool = False
    missing: list[str] = Field(description='the groups to send whole, as "kind/name"')
    detail: str


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
    lastSeen: datetime | None = Field(
        default=None, description="the worker's last request (features or heartbeat) to this replica"
    )
    inSync: bool = False
    lastError: str = ""
    ruleErrors: list[str] = []
    labelOrigins: dict[str, str] = Field(
        default={},
        description="label -> where it came from: worker, NodeFeature <namespace>/<name>, NodeFeatureRule <name>",
    )


class ListMeta(BaseModel):
    continue_: str = Field(
        default="",
        alias="continue",
        description="pass as `continue` for the next page; empty on the last page",
    )
    remainingItemCount: int = Field(default=0, description="nodes after this page")


class NodeList(BaseModel):
    """One page of nodes, in name order."""

    items: list[NodeStatus]
    metadata: ListMeta


class HeldNode(BaseModel):
    """A node's features a follower kept while it could not forward them to the leader."""

    node: str = Field(pattern=NODE_NAME_PATTERN, max_length=253)
    base: str = Field(
        description="what the follower last knew the leader to hold for the node (replica.own_key); "
        "empty for nothing. The leader takes the features only while it holds that."
    )
    nfdVersion: str = ""
    features: RawFeatures
    devicePluginResources: list[str] = []


class HeldRequest(BaseModel):
    items: list[HeldNode]


class HeldResponse(BaseModel):
    taken: list[str] = Field(description="nodes whose features the leader took")
    kept: list[str] = Field(description="nodes for which the leader got other features since and keeps them")
