"""``nfd worker`` processes against a real ``nfd master --no-publish --no-auth``."""

from __future__ import annotations

import time

from worker.worker_helpers import HostTree, Master, count_lines, wait_until


def test_first_delivery_reaches_the_master(master: Master, host: HostTree, start_worker, node: str) -> None:
    host.write("mine", "fast=true\nplain\n")
    w = start_worker(master.url, host, "--sleep-interval", "60s")
    feats = wait_until(lambda: master.labels(node), what="the first delivery")
    assert feats == {"fast": "true", "plain": "true"}
    view = master.node(node)
    assert view is not None and len(view["digest"]) == 64
    assert w.requests("features", "ok") == 1


def test_unchanged_features_go_as_heartbeats_only(
    master: Master, host: HostTree, start_worker, node: str
) -> None:
    host.write("mine", "steady=1\n")
    updates = master.metric("nfd_master_node_update_requests_total")
    heartbeats = master.metric("nfd_master_node_heartbeats_total")
    w = start_worker(master.url, host, "--sleep-interval", "1s")
    wait_until(lambda: w.requests("heartbeat", "ok") >= 5, what="five heartbeats")
    # Five passes and more, one full delivery: the steady state sends only the digest.
    assert w.requests("features", "ok") == 1
    assert master.labels(node) == {"steady": "1"}
    # The master's side of it: one update, the rest heartbeats.
    assert master.metric("nfd_master_node_update_requests_total") == updates + 1
    assert master.metric("nfd_master_node_heartbeats_total") >= heartbeats + 5


def test_a_change_is_detected_and_sent_in_full(
    master: Master, host: HostTree, start_worker, node: str
) -> None:
    host.write("mine", "version=1\n")
    w = start_worker(master.url, host, "--sleep-interval", "1s")
    wait_until(lambda: master.labels(node) == {"version": "1"}, what="version 1")
    wait_until(lambda: w.requests("heartbeat", "ok") >= 2, what="heartbeats")
    host.write("mine", "version=2\n")
    wait_until(lambda: master.labels(node) == {"version": "2"}, what="version 2")
    wait_until(lambda: w.requests("features", "ok") == 2, what="the count of full deliveries")


def test_features_d_change_is_picked_up_without_waiting_for_the_interval(
    master: Master, host: HostTree, start_worker, node: str
) -> None:
    w = start_worker(master.url, host, "--sleep-interval", "1h")
    wait_until(lambda: master.labels(node) == {}, what="the first delivery")
    host.write("late", "arrived=yes\n")
    # The interval is an hour: only the directory watch can bring this in time.
    wait_until(lambda: master.labels(node) == {"arrived": "yes"}, timeout=10, what="the change")
    (host.features_d / "late").unlink()
    wait_until(lambda: master.labels(node) == {}, timeout=10, what="the removal")
    assert "pass triggered: features.d" in w.output()


def test_master_restart_gets_the_full_features_again(
    own_master: Master, host: HostTree, start_worker, node: str
) -> None:
    master = own_master
    host.write("mine", "survives=restart\n")
    w = start_worker(master.url, host, "--sleep-interval", "1s", "--retry-max-delay", "0.5s")
    wait_until(lambda: master.labels(node), what="the first delivery")
    master.stop()
    master.start()  # same port, empty memory
    wait_until(lambda: master.labels(node) == {"survives": "restart"}, what="the resend")
    # Unchanged features: the worker heartbeated, got 409 from the new master, and sent
    # them in full again.
    wait_until(lambda: w.requests("heartbeat", "unknown") >= 1, what="the 409 counted")
    wait_until(lambda: w.requests("features", "ok") >= 2, what="the count of full deliveries")
    assert w.proc.poll() is None


def test_master_down_for_a_while_then_the_newest_features_arrive(
    own_master: Master, host: HostTree, start_worker, node: str
) -> None:
    master = own_master
    host.write("mine", "state=before\n")
    w = start_worker(master.url, host, "--sleep-interval", "1s", "--retry-max-delay", "0.4s")
    wait_until(lambda: master.labels(node) == {"state": "before"}, what="the first delivery")
    master.stop()
    host.write("mine", "state=during\n")
    wait_until(lambda: w.requests("any", "unreachable") >= 3, what="failed attempts")
    host.write("mine", "state=newest\n")
    master.start()
    wait_until(lambda: master.labels(node) == {"state": "newest"}, what="the newest features")
    assert w.proc.poll() is None  # it never gave up
    assert "unreachable" in w.output()


def test_413_is_logged_and_not_retried_in_a_tight_loop(
    small_master: Master, host: HostTree, start_worker, node: str
) -> None:
    host.write("big", "".join(f"key{i}=value{i}\n" for i in range(50)))
    w = start_worker(small_master.url, host, "--sleep-interval", "1h")
    wait_until(lambda: w.requests("features", "rejected") >= 1, what="the rejection")
    # A change on the node is the only thing that may bring the next attempt.
    host.write("more", "x=1\n")
    wait_until(lambda: w.requests("features", "rejected") >= 2, timeout=10, what="the second rejection")
    time.sleep(0.3)  # the change's events settle
    settled = w.requests("features", "rejected")
    time.sleep(1.0)  # room for a tight loop to show itself
    assert w.requests("features", "rejected") == settled <= 3
    assert count_lines(w.output(), r"HTTP 413") == settled
    assert small_master.node(node) is None
