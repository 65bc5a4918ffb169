"""``nfd master``'s settings: defaults < environment (NFD_MASTER_*) < config file < flags.
Bad input is a CliError (one line, exit 2)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from pydantic import ValidationError

    from nfd.master.settings import MasterSettings

_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def settings_from_args(args: argparse.Namespace) -> MasterSettings:
    """Settings: defaults < environment (NFD_MASTER_*) < config file < flags."""
    from pathlib import Path

    from pydantic import ValidationError
    from pydantic_settings import SettingsError

    from nfd.cli import CliError
    from nfd.config import ConfigError, parse_duration
    from nfd.master.masterconfig import load_master_config
    from nfd.master.settings import MasterSettings

    try:
        s = MasterSettings()
    except ValidationError as e:
        raise CliError(f"environment: {_env_errors(e)}") from None
    except SettingsError as e:  # a group variable (NFD_MASTER_KUBE) that is not JSON
        raise CliError(f"environment: {' '.join(str(e).split())}") from None
    if args.config:
        try:
            warnings = load_master_config(args.config, s)
        except ConfigError as e:
            raise CliError(str(e)) from None
        import logging

        for w in warnings:
            logging.getLogger("nfd.master").warning("%s", w)
    if args.host is not None:
        s.server.host = args.host
    if args.port is not None:
        s.server.port = args.port
    if args.max_body_bytes is not None:
        if args.max_body_bytes <= 0:
            raise CliError("--max-body-bytes must be positive")
        s.server.max_body_bytes = args.max_body_bytes
    if bool(args.tls_cert_file) != bool(args.tls_key_file):
        raise CliError("--tls-cert-file and --tls-key-file go together")
    if args.tls_cert_file:
        for flag, f in (("--tls-cert-file", args.tls_cert_file), ("--tls-key-file", args.tls_key_file)):
            if not Path(f).is_file():
                raise CliError(f"{flag} {f}: no such file")
        s.tls.cert_file, s.tls.key_file = Path(args.tls_cert_file), Path(args.tls_key_file)
    if args.no_tls:
        if args.tls_cert_file:
            raise CliError("--no-tls and --tls-cert-file contradict each other")
        s.tls.enabled = False
    _set_given(
        s.tls, _dns_name_error,
        ("--tls-secret", "secret_name", args.tls_secret),
        ("--tls-ca-configmap", "ca_configmap", args.tls_ca_configmap),
        ("--tls-service", "service_name", args.tls_service),
    )  # fmt: skip
    for name in args.tls_dns_name:
        error = _dns_name_error(name)
        if error:
            raise CliError(f"--tls-dns-name{error}")
    s.tls.extra_dns_names += args.tls_dns_name
    if args.kubeconfig:
        if not Path(args.kubeconfig).is_file():
            raise CliError(f"--kubeconfig {args.kubeconfig}: no such file")
        s.kube.kubeconfig = Path(args.kubeconfig)
    if args.no_publish:
        s.kube.publish = False
    if args.no_auth:
        s.auth.enabled = False
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
    if args.enable_taints:
        s.policy.enable_taints = True
    if args.rules_dir:
        if not Path(args.rules_dir).is_dir():
            raise CliError(f"--rules-dir {args.rules_dir}: no such directory")
        s.rules.rules_dir = Path(args.rules_dir)
    if args.no_rule_watch:
        s.rules.watch = False
    if args.no_nodefeature_watch:
        s.nodefeatures.watch = False
    if args.resync_period:
        try:
            period = parse_duration(args.resync_period, where="--resync-period")
        except ConfigError as e:
            raise CliError(str(e)) from None
        if period <= 0:
            raise CliError("--resync-period must be positive")
        s.kube.resync_period_s = period
    if args.gc_interval:
        try:
            gc_every = parse_duration(args.gc_interval, where="--gc-interval")
        except ConfigError as e:
            raise CliError(str(e)) from None
        if gc_every < 0:
            raise CliError("--gc-interval must not be negative")
        if gc_every == 0:
            s.nodefeatures.gc = False
        else:
            s.nodefeatures.gc_interval_s = gc_every
    if args.enable_leader_election:
        s.leader.enabled = True
    _set_given(
        s.kube, _positive_error,
        ("--kube-api-qps", "qps", args.kube_api_qps),
        ("--kube-api-burst", "burst", args.kube_api_burst),
        ("--parallelism", "parallelism", args.parallelism),
    )  # fmt: skip
    return s


def _set_given(target: object, error_of: Callable[[Any], str | None], *flags: tuple[str, str, Any]) -> None:
    """Each (flag, attribute, value) whose flag was given: ``value`` checked, then set on
    ``target``. ``error_of`` says what is wrong with a value, after the flag's name."""
    from nfd.cli import CliError

    for flag, attr, val in flags:
        if val is not None:
            error = error_of(val)
            if error:
                raise CliError(f"{flag}{error}")
            setattr(target, attr, val)


def _dns_name_error(name: str) -> str | None:
    if _DNS_NAME.match(name):
        return None
    return f" {name!r}: expected a lowercase DNS name (a-z, 0-9, '-', '.')"


def _positive_error(value: float) -> str | None:
    return None if value > 0 else " must be positive"


def _env_errors(e: ValidationError) -> str:
    """pydantic's report on one line: each variable by its name, and why."""
    parts = []
    for err in e.errors():
        name = "NFD_MASTER_" + "__".join(str(p) for p in err["loc"]).upper()
        parts.append(f"{name}: {err['msg']}")
    return "; ".join(parts)

