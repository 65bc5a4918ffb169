"""A kubeconfig user's ``exec`` credential plugin (client.authentication.k8s.io), as
kubectl runs one: ``aws eks get-token``, ``gke-gcloud-auth-plugin``, ``kubelogin``.

An operator's kubeconfig on a managed cluster rarely holds a token of its own, so
``kubectl nfd`` and ``nfd prune`` run the plugin as kubectl would: the command with its
arguments and environment, ``KUBERNETES_EXEC_INFO`` describing the request (never
interactive: stdin is closed), and the ``ExecCredential`` it prints is read for its
token. The token is kept until its ``expirationTimestamp`` (a minute's margin), or for
the process's life when it has none, as kubectl does. Plugins that answer with a client
certificate instead are refused by name: the TLS context is made once per client.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from nfd.kube.errors import Unreachable

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
RUN_TIMEOUT_S = 60.0  # a plugin may ask a cloud's token service
MARGIN_S = 60.0  # a token this close to its expiry is asked for again


@dataclass(eq=False)
class ExecPlugin:
    """``command`` resolved as kubectl does (a path with a slash relative to the
    kubeconfig's directory, else looked up on PATH), ``args``, ``env`` added to ours."""

    api_version: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cluster: Mapping[str, Any] | None = None  # provideClusterInfo: the cluster's entry
    _token: str | None = field(default=None, init=False, repr=False)
    _expires: float | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def token(self, now: float | None = None) -> str:
        """The current token, running the plugin when none is kept or it expires.
        Unreachable (one line, the plugin named) when the plugin fails."""
        with self._lock:
            t = time.time() if now is None else now
            if self._token is None or (self._expires is not None and t >= self._expires - MARGIN_S):
                self._token, self._expires = self._run()
            return self._token

    def _run(self) -> tuple[str, float | None]:
        what = f"exec credential plugin {self.command}"
        info: dict[str, Any] = {"interactive": False}
        if self.cluster is not None:
            info["cluster"] = dict(self.cluster)
        env = {
            **os.environ,
            **self.env,
            "KUBERNETES_EXEC_INFO": json.dumps(
                {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": info}
            ),
        }
        try:
            done = subprocess.run(
                [self.command, *self.args], env=env, stdin=subprocess.DEVNULL,
                capture_output=True, timeout=RUN_TIMEOUT_S, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as e:
            raise Unreachable(None, f"{what}: {e}") from None
        if done.returncode != 0:
            last = (done.stderr.decode("utf-8", "replace").strip().splitlines() or [""])[-1][:200]
            raise Unreachable(None, f"{what}: exit {done.returncode}" + (f": {last}" if last else ""))
        try:
            cred = json.loads(done.stdout)
        except ValueError:
            raise Unreachable(None, f"{what}: its output is not JSON") from None
        status = cred.get("status") if isinstance(cred, dict) else None
        if not isinstance(status, dict):
            raise Unreachable(None, f"{what}: its ExecCredential has no status")
        token = status.get("token")
        if not isinstance(token, str) or not token:
            if status.get("clientCertificateData"):
                raise Unreachable(
                    None, f"{what}: client certificates from a plugin are not supported; use a token"
                )
            raise Unreachable(None, f"{what}: its ExecCredential has no status.token")
        return token, _expiry(status.get("expirationTimestamp"), what)


def _expiry(value: Any, what: str) -> float | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise Unreachable(None, f"{what}: expirationTimestamp {value!r} is not RFC 3339") from None


def from_kubeconfig_user(
    spec: Mapping[str, Any], base: str, cluster: Mapping[str, Any], where: str
) -> ExecPlugin:
    """The ``exec`` entry of a kubeconfig user. ValueError names the key at fault."""
    version = str(spec.get("apiVersion") or "")
    if version not in API_VERSIONS:
        raise ValueError(f"{where}.apiVersion: {version!r} is not one of {', '.join(API_VERSIONS)}")
    command = str(spec.get("command") or "")
    if not command:
        raise ValueError(f"{where}.command: missing")
    # A bare name not on PATH stays as it is: the run names it.
    command = os.path.join(base, command) if os.sep in command else shutil.which(command) or command
    args = spec.get("args") or []
    env = spec.get("env") or []
    if not isinstance(args, list) or not isinstance(env, list):
        raise ValueError(f"{where}: args and env are lists")
    pairs: dict[str, str] = {}
    for i, item in enumerate(env):
        if not isinstance(item, dict) or not item.get("name"):
            raise ValueError(f"{where}.env[{i}]: a name and a value")
        pairs[str(item["name"])] = str(item.get("value") or "")
    return ExecPlugin(
        version, command, tuple(str(a) for a in args), pairs,
        dict(cluster) if spec.get("provideClusterInfo") else None,
    )  # fmt: skip
