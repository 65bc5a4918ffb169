"""A Node's JSON parsed for what the master reads of it, the rest left unparsed.

The answer to each node write, each Node watch event and each page of a Node LIST
holds the whole Node: its
managedFields (one entry per label the master set), conditions, images, node info.
Turning all of it into Python objects cost more CPU per node than building the write;
pydantic-core validates the JSON against these TypedDicts as it parses it and builds
only the keys named here. What ``patches.observe``, ``NodeSync`` and ``prune.plan``
read must be named here (tests/master/test_nodeview.py holds them to that). Values are
``Any``: taken as they come, never converted. A document that does not fit (a Node
without the usual objects in these places, a watch's ERROR event) is parsed whole."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

_IGNORE = ConfigDict(extra="ignore")


@with_config(_IGNORE)
class _Meta(TypedDict, total=False):
    name: Any
    uid: Any
    resourceVersion: Any
    creationTimestamp: Any
    deletionTimestamp: Any
    labels: Any
    annotations: Any


@with_config(_IGNORE)
class _Spec(TypedDict, total=False):
    taints: Any
    unschedulable: Any


@with_config(_IGNORE)
class _Status(TypedDict, total=False):
    capacity: Any
    allocatable: Any


@with_config(_IGNORE)
class _Node(TypedDict, total=False):
    apiVersion: Any
    kind: Any
    metadata: _Meta
    spec: _Spec
    status: _Status


@with_config(_IGNORE)
class _Event(TypedDict, total=False):
    type: Any
    object: _Node


# The functional form: "continue" is a keyword.
_ListMeta = TypedDict("_ListMeta", {"resourceVersion": Any, "continue": Any}, total=False)
with_config(_IGNORE)(_ListMeta)


@with_config(_IGNORE)
class _Page(TypedDict, total=False):
    apiVersion: Any
    kind: Any
    metadata: _ListMeta
    items: list[_Node]


_NODE = TypeAdapter(_Node)
_EVENT = TypeAdapter(_Event)
_PAGE = TypeAdapter(_Page)
_OBJECT_EVENTS = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})


def node(data: bytes | str) -> Any:
    """A Node (a GET or PATCH answer) as the master reads it."""
    try:
        return _NODE.validate_json(data)
    except ValidationError:
        return json.loads(data)


def page(data: bytes | str) -> Any:
    """A page of a Node LIST (its resourceVersion and continue token, and each Node as
    ``node`` reads it)."""
    try:
        return _PAGE.validate_json(data)
    except ValidationError:
        return json.loads(data)


def event(line: bytes | str) -> Any:
    """A Node watch event as the master reads it; an ERROR event (a Status) whole."""
    try:
        ev = _EVENT.validate_json(line)
    except ValidationError:
        return json.loads(line)
    return ev if ev.get("type") in _OBJECT_EVENTS else json.loads(line)
