"""Settings: defaults < environment < config file < flags; bad input is a one-line error."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nfd.cli import CliError, build_parser
from nfd.commands.master_settings import settings_from_args


def args(*argv: str):
    return build_parser(only="master").parse_args(["master", *argv])


def test_defaults_are_upstreams_but_the_write_rate():
    s = settings_from_args(args())
    # The write rate starts high and adapts (ratelimit.py); upstream's fixed 10/s would
    # keep a 10,000-node cluster waiting 17 minutes.
    assert (s.kube.qps, s.kube.burst, s.kube.parallelism) == (500, 100, 64)
    assert s.kube.resync_period_s == 3600
    assert s.server.max_body_bytes == 2 * 1024 * 1024
    assert s.leader.lease_name == "nfd-master.nfd.kubernetes.io"
    assert (s.leader.lease_duration_s, s.leader.renew_deadline_s, s.leader.retry_period_s) == (15, 10, 2)
    assert s.auth.worker_username == "system:serviceaccount:node-feature-discovery:nfd-worker"
    # Secure by default: TLS from the cluster's Secret, reviews cached, deletions watched.
    assert s.tls.enabled and s.tls.cert_file is None
    assert (s.tls.secret_name, s.tls.ca_configmap, s.tls.service_name) == (
        "nfd-master-tls",
        "nfd-master-ca",
        "nfd-master",
    )
    assert s.auth.enabled and s.auth.watch_pods and s.auth.revocation_window_s == 5


def test_environment_then_file_then_flags(tmp_path, monkeypatch):
    monkeypatch.setenv("NFD_MASTER_KUBE__QPS", "50")
    monkeypatch.setenv("NFD_MASTER_KUBE__BURST", "70")
    monkeypatch.setenv("POD_NAMESPACE", "nfd-system")
    conf = tmp_path / "master.conf"
    conf.write_text(
        "extraLabelNs: [vendor.example.com]\nenableTaints: true\nresyncPeriod: 10m\n"
        "core: {labelWhiteList: '^cpu-'}\nsources: {pci: {deviceClassWhitelist: ['12']}}\n"
    )
    s = settings_from_args(
        args("--config", str(conf), "--kube-api-burst", "80", "--extra-label-ns", "b.example.com")
    )
    assert s.kube.qps == 50 and s.kube.burst == 80
    assert s.leader.namespace == "nfd-system"
    assert s.policy.extra_label_ns == ["vendor.example.com", "b.example.com"]
    assert s.policy.enable_taints and s.kube.resync_period_s == 600
    assert s.labeling.core.label_whitelist == "^cpu-"
    assert s.labeling.sources.pci.device_class_whitelist == ("12",)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--worker-service-account", "nocolon"], "NAMESPACE:NAME"),
        (["--resync-period", "soon"], "duration"),
        (["--tls-cert-file", "/nonexistent"], "go together"),
        (["--rules-dir", "/nonexistent"], "no such directory"),
        (["--max-body-bytes", "0"], "positive"),
        (["--no-tls", "--tls-cert-file", __file__, "--tls-key-file", __file__], "contradict"),
        (["--tls-secret", "Bad_Name"], "--tls-secret 'Bad_Name': expected a lowercase DNS name"),
        (["--tls-dns-name", "nfd_master.example"], "--tls-dns-name 'nfd_master.example'"),
    ],
)
def test_bad_flags_are_one_line_errors(argv, message):
    with pytest.raises(CliError, match=message):
        settings_from_args(args(*argv))


def test_upstreams_leader_election_and_page_size_keys(tmp_path):
    conf = tmp_path / "nfd-master.conf"
    conf.write_text(
        "leaderElection: {leaseDuration: 30s, retryPeriod: 1s}\ninformerPageSize: 50\nklog: {v: 3}\n"
    )
    s = settings_from_args(args("--config", str(conf)))
    assert (s.leader.lease_duration_s, s.leader.renew_deadline_s, s.leader.retry_period_s) == (30, 10, 1)
    assert s.kube.list_page_size == 50


def test_bad_config_file_names_the_key(tmp_path):
    conf = tmp_path / "master.conf"
    conf.write_text("enableTaints: maybe\n")
    with pytest.raises(CliError, match="enableTaints"):
        settings_from_args(args("--config", str(conf)))


def test_command_exits_with_a_reason_without_a_cluster(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": ":".join(sys.path)}
    r = subprocess.run([sys.executable, "-m", "nfd", "master", "--port", "0"], capture_output=True, text=True,
                       env=env, timeout=60)  # fmt: skip
    assert r.returncode == 1
    assert "needs the API server" in r.stderr and "Traceback" not in r.stderr
