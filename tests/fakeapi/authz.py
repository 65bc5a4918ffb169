"""SubjectAccessReview (authorization.k8s.io/v1) as RBAC answers it: rules granted to
users and groups (cluster-wide or in one namespace), ``system:masters`` may do anything.
With ``FakeApiServer.enforce_rbac`` the same rules decide every request (403 otherwise).

    api.authz.grant(user="system:serviceaccount:monitoring:prometheus",
                    verbs=["get"], non_resource_urls=["/metrics"])
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ApiError, invalid

SAR_API = "authorization.k8s.io/v1"


@dataclass(frozen=True)
class Rule:
    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ("",)
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()
    namespace: str = ""  # "" for a ClusterRoleBinding

    def covers_resource(self, a: dict[str, Any]) -> bool:
        if self.namespace and a.get("namespace", "") != self.namespace:
            return False
        resource = a.get("resource", "") + (f"/{a['subresource']}" if a.get("subresource") else "")
        return (
            _match(self.verbs, a.get("verb", ""))
            and _match(self.api_groups, a.get("group", ""))
            and _match(self.resources, resource)
            and (not self.resource_names or a.get("name", "") in self.resource_names)
        )

    def covers_path(self, a: dict[str, Any]) -> bool:
        if self.namespace:  # non-resource URLs are granted cluster-wide only
            return False
        path = a.get("path", "")
        return _match(self.verbs, a.get("verb", "")) and any(
            u == path or u == "*" or (u.endswith("*") and path.startswith(u[:-1]))
            for u in self.non_resource_urls
        )


def _match(allowed: tuple[str, ...], value: str) -> bool:
    return "*" in allowed or value in allowed


class Authorizer:
    def __init__(self) -> None:
        self._grants: list[tuple[str, str, Rule]] = []  # (kind "User"/"Group", name, rule)
        self._lock = threading.Lock()

    def grant(
        self,
        *,
        user: str = "",
        group: str = "",
        verbs: Sequence[str],
        resources: Sequence[str] = (),
        api_groups: Sequence[str] = ("",),
        resource_names: Sequence[str] = (),
        non_resource_urls: Sequence[str] = (),
        namespace: str = "",
    ) -> None:
        if bool(user) == bool(group):
            raise ValueError("grant to a user or a group")
        rule = Rule(tuple(verbs), tuple(api_groups), tuple(resources), tuple(resource_names),
                    tuple(non_resource_urls), namespace)  # fmt: skip
        with self._lock:
            self._grants.append(("User" if user else "Group", user or group, rule))

    def load_rbac(self, docs: list[dict[str, Any]], namespace: str) -> None:
        """Grant what RBAC manifests (Roles, ClusterRoles and their bindings; objects
        without a namespace are in ``namespace``, as kustomize would put them) grant."""
        roles = {(d["kind"], d["metadata"].get("namespace", namespace), d["metadata"]["name"]): d for d in docs
                 if d.get("kind") in ("Role", "ClusterRole")}  # fmt: skip
        for b in docs:
            if b.get("kind") not in ("RoleBinding", "ClusterRoleBinding"):
                continue
            scope = b["metadata"].get("namespace", namespace) if b["kind"] == "RoleBinding" else ""
            ref = b["roleRef"]
            role = roles[(ref["kind"], scope if ref["kind"] == "Role" else namespace, ref["name"])]
            for subject in b.get("subjects") or []:
                who = {"user": subject["name"]} if subject["kind"] == "User" else {"group": subject["name"]}
                if subject["kind"] == "ServiceAccount":
                    sa_ns = subject.get("namespace", namespace)
                    who = {"user": f"system:serviceaccount:{sa_ns}:{subject['name']}"}
                for r in role.get("rules") or []:
                    self.grant(
                        **who, verbs=r["verbs"], resources=r.get("resources", ()),
                        api_groups=r.get("apiGroups", ()), resource_names=r.get("resourceNames", ()),
                        non_resource_urls=r.get("nonResourceURLs", ()), namespace=scope,
                    )  # fmt: skip

    def allowed(self, user: str, groups: list[str], spec: dict[str, Any]) -> bool:
        if "system:masters" in groups:
            return True
        ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        with self._lock:
            grants = list(self._grants)
        for kind, name, rule in grants:
            if (kind == "User" and name != user) or (kind == "Group" and name not in groups):
                continue
            if (ra is not None and rule.covers_resource(ra)) or (nra is not None and rule.covers_path(nra)):
                return True
        return False

    def enforce(
        self, user: str, groups: list[str], *, verb: str, resource: str, subresource: str = "",
        namespace: str = "", name: str = "",
    ) -> None:  # fmt: skip
        """Raise 403 Forbidden, worded as the API server's, unless RBAC allows the request
        (``resource`` as the request log names it: ``leases.coordination.k8s.io``)."""
        plural, _, group = resource.partition(".")
        attrs = {"verb": verb, "group": group, "resource": plural, "subresource": subresource,
                 "namespace": namespace, "name": name}  # fmt: skip
        if self.allowed(user, groups, {"resourceAttributes": attrs}):
            return
        what = plural + (f"/{subresource}" if subresource else "")
        where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
        named = f' "{name}"' if name else ""
        raise ApiError(
            403,
            f'{what}{named} is forbidden: User "{user}" cannot {verb} resource "{what}" '
            f'in API group "{group}" {where}',
        )

    def review(self, body: dict[str, Any]) -> dict[str, Any]:
        """A SubjectAccessReview object in, the same with ``status`` out; invalid specs
        are refused as the API server refuses them."""
        if body.get("kind") not in (None, "SubjectAccessReview") or body.get("apiVersion") not in (
            None,
            SAR_API,
        ):
            raise ApiError(400, "the request body is not an authorization.k8s.io/v1 SubjectAccessReview")
        spec = body.get("spec") or {}
        causes = []
        if ("resourceAttributes" in spec) == ("nonResourceAttributes" in spec):
            causes.append(
                (
                    "spec.resourceAttributes",
                    "",
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                )
            )
        user, groups = spec.get("user") or "", list(spec.get("groups") or [])
        if not user and not groups:
            causes.append(("spec.user", "", "at least one of user or group must be specified"))
        if causes:
            raise invalid("SubjectAccessReview", "authorization.k8s.io", "", causes)
        ok = self.allowed(user, groups, spec)
        status: dict[str, Any] = {"allowed": ok}
        status["reason"] = "allowed by a fake RBAC grant" if ok else ""
        return {"kind": "SubjectAccessReview", "apiVersion": SAR_API,
                "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}  # fmt: skip
