"""Prometheus metrics, upstream's names where they mean the same. One registry per
master instance (no process-global state: tests run several masters side by side)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, generate_latest

from nfd import __version__


class Metrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        Info("nfd_master_build", "nfd master build", registry=r).info({"version": __version__})
        self.update_requests = Counter(
            "nfd_master_node_update_requests", "Feature updates received from workers", registry=r
        )
        self.heartbeats = Counter(
            "nfd_master_node_heartbeats", "Heartbeats received from workers", registry=r
        )
        self.updates = Counter("nfd_master_node_updates", "Node objects patched", registry=r)
        self.update_failures = Counter(
            "nfd_master_node_update_failures", "Failed node patches (retried)", ["reason"], registry=r
        )
        self.api_requests = Counter(
            "nfd_master_api_requests", "Requests to the API server", ["verb", "resource", "code"], registry=r
        )
        self.labels_rejected = Counter(
            "nfd_master_node_labels_rejected", "Labels rejected by the policy", registry=r
        )
        self.annotations_rejected = Counter(
            "nfd_master_node_annotations_rejected", "Annotations rejected by the policy", registry=r
        )
        self.ers_rejected = Counter(
            "nfd_master_node_extendedresources_rejected", "Extended resources rejected", registry=r
        )
        self.taints_rejected = Counter("nfd_master_node_taints_rejected", "Taints rejected", registry=r)
        self.rule_duration = Histogram(
            "nfd_master_nodefeaturerule_processing_duration_seconds",
            "Time to re-evaluate every node after a rule change",
            registry=r,
        )
        self.rule_errors = Counter(
            "nfd_master_nodefeaturerule_processing_errors", "Rule parse or evaluation errors", registry=r
        )
        self.auth_failures = Counter(
            "nfd_master_auth_failures", "Rejected worker requests", ["reason"], registry=r
        )
        self.nodes = Gauge("nfd_master_nodes", "Nodes the master holds features for", registry=r)
        self.queue_depth = Gauge("nfd_master_update_queue_depth", "Nodes waiting to be written", registry=r)
        self.api_window = Gauge(
            "nfd_master_api_writes_in_flight_limit",
            "Node writes that may be in flight now (adapts up to --parallelism)",
            registry=r,
        )
        self.is_leader = Gauge("nfd_master_is_leader", "1 while this instance may write", registry=r)
        # Upstream's nfd-gc names: our collector runs inside the master, so its series
        # are served here, by the kind of object (upstream's label values).
        self.gc_deleted = Counter(
            "nfd_gc_objects_deleted",
            "Objects of gone nodes deleted by the garbage collector",
            ["kind"],
            registry=r,
        )
        self.gc_delete_failures = Counter(
            "nfd_gc_object_delete_failures",
            "Deletions by the garbage collector that failed (retried next round)",
            ["kind"],
            registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def count_rejected(self, rejected: dict[str, dict[str, str]]) -> None:
        for kind, counter in (
            ("labels", self.labels_rejected),
            ("annotations", self.annotations_rejected),
            ("extendedResources", self.ers_rejected),
            ("taints", self.taints_rejected),
        ):
            n = len(rejected.get(kind, ()))
            if n:
                counter.inc(n)
