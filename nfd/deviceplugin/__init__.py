"""nfd's device-plugin mode: serve kubelet's device-plugin API (v1beta1) for devices
that nfd discovers (PCI, USB, device-node globs, and kinds added by other modules).

Importing this package is cheap and does not load gRPC: the worker calls
:func:`served_resources` to report which extended resources this node's plugins serve.
Only :mod:`nfd.deviceplugin.server` and :mod:`nfd.deviceplugin.manager` import ``grpc``.
"""

from __future__ import annotations

from nfd.deviceplugin.view import declared_resources, served_resources

__all__ = ["declared_resources", "served_resources"]
