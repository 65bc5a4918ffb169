"""``nfd master``'s settings: defaults < environment (NFD_MASTER_*) < config file < flags.
Bad input is a CliError (one line, exit 2)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from nfd.master.core.settings import MasterSettings

_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def settings_from_args(args: argparse.Namespace) -> MasterSettings:
    """Settings: defaults < environment (NFD_MASTER_*) < config file < flags."""
    from nfd.cli import CliError
    from nfd.master.core.settings import MasterSettings
    from nfd.settings import ConfigError

    try:
        s = MasterSettings.from_environment()
    except ConfigError as e:
        raise CliError(str(e)) from None
    if args.config:
        try:
            warnings = s.apply_config_file(args.config)
        except ConfigError as e:
            raise CliError(str(e)) from None
        import logging

        for w in warnings:
            logging.getLogger("nfd.master").warning("%s", w)
    if args.host is not None:
        s.server.host = args.host
    if args.port is not None:
        s.server.port = args.port
    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        raise CliError("--tls-cert-file and --tls-key-file go together")
    if args.tls_cert_file:
        s.tls.cert_file = _existing("--tls-cert-file", args.tls_cert_file)
        s.tls.key_file = _existing("--tls-key-file", args.tls_key_file)
    if args.no_tls and args.tls_cert_file:
        raise CliError("--no-tls and --tls-cert-file contradict each other")
    # The valued flags whose value only needs checking: each given one is set.
    for flag, value, group, attr, error_of in (
        ("--max-body-bytes", args.max_body_bytes, s.server, "max_body_bytes", _positive_error),
        ("--tls-secret", args.tls_secret, s.tls, "secret_name", _dns_name_error),
        ("--tls-ca-configmap", args.tls_ca_configmap, s.tls, "ca_configmap", _dns_name_error),
        ("--tls-service", args.tls_service, s.tls, "service_name", _dns_name_error),
        ("--kube-api-qps", args.kube_api_qps, s.kube, "qps", _positive_error),
        ("--kube-api-burst", args.kube_api_burst, s.kube, "burst", _positive_error),
        ("--parallelism", args.parallelism, s.kube, "parallelism", _positive_error),
    ):
        if value is not None:
            error = error_of(value)
            if error:
                raise CliError(f"{flag}{error}")
            setattr(group, attr, value)
    for name in args.tls_dns_name:
        error = _dns_name_error(name)
        if error:
            raise CliError(f"--tls-dns-name{error}")
    s.tls.extra_dns_names += args.tls_dns_name
    if args.kubeconfig:
        s.kube.kubeconfig = _existing("--kubeconfig", args.kubeconfig)
    if args.auth_audience:
        s.auth.audience = args.auth_audience
    if args.worker_service_account:
        ns, sep, name = args.worker_service_account.partition(":")
        if not sep or not ns or not name:
            raise CliError("--worker-service-account: expected NAMESPACE:NAME")
        s.auth.worker_service_account = args.worker_service_account
    s.policy.extra_label_ns += args.extra_label_ns
    s.policy.deny_label_ns += args.deny_label_ns
    if args.label_whitelist is not None:
        s.policy.label_whitelist = args.label_whitelist
    if args.rules_dir:
        s.rules.rules_dir = _existing("--rules-dir", args.rules_dir, directory=True)
    if args.resync_period:
        period = _duration("--resync-period", args.resync_period)
        if period <= 0:
            raise CliError("--resync-period must be positive")
        s.kube.resync_period_s = period
    if args.gc_interval:
        gc_every = _duration("--gc-interval", args.gc_interval)
        if gc_every < 0:
            raise CliError("--gc-interval must not be negative")
        if gc_every == 0:
            s.nodefeatures.gc = False
        else:
            s.nodefeatures.gc_interval_s = gc_every
    # The switches: each sets one setting when given.
    for given, section, field, setting in (
        (args.no_tls, s.tls, "enabled", False),
        (args.no_publish, s.kube, "publish", False),
        (args.no_auth, s.auth, "enabled", False),
        (args.enable_taints, s.policy, "enable_taints", True),
        (args.no_rule_watch, s.rules, "watch", False),
        (args.no_nodefeature_watch, s.nodefeatures, "watch", False),
        (args.enable_leader_election, s.leader, "enabled", True),
    ):
        if given:
            setattr(section, field, setting)
    return s


def _existing(flag: str, path: str, *, directory: bool = False) -> Path:
    from pathlib import Path

    from nfd.cli import CliError

    if directory and not Path(path).is_dir():
        raise CliError(f"{flag} {path}: no such directory")
    if not directory and not Path(path).is_file():
        raise CliError(f"{flag} {path}: no such file")
    return Path(path)


def _duration(flag: str, value: str) -> float:
    from nfd.cli import CliError
    from nfd.settings import ConfigError, parse_duration

    try:
        return parse_duration(value, where=flag)
    except ConfigError as e:
        raise CliError(str(e)) from None


def _dns_name_error(name: str) -> str | None:
    """What is wrong with a flag's value (said after the flag's name), or None."""
    if _DNS_NAME.match(name):
        return None
    return f" {name!r}: expected a lowercase DNS name (a-z, 0-9, '-', '.')"


def _positive_error(value: float) -> str | None:
    return None if value > 0 else " must be positive"
